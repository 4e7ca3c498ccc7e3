"""A node's heartbeat lost and regained on the simulated cluster, as spurctld handles it.

docs/spur-facts.md, "A drained node whose heartbeat is lost" (main 4cc3da8):

- The health check marks a node DOWN when its last heartbeat is older than the timeout,
  unless it is DOWN or DRAIN already (node.rs `transition`, HeartbeatTimeout, l. 55-56):
  so an up node and a DRAINING one (a drain on a charged node) go DOWN. An admin hold
  (any drain or DOWN set through UpdateNode: `admin_locked`) keeps its own reason and its
  lock; an unlocked node gets `Not responding` (cluster.rs `apply_health_actions`,
  l. 2981-3017). Before #624 (release v0.8.0 and older, l. 2311-2340; the release's
  `hold_keeps_reason` is False) every node gets `Not responding`, a hold keeping its
  lock all the same (`ClusterState.locked_not_responding`). The Down transition evicts
  the node's active jobs to NODE_FAIL, and the health loop sends each a SIGKILL cancel
  on its nodes; the silent node's own spurd cannot take it.
- When the heartbeat returns, a DOWN node recovers by itself only without the admin lock
  (HeartbeatRecovered, node.rs l. 58-63): a locked DOWN stays DOWN until an UpdateNode
  (any state, `AdminSetState`) moves it; IDLE clears the lock (cluster.rs
  `update_node_state`, l. 2751-2790).

Here every hold state counts as locked (the simulated controller takes holds only from
UpdateNode and DrainNode), and so does a DOWN in `locked_not_responding`; where the
release records who set a reason (#860), a locked node's `reason_uid` is kept with its
reason; `Not responding` is uid 0.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING

from spurctl.model import NodeState
from spurctl_sim.scenario import busy_state

if TYPE_CHECKING:
    from spurctl_sim.state import ClusterState

NOT_RESPONDING = "Not responding"
_LOCKED = (NodeState.DRAIN, NodeState.DRAINING, NodeState.DOWN)


def heartbeat_lost(state: ClusterState, name: str, at: datetime) -> list[int]:
    """`name`'s spurd stops (its processes and cgroups stay) and the controller's health
    check times its heartbeat out; returns the ids of the jobs evicted."""
    from spurctl_sim.state import allocated

    with state.lock:
        state.spurd_stopped.add(name)
        node = state.nodes[name]
        state.generation += 1
        if node.state in (NodeState.DOWN, NodeState.DRAIN):
            return []
        if node.state in _LOCKED and state.spur_release.hold_keeps_reason:
            down = dataclasses.replace(node, state=NodeState.DOWN)
        else:
            if node.state in _LOCKED:  # v0.8.0: the hold's reason replaced, its lock kept
                state.locked_not_responding.add(name)
            uid = 0 if state.spur_release.reason_uid else None
            down = dataclasses.replace(
                node, state=NodeState.DOWN, state_reason=NOT_RESPONDING, reason_uid=uid
            )
        state.nodes[name] = down
        evicted = state.evict_for_down(name, at)
        for job_id in evicted:  # the health loop's SIGKILL: the job's other nodes take it
            for other in sorted(allocated(state.jobs[job_id]) - {name}):
                if other in state.held and other not in state.spurd_stopped:
                    state.agent_cancel(other, job_id, 9)
        return evicted


def heartbeat_back(state: ClusterState, name: str, at: datetime) -> None:
    """`name`'s spurd starts again at `at` and heartbeats (a known node's registration
    changes nothing else): a DOWN node without the admin lock (`Not responding`, not in
    `locked_not_responding`) recovers; a locked one stays DOWN."""
    with state.lock:
        state.spurd_stopped.discard(name)
        state.agent_started_at[name] = at
        node = state.nodes[name]
        locked = name in state.locked_not_responding
        if node.state is NodeState.DOWN and node.state_reason == NOT_RESPONDING and not locked:
            idle = dataclasses.replace(node, state=NodeState.IDLE, state_reason="", reason_uid=None)
            state.nodes[name] = dataclasses.replace(idle, state=busy_state(idle, idle.alloc))
        state.generation += 1
