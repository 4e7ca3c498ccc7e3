"""What spurctld does when a node registers afresh, on the simulated cluster: its partitions
from its labels, and a pending job that fits placed on it at once.

docs/spur-facts.md, "A fresh registration: partitions and the scheduler" (v0.8.0 and
main 4cc3da8, crates/spurctld/src/cluster.rs):

- `WalOperation::NodeRegister` builds `Node::new` (Unknown, then Idle by the Register
  event: no reason, no admin lock, nothing allocated) with the labels the agent sent, and
  assigns its partitions: every partition whose hostlist names the node OR whose label
  selector the labels match (`partition_matches_node`), else the default partition (else
  the first). `WalOperation::NodeLabelsUpdate` (UpdateNode's labels) assigns them again
  the same way, so labels put back put the node back in its partitions.
- The scheduler loop wakes every `scheduler.interval_secs` (default 1 s) and places pending
  jobs on the nodes that are up; a fresh record is up at once. Here the placement happens
  the moment the node registers (the worst case of that second): each job of the
  scenario's `waiting` list still PENDING, in order, is placed on the node when its
  partition is one of the node's (or it names none) and its share fits the node.

A scenario without `partition_selectors` or `default_partition` keeps each node's
partitions as listed (hostlist membership only), and one without `waiting` places nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from spurctl.model import Holding, JobState, Node, NodeState
from spurctl_sim.scenario import node_share

if TYPE_CHECKING:
    from spurctl_sim.state import ClusterState


def partitions_of(state: ClusterState, node: Node) -> Node:
    """`node` with the partitions spurctld assigns it from its name and labels: those its
    hostlist membership gives (the partitions it is listed in that have no selector), those
    whose selector its labels match, else the default."""
    selectors: Mapping[str, Mapping[str, str]] = state.partition_selectors
    if not selectors and not state.default_partition:
        return node
    by_name = state.listed_partitions.get(node.name, ())
    matched = [p for p in by_name if p not in selectors]
    matched += [
        p
        for p, wanted in selectors.items()
        if wanted and all(node.labels.get(k) == v for k, v in wanted.items()) and p not in matched
    ]
    if not matched and state.default_partition:
        matched = [state.default_partition]
    return dataclasses.replace(node, partitions=tuple(matched))


def place_waiting(state: ClusterState, name: str, at: datetime) -> list[int]:
    """The scheduler's pass over node `name`, up and registered afresh: every waiting job
    that fits is placed there (RUNNING, its run held by the node's agent). Returns the ids
    placed. Called under `state.lock`."""
    placed = []
    for job_id in state.waiting:
        node = state.nodes[name]
        if node.state not in (NodeState.IDLE, NodeState.MIXED):
            break
        job = state.jobs.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            continue
        if job.partition and job.partition not in node.partitions:
            continue
        share = node_share(job)
        if node.alloc.cpus + share.cpus > node.total.cpus:
            continue
        state.set_job(
            msgspec.structs.replace(
                job, state=JobState.RUNNING, nodelist=name, num_nodes=1, start_time=at,
                state_reason="",
            )
        )  # fmt: skip
        pids = (70_000 + job_id % 100_000,)
        state.held[name][job_id] = Holding(job_id=job_id, pids=pids, started_at=at)
        placed.append(job_id)
    return placed
