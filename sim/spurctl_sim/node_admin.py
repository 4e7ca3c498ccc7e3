"""The controller's node administration on the simulated cluster, as spurctld does it.

docs/spur-facts.md, "Phantom charges and node administration" (read at 4cc3da8):

- UpdateNode (admin only) with a state: DRAIN on a node whose allocation holds CPUs
  or devices becomes DRAINING (`update_node_state`), and only a job's deallocation
  turns DRAINING into DRAIN (`deallocate_job_slices`), so a node charged by no job
  stays DRAINING for ever; DOWN evicts the node's active jobs and subtracts only
  their slices; IDLE changes the state alone. The reason given replaces the node's
  (none clears it). Labels are set and removed by `labels` and `remove_labels`. An
  unknown node is INTERNAL "node NAME not found".
- DrainNode: DRAINING while an active job lists the node, else DRAIN ("drained" in
  its answer), however much the node is charged.
- Where the release has #860 (from its pull request), UpdateNode and DrainNode record
  who set the reason: `reason_uid`, the caller's uid from its JWT (an anonymous caller
  is recorded as 0 here, which the pull request does not say); a state that puts the
  node back in service clears it, as a fresh registration does.
- DeregisterNode(force=false): FAILED_PRECONDITION "node 'NAME' has running jobs; use
  --force to evict them" while a Running/Completing/Suspended job lists the node,
  else the record goes (`remove_node`); every other error of `remove_node` (a Raft propose
  failure: `ClusterState.remove_failure`) is answered FAILED_PRECONDITION too, with its
  own text, and the record stays. The node's spurd is not told: its next
  heartbeat meets NOT_FOUND and it registers again (spurd reporter.rs
  `should_reregister`), a fresh record (`registered_afresh`), its partitions assigned from
  its labels and a waiting job placed on it at once (spurctl_sim/registration.py).
  A test pins when that happens: `ClusterState.registration_held` keeps the node away
  for a block, `ClusterState.back_at_once` registers it before DeregisterNode answers
  (a background heartbeat races a run's reads on a loaded machine).
- UpdateNode's labels assign the node's partitions again (`NodeLabelsUpdate`). A fault,
  `ClusterState.update_failure`, refuses UpdateNode's state or labels (INTERNAL).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import grpc
import msgspec
from google.protobuf import empty_pb2

from spurctl.model import JobState, Node, NodeState
from spurctl.proto import slurm_pb2 as pb
from spurctl_sim.nodelists import allocated
from spurctl_sim.registration import partitions_of, place_waiting
from spurctl_sim.restarts import registered_afresh
from spurctl_sim.scenario import busy_state, charged

if TYPE_CHECKING:
    from spurctl_sim.state import ClusterState


class Refused(Exception):
    """An RPC answered with an error status (and, for a follower, the leader hint)."""

    def __init__(
        self, code: grpc.StatusCode, detail: str, trailing: Sequence[tuple[str, str]] = ()
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.trailing = tuple(trailing)


def _active_on(state: ClusterState, name: str) -> list[int]:
    return sorted(j.job_id for j in state.jobs.values() if j.state.active and name in allocated(j))


def update_node(
    state: ClusterState,
    name: str,
    new_state: NodeState | None,
    reason: str | None,
    labels: dict[str, str] | None = None,
    remove_labels: Iterable[str] = (),
    uid: int = 0,
) -> Node:
    """UpdateNode as `update_node_state` and `update_node_labels` apply it; `uid` is the
    caller's (recorded as reason_uid where the release has #860)."""
    with state.lock:
        node = state.nodes.get(name)
        if node is None:
            raise Refused(grpc.StatusCode.INTERNAL, f"node {name} not found")
        if new_state is not None and "state" in state.update_failure:
            raise Refused(grpc.StatusCode.INTERNAL, state.update_failure["state"])
        if new_state is not None:
            state.locked_not_responding.discard(name)  # the lock is the new state's now
            if new_state is NodeState.DRAIN and charged(node.alloc):
                new_state = NodeState.DRAINING
            node = dataclasses.replace(
                node, state=new_state, state_reason=reason or "",
                reason_uid=_attributed(state, uid, new_state),
            )  # fmt: skip
            if new_state in _UP:
                node = dataclasses.replace(node, state=busy_state(node, node.alloc))
        if (labels or remove_labels) and "labels" in state.update_failure:
            state.nodes[name] = node  # the state, applied before the labels failed
            state.generation += 1
            raise Refused(grpc.StatusCode.INTERNAL, state.update_failure["labels"])
        if labels or remove_labels:
            kept = {k: v for k, v in node.labels.items() if k not in set(remove_labels)}
            relabelled = dataclasses.replace(node, labels={**kept, **(labels or {})})
            node = partitions_of(state, relabelled)
        state.nodes[name] = node
        state.generation += 1
        if new_state is NodeState.DOWN:
            state.evict_for_down(name)
        return state.nodes[name]


