"""A run bound to a live spurstepd session is adopted by spurd, never an agent orphan.

spurd hands each job step to a supervisor double-forked so that it outlives spurd,
and a restarted spurd re-reads every session whose descriptor's pid still runs with
the start ticks it records, and adopts it (Spur #754: stepd.rs `discover_live`,
spurd main.rs). So a run that began before the current spurd is no orphan when a
live session binds it: the verdict stands, investigated, and the reason says so.
A stale session (its supervisor gone) adopts nothing.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest

from spurctl.decide import release
from spurctl.holdings import Holding, Inventory, Session, SessionBinding
from spurctl.model import Action, Job, JobState, Kind
from tests.unit.test_classify import T0, held, job
from tests.unit.test_classify_agent_orphan import AFTER, BEFORE, RUN_START, Case, classify, on_node

BATCH = 0xFFFF_FFFE
LIVE = Session(3, BATCH, 6100, SessionBinding.LIVE, workload=7)
STALE = Session(3, BATCH, 6100, SessionBinding.STALE, "pid 6100 no longer runs", workload=7)


def bound(h: Holding, *sessions: Session) -> Holding:
    return msgspec.structs.replace(h, sessions=sessions)


def done(job_id: int = 40) -> Job:
    return job(job_id, JobState.COMPLETED, "gpu017", end=T0)


CASES: dict[str, Case] = {
    "GATE: a run older than spurd that a live session binds is never an agent orphan": Case(
        (done(),),
        on_node(bound(held(40, pids=(7,)), LIVE), agent_started=BEFORE),
        (Kind.TERMINAL_HELD, Action.INVESTIGATE),
    ),
    "a live session's untracked id is investigated, never an orphan": Case(
        (),
        on_node(bound(held(40, pids=(7,)), LIVE), agent_started=BEFORE),
        (Kind.BELOW_WATERMARK_UNKNOWN, Action.INVESTIGATE),
    ),
    "a healthy run a live session binds is healthy: spurd adopted it": Case(
        (job(40, JobState.RUNNING, "gpu[016-018]"),),
        on_node(bound(held(40, pids=(7,)), LIVE), agent_started=BEFORE),
        None,
    ),
    "a stale session adopts nothing: the run is an agent orphan": Case(
        (done(),),
        on_node(bound(held(40, pids=(7,)), STALE), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.INVESTIGATE),
    ),
    "a run spurd launched under a live session stays a reclaim": Case(
        (done(),),
        on_node(bound(held(40, pids=(7,)), LIVE), agent_started=AFTER),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
    ),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_sessions(case: Case) -> None:
    got = [(f.kind, f.action) for f in classify(case).findings if f.job_id is not None]
    assert got == ([case.expected] if case.expected else [])


def test_the_reason_names_the_live_session_that_binds_the_run() -> None:
    name = "GATE: a run older than spurd that a live session binds is never an agent orphan"
    (finding,) = classify(CASES[name]).findings
    assert "a live spurstepd session binds it (attempt 3 step batch: supervisor 6100" in (
        finding.reason
    )
    assert "spurd adopts every live session when it starts (Spur #754)" in finding.reason
    assert "not called an agent orphan" in finding.reason
    assert "node-release" not in finding.reason


def test_a_live_session_run_none_of_whose_processes_descend_from_spurd_is_no_orphan() -> None:
    # The supervisor is re-parented to init (double fork): its run never descends from
    # spurd, which still tracks it through the session.
    inv: Inventory = replace(
        on_node(bound(held(40, pids=(7,)), LIVE), agent_started=AFTER), ancestry_read=True
    )
    (finding,) = classify(Case((done(),), inv, None)).findings
    assert (finding.kind, finding.action) == (Kind.TERMINAL_HELD, Action.RECLAIM)


def test_node_release_refuses_a_run_a_live_session_binds() -> None:
    inv = on_node(bound(held(40, pids=(7,)), LIVE), agent_started=BEFORE)
    why = release.refusal(inv, 40, RUN_START)
    assert why is not None and "a live spurstepd session binds it" in why
    assert "spurctl reclaim --node gpu017 --job 40" in why


def test_node_release_frees_a_run_whose_session_is_stale() -> None:
    inv = on_node(bound(held(40, pids=(7,)), STALE), agent_started=BEFORE)
    assert release.refusal(inv, 40, RUN_START) is None
