"""leftover: a holding with no process gets one agent cancel at most.

spurd's CancelJob acts only on jobs in its running map, and a job leaves it when its
last process exits; for any other id it only frees an allocation entry. So an empty
`job_<id>` cgroup or a spool directory gets the one cancel that may free such an
entry, and once reclaim's journal records it sent, the holding is a `leftover`
pointing at `spurctl node-release`, never planned for another agent cancel.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

from spurctl.act.journal import Journal
from spurctl.decide import classify as classify_module
from spurctl.decide.classify import Classification
from spurctl.model import Action, Holding, JobState, Kind
from spurctl.sources.journal_records import cancels_sent
from tests.unit.test_classify import NOW, T0, WM, held, inv, invs, job, view

TRACE = msgspec.structs.replace(held(40), traces=("cgroup",))  # an empty job_40 cgroup
SENT = NOW - timedelta(minutes=2)  # the agent cancel, journaled before the inventory


def judge(holding: Holding, cancelled: dict[tuple[str, int], datetime]) -> Classification:
    return classify_module.classify(
        view(job(40, JobState.COMPLETED, "gpu017", end=T0)),
        invs(inv("gpu017", holding)),
        watermark=WM,
        scope={"gpu017"},
        cancelled=cancelled,
    )


def only(result: Classification) -> tuple[Kind, Action, str]:
    [f] = result.findings
    return f.kind, f.action, f.reason


def test_a_holding_with_no_process_gets_its_one_agent_cancel() -> None:
    kind, action, _ = only(judge(TRACE, {}))
    assert (kind, action) == (Kind.TERMINAL_HELD, Action.RECLAIM)


def test_once_a_cancel_was_sent_an_empty_trace_is_a_leftover_for_node_release() -> None:
    kind, action, reason = only(judge(TRACE, {("gpu017", 40): SENT}))
    assert (kind, action) == (Kind.LEFTOVER, Action.INVESTIGATE)
    assert reason.startswith("job 40 ended COMPLETED")
    assert "gpu017 still shows job 40 (cgroup, no process) after an agent cancel" in reason
    assert "another would free nothing" in reason
    assert "`spurctl node-release --job 40 --started-at 2026-12-02T10:10:00Z` on gpu017" in reason


def test_an_inventory_older_than_the_cancel_asks_for_a_re_collect_and_sends_nothing() -> None:
    kind, action, reason = only(judge(TRACE, {("gpu017", 40): NOW + timedelta(seconds=5)}))
    assert (kind, action) == (Kind.LEFTOVER, Action.INVESTIGATE)
    assert "after this inventory was taken; re-collect gpu017" in reason


def test_a_live_run_is_planned_again_after_an_earlier_cancel() -> None:
    # A run with a process may be in spurd's running map: its cancel can still free it.
    kind, action, _ = only(judge(held(40, pids=(7,)), {("gpu017", 40): SENT}))
    assert (kind, action) == (Kind.TERMINAL_HELD, Action.RECLAIM)


def test_a_trace_newer_than_the_cancel_is_another_run_and_gets_its_own_cancel() -> None:
    newer = msgspec.structs.replace(TRACE, started_at=SENT + timedelta(minutes=1))
    kind, action, _ = only(judge(newer, {("gpu017", 40): SENT}))
    assert (kind, action) == (Kind.TERMINAL_HELD, Action.RECLAIM)


def test_a_cancel_journaled_for_another_node_changes_nothing_here() -> None:
    kind, _, _ = only(judge(TRACE, {("gpu018", 40): SENT}))
    assert kind is Kind.TERMINAL_HELD


def test_a_spared_holding_stays_spared_whatever_the_journal_says() -> None:
    result = classify_module.classify(
        view(job(40, JobState.PENDING)),
        invs(inv("gpu017", TRACE)),
        watermark=WM,
        scope={"gpu017"},
        cancelled={("gpu017", 40): SENT},
    )
    assert only(result)[:2] == (Kind.NOT_STARTED, Action.SPARE)


def test_the_journal_remembers_sent_and_possibly_sent_cancels_only(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 1, "terminal-held")
        j.outcome("gpu017", 1, "terminal-held", "sent", "agent accepted")
        j.intent("gpu017", 2, "terminal-held")
        j.outcome("gpu017", 2, "terminal-held", "skipped", "not sent: no longer terminal-held")
        j.intent("gpu017", 3, "active-elsewhere")
        j.outcome("gpu017", 3, "active-elsewhere", "failed", "agent gpu017:6818 unreachable")
        j.intent("gpu017", 4, "below-watermark-unknown")  # interrupted: may have gone out
        j.intent("gpu017", 5, "agent-orphan")  # node-release: no agent cancel
        j.outcome("gpu017", 5, "agent-orphan", "released", "released")
    got = cancels_sent(path)
    assert set(got) == {("gpu017", 1), ("gpu017", 4)}
    at = json.loads(path.read_text().splitlines()[1])["at"]
    assert got[("gpu017", 1)].isoformat().replace("+00:00", "Z") == at
    assert cancels_sent(tmp_path / "none.jsonl") == {}


def test_an_intent_closed_as_unknown_counts_as_possibly_sent(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 7, "terminal-held")
    with Journal(path) as j:
        j.outcome("gpu017", 7, "terminal-held", "failed", "unknown: an earlier run was interrupted")
    assert set(cancels_sent(path)) == {("gpu017", 7)}
