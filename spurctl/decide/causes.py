"""What a node's controller record says about why to leave a holding be.

What the classifier's arms cannot see from the job alone (docs/spur-facts.md):
Spur's health checks (decide/health.py): nothing is freed for them.
"""

from __future__ import annotations

from spurctl.decide.health import spare_reason
from spurctl.model import Action, Job, Kind, Node

# Findings whose remedy frees the run on the node itself (node-release).
_FREED_ON_NODE = frozenset({Kind.AGENT_ORPHAN, Kind.LEFTOVER})


def overlay(
    kind: Kind, action: Action, job: Job | None, node: Node | None, holder: str
) -> tuple[str, Action] | None:
    """What to add to a holding's finding (reason, new action), or None for nothing.

    A health check's run, or any run of a node a health check holds, is spared
    whatever the verdict that would free it.
    """
    spare = spare_reason(job, node, holder)
    if spare is not None and (action is Action.RECLAIM or kind in _FREED_ON_NODE):
        return spare, Action.SPARE
    return None
