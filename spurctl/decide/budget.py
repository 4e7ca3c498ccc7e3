"""How much of the fleet spurctl may hold out of service, and how soon it may drain again.

After a controller wipe, or a fleet-wide spurd restart without spurstepd, every node can
hold agent orphans, and one `spurctl drain -w ALL` would drain the fleet. So a run that
drains (drain, repair, later the autopilot) is refused whole when the nodes out of
service by spurctl's own reason (any run's, counted over the controller's whole node
list, not only the scope: decide/owner.py) plus this run's would pass
`--max-unavailable` (N nodes, or P% of the controller's nodes, at least 1). A drain of
spurctl's that Spur v0.8.0 turned into DOWN `Not responding` on a heartbeat timeout
(decide/lost_reason.py) counts too: the reason is no longer spurctl's, but the node is
out of service because of spurctl's drain, and stays so until a person lifts it. And a node
spurctl resumed is not drained again by spurctl before `--cooldown` has passed, unless
the operator names it alone: a node flapping between drained and resumed is a person's
question. Pure: the use cases bring the nodes, the journal's records and the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from spurctl.decide.lost_reason import lost_drain
from spurctl.decide.owner import Ownership
from spurctl.hostlist import fold
from spurctl.model import Node, NodeState, format_time, parse_time

# What counts as out of service: a drain (DRAIN, DRAINING) or a DOWN.
OUT_OF_SERVICE = frozenset({NodeState.DRAIN, NodeState.DRAINING, NodeState.DOWN})
DEFAULT_COOLDOWN_S = 600.0


@dataclass(frozen=True, slots=True)
class MaxUnavailable:
    """`--max-unavailable`: a number of nodes (`count`), or a percentage of the nodes the
    controller lists (`percent`, never fewer than one node)."""

    count: int | None = None
    percent: float | None = None

    def cap(self, total: int) -> int:
        """The most nodes spurctl may hold out of service among `total`."""
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(1, math.floor(total * self.percent / 100 + 1e-9))

    def __str__(self) -> str:
        if self.count is not None:
            return str(self.count)
        p = self.percent or 0.0
        return f"{int(p) if float(p).is_integer() else p}%"


DEFAULT_MAX_UNAVAILABLE = MaxUnavailable(percent=2.0)


def out_by_spurctl(nodes: Iterable[Node], owned: Ownership, *, reason_replaced: bool) -> list[str]:
    """The nodes out of service under a reason of spurctl's own (any run's) and, where the
    controller's release replaces a drain's reason on a heartbeat timeout
    (`reason_replaced`: releases.replaces_hold_reason), those of spurctl's drains it
    turned into DOWN `Not responding` (lost_drain)."""
    return sorted(
        n.name
        for n in nodes
        if n.state in OUT_OF_SERVICE
        and (owned.owns(n) or (reason_replaced and lost_drain(n, owned) is not None))
    )


def over_budget(
    nodes: Mapping[str, Node],
    owned: Ownership,
    taking: Iterable[str],
    limit: MaxUnavailable,
    verb: str,
    *,
    reason_replaced: bool,
) -> str | None:
    """Why a run that would take `taking` out of service is refused whole (one line), or
    None when spurctl's nodes out of service (out_by_spurctl, `reason_replaced` as
    there), these included, stay within `limit` of the controller's `nodes` (every node
    it lists)."""
    out = out_by_spurctl(nodes.values(), owned, reason_replaced=reason_replaced)
    new = sorted(set(taking) - set(out))
    cap = limit.cap(len(nodes))
    total = len(out) + len(new)
    if not new or total <= cap:
        return None
    lost = [n for n in out if not owned.owns(nodes[n])]
    already = (
        f"beside the {len(out)} already out of service by spurctl's reason ({fold(out)}"
        + (f"; {fold(lost)} DOWN 'Not responding' since spurctl's drain" if lost else "")
        + ")"
        if out
        else "with none out of service by spurctl's reason yet"
    )
    return (
        f"refusing to {verb}, nothing sent: it would take {len(new)} more node"
        f"{'s' if len(new) != 1 else ''} out of service ({fold(new)}) {already}: "
        f"{total}, above --max-unavailable {limit} ({cap} of the controller's {len(nodes)} "
        f"nodes); name fewer nodes, or pass a larger --max-unavailable"
    )


def resumed_at(records: Iterable[Mapping[str, Any]]) -> dict[str, datetime]:
    """Each node's last resume by spurctl that was sent, from the journal."""
    out: dict[str, datetime] = {}
    for rec in records:
        if (rec.get("action"), rec.get("step"), rec.get("event"), rec.get("result")) != (
            "resume", "resume", "outcome", "sent",
        ):  # fmt: skip
            continue
        try:
            at = parse_time(rec.get("at"))
        except ValueError:
            continue
        node = str(rec.get("node"))
        if at is not None and (node not in out or at > out[node]):
            out[node] = at
    return out


def cooling(
    name: str,
    resumed: Mapping[str, datetime],
    *,
    now: datetime,
    cooldown_s: float,
    named_alone: bool,
    verb: str,
) -> str | None:
    """Why `name` is not drained again yet (spurctl resumed it within `cooldown_s`), or
    None. A node the operator names alone is drained whatever the cooldown."""
    at = resumed.get(name)
    if at is None or named_alone:
        return None
    until = at + timedelta(seconds=cooldown_s)
    if now >= until:
        return None
    return (
        f"spurctl resumed {name} at {format_time(at)}: not drained again by spurctl before "
        f"{format_time(until)} (--cooldown), unless named alone (`spurctl {verb} -w {name}`)"
    )
