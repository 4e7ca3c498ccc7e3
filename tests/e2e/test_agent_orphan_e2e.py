"""agent-orphan end to end: the real CLI against the simulated cluster whose nodes report spurd.

In the incident, gpu003 still runs job 4711 (now RUNNING on gpu015) and gpu004
job 4712 (now on gpu016-017). Here gpu003's spurd restarted after its run began,
so the agent no longer tracks it (Spur #803) and a CancelJob would answer Ok and
free nothing: the audit says agent-orphan with the node-side command, and
`reclaim --yes` sends it nothing. gpu004's spurd predates its run: still a
reclaim. gpu015's spurd also restarted after its (legitimate) run of 4711 began:
investigated, never released.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from spurctl.model import format_time
from spurctl_sim import Scenario, incident
from tests.e2e.test_unsure_evidence_spares_e2e import (
    audit_json,
    by_key,
    reclaim_yes,
    secured,
    setup_files,
)


def _started(scenario: Scenario, node: str, job_id: int) -> datetime:
    (h,) = [h for h in scenario.holdings[node] if h.job_id == job_id]
    assert h.started_at is not None
    return h.started_at


def with_restarted_agents() -> Scenario:
    scenario = incident()
    scenario.agent_started_at = {
        "gpu003": _started(scenario, "gpu003", 4711) + timedelta(hours=8),
        "gpu004": _started(scenario, "gpu004", 4712) - timedelta(hours=1),
        "gpu015": _started(scenario, "gpu015", 4711) + timedelta(hours=5),
    }
    return scenario


def test_a_run_older_than_its_nodes_spurd_is_an_orphan_and_gets_no_agent_cancel(
    tmp_path: Path,
) -> None:
    scenario = with_restarted_agents()
    started = format_time(_started(scenario, "gpu003", 4711))
    with secured(scenario) as sim:
        f = setup_files(sim, tmp_path)
        _, doc = audit_json(f, "--nodes", "gpu[003-004,015]")
        found = by_key(doc)

        orphan = found[("gpu003", 4711)]
        assert (orphan["kind"], orphan["action"]) == ("agent-orphan", "investigate")
        assert "no agent cancel is planned" in orphan["reason"]
        assert (
            f"`spurctl node-release --job 4711 --started-at {started}` on gpu003"
            in (orphan["reason"])
        )
        assert orphan["controller_state"] == "RUNNING" and orphan["live"] is True
        # The spurd that launched its run still tracks it: a reclaim as before.
        assert (found[("gpu004", 4712)]["kind"], found[("gpu004", 4712)]["action"]) == (
            "active-elsewhere",
            "reclaim",
        )
        # A legitimate run its restarted spurd lost: shown without --all, never released.
        legit = found[("gpu015", 4711)]
        assert (legit["kind"], legit["action"]) == ("agent-orphan", "investigate")
        assert "do not release it" in legit["reason"]

        run = reclaim_yes(f, tmp_path, "gpu[003-004,015]")
        assert run.returncode in (0, 1), run.stderr
        assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu004", 4712)]
        assert any(h.job_id == 4711 for h in sim.holdings("gpu003"))
        assert any(h.job_id == 4711 for h in sim.holdings("gpu015"))


def test_without_an_agent_start_time_the_verdicts_stand(tmp_path: Path) -> None:
    scenario = replace(with_restarted_agents(), agent_started_at={})
    with secured(scenario) as sim:
        f = setup_files(sim, tmp_path)
        _, doc = audit_json(f, "--nodes", "gpu003")
        held = by_key(doc)[("gpu003", 4711)]
        assert (held["kind"], held["action"]) == ("active-elsewhere", "reclaim")


def test_a_scenarios_agent_start_times_round_trip_and_reach_the_inventories(
    tmp_path: Path,
) -> None:
    from spurctl_sim import read_scenario, write_scenario
    from spurctl_sim.state import SIM_AGENT_PID

    scenario = with_restarted_agents()
    write_scenario(scenario, tmp_path / "scenario.json")
    again = read_scenario(tmp_path / "scenario.json")
    assert again.agent_started_at == scenario.agent_started_at
    with secured(again) as sim:
        by_node = {inv.node: inv for inv in sim.inventories()}
    assert by_node["gpu003"].agent is not None
    assert by_node["gpu003"].agent.pid == SIM_AGENT_PID
    assert by_node["gpu003"].agent.started_at == scenario.agent_started_at["gpu003"]
    assert by_node["gpu001"].agent is None and not by_node["gpu001"].agent_checked
