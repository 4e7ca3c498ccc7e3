"""Whose drain a node carries, and whether a node is still as a plan saw it.

A drain is spurctl's only when its reason is exactly one the journal records spurctl
setting on that node (the `reason` of a repair's or a drain's drain intent whose call
did not definitely fail), and, where the controller says who set it (Spur #860's
`reason_uid`) and spurctl knows which uid the controller records for its own calls (its
credential's), set by that uid. A reason that merely looks like spurctl's (`spurctl:`
amended by an admin, behind blanks or control characters, or one spurctl never
journaled) is someone else's: kept, never lifted, overwritten or taken up.

Every write is sent only to a node still as its plan saw it (`Seen`): its state (of the
same kind: up, held by a drain, down), its reason and, where the controller says, who
set it. Pure: the use cases bring the journal's records and the node records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spurctl.model import Node, NodeState

_UP = frozenset({NodeState.IDLE, NodeState.MIXED, NodeState.ALLOCATED})
_HELD = frozenset({NodeState.DRAIN, NodeState.DRAINING})
# Steps whose UpdateNode sets spurctl's own reason (undrain and redrain put back another's).
_OWN_DRAINS = frozenset({("repair", "drain"), ("drain", "drain")})


# Steps after which the drain spurctl set is no longer on the node, once sent: lifted
# (resume, a repair's undrain) or gone with the node's record (a repair's removal).
_OWN_ENDS = frozenset({("resume", "resume"), ("repair", "undrain"), ("repair", "deregister")})


def journaled_drains(records: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """For each node, the reasons the journal records spurctl setting on it and not since
    lifting or removing itself: a drain's intent, unless its outcome says the call
    definitely did not go through."""
    set_by: dict[tuple[str, str], str] = {}  # (node, run) -> the reason its drain set
    lifting: dict[tuple[str, str], str] = {}  # (node, run) -> the reason a resume lifts
    out: dict[str, set[str]] = {}
    for rec in records:
        key = (rec.get("action"), rec.get("step"))
        node, run = str(rec.get("node")), str(rec.get("run"))
        event, result = rec.get("event"), rec.get("result")
        if key in _OWN_DRAINS and event == "intent":
            reason = rec.get("reason")
            if isinstance(reason, str) and reason:
                set_by[(node, run)] = reason
                out.setdefault(node, set()).add(reason)
        elif key in _OWN_DRAINS and event == "outcome" and result in ("failed", "skipped"):
            reason = set_by.get((node, run))
            if reason is not None and not str(rec.get("detail") or "").startswith("unknown:"):
                out.get(node, set()).discard(reason)
        elif key == ("resume", "resume") and event == "intent":
            lifting[(node, run)] = str(rec.get("reason") or "")
        elif key in _OWN_ENDS and event == "outcome" and result == "sent":
            ended = (
                lifting.pop((node, run), None) if key[0] == "resume" else set_by.get((node, run))
            )
            if ended is not None:
                out.get(node, set()).discard(ended)
    return {node: frozenset(reasons) for node, reasons in out.items() if reasons}


@dataclass(frozen=True, slots=True)
class Ownership:
    """What tells spurctl's drains from everyone else's: the reasons its journal records it
    setting per node, and the uid the controller records for its calls (None: unknown, no
    credential, so every anonymous caller is recorded alike and the uid tells nothing)."""

    reasons: Mapping[str, frozenset[str]] = field(default_factory=dict)
    uid: int | None = None

    def owns(self, node: Node) -> bool:
        return self.why_not(node) is None

    def looks_owned(self, node: Node) -> bool:
        """Whether `node`'s reason could be taken for spurctl's (it says `spurctl:`, or the
        journal records spurctl setting it): what is said of it then names why it is not."""
        reason = node.state_reason
        return "spurctl:" in reason or reason in self.reasons.get(node.name, ())

    def why_not(self, node: Node) -> str | None:
        """Why `node`'s reason is not spurctl's, as a phrase; None when it is."""
        reason = node.state_reason
        if reason not in self.reasons.get(node.name, ()):
            if "spurctl:" in reason:
                return (
                    f"carries a spurctl-looking reason spurctl never journaled setting on "
                    f"{node.name} ({reason!r})"
                )
            return f"carries another's reason ({reason!r})"
        if self.uid is not None and node.reason_uid is not None and node.reason_uid != self.uid:
            return (
                f"carries {reason!r}, set by uid {node.reason_uid} (reason_uid), not by "
                f"spurctl's uid {self.uid}"
            )
        return None


@dataclass(frozen=True, slots=True)
class Seen:
    """A node as a plan saw it: the kind of state (up, held, down, ...), the exact reason,
    and who set it where the controller says (None: not said, not compared)."""

    states: frozenset[NodeState]
    reason: str
    uid: int | None = None

    @classmethod
    def of(cls, node: Node) -> Seen:
        return cls(_kind(node.state), node.state_reason, node.reason_uid)

    @classmethod
    def drained(cls, reason: str, uid: int | None) -> Seen:
        """A node carrying the drain spurctl set with `reason` (by `uid`, where known)."""
        return cls(_HELD, reason, uid)

    def change(self, node: Node | None) -> str | None:
        """How `node` differs from what was seen (a phrase), or None when it does not."""
        if node is None:
            return "it is gone from the controller"
        uid_changed = (
            self.uid is not None and node.reason_uid is not None and node.reason_uid != self.uid
        )
        if node.state in self.states and node.state_reason == self.reason and not uid_changed:
            return None
        by = f", set by uid {node.reason_uid}" if node.reason_uid is not None else ""
        return f"it is now {node.state.name} with reason {node.state_reason!r}{by}"

    def describe(self) -> str:
        """`up with no reason`, `drained with reason '...', set by uid 0`."""
        kind = (
            "up"
            if self.states == _UP
            else "drained"
            if self.states == _HELD
            else "/".join(sorted(s.name for s in self.states))
        )
        said = f"with reason {self.reason!r}" if self.reason else "with no reason"
        by = f", set by uid {self.uid}" if self.uid is not None else ""
        return f"{kind} {said}{by}"


def _kind(state: NodeState) -> frozenset[NodeState]:
    """The states the controller moves a node between by itself: a plan that saw one
    accepts the others (IDLE/MIXED/ALLOCATED with scheduling, DRAINING to DRAIN)."""
    if state in _UP:
        return _UP
    if state in _HELD:
        return _HELD
    return frozenset({state})
