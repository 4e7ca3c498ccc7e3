"""decide/owner.py: a drain is spurctl's only when its reason is exactly one the journal
records spurctl setting on that node, not lifted since (and, where the controller says
who set it and spurctl knows its own uid, set by that uid); a plan's view of a node
holds only while the node is still so."""

from __future__ import annotations

from typing import Any

from spurctl.decide.owner import Ownership, Seen, journaled_drains
from spurctl.model import Node, NodeState

R = "spurctl: agent-orphan job 4950 (spurctl explain gpu012)"


def rec(action: str, step: str, event: str, run: str = "r1", **more: Any) -> dict[str, Any]:
    return {"node": "gpu012", "job_id": 0, "action": action, "step": step, "event": event,
            "run": run, **more}  # fmt: skip


def node(reason: str, state: NodeState = NodeState.DRAIN, uid: int | None = None) -> Node:
    return Node("gpu012", state, reason, reason_uid=uid)


def test_a_drain_intent_makes_its_reason_spurctls_on_that_node_only() -> None:
    owned = Ownership(journaled_drains([rec("drain", "drain", "intent", reason=R)]))
    assert owned.owns(node(R))
    assert not owned.owns(Node("gpu013", NodeState.DRAIN, R))


def test_a_call_that_definitely_failed_or_was_skipped_set_nothing() -> None:
    for result, detail in (("failed", "refused"), ("skipped", "not sent: changed")):
        found = [
            rec("drain", "drain", "intent", reason=R),
            rec("drain", "drain", "outcome", result=result, detail=detail),
        ]
        assert journaled_drains(found) == {}
    unknown = [
        rec("repair", "drain", "intent", reason=R),
        rec("repair", "drain", "outcome", result="failed", detail="unknown: no answer"),
    ]
    assert journaled_drains(unknown) == {"gpu012": frozenset({R})}  # it may have gone out


def test_a_reason_spurctl_lifted_or_removed_is_no_longer_its_own() -> None:
    drained = [rec("drain", "drain", "intent", reason=R)]
    resumed = [
        rec("resume", "resume", "intent", run="r2", reason=R),
        rec("resume", "resume", "outcome", run="r2", result="sent"),
    ]
    assert journaled_drains(drained + resumed) == {}
    again = [rec("drain", "drain", "intent", run="r3", reason=R)]
    assert journaled_drains(drained + resumed + again) == {"gpu012": frozenset({R})}
    repaired = [
        rec("repair", "drain", "intent", reason=R),
        rec("repair", "deregister", "intent"),
        rec("repair", "deregister", "outcome", result="sent"),
    ]
    assert journaled_drains(repaired) == {}


def test_put_back_drains_and_lifted_reasons_are_never_spurctls() -> None:
    found = [
        rec("repair", "redrain", "intent", reason="ops: bad DIMM"),
        rec("repair", "undrain", "intent", reason="ops: bad DIMM"),
        rec("resume", "resume", "intent", reason=R),
    ]
    assert journaled_drains(found) == {}


def test_anything_but_the_exact_reason_is_someone_elses_and_says_so() -> None:
    owned = Ownership({"gpu012": frozenset({R})})
    for reason in (f" {R}", f"\t{R}", f"\u3000{R}", f"\x1c{R}", f"{R} -- bob: RMA"):
        why = owned.why_not(node(reason))
        assert why is not None and "spurctl-looking reason spurctl never journaled" in why
        assert owned.looks_owned(node(reason))
    assert owned.why_not(node("ops: bad DIMM")) == "carries another's reason ('ops: bad DIMM')"
    assert not owned.looks_owned(node("ops: bad DIMM"))


def test_where_the_controller_says_who_set_it_the_uid_must_be_spurctls() -> None:
    owned = Ownership({"gpu012": frozenset({R})}, uid=0)
    assert owned.owns(node(R, uid=0))
    assert owned.owns(node(R, uid=None))  # a release before #860: the journal decides
    why = owned.why_not(node(R, uid=1000))
    assert why is not None and "set by uid 1000 (reason_uid), not by spurctl's uid 0" in why
    # No credential: every anonymous caller is recorded alike, the uid tells nothing.
    assert Ownership({"gpu012": frozenset({R})}).owns(node(R, uid=1000))


def test_a_node_is_as_seen_while_its_kind_of_state_reason_and_setter_hold() -> None:
    seen = Seen.of(Node("gpu012", NodeState.IDLE))
    assert seen.change(Node("gpu012", NodeState.MIXED)) is None  # scheduling moves it
    assert seen.change(node("ops: x", NodeState.DRAINING)) == (
        "it is now DRAINING with reason 'ops: x'"
    )
    assert seen.change(None) == "it is gone from the controller"
    ours = Seen.drained(R, 0)
    assert ours.change(node(R, NodeState.DRAINING, uid=0)) is None  # DRAINING -> DRAIN
    assert ours.change(node(R, uid=1000)) == f"it is now DRAIN with reason {R!r}, set by uid 1000"
    assert ours.change(node(R, NodeState.DOWN)) is not None


def test_what_was_seen_reads_in_an_operators_words() -> None:
    assert Seen.of(Node("gpu012", NodeState.MIXED)).describe() == "up with no reason"
    assert Seen.drained(R, 0).describe() == f"drained with reason {R!r}, set by uid 0"
    assert Seen.of(node("x", NodeState.DOWN)).describe() == "DOWN with reason 'x'"
