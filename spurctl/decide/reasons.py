"""The pieces a finding's sentence is built from, in an operator's words."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from spurctl import hostlist
from spurctl.model import Holding


def evidence(h: Holding) -> str:
    """'with GPUs 0-3 and 2 live processes': what the node holds, in an operator's words."""
    if h.gpus:
        what = f"GPU{'s' if len(h.gpus) > 1 else ''} {id_ranges(h.gpus)}"
    elif h.cpus:
        what = f"{h.cpus} CPU{'s' if h.cpus > 1 else ''}"
    else:
        what = "no GPU"
    n = len(h.pids)
    procs = f"{n} live process{'es' if n > 1 else ''}" if n else "no live process"
    return f"with {what} and {procs}"


def id_ranges(ids: Iterable[int]) -> str:
    """0,1,2,3,6 -> '0-3,6'."""
    return hostlist.ranges(ids)


def plural(count: int, word: str, many: str | None = None) -> str:
    """'1 node', '3 nodes', '2 processes' (`many` when adding an s is wrong)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def when(t: datetime, now: datetime) -> str:
    """'10:05 UTC' on the view's day, with the date otherwise."""
    return t.strftime("%H:%M UTC" if t.date() == now.date() else "%Y-%m-%d %H:%M UTC")


def duration(seconds: float) -> str:
    """'45 s', '12 min', '3.5 h', '2.0 days': a span of time, roughly, in an operator's words."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


# The dimensions of an allocation, in the order (cpus, memory_mb, gpus).
UNITS = ("CPU", "MB of memory", "GPU")


def amount(value: int, dim: int) -> str:
    """'2 GPUs', '1 CPU', '512 MB of memory': `value` of dimension `dim` of UNITS."""
    unit = UNITS[dim]
    return f"{value} {unit}" if value == 1 or unit.startswith("MB") else f"{value} {unit}s"


def join(parts: Iterable[str]) -> str:
    """'a', 'b', 'c' -> 'a, b and c'."""
    items = list(parts)
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)


def repair_remedy(node: str) -> str:
    """What clears a phantom charge (docs/spur-facts.md, "Phantom charges and node
    administration"), as the end of a phantom-alloc reason."""
    return f" but a fresh registration (DeregisterNode): `spurctl repair --node {node}`"
