"""After a reclaim's sends: the touched nodes inventoried again until their jobs are gone.

spurd frees a run that ignores SIGTERM only after its 5 s SIGKILL grace and the next
2 s monitor tick (docs/spur-facts.md, "The agent's CancelJob"), so one look at 5 s
would call such a cancel failed. A node is looked at every RECOLLECT_EVERY_S (the
first time at min(that, settle)) while one of its jobs is still there, and never
past `settle` seconds after the sends. What each look showed is returned for the
caller to judge (decide.confirm.verify); a Ctrl-C, or whatever breaks the collect,
propagates to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spurctl.sources.inventories import Sources

# Re-collect this often while waiting for the cancelled runs to go: spurd's monitor
# notices an exit every 2 s (docs/spur-facts.md, "The agent's CancelJob").
RECOLLECT_EVERY_S = 2.0


@dataclass(slots=True)
class Looked:
    """What the re-collects showed."""

    # Each node's held job ids at its last successful look.
    held_now: dict[str, set[int]] = field(default_factory=dict)
    # Why a node that never answered could not be inventoried.
    errors: dict[str, str] = field(default_factory=dict)
    # How long after the sends each node was last looked at.
    seen_at: dict[str, float] = field(default_factory=dict)
    # How long the whole wait took.
    waited_s: float = 0.0


def until_freed(
    sent: Sequence[tuple[str, int]],
    touched: Iterable[str],
    recollect: Sources,
    settle: float,
    *,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    on_look: Callable[[], None] | None = None,
) -> Looked:
    """Re-collect `touched` until no node shows a job of `sent` (node, job id) or `settle`
    seconds have passed. `on_look` is called once, before the first wait."""
    from spurctl.sources.collect import collect

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    looked = Looked()
    begun = clock()
    check = min(RECOLLECT_EVERY_S, settle)
    nodes = list(touched)
    if on_look is not None:
        on_look()
    while True:
        sleep(max(0.0, begun + check - clock()))
        at = round(clock() - begun, 1)
        again = collect(
            nodes,
            command=recollect.command,
            fanout=recollect.fanout,
            timeout=recollect.node_timeout,
            tree=recollect.tree,
        )
        for inv in again:
            if inv.error:
                if inv.node not in looked.held_now:  # an earlier look still stands
                    looked.errors[inv.node] = str(inv.error)
                continue
            looked.held_now[inv.node] = {h.job_id for h in inv.held}
            looked.errors.pop(inv.node, None)
            looked.seen_at[inv.node] = at
        held = looked.held_now
        nodes = sorted({node for node, job in sent if node not in held or job in held[node]})
        if not nodes or check >= settle:
            break
        check = min(check + RECOLLECT_EVERY_S, settle)
    looked.waited_s = round(clock() - begun, 1)
    return looked