_UP = (NodeState.IDLE, NodeState.MIXED, NodeState.ALLOCATED)


def _attributed(state: ClusterState, uid: int, new_state: NodeState) -> int | None:
    """The reason_uid a state change leaves (#860): the caller's, none once back in service."""
    if not state.spur_release.reason_uid or new_state in _UP:
        return None
    return uid


def drain_node(state: ClusterState, name: str, reason: str, uid: int = 0) -> tuple[NodeState, int]:
    """DrainNode: DRAINING while an active job lists the node, else DRAIN."""
    with state.lock:
        node = state.nodes.get(name)
        if node is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"node {name} not found")
        running = len(_active_on(state, name))
        state.locked_not_responding.discard(name)
        drained = NodeState.DRAINING if running else NodeState.DRAIN
        state.nodes[name] = dataclasses.replace(
            node, state=drained, state_reason=reason,
            reason_uid=_attributed(state, uid, drained),
        )  # fmt: skip
        state.generation += 1
        return drained, running


def deregister_node(state: ClusterState, name: str, *, force: bool, at: datetime) -> list[int]:
    """DeregisterNode (`remove_node`): refused while an active job lists the node, unless
    `force`, which evicts them to NODE_FAIL and SIGKILLs their runs on their other nodes;
    then the record goes. Returns the evicted ids."""
    with state.lock:
        node = state.nodes.get(name)
        if node is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"node {name} not found")
        evicted = _active_on(state, name)
        if evicted and not force:
            raise Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"node '{name}' has running jobs; use --force to evict them",
            )
        if state.remove_failure is not None:  # the NodeRemove proposal failed: nothing applied
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, state.remove_failure)
        for job_id in evicted:
            job = state.jobs[job_id]
            state.set_job(
                msgspec.structs.replace(
                    job, state=JobState.NODE_FAIL, end_time=at, state_reason="NodeFail"
                )
            )
            for other in sorted(allocated(job) - {name}):
                if other in state.nodes:  # spawn_cancel_for_evicted: nodes with an address
                    state.agent_cancel(other, job_id, 9)
        state.removed[name] = state.nodes.pop(name)
        state.locked_not_responding.discard(name)
        state.generation += 1
        return evicted


def reregister(state: ClusterState, agents: Iterable[str], at: datetime) -> list[str]:
    """One heartbeat of each running agent in `agents`: an agent whose record is gone meets
    NOT_FOUND and registers again (a fresh record), unless its registration is refused
    (`ClusterState.refuse_registration`). Returns the nodes registered again."""
    back = []
    with state.lock:
        for name in agents:
            if name not in state.removed or name in state.registration_refused:
                continue
            state.nodes[name] = partitions_of(
                state,
                registered_afresh(state.removed.pop(name), at, state.agent_labels.get(name, {})),
            )
            back.append(name)
            place_waiting(state, name, at)  # the scheduler's next tick: a job may land at once
        state.generation += bool(back)
    return back


# -- the RPCs ------------------------------------------------------------------------


def update_node_rpc(
    state: ClusterState, req: pb.UpdateNodeRequest, uid: int = 0
) -> empty_pb2.Empty:
    new_state = None
    if req.HasField("state"):
        try:
            new_state = NodeState(req.state)
        except ValueError:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "invalid node state") from None
    reason = req.reason if req.HasField("reason") else None
    update_node(state, req.name, new_state, reason, dict(req.labels), list(req.remove_labels), uid)
    return empty_pb2.Empty()


def drain_node_rpc(
    state: ClusterState, req: pb.DrainNodeRequest, uid: int = 0
) -> pb.DrainNodeResponse:
    drained, running = drain_node(state, req.name, req.reason, uid)
    return pb.DrainNodeResponse(
        actual_state="draining" if drained is NodeState.DRAINING else "drained",
        running_jobs=running,
    )


def deregister_node_rpc(
    state: ClusterState, req: pb.DeregisterNodeRequest, uid: int = 0
) -> pb.DeregisterNodeResponse:
    from spurctl.model import utcnow

    evicted = deregister_node(state, req.name, force=req.force, at=utcnow())
    state.deregistrations.append((req.name, req.force, req.reason))
    if req.name in state.back_at_once:
        reregister(state, [req.name], utcnow())
    return pb.DeregisterNodeResponse(evicted_jobs_count=len(evicted))
