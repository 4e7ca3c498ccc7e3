"""`spurctl audit --watch --format json`: each round as one line of JSON (JSON Lines).

Each line is the round's `spurctl.audit/v1` document (what `audit --format json`
prints for that round's report) with a `watch` key for the round, and each finding
with its history: when the watch first saw it, for how long, whether it is stranded.
A line is written whole and flushed, so `jq` or a log shipper reading the pipe gets
every round as it comes. JSON is never escaped for a terminal; nothing is redrawn.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from types import TracebackType
from typing import Any, TextIO

import msgspec

from spurctl.decide.tracker import WatchRound
from spurctl.model import format_time
from spurctl.render.audit import audit_document
from spurctl.render.watch import Hold, RoundWriter


def round_document(state: WatchRound) -> dict[str, Any]:
    """The round's audit document, its findings' history, and a `watch` key.

    A failed round carries its `error` and the last good round's report and findings
    (`report_round` says which), as the table shows them.
    """
    doc = audit_document(state.report)
    for finding, tracked in zip(doc["findings"], state.tracked, strict=True):
        finding.update(
            # The earliest time any round's evidence gave (decide/tracker.TrackedFinding).
            since=format_time(tracked.since),
            since_evidence=None if tracked.since_evidence is None else tracked.since_evidence.value,
            first_seen=format_time(tracked.first_seen),
            watched_s=round(tracked.age.total_seconds(), 3),
            # What STRANDED counts: watched_s, or the controller's own time for the job.
            lasted_s=round(tracked.lasted.total_seconds(), 3),
            stranded=tracked.stranded,
            evidence_stale=tracked.evidence_stale,
        )
    step = state.reclaim_step
    doc["watch"] = {
        "round": state.number,
        "at": format_time(state.at),
        "interval_s": state.interval,
        "report_round": state.report_round,
        "error": state.error,
        "stranded": len(state.stranded),
        "reclaim": None if step is None else {"argv": list(step.argv), "why": step.why},
    }
    return doc


class JsonLines(RoundWriter):
    """Where the rounds go with --format json: one line each, on `file` (stdout).
    `hold()`: a context in which Ctrl-C waits until the line in hand is written."""

    def __init__(self, file: TextIO | None = None, *, hold: Hold = nullcontext) -> None:
        self.out = sys.stdout if file is None else file
        self.hold = hold
        self.shown: WatchRound | None = None

    def __enter__(self) -> JsonLines:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def show(self, state: WatchRound) -> None:
        line = msgspec.json.encode(round_document(state)).decode() + "\n"
        with self.hold():
            self.out.write(line)
            self.out.flush()
            self.shown = state

    def running(self) -> None:
        """Nothing to say between rounds: a line is a round."""
