"""A drain of spurctl's whose reason Spur replaced: DOWN `Not responding`, locked, for ever.

Release v0.8.0 and older (cluster.rs `apply_health_actions`, v0.8.0 l. 2311-2340) mark
a node whose heartbeat timed out DOWN with reason `Not responding` even when an admin
hold (spurctl's drain) was on it, and keep the hold's lock; a locked DOWN never recovers
by itself (node.rs `transition`), not even when spurd registers again. #624 (0.9.0)
keeps the hold's reason instead, and spurctl's own rule then still sees its drain.

So on such a controller a node the journal says spurctl drained (an outcome that set it,
never lifted or removed by spurctl since: decide/owner.py's facts) that is now DOWN with
reason exactly `Not responding` is stranded, and its reason is not spurctl's: nothing
lifts it by itself (resume by default and the autopilot leave it). spurctl says so, and
`spurctl resume --lost-reason` is the operator's explicit path. Pure: the use cases say
whether the controller's release replaces the reason (spurctl/releases.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from spurctl.decide.owner import Ownership
from spurctl.model import Node, NodeState, format_time

NOT_RESPONDING = "Not responding"
# The journal's `kind` of a resume sent through --lost-reason.
LOST_KIND = "lost-reason"


def lost_drain(node: Node, owned: Ownership) -> tuple[str, datetime] | None:
    """spurctl's drain on `node` that a heartbeat timeout replaced, as (its reason, when the
    journal records it sent): `node` is DOWN with reason exactly `Not responding`, and the
    journal records a drain of spurctl's there sent and never lifted or removed since. None
    otherwise, and when the controller's record of the node was registered after that
    drain (slurmd_start_time: the record spurctl drained is gone)."""
    if node.state is not NodeState.DOWN or node.state_reason != NOT_RESPONDING:
        return None
    sent = [
        (at, reason)
        for reason in owned.reasons.get(node.name, ())
        if (at := owned.since.get((node.name, reason))) is not None
    ]
    if not sent:
        return None
    at, reason = max(sent)
    if node.agent_start_time is not None and node.agent_start_time > at:
        return None
    return reason, at


def lost_drains(nodes: Iterable[Node], owned: Ownership) -> dict[str, datetime]:
    """Those of `nodes` whose drain of spurctl's a heartbeat timeout replaced (lost_drain),
    each with the drain's time."""
    return {n.name: lost[1] for n in nodes if (lost := lost_drain(n, owned)) is not None}


def lost_line(name: str, at: datetime, version: str) -> str:
    """The one line audit, nodes, explain and resume say of a drain whose reason was lost."""
    return (
        f"{name} went DOWN after spurctl's drain of {format_time(at)}: Spur up to v0.8.0 "
        f"(this controller says {version.strip() or 'no version'}) replaced the drain's reason "
        "with 'Not responding' when its heartbeat timed out, keeping the lock, and a locked "
        "DOWN never recovers by itself; once its audit is clean and its spurd runs, "
        f"`spurctl resume -w {name} --lost-reason` lifts it"
    )


def keeps_reason_line(name: str, version: str) -> str:
    """--lost-reason refused where the release keeps a drain's reason (#624)."""
    return (
        f"{name} is not lifted: Spur {version.strip()} keeps a drain's own reason when the "
        "heartbeat times out (#624, 0.9.0), so a drain of spurctl's gone DOWN still carries "
        "spurctl's reason and plain `spurctl resume` handles it; --lost-reason is for Spur "
        "v0.8.0 and older"
    )
