"""A spurd restart on the simulated cluster, as each Spur release handles it.

Up to 0.11 a graceful stop sends DeregisterAgent and the controller removes the node
(`remove_node(force=true)`): the node's active jobs go to NODE_FAIL, a SIGKILL cancel
reaches each evicted job's other nodes, and the next spurd registers a fresh record
(new slurmd_start_time, drain gone). After #784 the node is marked Down and its record
kept. A crash changes neither. Either way the node's own runs survive.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spurctl.model import Allocation, Holding, Job, JobState, Node, NodeState
from spurctl_sim.releases import (
    MAIN_4CC3DA8,
    NEWEST,
    V0_8_0,
    V0_9_TO_0_11,
    SpurRelease,
)
from spurctl_sim.scenario import Scenario
from spurctl_sim.state import ClusterState

REGISTERED = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)  # slurmd_start_time: first registration
SPURD = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
LATER = SPURD + timedelta(hours=1)
REMOVING = [V0_8_0, MAIN_4CC3DA8, V0_9_TO_0_11]


def cluster(release: SpurRelease, *, drained: bool = False) -> ClusterState:
    """Job 1 runs on gpu001 and gpu002, job 2 on gpu001 alone; gpu001 maybe drained."""
    nodes = [
        Node(
            name=name,
            state=NodeState.DRAIN if drained and name == "gpu001" else NodeState.IDLE,
            state_reason="admin: bad DIMM" if drained and name == "gpu001" else "",
            agent_start_time=REGISTERED,
            labels={"rack": "r01"},
        )
        for name in ("gpu001", "gpu002")
    ]
    run = {"pids": (7,), "started_at": SPURD}
    state = ClusterState(
        Scenario(
            version="0.8.0",
            jobs=[],
            nodes=nodes,
            holdings={
                "gpu001": [
                    Holding(job_id=1, **run),
                    Holding(job_id=2, pids=(8,), started_at=SPURD),
                ],
                "gpu002": [Holding(job_id=1, pids=(9,), started_at=SPURD)],
            },
            agent_started_at={"gpu001": SPURD, "gpu002": SPURD},
        ),
        release,
    )
    state.set_job(Job(job_id=1, state=JobState.RUNNING, nodelist="gpu[001-002]"))
    state.set_job(Job(job_id=2, state=JobState.RUNNING, nodelist="gpu001"))
    return state


def held(state: ClusterState, node: str) -> set[int]:
    return {h.job_id for h in state.inventory(node).held}


@pytest.mark.parametrize("release", [*REMOVING, NEWEST], ids=lambda r: r.name)
def test_a_crash_restart_changes_nothing_on_the_controller(release: SpurRelease) -> None:
    state = cluster(release, drained=True)
    before = state.nodes["gpu001"]
    assert state.restart_agent("gpu001", LATER) == []
    assert state.nodes["gpu001"] == before  # slurmd_start_time, drain and reason kept
    assert {j: state.jobs[j].state for j in (1, 2)} == {1: JobState.RUNNING, 2: JobState.RUNNING}
    assert held(state, "gpu001") == {1, 2} and held(state, "gpu002") == {1}
    assert state.inventory("gpu001").agent.started_at == LATER  # type: ignore[union-attr]


@pytest.mark.parametrize("release", REMOVING, ids=lambda r: r.name)
def test_up_to_0_11_a_graceful_restart_removes_the_node_and_it_registers_afresh(
    release: SpurRelease,
) -> None:
    state = cluster(release, drained=True)
    assert state.restart_agent("gpu001", LATER, graceful=True) == [1, 2]
    assert {state.jobs[j].state for j in (1, 2)} == {JobState.NODE_FAIL}
    fresh = state.nodes["gpu001"]
    # A new record: a new slurmd_start_time, the admin's drain and its reason gone.
    assert fresh.agent_start_time == LATER
    assert (fresh.state, fresh.state_reason, fresh.alloc) == (NodeState.IDLE, "", Allocation())
    # SIGKILL reached job 1's other node; the restarted node's own runs outlive spurd.
    assert held(state, "gpu002") == set()
    assert held(state, "gpu001") == {1, 2}


def test_after_784_a_graceful_restart_marks_the_node_down_and_keeps_its_record() -> None:
    state = cluster(NEWEST, drained=True)
    assert state.restart_agent("gpu001", LATER, graceful=True) == [1, 2]
    assert {state.jobs[j].state for j in (1, 2)} == {JobState.NODE_FAIL}
    kept = state.nodes["gpu001"]
    # The record stays: slurmd_start_time unchanged, the admin's hold and reason kept.
    assert kept.agent_start_time == REGISTERED
    assert (kept.state, kept.state_reason) == (NodeState.DRAIN, "admin: bad DIMM")
    assert held(state, "gpu002") == set()  # evicted as before
    assert held(state, "gpu001") == {1, 2}


def test_after_784_an_undrained_node_comes_back_with_its_heartbeat() -> None:
    state = cluster(NEWEST)
    state.restart_agent("gpu001", LATER, graceful=True)
    kept = state.nodes["gpu001"]
    assert (kept.state, kept.agent_start_time) == (NodeState.IDLE, REGISTERED)


@pytest.mark.parametrize("release", [*REMOVING, NEWEST], ids=lambda r: r.name)
def test_a_requeue_after_a_graceful_restart_runs_anew_on_every_node(release: SpurRelease) -> None:
    state = cluster(release)
    state.restart_agent("gpu001", LATER, graceful=True, requeue=True)
    assert state.jobs[1].state is JobState.RUNNING
    [shared] = [h for h in state.inventory("gpu001").held if h.job_id == 1]
    assert shared.pids[0] == 7 and shared.tracked_pids == shared.pids[1:]  # the old cgroup
    [other] = state.inventory("gpu002").held
    assert other.pids != (9,) and other.started_at == LATER + timedelta(seconds=1)
