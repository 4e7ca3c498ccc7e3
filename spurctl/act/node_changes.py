"""One drain or resume of a node: spurctl's UpdateNode, journaled and read back.

Shared by `spurctl drain`/`resume` and the autopilot, so both send through the same
guards (NodeAdmin: the node re-read right before the call, intent before, outcome after).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spurctl.decide.drains import NodeChange
from spurctl.decide.repair import HOLDS
from spurctl.model import NodeState

if TYPE_CHECKING:
    from spurctl.act.node_admin import NodeAdmin
    from spurctl.sources.controller import ControllerClient


def change_node(
    admin: NodeAdmin, client: ControllerClient, drain: bool, c: NodeChange
) -> tuple[bool, str]:
    """One node's UpdateNode (`drain`, else resume), journaled and read back: (sent, detail)."""
    from spurctl.act.node_admin import AdminCallFailed, ControllerWriter, NodeChanged, Step
    from spurctl.sources.node_records import read_node

    verb = "drain" if drain else "resume"

    def shows() -> bool:
        node = read_node(client, c.node)
        if node is None:
            return False
        if drain:
            return node.state in HOLDS and node.state_reason == c.reason
        return node.state not in HOLDS and node.state is not NodeState.DOWN

    state = NodeState.DRAIN if drain else NodeState.IDLE
    words = f"state={state.name}" + (f", reason={c.reason!r}" if drain else "")
    step = Step(c.node, c.kind, verb, verb, f"UpdateNode({c.node}, {words})",
                {"reason": c.reason}, job_id=c.job_id)  # fmt: skip
    said = f"drained: {c.reason}" if drain else f"resumed: lifted {c.reason!r}"

    def send(w: ControllerWriter) -> None:
        w.update_node(c.node, state=state, reason=c.reason if drain else None)

    assert c.seen is not None  # drain_plan and resume_plan say what they saw
    try:
        # Sent only while the node is as the plan saw it: an admin may have drained it
        # (or lifted spurctl's) while the prompt was open.
        admin.send(step, send, said, confirm=shows, expect=c.seen)
    except NodeChanged as exc:
        return False, f"not sent: {exc.message}"
    except AdminCallFailed as exc:
        return False, exc.message
    return True, said
