"""What `spurctl audit --watch` shows each round: the findings, how long each has
lasted, and which reclaimable holdings the controller is leaving stranded.

A terminal gets one view redrawn in place; anything else (a log, a pipe) gets
one plain block per round.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TextIO

from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from spurctl.decide.reasons import plural
from spurctl.decide.tracker import STRANDED_AFTER, TrackedFinding, WatchRound
from spurctl.hostlist import fold
from spurctl.model import Finding, format_time
from spurctl.render.audit import Column, audit_view, plain_text, terminal_console


def format_age(age: timedelta) -> str:
    """45s, 2m05s, 3h07m, 2d04h: short enough for a table column."""
    seconds = max(int(age.total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def _clock(moment: datetime, today: datetime) -> str:
    # The round header carries the date; a row repeats it only when it differs.
    moment, today = moment.astimezone(UTC), today.astimezone(UTC)
    if moment.date() == today.date():
        return moment.strftime("%H:%M:%S")
    return format_time(moment.replace(microsecond=0)) or ""


def _status(t: TrackedFinding) -> Text:
    if t.stranded:
        return Text("STRANDED", style="bold red")
    if t.evidence_stale:
        return Text("stale inv", style="yellow")
    return Text("")


def _history_columns(tracked: Sequence[TrackedFinding], at: datetime) -> list[Column]:
    """Since when each finding has been seen, its age, and whether it is stranded."""
    # By identity: the classifier may emit two equal findings, each is a row.
    history = {id(t.finding): t for t in tracked}

    def since(f: Finding) -> str:
        return _clock(history[id(f)].first_seen, at)

    def age(f: Finding) -> str:
        return format_age(history[id(f)].age)

    def status(f: Finding) -> Text:
        return _status(history[id(f)])

    return [
        Column("since", lambda f: Text(since(f)), lambda f: Text(f"since {since(f)}")),
        Column("age", lambda f: Text(age(f)), lambda f: Text(f"age {age(f)}")),
        Column("status", status, status),
    ]


def watch_renderable(
    state: WatchRound, *, live: bool = False, running: bool = False
) -> RenderableType:
    """The whole view of one round.

    `live`: drawn on a terminal (says how to stop); `running`: the next round's
    audit is under way.
    """
    report = state.report
    at = state.at.astimezone(UTC).replace(microsecond=0)
    header = (
        f"spurctl audit --watch: round {state.number}, {format_time(at)} (times UTC), "
        f"every {state.interval:g} s"
    )
    if running:
        header += f"; round {state.number + 1} running"
    if live:
        header += "; Ctrl-C to stop"
    out: list[RenderableType] = [Text(header + ".", style="bold")]
    if state.error is not None:
        out.append(
            Text(
                f"Round {state.number} FAILED: {state.error}. Showing round "
                f"{state.report_round}; a failed round clears no finding.",
                style="bold red",
            )
        )
    heartbeats = int(STRANDED_AFTER.total_seconds())
    after_findings: list[RenderableType] = []
    stranded = [t for t in state.tracked if t.stranded]
    if stranded:
        nodes = fold(sorted({t.finding.node for t in stranded}))
        after_findings.append(
            Text(
                f"STRANDED: {plural(len(stranded), 'reclaimable holding')} outlived two agent "
                f"heartbeats ({heartbeats} s): the controller is not releasing them. "
                f"Reclaim with: spurctl reclaim --node '{nodes}'",
                style="bold red",
            )
        )
    stale = [t for t in state.tracked if t.evidence_stale]
    if stale:
        nodes = fold(sorted({t.finding.node for t in stale}))
        after_findings.append(
            Text(
                f"stale inv: {plural(len(stale), 'reclaim finding')} on {nodes} cannot be called "
                "stranded: their inventories were not re-collected since first seen. "
                "Re-collect into the --inventory files (spurctl collect -o FILE) or watch "
                "with --collect.",
                style="yellow",
            )
        )
    out += audit_view(
        report,
        [t.finding for t in state.tracked],
        _history_columns(state.tracked, at),
        after_findings,
    )
    return Group(*out)


def render_watch_round(state: WatchRound, *, console_width: int | None = None) -> str:
    """One round as plain text (no colour, no trailing blanks), for logs and pipes.

    `console_width` defaults to what `audit` uses when not on a terminal.
    """
    return plain_text([watch_renderable(state)], console_width)


class WatchScreen:
    """Where the rounds go: on a terminal one view redrawn in place, which keeps
    the last round on screen when the watch ends; elsewhere one plain block per round."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.out = sys.stdout if file is None else file
        self.shown: WatchRound | None = None
        self._live = Live(console=terminal_console(self.out), auto_refresh=False)
        self._on_terminal = self.out.isatty()

    def __enter__(self) -> WatchScreen:
        if self._on_terminal:
            self._live.__enter__()
        return self

    def show(self, state: WatchRound) -> None:
        self.shown = state
        if self._on_terminal:
            self._live.update(watch_renderable(state, live=True), refresh=True)
        else:
            self.out.write(("\n" if state.number > 1 else "") + render_watch_round(state))
            self.out.flush()

    def follow(self, rounds: Iterable[WatchRound]) -> WatchRound:
        """Show every round until they end or Ctrl-C; return the last one shown.

        Ctrl-C before any round was shown is re-raised: there is nothing to leave on screen.
        """
        try:
            for state in rounds:
                self.show(state)
        except KeyboardInterrupt:
            if self.shown is None:
                raise
        assert self.shown is not None
        return self.shown

    def running(self) -> None:
        """Say that the next round is under way, under the last one shown."""
        if self._on_terminal and self.shown is not None:
            self._live.update(watch_renderable(self.shown, live=True, running=True), refresh=True)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._on_terminal:
            return
        if self.shown is not None:
            # Leave the last round on screen, not "round N+1 running".
            self._live.update(watch_renderable(self.shown), refresh=True)
        self._live.__exit__(exc_type, exc, tb)
