"""A spurd restart on the simulated cluster, as each Spur release handles it.

docs/spur-facts.md, "spurd's restarts, names and supervisors":

- A crash (SIGKILL) sends nothing: the controller keeps the node's record and its
  jobs as they were (RUNNING), `slurmd_start_time` included.
- A graceful stop (SIGTERM) sends DeregisterAgent. Up to 0.11 the controller
  answers with `remove_node(force=true)`: every active job on the node is evicted
  to NODE_FAIL, a SIGKILL cancel goes to each evicted job's nodes whose record is
  still there (the job's other nodes: the removed node has no address left), and
  the record goes; the new spurd then registers a fresh one (`Node::new`: idle,
  nothing allocated, a new `slurmd_start_time`, an admin's drain, its reason and
  labels gone: `registered_afresh`). After #784 the node is marked Down and its
  record kept (an admin's drain keeps its reason: a DRAINING one goes DOWN, locked,
  as under a heartbeat timeout); the jobs are evicted as before,
  and the node returns when its heartbeat does, with the same `slurmd_start_time`.

Either way the node's runs survive (their processes and cgroups outlive spurd) and
the node shows a new spurd start time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from spurctl.model import Allocation, Holding, Job, JobState, Node, NodeState
from spurctl_sim.nodelists import allocated
from spurctl_sim.registration import partitions_of, place_waiting
from spurctl_sim.scenario import busy_state

if TYPE_CHECKING:
    from spurctl_sim.state import ClusterState

# DeregisterAgentRequest.reason as spurd sends it (crates/spurd/src/main.rs).
SHUTDOWN_REASON = "agent shutdown"
_HELD_BY_ADMIN = (NodeState.DRAIN, NodeState.DRAINING, NodeState.DOWN)


def restart_agent(
    state: ClusterState, node: str, at: datetime, *, graceful: bool, requeue: bool
) -> list[int]:
    """spurd restarts on `node` at `at`; returns the ids of the jobs the controller evicted.

    With `requeue` each evicted job runs again at once under the same id, on the
    same nodes; on `node` the new run joins the old run's `job_<id>` cgroup, so the
    holding shows the pre-restart processes beside the new ones (`tracked_pids`).
    """
    with state.lock:
        state.agent_started_at[node] = at
        state.generation += 1
        if not graceful:
            return []
        evicted = sorted(
            j.job_id for j in state.jobs.values() if j.state.active and node in allocated(j)
        )
        for job_id in evicted:
            job = state.jobs[job_id]
            state.set_job(
                msgspec.structs.replace(
                    job, state=JobState.NODE_FAIL, end_time=at, state_reason="NodeFail"
                )
            )
            # spawn_cancel_for_evicted: SIGKILL to the job's nodes that have an address.
            for other in sorted(allocated(job) - {node}):
                if other in state.held:
                    state.agent_cancel(other, job_id, 9)
        keeps = state.spur_release.deregister_keeps_node
        own = state.agent_labels.get(node, {})
        after = _deregistered(state.nodes[node], at, keeps_node=keeps, agent_labels=own)
        # Node::new carries no allocation, so a phantom charge goes with the old record.
        state.nodes[node] = dataclasses.replace(after, state=busy_state(after, after.alloc))
        if not keeps:  # registered afresh: partitions from its labels, a waiting job placed
            state.locked_not_responding.discard(node)
            state.nodes[node] = partitions_of(state, state.nodes[node])
            place_waiting(state, node, at)
        if requeue:
            for job_id in evicted:
                _requeue_at_once(state, node, job_id, at + timedelta(seconds=1), allocated)
        return evicted


def _deregistered(
    before: Node, at: datetime, *, keeps_node: bool, agent_labels: dict[str, str]
) -> Node:
    """The node's record once the new spurd heartbeats: kept (#784) or registered afresh."""
    if keeps_node:
        if before.state is NodeState.DRAINING:
            # Marked Down as a heartbeat timeout would (spurctl_sim/liveness.py): the hold
            # keeps its reason, who set it and its lock, so it never comes back by itself.
            return dataclasses.replace(before, state=NodeState.DOWN)
        if before.state in _HELD_BY_ADMIN:
            return before  # an admin's hold keeps its state, reason and lock
        return dataclasses.replace(before, state=NodeState.IDLE, state_reason="", reason_uid=None)
    return registered_afresh(before, at, agent_labels)


def registered_afresh(before: Node, at: datetime, agent_labels: dict[str, str]) -> Node:
    """The record spurd's registration makes when the controller has none for its node
    (`Node::new`, cluster.rs `register_node`): IDLE, nothing allocated, no drain or reason,
    the agent's own labels (an admin's are gone), and a new `slurmd_start_time`. The same
    for a graceful restart before #784 and for a DeregisterNode (spurctl_sim/node_admin.py)."""
    return dataclasses.replace(
        before,
        state=NodeState.IDLE,
        state_reason="",
        reason_uid=None,
        alloc=Allocation(),
        agent_start_time=at,
        labels=dict(agent_labels),
    )


def _requeue_at_once(
    state: ClusterState,
    node: str,
    job_id: int,
    restart: datetime,
    allocated: Callable[[Job], frozenset[str]],
) -> None:
    job = state.jobs[job_id]
    state.set_job(
        msgspec.structs.replace(
            job, state=JobState.RUNNING, start_time=restart, end_time=None, state_reason=""
        )
    )
    new = (60_000 + job_id % 100_000,)
    for name in sorted(allocated(job)):
        old = state.held[name].get(job_id)
        if name != node:  # the old run there was killed: the new one is a run of its own
            state.held[name][job_id] = Holding(job_id=job_id, pids=new, started_at=restart)
            continue
        state.held[node][job_id] = (
            msgspec.structs.replace(old, pids=tuple(sorted({*old.pids, *new})), tracked_pids=new)
            if old is not None
            else Holding(job_id=job_id, pids=new, started_at=restart, tracked_pids=new)
        )
