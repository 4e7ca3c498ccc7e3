"""A node spurctl drained whose heartbeat is lost, against the simulated cluster.

gpu012 holds agent orphans, so `spurctl drain` leaves it DRAINING (4950 still runs
there). Its spurd then stops: the controller's health check turns the DRAINING node
DOWN with spurctl's reason and Spur's admin lock, and a locked DOWN never recovers by
itself, even once spurd is back (node.rs, cluster.rs `apply_health_actions`; the
simulated controller plays it: spurctl_sim/liveness.py). `resume` must list it and say
why it stays, then lift it once its audit is clean and its spurd answers; drain,
audit, nodes and explain say what happened and never blame an admin's DOWN.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.model import NodeState
from spurctl_sim import SimCluster, incident
from spurctl_sim.releases import NEWEST
from tests.cli import run_cli, wait_for
from tests.e2e.test_drain_resume_e2e import ORPHAN_DRAIN, Cluster, command
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    """The incident with gpu012's spurd restarted after its runs began (agent orphans)."""
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with SimCluster(scenario) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        with kept_fresh(sim, live):
            yield Cluster(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", tmp_path)


def _drained_then_down(c: Cluster) -> str:
    """gpu012 drained by spurctl, then its heartbeat lost: the drain's time, as journaled."""
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    assert c.sim.node("gpu012").state is NodeState.DRAINING
    c.sim.lose_heartbeat("gpu012")
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.DOWN, ORPHAN_DRAIN)
    wait_for(lambda: '"agent": null' in c.live.read_text())  # the node shows no spurd
    sent = [r for r in journal_records(c.journal) if r.get("action") == "drain" and "result" in r]
    return str(sent[-1]["at"])


def test_resume_lists_spurctls_drain_gone_down_and_lifts_it_once_clean_with_spurd_back(
    c: Cluster,
) -> None:
    at = _drained_then_down(c)
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"gpu012  stays DOWN since spurctl's drain of {at} (heartbeat lost): " in proc.stdout
    assert c.sim.node("gpu012").state is NodeState.DOWN

    # spurd back: the locked DOWN stays DOWN; the orphans freed on the node (node-release).
    c.sim.start_agent("gpu012")
    assert c.sim.node("gpu012").state is NodeState.DOWN
    for job_id in (4702, 4950):
        c.sim.release("gpu012", job_id)
    wait_for(lambda: '"job_id": 4950' not in c.live.read_text())
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        f"gpu012  UpdateNode(state=IDLE): lifts '{ORPHAN_DRAIN}', its audit is clean and its "
        "spurd runs (DOWN since its heartbeat was lost)"
    ) in proc.stdout
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.IDLE, "")
    resumed = [r for r in journal_records(c.journal) if r.get("action") == "resume"]
    assert [(r["event"], r.get("result")) for r in resumed] == [
        ("intent", None),
        ("outcome", "sent"),
    ]


def test_resume_keeps_spurctls_down_node_whose_spurd_does_not_run_though_it_is_clean(
    c: Cluster,
) -> None:
    _drained_then_down(c)
    for job_id in (4702, 4950):  # nothing held any more, but no spurd either
        c.sim.release("gpu012", job_id)
    wait_for(lambda: '"job_id": 4950' not in c.live.read_text())
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu012  stays DOWN since spurctl's drain of " in proc.stdout
    assert "agent-not-running" in proc.stdout
    assert c.sim.node("gpu012").state is NodeState.DOWN


def test_drain_audit_nodes_and_explain_say_down_since_spurctls_drain_never_an_admins(
    c: Cluster,
) -> None:
    at = _drained_then_down(c)
    words = f"DOWN since spurctl's drain of {at} (heartbeat lost)"
    drain = command(c, "drain", "gpu012", "--yes")
    assert drain.returncode == 0, drain.stdout + drain.stderr
    assert f"gpu012  gpu012 is {words}: `spurctl resume` lifts it" in drain.stdout
    assert "already DOWN by spurctl" not in drain.stdout

    view = ("--controller", c.sim.controller_address, "--inventory", str(c.live))
    journal = ("--journal", str(c.journal))
    audit = run_cli("audit", "-w", "gpu012", *view, *journal, "--format", "json", home=c.home)
    doc = json.loads(audit.stdout)
    assert any(note.startswith(f"gpu012 is {words}") for note in doc["notes"]), doc["notes"]
    assert "UpdateNode(state=DOWN)" not in audit.stdout

    nodes = run_cli("nodes", "-w", "gpu012", *view, *journal, "--format", "json", home=c.home)
    assert nodes.returncode == 0, nodes.stderr
    assert any(n.startswith(f"gpu012 is {words}") for n in json.loads(nodes.stdout)["notes"])

    explain = run_cli("explain", "gpu012", *view, *journal, "--format", "json", home=c.home)
    cause = json.loads(explain.stdout)["controller_node"]["cause"]
    assert cause.startswith(words), cause
    assert "admin" not in cause


def test_on_the_newest_spur_the_drains_uid_survives_the_timeout_and_resume_lifts_it(
    tmp_path: Path,
) -> None:
    """#860/#784: an admin hold keeps its reason_uid under the timeout, so spurctl's drain
    gone DOWN is still spurctl's by its credential's uid."""
    from spurctl.sources import credentials
    from spurctl.usecases.drain import Verb
    from tests.e2e.test_drain_owner_e2e import KEY, _clean_gpu012, _cluster, _in_process

    gen = _cluster(tmp_path, spur_release=NEWEST, auth="required", jwt_key=KEY)
    c = next(gen)
    try:
        ops = credentials.mint(KEY, "ops", uid=1000, admin=True)
        drained = _in_process(c, Verb.DRAIN, "gpu012", lambda plan: True, token=ops)
        assert drained.done == {"gpu012": (True, f"drained: {ORPHAN_DRAIN}")}, drained
        c.sim.lose_heartbeat("gpu012")
        node = c.sim.node("gpu012")
        assert (node.state, node.state_reason, node.reason_uid) == (
            NodeState.DOWN, ORPHAN_DRAIN, 1000,
        )  # fmt: skip
        c.sim.start_agent("gpu012")
        _clean_gpu012(c)
        resumed = _in_process(c, Verb.RESUME, "gpu012", lambda plan: True, token=ops)
        assert resumed.done == {"gpu012": (True, f"resumed: lifted {ORPHAN_DRAIN!r}")}, resumed
        assert c.sim.node("gpu012").state is NodeState.IDLE
    finally:
        gen.close()
