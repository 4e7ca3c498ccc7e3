"""The simulated agent's CancelJob frees what spurd's frees, when spurd frees it.

spurd acts only on a job in its running map (a run it launched); any other id only
frees an allocation entry, and it answers Ok either way. A graceful cancel is
SIGTERM, SIGKILL 5 s later, and the release at the 2 s monitor's next tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from spurctl.model import Holding, Job, JobState, Node, NodeState
from spurctl_sim.scenario import Scenario
from spurctl_sim.state import CancelTiming, ClusterState

SPURD = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
LATER = SPURD + timedelta(hours=1)


def cluster(*held: Holding) -> ClusterState:
    return ClusterState(
        Scenario(
            version="0.8.0",
            jobs=[Job(job_id=h.job_id, state=JobState.COMPLETED) for h in held],
            nodes=[Node(name="gpu001", state=NodeState.IDLE)],
            holdings={"gpu001": list(held)},
            agent_started_at={"gpu001": SPURD},
        )
    )


def holds(state: ClusterState, job_id: int) -> bool:
    return job_id in {h.job_id for h in state.inventory("gpu001").held}


def wait_for(ready: Callable[[], bool], seconds: float = 5.0) -> float:
    begun = time.monotonic()
    while not ready():
        assert time.monotonic() - begun < seconds, "timed out"
        time.sleep(0.01)
    return time.monotonic() - begun


def test_a_run_spurd_launched_is_freed_and_an_empty_cgroup_or_spool_is_not() -> None:
    state = cluster(
        Holding(job_id=1, pids=(7,), started_at=LATER),
        Holding(job_id=2, started_at=LATER, traces=("cgroup",)),
        Holding(job_id=3, started_at=LATER, traces=("spool",)),
        Holding(job_id=4, started_at=LATER),  # no trace recorded: a reservation
        Holding(job_id=5, pids=(8,), started_at=SPURD - timedelta(hours=1)),  # an orphan
    )
    assert [state.agent_cancel("gpu001", j, 0) for j in (1, 2, 3, 4, 5, 99)] == [
        True,
        False,
        False,
        True,
        False,
        False,
    ]
    assert [holds(state, j) for j in (1, 2, 3, 4, 5)] == [False, True, True, False, True]


def test_with_spurds_timing_a_run_that_ignores_sigterm_goes_only_after_the_grace() -> None:
    state = cluster(
        Holding(job_id=1, pids=(7,), started_at=LATER),
        Holding(job_id=2, pids=(8,), started_at=LATER),
    )
    state.cancel_timing = CancelTiming().scaled(0.1)  # 0.5 s grace, 0.2 s monitor tick
    state.ignores_sigterm.add(("gpu001", 2))
    assert state.agent_cancel("gpu001", 1, 0) and state.agent_cancel("gpu001", 2, 0)
    assert holds(state, 1) and holds(state, 2)  # nothing is freed at the call itself
    responsive = wait_for(lambda: not holds(state, 1))
    stubborn = wait_for(lambda: not holds(state, 2))
    assert 0.15 <= responsive < 0.5
    assert responsive + stubborn >= 0.65  # the SIGKILL grace, then the monitor's tick


def test_a_cancel_of_a_shared_cgroup_stops_spurds_run_and_leaves_the_orphans() -> None:
    # After a graceful restart with requeue: 7 predates spurd, 9 is its own run.
    state = cluster(Holding(job_id=1, pids=(7, 9), started_at=SPURD - timedelta(hours=1)))
    state.restart_agent("gpu001", LATER)
    state.hold("gpu001", Holding(job_id=1, pids=(7, 9), started_at=SPURD, tracked_pids=(9,)))
    assert state.agent_cancel("gpu001", 1, 0)
    [left] = state.inventory("gpu001").held
    assert (left.pids, left.tracked_pids) == ((7,), ())
    assert not state.agent_cancel("gpu001", 1, 0)  # the orphan: Ok, and nothing freed


def test_a_graceful_restart_evicts_and_may_requeue_while_a_crash_changes_nothing() -> None:
    state = cluster(Holding(job_id=1, pids=(7,), started_at=SPURD))
    state.set_job(Job(job_id=1, state=JobState.RUNNING, nodelist="gpu001"))
    assert state.restart_agent("gpu001", LATER) == []
    assert state.jobs[1].state is JobState.RUNNING
    assert state.restart_agent("gpu001", LATER, graceful=True) == [1]
    assert state.jobs[1].state is JobState.NODE_FAIL
    state.set_job(Job(job_id=1, state=JobState.RUNNING, nodelist="gpu001"))
    assert state.restart_agent("gpu001", LATER, graceful=True, requeue=True) == [1]
    assert state.jobs[1].state is JobState.RUNNING
    [shared] = state.inventory("gpu001").held
    assert shared.pids[0] == 7 and len(shared.pids) == 2
    assert shared.tracked_pids == shared.pids[1:]
