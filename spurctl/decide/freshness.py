"""How old an inventory is against the controller's view: stale, or dated ahead.

A node's holdings read long before the view may have changed since; one dated
after the audit's clock comes from a node whose clock is ahead, and how old its
evidence is cannot be told.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from spurctl.decide.reasons import duration
from spurctl.model import ControllerView, Inventory, format_time

# Spur agents heartbeat every 30 s: an inventory collected more than two heartbeats
# before the controller view may no longer show what the node holds.
STALE_INVENTORY_S = 60.0
# An inventory dated more than this after the audit's "now" comes from a node whose clock
# is ahead: its negative age would pass every staleness check (reclaim skips it too).
CLOCK_AHEAD_S = 60.0


def inventory_age(view: ControllerView, inv: Inventory | None) -> float | None:
    """Seconds from `inv`'s collection to the controller view (negative: collected after
    it); None without an inventory or its collection time."""
    if inv is None or inv.collected_at is None:
        return None
    return round((view.taken_at - inv.collected_at).total_seconds(), 3)


def seconds_ahead(inv: Inventory, now: datetime) -> float | None:
    """How many seconds `inv` is dated after `now`, when more than CLOCK_AHEAD_S; else None."""
    if inv.collected_at is None:
        return None
    ahead = (inv.collected_at - now).total_seconds()
    return ahead if ahead > CLOCK_AHEAD_S else None


def clock_ahead(inv: Inventory, ahead: float, now: datetime) -> str:
    assert inv.collected_at is not None
    return (
        f"{inv.node}'s inventory is dated {format_time(inv.collected_at)}, {duration(ahead)} "
        f"after this audit's clock ({format_time(now)}; more than the "
        f"{CLOCK_AHEAD_S:.0f} s allowed): the node's clock is ahead, so how old its evidence "
        "is cannot be told and nothing it holds is reclaimed; fix its clock (NTP) and "
        "re-collect it"
    )


def stale_inventories_note(ages: Mapping[str, float], *, collected: bool = False) -> str | None:
    """The note naming inventories collected more than two heartbeats before the view.

    The controller's view is of one moment; a node's holdings read long before it
    may have changed since (a run ended, a cancel landed), so decisions on them
    deserve a fresh collect.
    """
    stale = sorted(
        (n for n, age in ages.items() if age > STALE_INVENTORY_S), key=lambda n: -ages[n]
    )
    if not stale:
        return None
    shown = ", ".join(stale[:5]) + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
    count = f"{len(stale)} inventor{'y was' if len(stale) == 1 else 'ies were'}"
    span = (
        f"more than {STALE_INVENTORY_S:.0f} s (two agent heartbeats) before the controller "
        f"view, the oldest {duration(ages[stale[0]])} before ({shown})"
    )
    if collected:
        # This audit's own collect ran after the view was read: dated before it is a clock.
        dated = f"{len(stale)} inventor{'y is' if len(stale) == 1 else 'ies are'} dated"
        return (
            f"{dated} {span}, though this audit's --collect took them after reading the "
            "controller: those nodes' clocks are behind this host's by at least that much, "
            "so their start times and ages mislead; fix their clocks (NTP)"
        )
    return (
        f"{count} collected {span}: what those nodes hold may have changed since; "
        "re-collect them, or use --collect"
    )
