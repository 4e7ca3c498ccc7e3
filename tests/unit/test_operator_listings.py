"""The pure parts of the operator listings: -x's exclusion, `nodes`' rows, journal filters."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer

from spurctl.model import AgentProcess, ControllerView, Inventory, JobState, NodeState
from spurctl.option_values import since_time
from spurctl.scope import Scope, excluded_note, excluding
from spurctl.usecases.journal_runs import JournalFilter, JournalRuns, filtered, summarize
from spurctl.usecases.nodes import AgentStatus, listing
from tests.unit.test_classify import NOW, held, inv, job, node, view

# -- -x -----------------------------------------------------------------------------


def test_excluding_takes_a_node_out_by_either_of_its_names() -> None:
    loose = inv("gpu017.cluster.local", held(5))
    targeted = replace(inv("oddname", held(6)), target_node="gpu018")
    kept = excluding(
        {"GPU017", "gpu018"},
        ["gpu016", "gpu017", "gpu018"],
        [inv("gpu016"), loose, targeted],
        None,
    )
    assert [i.node for i in kept.inventories] == ["gpu016"]
    assert kept.scope == frozenset({"gpu016", "oddname"})
    # One name per node, the controller's: gpu017 is not counted twice.
    assert kept.left_out == ("gpu017", "gpu018")
    assert excluded_note(kept.left_out) == ("2 nodes excluded by -x and not audited: gpu[017-018].")


def test_excluding_within_a_given_scope_counts_only_the_nodes_in_it() -> None:
    kept = excluding({"gpu017", "gpu099"}, ["gpu016", "gpu017"], [], {"gpu016", "gpu017"})
    assert (kept.scope, kept.left_out) == (frozenset({"gpu016"}), ("gpu017",))
    assert excluded_note(kept.left_out) == "1 node excluded by -x and not audited: gpu017."


# -- nodes ----------------------------------------------------------------------------


CPUS = {"gpu016": 8, "gpu017": 0, "gpu018": 0, "gpu020": 8}


def _cluster() -> tuple[ControllerView, dict[str, Inventory]]:
    the_view = view(
        job(1, JobState.RUNNING, "gpu[016-017]"),
        job(2, JobState.COMPLETED, "gpu016"),
        job(3, JobState.RUNNING, "gpu020"),
        job(4, JobState.RUNNING, "gpu[bad"),
        nodes=tuple(node(n, cpus=c) for n, c in CPUS.items()),
    )
    stale = replace(inv("gpu016", held(1), held(2)), collected_at=NOW - timedelta(minutes=5))
    invs = {
        "gpu016": stale,
        "GPU017.cluster": replace(inv("GPU017.cluster", held(1)), agent=AgentProcess(9)),
        "gpu018": replace(inv("gpu018"), agent=None, agent_checked=True),
        "gpu099": inv("gpu099", held(7), error="ssh: timed out"),
    }
    return the_view, invs


def test_each_node_gets_its_controller_state_placed_jobs_held_ids_agent_and_age() -> None:
    the_view, invs = _cluster()
    rows = {r.node: r for r in listing(the_view, invs, scope=None, now=NOW).rows}

    assert list(rows) == ["gpu016", "gpu017", "gpu018", "gpu020", "gpu099"]
    g16 = rows["gpu016"]
    assert (g16.state, g16.jobs, g16.held, g16.agent) == (
        NodeState.MIXED.name,
        (1,),
        (1, 2),
        AgentStatus.ANSWERED,
    )
    assert g16.inventory_age_s == 300.0
    g17 = rows["gpu017"]
    assert (g17.jobs, g17.held, g17.inventory_node) == ((1,), (1,), "GPU017.cluster")
    assert rows["gpu018"].agent is AgentStatus.NO_SPURD and rows["gpu018"].held == ()
    g20 = rows["gpu020"]
    assert (g20.jobs, g20.held, g20.agent) == ((3,), None, AgentStatus.NOT_INVENTORIED)
    g99 = rows["gpu099"]
    assert (g99.state, g99.held, g99.agent, g99.error) == (
        None,
        None,
        AgentStatus.UNREACHABLE,
        "ssh: timed out",
    )


def test_a_scope_naming_the_inventorys_own_name_lists_the_node_once_under_the_controllers() -> None:
    the_view, invs = _cluster()
    shown = listing(the_view, invs, scope={"GPU017.cluster", "gpu017"}, now=NOW)
    assert [r.node for r in shown.rows] == ["gpu017"]
    assert shown.by_agent() == {AgentStatus.ANSWERED: ["gpu017"]}


def test_an_inventory_reporting_the_exact_name_wins_over_a_loose_twin() -> None:
    the_view, _ = _cluster()
    exact = inv("gpu017", held(1))
    loose = inv("GPU017", held(8))
    (row,) = listing(the_view, {"gpu017": exact, "GPU017": loose}, scope={"gpu017"}, now=NOW).rows
    assert (row.held, row.inventory_node) == ((1,), None)


# -- journal --node --since ---------------------------------------------------------


def _rec(run: str, event: str, node: str, job_id: int, at: str, **extra: object) -> dict[str, Any]:
    base = {"run": run, "event": event, "node": node, "job_id": job_id, "at": at}
    return {**base, "operator": "ops", "kind": "terminal-held", **extra}


RECORDS = [
    _rec("r1", "intent", "gpu001", 5, "2026-12-01T10:00:00Z"),
    _rec("r1", "outcome", "gpu001", 5, "2026-12-01T10:00:01Z", result="sent"),
    _rec("r2", "intent", "gpu001", 6, "2026-12-02T10:00:00Z"),
    _rec("r2", "outcome", "gpu001", 6, "2026-12-02T10:00:01Z", result="failed"),
    _rec("r2", "intent", "gpu002", 7, "2026-12-02T10:00:02Z"),
]


def _view() -> JournalRuns:
    return JournalRuns(Path("j"), True, summarize(RECORDS))


def test_a_node_filter_keeps_the_runs_that_touched_it_counted_for_it_alone() -> None:
    only = filtered(_view(), JournalFilter(Scope.parse("gpu002")))
    (run,) = only.runs
    assert (run.run, run.nodes, run.intents, run.failed) == ("r2", ["gpu002"], 1, 0)
    assert [u.node for u in run.no_outcome] == ["gpu002"] and only.in_journal == 2
    both = filtered(_view(), JournalFilter(Scope.parse("gpu[001-002]", "gpu002")))
    assert [(r.run, r.nodes, r.failed, r.interrupted) for r in both.runs] == [
        ("r2", ["gpu001"], 1, False),
        ("r1", ["gpu001"], 0, False),
    ]


def test_a_since_filter_keeps_the_runs_with_a_record_at_or_after_it() -> None:
    at = datetime(2026, 12, 2, 10, 0, 2, tzinfo=UTC)
    assert [r.run for r in filtered(_view(), JournalFilter(since=at)).runs] == ["r2"]
    later = filtered(_view(), JournalFilter(since=at + timedelta(seconds=1)))
    assert later.runs == [] and later.in_journal == 2
    assert filtered(_view(), JournalFilter()) == _view()


def test_since_reads_a_time_or_a_span_back_from_now() -> None:
    assert since_time("2026-12-02T10:00:00Z") == datetime(2026, 12, 2, 10, tzinfo=UTC)
    assert since_time("2026-12-02T12:00:00+02:00") == datetime(2026, 12, 2, 10, tzinfo=UTC)
    assert since_time("2026-12-02T10:00") == datetime(2026, 12, 2, 10, tzinfo=UTC)
    since = since_time("2h")
    back = datetime.now(UTC) - since
    assert timedelta(hours=2) <= back < timedelta(hours=2, seconds=30)
    for bad in ("yesterday", "0h", "-5m", "2026-13-01", ""):
        with pytest.raises(typer.BadParameter):
            since_time(bad)
