"""A node whose inventory records no running spurd: agent-not-running, never clean."""

from __future__ import annotations

from dataclasses import replace

from spurctl.model import Action, AgentProcess, Holding, Inventory, JobState, Kind
from tests.unit.test_classify import T0, WM, classify, held, inv, invs, job, view

SPURD = AgentProcess(2201, T0)


def _without_spurd(name: str, *holdings: Holding, hostname: str | None = None) -> Inventory:
    base = inv(name, *holdings)
    return replace(base, agent=None, agent_checked=True, hostname=hostname or name)


def test_a_node_whose_scan_found_no_spurd_is_agent_not_running_never_clean() -> None:
    empty = _without_spurd("gpu017")
    result = classify(view(), invs(empty), watermark=WM, include_healthy=True)
    (finding,) = [f for f in result.findings if f.node == "gpu017"]
    assert (finding.kind, finding.action, finding.job_id) == (
        Kind.AGENT_NOT_RUNNING,
        Action.INVESTIGATE,
        None,
    )
    assert finding.reason.startswith("no spurd process was running on gpu017")
    assert "it holds nothing" in finding.reason and "start spurd" in finding.reason
    assert finding.needs_action


def test_nothing_held_on_a_node_without_spurd_is_reclaimed() -> None:
    ended = job(5, JobState.COMPLETED, "gpu017", end=T0)
    node = _without_spurd("gpu017", held(5, gpu_ids=(0,), pids=(81,)))
    result = classify(view(ended), invs(node), watermark=WM)
    by_kind = {f.kind: f for f in result.findings}
    assert "holds job 5 and no agent is there to cancel it" in (
        by_kind[Kind.AGENT_NOT_RUNNING].reason
    )
    terminal = by_kind[Kind.TERMINAL_HELD]
    assert terminal.action is Action.INVESTIGATE
    assert "not reclaimed: no spurd was running on gpu017" in terminal.reason
    assert not [f for f in result.findings if f.action is Action.RECLAIM]


def test_the_same_node_with_spurd_running_is_judged_as_usual() -> None:
    ended = job(5, JobState.COMPLETED, "gpu017", end=T0)
    node = replace(inv("gpu017", held(5, gpu_ids=(0,))), agent=SPURD, agent_checked=True)
    result = classify(view(ended), invs(node), watermark=WM)
    assert [(f.kind, f.action) for f in result.findings] == [(Kind.TERMINAL_HELD, Action.RECLAIM)]


def test_an_older_inventory_that_does_not_say_is_not_agent_not_running() -> None:
    # No `agent` key at all (agent_checked False): the document does not say, so no finding.
    ended = job(5, JobState.COMPLETED, "gpu017", end=T0)
    result = classify(view(ended), invs(inv("gpu017", held(5))), watermark=WM)
    assert Kind.AGENT_NOT_RUNNING not in {f.kind for f in result.findings}
    assert {f.action for f in result.findings} == {Action.RECLAIM}


def test_the_reason_names_a_hostname_given_that_differs_from_the_hosts_own() -> None:
    node = _without_spurd("gpu017", hostname="build03")
    (finding,) = classify(view(), invs(node), watermark=WM).findings
    assert "on gpu017 when its inventory was taken at 2026-12-02T10:30:00Z" in finding.reason
    assert "(scanned on host build03 with --hostname gpu017)" in finding.reason
    same = _without_spurd("gpu017", hostname="gpu017")
    (plain,) = classify(view(), invs(same), watermark=WM).findings
    assert "scanned on host" not in plain.reason


def test_an_audit_notes_every_inventory_taken_under_another_hosts_name() -> None:
    spurd = {"agent": SPURD, "agent_checked": True}
    renamed = [replace(inv(f"gpu01{i}"), hostname=f"build0{i}", **spurd) for i in range(6, 9)]
    result = classify(view(), invs(*renamed, replace(inv("gpu020"), **spurd)), watermark=WM)
    assert result.findings == []
    (note,) = [n for n in result.notes if "--hostname" in n]
    assert note.startswith(
        "3 inventories were taken with a node-inventory --hostname other than the host's own "
        "name: gpu016 (host build06), gpu017 (host build07), gpu018 (host build08)"
    )
    one = classify(view(), invs(renamed[0]), watermark=WM).notes
    assert [n for n in one if "--hostname" in n] == [
        "1 inventory was taken with a node-inventory --hostname other than the host's own "
        "name: gpu016 (host build06); it is judged as the node named, so check that "
        "--hostname named the right node"
    ]
