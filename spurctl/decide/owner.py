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
from datetime import datetime
from typing import Any

from spurctl.model import Node, NodeState, format_time, parse_time

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


def drained_at(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], datetime]:
    """(node, reason) -> when the journal last records spurctl's drain with that reason
    sent there (the outcome's `at`)."""
    reason_of: dict[tuple[str, str], str] = {}  # (node, run) -> its drain's reason
    out: dict[tuple[str, str], datetime] = {}
    for rec in records:
        if (rec.get("action"), rec.get("step")) not in _OWN_DRAINS:
            continue
        key = (str(rec.get("node")), str(rec.get("run")))
        if rec.get("event") == "intent":
            reason_of[key] = str(rec.get("reason") or "")
            continue
        if rec.get("event") != "outcome" or rec.get("result") != "sent":
            continue
        try:
            at = parse_time(rec.get("at"))
        except ValueError:
            continue
        held = (key[0], reason_of.get(key, ""))
        if at is not None and (held not in out or at > out[held]):
            out[held] = at
    return out


def down_since(at: datetime | None) -> str:
    """`DOWN since spurctl's drain of <when> (heartbeat lost)`: a node spurctl drained whose
    heartbeat was lost since (`at`: the drain's time, None where the journal has none)."""
    when = f" of {format_time(at)}" if at is not None else ""
    return f"DOWN since spurctl's drain{when} (heartbeat lost)"


@dataclass(frozen=True, slots=True)
class Ownership:
    """What tells spurctl's drains from everyone else's: the reasons its journal records it
    setting per node, and the uid the controller records for its calls (None: unknown, no
    credential, so every anonymous caller is recorded alike and the uid tells nothing);
    `since`: when each (node, reason) drain was sent, where the journal says."""

    reasons: Mapping[str, frozenset[str]] = field(default_factory=dict)
    uid: int | None = None
    since: Mapping[tuple[str, str], datetime] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]], uid: int | None) -> Ownership:
        """From the journal's records (read once) and the uid of spurctl's calls."""
        records = list(records)
        return cls(journaled_drains(records), uid, drained_at(records))

    def out_words(self, node: Node) -> str:
        """How spurctl's drain holds `node` (one it owns), in an operator's words: `DRAINING
        by spurctl ('spurctl: ...')`, or `DOWN since spurctl's drain of <when> (heartbeat
        lost)`: spurctl never sets DOWN, and Spur turns a DRAINING node whose heartbeat is
        lost into DOWN with the drain's reason, locked (docs/spur-facts.md)."""
        if node.state is NodeState.DOWN:
            return down_since(self.since.get((node.name, node.state_reason)))
        return f"{node.state.name} by spurctl ({node.state_reason!r})"

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
