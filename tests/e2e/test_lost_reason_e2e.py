"""A drain of spurctl's whose reason Spur v0.8.0 replaced, against the simulated cluster.

gpu012 holds agent orphans, so `spurctl drain` leaves it DRAINING. Its spurd then
stops: release v0.8.0's health check marks it DOWN `Not responding`, keeping the drain's
lock (cluster.rs `apply_health_actions`, v0.8.0 l. 2311-2340), so it never recovers by
itself and its reason is no longer spurctl's. audit, nodes, explain and resume must say
so; plain resume leaves it; `resume --lost-reason` lifts it only when the journal
records that drain, its audit is clean and its spurd runs. From 0.9.0 (#624) the drain
keeps its reason and --lost-reason refuses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from spurctl.model import NodeState
from spurctl.usecases.drain import DrainRequest, Verb, change
from spurctl_sim.releases import V0_8_0, V0_9_TO_0_11, SpurRelease
from tests.cli import run_cli, wait_for
from tests.e2e.test_drain_owner_e2e import _clean_gpu012, _cluster
from tests.e2e.test_drain_resume_e2e import ORPHAN_DRAIN, Cluster, command
from tests.reclaim import journal_records

LOST = "--lost-reason"


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(tmp_path, spur_release=V0_8_0)


def _drained_then_lost(c: Cluster) -> str:
    """gpu012 drained by spurctl, then its heartbeat lost: the drain's time, as journaled."""
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    assert c.sim.node("gpu012").state is NodeState.DRAINING
    c.sim.lose_heartbeat("gpu012")
    wait_for(lambda: '"agent": null' in c.live.read_text())  # the node shows no spurd
    sent = [r for r in journal_records(c.journal) if r.get("action") == "drain" and "result" in r]
    return str(sent[-1]["at"])


def _resumes(c: Cluster) -> list[dict[str, Any]]:
    return [r for r in journal_records(c.journal) if r.get("action") == "resume"]


def _said(at: str) -> str:
    return f"gpu012 went DOWN after spurctl's drain of {at}: Spur up to v0.8.0"


def test_v0_8_0_audit_nodes_explain_and_plain_resume_say_the_drain_went_down_and_leave_it(
    c: Cluster,
) -> None:
    at = _drained_then_lost(c)
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.DOWN, "Not responding")
    c.sim.start_agent("gpu012")
    c.sim.heartbeat()
    assert c.sim.node("gpu012").state is NodeState.DOWN  # locked: never by itself
    said = _said(at)
    step = "`spurctl resume -w gpu012 --lost-reason` lifts it"

    view = ("--controller", c.sim.controller_address, "--inventory", str(c.live))
    journal = ("--journal", str(c.journal))
    audit = run_cli("audit", "-w", "gpu012", *view, *journal, "--format", "json", home=c.home)
    notes = json.loads(audit.stdout)["notes"]
    assert any(n.startswith(said) and n.endswith(step) for n in notes), notes
    nodes = run_cli("nodes", "-w", "gpu012", *view, *journal, "--format", "json", home=c.home)
    assert any(n.startswith(said) for n in json.loads(nodes.stdout)["notes"]), nodes.stdout
    explain = run_cli("explain", "gpu012", *view, *journal, "--format", "json", home=c.home)
    assert json.loads(explain.stdout)["controller_node"]["cause"].startswith(said)

    _clean_gpu012(c)  # clean and spurd running: plain resume still leaves it
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"  {said}" in proc.stdout and step in proc.stdout
    assert c.sim.node("gpu012").state is NodeState.DOWN
    assert _resumes(c) == []


def test_drain_says_the_lost_reason_line_of_such_a_node_and_sends_nothing(c: Cluster) -> None:
    at = _drained_then_lost(c)
    drains = len(journal_records(c.journal))
    proc = command(c, "drain", "gpu012", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # One line, audit's own words, with the one command that lifts it.
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("  gpu012  ")]
    audit = run_cli(
        "audit", "-w", "gpu012", "--controller", c.sim.controller_address, "--inventory",
        str(c.live), "--journal", str(c.journal), "--format", "json", home=c.home,
    )  # fmt: skip
    [note] = [n for n in json.loads(audit.stdout)["notes"] if n.startswith(_said(at))]
    assert line == f"  gpu012  {note}"
    assert "for another reason" not in proc.stdout
    assert "Nothing to drain: nothing sent" in proc.stdout
    assert len(journal_records(c.journal)) == drains  # nothing journaled, nothing sent
    assert c.sim.node("gpu012").state_reason == "Not responding"


