"""How a finding's `since` reads on a screen: the evidence's word, then its time.

"ended 2026-12-01T23:40:51Z" (the job ended then), "moved 22:16:05" (its run on
other nodes started then), "started ..." (the held run started), "inventoried ..."
(the inventory showing it was collected then); "-" when nothing dates it. A time on
the day of the report is its clock alone: the report's header carries the date.
"""

from __future__ import annotations

from datetime import UTC, datetime

from spurctl.model import SinceEvidence, format_time

WORD = {
    SinceEvidence.JOB_END: "ended",
    SinceEvidence.JOB_START: "moved",
    SinceEvidence.RUN_START: "started",
    SinceEvidence.INVENTORY: "inventoried",
}


def clock(moment: datetime, today: datetime) -> str:
    """`moment` as HH:MM:SS on `today`'s date (UTC), else as RFC 3339."""
    moment, today = moment.astimezone(UTC), today.astimezone(UTC)
    if moment.date() == today.date():
        return moment.strftime("%H:%M:%S")
    return format_time(moment.replace(microsecond=0)) or ""


def since_text(moment: datetime | None, evidence: SinceEvidence | None, today: datetime) -> str:
    """The evidence's word and its time, or "-" when nothing dates the finding."""
    if moment is None:
        return "-"
    word = WORD.get(evidence, "since") if evidence is not None else "since"
    return f"{word} {clock(moment, today)}"
