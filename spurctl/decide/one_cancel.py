"""One agent cancel per holding, for the autopilot: pure.

A holding whose agent cancel the journal records (sent, or an intent that may have gone
out) is never cancelled again by the autopilot: spurd frees a cancelled run at its
monitor's next tick (2 s), or after its SIGKILL grace (5 s more) for one that ignores
SIGTERM (docs/spur-facts.md, "The agent's CancelJob"), and a second cancel frees nothing
the first did not. Until an inventory taken `settle` after the cancel shows it, the
holding waits (`cancel-sent`: neither cancelled again nor drained); one such inventory
still showing it is a holding no cancel frees, and it takes the drain path (drain_plan
drains a node whose cancel is unconfirmed). A process-less holding is already a
`leftover` by the audit's own rule (run_evidence.leftover), as for a manual reclaim.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from spurctl.decide.reasons import duration
from spurctl.decide.run_evidence import JOURNAL_RESOLUTION
from spurctl.model import format_time

# How long after its cancel a holding may still show (spurd freeing it): reclaim's
# --settle default (defaults.DEFAULT_SETTLE_S), past the 7 s a run ignoring SIGTERM takes.
CANCEL_SETTLE = timedelta(seconds=15)
WAIT = "cancel-sent"


@dataclass(frozen=True, slots=True)
class AfterCancel:
    """A holding the journal records an agent cancel of: `lingers` once an inventory
    taken CANCEL_SETTLE after the cancel still shows it (drain), else it waits."""

    lingers: bool
    why: str


def after_cancel(
    node: str,
    job_id: int,
    *,
    sent: datetime | None,
    started: datetime | None,
    collected: datetime | None,
) -> AfterCancel | None:
    """None when no cancel of this holding is journaled (`sent`: the journal's last agent
    cancel of the job on the node; a run `started` after it is a newer one, cancelled
    never); else why no cancel goes again, and whether the holding lingers."""
    if sent is None or (started is not None and sent + JOURNAL_RESOLUTION < started):
        return None
    said = f"{node} job {job_id}: its agent cancel was journaled at {format_time(sent)}"
    if collected is not None and collected >= sent + CANCEL_SETTLE:
        return AfterCancel(
            True,
            f"{said} and an inventory {duration((collected - sent).total_seconds())} later "
            "still shows it: no second cancel frees it (one cancel per holding); the drain "
            "path instead",
        )
    return AfterCancel(
        False,
        f"{said}; not sent again (one cancel per holding): spurd frees a cancelled run "
        f"within its monitor tick and SIGKILL grace, so it waits for an inventory taken "
        f"{duration(CANCEL_SETTLE.total_seconds())} after the cancel",
    )
