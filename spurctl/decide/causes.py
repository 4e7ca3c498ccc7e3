"""What a node's controller record says about why a holding exists, or why to leave it be.

Two things the classifier's arms cannot see from the job alone (docs/spur-facts.md):

- An admin's `UpdateNode(state=DOWN)` evicts every active job on the node to
  NODE_FAIL and sends none of their runs a cancel (spurctld cluster.rs
  `update_node_state`: the NodeStateChange to Down evicts, and nothing sends the
  cancels that the heartbeat timeout and spurd's deregistration send). The runs go
  on on a node that is alive: terminal-held here, active-elsewhere once a job is
  requeued. The finding names that cause when the node's state and reason show it.
  A DOWN carrying a drain's reason of spurctl's is no admin's: spurctl never sets DOWN,
  and a heartbeat timeout keeps a drained node's reason (and sends the cancels).
- Spur's health checks (decide/health.py): nothing is freed for them.
"""

from __future__ import annotations

from spurctl.decide.health import is_health_check_drain, spare_reason
from spurctl.model import Action, Job, JobState, Kind, Node, NodeState

# The reasons Spur gives a node it marks DOWN itself, and then cancels its evicted jobs'
# runs: the heartbeat timeout (cluster.rs apply_health_actions), and since #784 spurd's
# own deregistration at shutdown (its DeregisterAgent reason).
SPUR_DOWN_REASONS = frozenset({"Not responding", "agent shutdown"})
# The findings an eviction without cancels leaves behind on the node.
_EVICTED = frozenset({Kind.TERMINAL_HELD, Kind.ACTIVE_ELSEWHERE})
# Findings whose remedy frees the run on the node itself (node-release).
_FREED_ON_NODE = frozenset({Kind.AGENT_ORPHAN, Kind.LEFTOVER})


def admin_down(node: Node | None) -> str | None:
    """The cause when `node` is DOWN with a reason Spur does not give itself; else None."""
    if node is None or node.state is not NodeState.DOWN:
        return None
    reason = node.state_reason.strip()
    if reason in SPUR_DOWN_REASONS or is_health_check_drain(reason):
        return None
    # Here, not at the top: an audit would import the repair planner (~5 ms) for a DOWN node.
    from spurctl.decide.repair import SPURCTL_PREFIX

    if reason.startswith(SPURCTL_PREFIX):
        # spurctl never sets DOWN: a drain's reason on a DOWN node is the heartbeat timeout
        # keeping a drain's reason (node.rs, cluster.rs apply_health_actions), and that
        # timeout sends its evicted jobs' cancels. No admin's DOWN to name.
        return None
    said = f"with reason {reason!r}" if reason else "with no reason"
    return (
        f"{node.name} is DOWN {said}, not a reason Spur gives itself ('Not responding', "
        "'agent shutdown'): an admin's UpdateNode(state=DOWN) evicts the node's active jobs "
        "to NODE_FAIL without sending their runs any cancel (spurctld update_node_state), "
        "so their runs stay on a node that is alive"
    )


def overlay(
    kind: Kind, action: Action, job: Job | None, node: Node | None, holder: str
) -> tuple[str, Action] | None:
    """What to add to a holding's finding (reason, new action), or None for nothing.

    A health check's run, or any run of a node a health check holds, is spared
    whatever the verdict that would free it; a run an admin's DOWN left behind keeps
    its verdict and names that cause.
    """
    spare = spare_reason(job, node, holder)
    if spare is not None and (action is Action.RECLAIM or kind in _FREED_ON_NODE):
        return spare, Action.SPARE
    if kind not in _EVICTED or job is None:
        return None
    if kind is Kind.TERMINAL_HELD and job.state is not JobState.NODE_FAIL:
        return None
    cause = admin_down(node)
    return None if cause is None else (f"cause: {cause}", action)