def test_the_audits_metrics_count_such_a_node_apart_and_the_lift_clears_it(
    c: Cluster, tmp_path: Path
) -> None:
    """Not in `spurctl_nodes_left_drained` (a drain whose reason is spurctl's, which plain
    resume lifts: its meaning unchanged), but in its own pair, which SpurctlDrainReasonLost
    reads (contrib/prometheus)."""
    prom = tmp_path / "spurctl.prom"

    def metrics() -> dict[str, float]:
        proc = run_cli(
            "audit", "--controller", c.sim.controller_address, "--inventory", str(c.live),
            "--journal", str(c.journal), "--format", "prometheus", "-o", str(prom), home=c.home,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr
        lines = [x for x in prom.read_text().splitlines() if x and not x.startswith("#")]
        return {x.rpartition(" ")[0]: float(x.rpartition(" ")[2]) for x in lines}

    assert metrics()["spurctl_nodes_drain_reason_lost"] == 0
    at = _drained_then_lost(c)
    since = 'spurctl_node_drain_reason_lost_since_timestamp_seconds{node="gpu012"}'
    lost = metrics()
    assert lost["spurctl_nodes_drain_reason_lost"] == 1
    assert lost[since] == datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    assert lost["spurctl_nodes_left_drained"] == 0
    assert not any(k.startswith("spurctl_node_drained_since_timestamp_seconds") for k in lost)
    c.sim.start_agent("gpu012")
    _clean_gpu012(c)
    assert command(c, "resume", "gpu012", LOST, "--yes").returncode == 0
    lifted = metrics()
    assert lifted["spurctl_nodes_drain_reason_lost"] == 0 and since not in lifted


def test_lost_reason_lifts_it_once_clean_with_spurd_running_journaled(c: Cluster) -> None:
    _drained_then_lost(c)
    c.sim.start_agent("gpu012")
    _clean_gpu012(c)
    proc = command(c, "resume", "gpu012", LOST, "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "gpu012  UpdateNode(state=IDLE): lifts the DOWN 'Not responding' that replaced "
        f"spurctl's '{ORPHAN_DRAIN}', its audit is clean and its spurd runs"
    ) in proc.stdout
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.IDLE, "")
    resumed = _resumes(c)
    assert [(r["event"], r.get("result"), r["kind"]) for r in resumed] == [
        ("intent", None, "lost-reason"),
        ("outcome", "sent", "lost-reason"),
    ]
    assert resumed[0]["reason"] == ORPHAN_DRAIN  # spurctl's drain, lifted
    # The drain is lifted in the journal's eyes too: nothing more is said of gpu012.
    again = command(c, "resume", "gpu012", LOST, "--yes")
    assert again.returncode == 1 and "not DOWN 'Not responding'" in again.stdout


def test_lost_reason_refuses_a_node_that_still_holds_something(c: Cluster) -> None:
    _drained_then_lost(c)
    c.sim.start_agent("gpu012")  # spurd back, the orphans still held
    wait_for(lambda: '"agent": null' not in c.live.read_text())
    proc = command(c, "resume", "gpu012", LOST, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu012  gpu012 is not lifted (DOWN 'Not responding' since spurctl's drain" in (
        proc.stdout
    )
    assert ": agent-orphan job" in proc.stdout
    assert c.sim.node("gpu012").state is NodeState.DOWN
    assert _resumes(c) == []


def test_lost_reason_refuses_a_node_whose_spurd_does_not_run(c: Cluster) -> None:
    _drained_then_lost(c)
    _clean_gpu012(c)  # nothing held any more, but no spurd either
    proc = command(c, "resume", "gpu012", LOST, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "agent-not-running" in proc.stdout
    assert c.sim.node("gpu012").state is NodeState.DOWN
    assert _resumes(c) == []


def test_lost_reason_refuses_a_node_the_journal_does_not_say_spurctl_drained(
    c: Cluster,
) -> None:
    """An admin's drain gone DOWN `Not responding` at v0.8.0 looks the same on the
    controller: only the journal tells it from spurctl's, and it says nothing here."""
    c.sim.admin_update("gpu012", NodeState.DRAIN, "ops: check")
    c.sim.lose_heartbeat("gpu012")
    c.sim.start_agent("gpu012")
    _clean_gpu012(c)
    assert c.sim.node("gpu012").state_reason == "Not responding"
    proc = command(c, "resume", "gpu012", LOST, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the journal records no drain of spurctl's on it still set" in proc.stdout
    assert c.sim.node("gpu012").state is NodeState.DOWN
    plain = command(c, "resume", "gpu012", "--yes")
    assert "gpu012 is DOWN ('Not responding'), not by spurctl" in plain.stdout
    assert not c.journal.exists()


def test_lost_reason_refuses_a_node_an_admin_drained_since(c: Cluster) -> None:
    _drained_then_lost(c)
    c.sim.start_agent("gpu012")
    _clean_gpu012(c)
    c.sim.admin_update("gpu012", NodeState.DRAIN, "ops: psu")
    proc = command(c, "resume", "gpu012", LOST, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gpu012 is not lifted: it is DRAIN with reason 'ops: psu', not DOWN 'Not responding', "
        "not spurctl's: never touched"
    ) in proc.stdout
    assert c.sim.node("gpu012").state_reason == "ops: psu"
    assert _resumes(c) == []


def test_lost_reason_sends_nothing_when_an_admin_drains_it_while_the_prompt_is_open(
    c: Cluster,
) -> None:
    """The node is re-read right before the call (`expect=`): an admin's drain set after
    the plan was shown stops it, journaled as skipped."""
    from spurctl.scope import Scope
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import connect_settings

    _drained_then_lost(c)
    c.sim.start_agent("gpu012")
    _clean_gpu012(c)

    def admin_meanwhile(plan: Any) -> bool:
        assert [ch.node for ch in plan.changes] == ["gpu012"]
        c.sim.admin_update("gpu012", NodeState.DRAIN, "ops: psu")
        return True

    conn = connect_settings(controller=c.sim.controller_address, home=c.home)
    src = Sources(Scope.parse("gpu012"), [str(c.live)], False, "", 1)
    request = DrainRequest(Verb.RESUME, src.scope, c.journal, lost_reason=True)
    done = change(request, src, conn, show_plan=lambda plan: None, ask=admin_meanwhile)
    sent, detail = done.done["gpu012"]
    assert not sent and "changed since the plan saw it" in detail, detail
    assert c.sim.node("gpu012").state_reason == "ops: psu"
    assert [(r["event"], r.get("result")) for r in _resumes(c)] == [("outcome", "skipped")]


@pytest.mark.parametrize("release", [V0_9_TO_0_11], ids=lambda r: r.name)
def test_from_0_9_the_drain_keeps_its_reason_and_lost_reason_refuses(
    tmp_path: Path, release: SpurRelease
) -> None:
    gen = _cluster(tmp_path, spur_release=release)
    c = next(gen)
    try:
        _drained_then_lost(c)
        node = c.sim.node("gpu012")
        assert (node.state, node.state_reason) == (NodeState.DOWN, ORPHAN_DRAIN)
        c.sim.start_agent("gpu012")
        _clean_gpu012(c)
        proc = command(c, "resume", "gpu012", LOST, "--yes")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert (
            f"gpu012 is not lifted: Spur {release.version} keeps a drain's own reason when "
            "the heartbeat times out (#624, 0.9.0)"
        ) in proc.stdout
        assert c.sim.node("gpu012").state is NodeState.DOWN
        plain = command(c, "resume", "gpu012", "--yes")  # the existing rule lifts it
        assert plain.returncode == 0, plain.stdout + plain.stderr
        assert c.sim.node("gpu012").state is NodeState.IDLE
    finally:
        gen.close()
