"""What `spurctl audit --watch` shows each round: the findings, how long each has
lasted, and which reclaimable holdings the controller is leaving stranded.

A terminal gets one view redrawn in place; anything else (a log, a pipe) gets
one plain block per round. What the terminal is comes in an Environment; the
signals a live view needs (Ctrl-C held while drawing, SIGWINCH) are the command
layer's (commands/watch_loop.py), which hands the screen its new size and the
way to hold an interrupt.
"""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.text import Text

from spurctl.decide.reasons import plural
from spurctl.decide.tracker import STRANDED_AFTER, TrackedFinding, WatchRound, blind
from spurctl.hostlist import fold
from spurctl.model import Action, Finding, NextStep, SinceEvidence, format_time
from spurctl.render.audit import Column, FindingsTable, screen_notes, version_text
from spurctl.render.common import (
    ACTION_RANK,
    ACTION_STYLE,
    context_line,
    escaped,
    folded,
    grouped,
    job_text,
    no_discrepancies,
    node_cell,
    pipe_width,
    summary_line,
)
from spurctl.render.environment import Environment
from spurctl.render.pasted import command_lines
from spurctl.render.since import since_text
from spurctl.render.sink import styled
from spurctl.render.table import Row, Table


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


def _status_word(t: TrackedFinding) -> str:
    return "STRANDED" if t.stranded else "stale inv" if t.evidence_stale else ""


_STATUS_STYLE = {"STRANDED": "bold red", "stale inv": "yellow"}


def _status(t: TrackedFinding) -> Text:
    word = _status_word(t)
    return Text(word, style=_STATUS_STYLE.get(word, ""))


# The indent of a reason under its finding in the audit table's narrow layout
# (render.audit.FindingsTable): the times line up with it.
_STACK_INDENT = 10


def _history_columns(tracked: Sequence[TrackedFinding], at: datetime) -> list[Column]:
    """Two times, each labelled: since when the evidence says the finding's state has
    held (the job's end, its move, the run's start, the inventory: decide/onset.py),
    and how long this watch has seen it; then whether it is stranded."""
    # By identity: the classifier may emit two equal findings, each is a row.
    history_of = {id(t.finding): t for t in tracked}
    # Thousands of findings share a few times and ages (those seen since the first
    # round, a job's end on many nodes): each is formatted once a round.
    dates: dict[tuple[datetime | None, SinceEvidence | None], str] = {}
    ages: dict[timedelta, str] = {}

    def since(f: Finding) -> str:
        t = history_of[id(f)]
        key = (t.since, t.since_evidence)
        text = dates.get(key)
        if text is None:
            dates[key] = text = since_text(t.since, t.since_evidence, at)
        return text

    def history(f: Finding) -> Text:
        # Narrow: both times on a line of their own, indented as the reason under it.
        text = since(f)
        dated = "" if text == "-" else f"{text}  "
        return Text(f"\n{' ' * _STACK_INDENT}{dated}watched {watched(f)}")

    def watched(f: Finding) -> str:
        lasted = history_of[id(f)].age
        text = ages.get(lasted)
        if text is None:
            ages[lasted] = text = format_age(lasted)
        return text

    def status(f: Finding) -> Text:
        return _status(history_of[id(f)])

    return [
        Column("since", lambda f: Text(since(f)), lambda f: Text(""), since),
        Column("watched", lambda f: Text(watched(f)), history, watched),
        Column("status", status, status, lambda f: _status_word(history_of[id(f)])),
    ]


def _verdict(
    state: WatchRound,
    *,
    ack: str | None = None,
    tell_version: bool = True,
    width: int | None = None,
    short: bool = False,
    cut_version: bool = False,
) -> list[RenderableType]:
    """The round's verdict: the totals, then what is stranded and the command that
    reclaims it, on a line of its own (`width`: the terminal's, where a command wider
    than it is broken over lines a shell joins back, never cut: render/pasted.py).
    `short`: the totals and every warning cut to one line each (the command never is);
    the version note too only with `cut_version` (it is news once, in its first round:
    the findings fold before it is cut)."""
    report = state.report
    heartbeats = int(STRANDED_AFTER.total_seconds())
    cut = _a_line if short else _as_is
    out: list[RenderableType] = [cut(Text(summary_line(report), style="bold"))]
    stranded = state.stranded
    if stranded:
        out += _stranded(len(stranded), heartbeats, state.reclaim_step, width)
    stale = [t for t in state.tracked if t.evidence_stale]
    if stale:
        nodes = fold(sorted({t.finding.node for t in stale}))
        said = (
            f"stale inv: {plural(len(stale), 'reclaim finding')} on {nodes} cannot be called "
            "stranded: no inventory re-collected during this watch shows them lasting "
            "two heartbeats. Re-collect into the --inventory files (spurctl collect -o FILE) "
            "or watch with --collect."
        )
        out.append(cut(Text(said, style="yellow")))
    out += map(cut, screen_notes(report, ack=ack, tell_version=False))  # the warnings
    version = version_text(report, ack=ack, tell=tell_version)
    out += map(_a_line if cut_version else _as_is, version)
    return out


def _as_is(text: Text) -> Text:
    return text


def _a_line(text: Text) -> Text:
    """`text` kept to one line, cut with `…` where the screen is narrower."""
    first = text.split("\n")[0] if "\n" in text.plain else text.copy()
    if len(first) < len(text):
        first.append("…")
    first.no_wrap, first.overflow = True, "ellipsis"
    return first


def _stranded(
    count: int, heartbeats: int, step: NextStep | None, width: int | None
) -> list[RenderableType]:
    said = (
        f"STRANDED: {plural(count, 'reclaimable holding')} outlived two agent heartbeats "
        f"({heartbeats} s): the controller is not releasing them."
    )
    if step is None:
        return [Text(said, style="bold red")]
    lines = command_lines(step, width)
    if len(lines) > 1:
        said += f" Reclaim with (one command on {len(lines)} lines):"
    else:
        said += " Reclaim with:"
    # Each line as written: never wrapped by rich, never cut (each fits `width`, or no
    # width was given and the one line is whole however long).
    shown = [Text(line, style="bold", no_wrap=True, overflow="ignore") for line in lines]
    return [Text(said, style="bold red"), *shown]


def _one_line_table(
    findings: Sequence[Finding], tracked: Sequence[TrackedFinding], at: datetime, *, fold: bool
) -> Table:
    """The findings one line each, for a terminal short of lines: node, job, kind, action
    and status whole (what an operator acts on), then the reason and its two times, cut
    with `…` to the room left (render/table.Table one_line)."""
    history_of = {id(t.finding): t for t in tracked}

    def text(f: Finding) -> str:
        t = history_of[id(f)]
        since = since_text(t.since, t.since_evidence, at)
        dated = "" if since == "-" else f"{since}, "
        return f"{f.reason} ({dated}watched {format_age(t.age)})"

    pairs = (
        folded(findings, lambda f: (_status_word(history_of[id(f)]), text(f)))
        if fold
        else [(f, f) for f in findings]
    )
    stands_for = {id(shown): first for shown, first in pairs}
    rows = []
    for node, group in grouped(shown for shown, _ in pairs):
        for f in group:
            first = stands_for[id(f)]
            word = _status_word(history_of[id(first)])
            cells = [
                node_cell(node) if first is not f else node,
                job_text(f.job_id),
                f.kind.value,
                f.action.value,
                word,
            ]
            styles = ["bold", None, None, None, _STATUS_STYLE.get(word)]
            rows.append(Row(cells, text(first), ACTION_STYLE[f.action], styles))
    return Table(["node", "job", "kind", "action", "status"], rows, "reason", one_line=True)


def _more(hidden: Sequence[Finding]) -> Text:
    """The line standing for the findings a short terminal has no room for."""
    counts = Counter(f.action for f in hidden)
    by_action = ", ".join(f"{counts[a]} {a.value}" for a in Action if counts[a])
    return Text(
        f"... and {len(hidden)} more ({by_action}); spurctl audit lists all.",
        style="bold",
    )


class WatchView:
    """One round, verdict first: the header, the totals, the STRANDED line with the
    command that reclaims it and the warnings, then the findings, most urgent first,
    folded into "... and N more" where the height runs out, then where the view came
    from. `height` is the most lines it may take (None: as many as it needs;
    `fit_terminal`: the console's height, re-read at every drawing)."""

    def __init__(
        self,
        state: WatchRound,
        *,
        live: bool = False,
        running: bool = False,
        height: int | None = None,
        fit_terminal: bool = False,
        fold: bool = True,
        ack: str | None = None,
        tell_version: bool = True,
    ) -> None:
        self.state = escaped(state)  # as drawn: the cluster's control characters written out
        self.fold = fold
        self.ack = ack
        self.tell_version = tell_version
        self.live = live
        self.running = running
        self.height = height
        self.fit_terminal = fit_terminal

    def _head(
        self, width: int, short: bool = False, cut_version: bool = False
    ) -> list[RenderableType]:
        state = self.state
        at = state.at.astimezone(UTC).replace(microsecond=0)
        cluster = f"cluster {state.report.cluster}, " if state.report.cluster else ""
        header = (
            f"spurctl audit --watch: {cluster}round {state.number}, {format_time(at)} "
            f"(times UTC), every {state.interval:g} s"
        )
        if self.running:
            header += f"; round {state.number + 1} running"
        if self.live:
            header += "; Ctrl-C to stop"
        out: list[RenderableType] = [Text(header + ".", style="bold")]
        cut = _a_line if short else _as_is
        if state.error is not None:
            failed = (
                f"Round {state.number} FAILED: {state.error}. Showing round "
                f"{state.report_round}; a failed round clears no finding."
            )
            out.append(cut(Text(failed, style="bold red")))
        dark = blind(t.finding for t in state.tracked)
        if dark:
            said = (
                f"No evidence this round from {fold(sorted(dark))} "
                f"({plural(len(dark), 'node')}): their earlier findings keep their ages "
                "until an inventory shows them gone."
            )
            out.append(cut(Text(said, style="yellow")))
        # On a terminal (live, or the last round printed when the watch stops) a command
        # wider than it is broken over lines: the view fits the screen, the command pastes.
        fitted = width if self.live or self.fit_terminal else None
        verdict = _verdict(
            state, ack=self.ack, tell_version=self.tell_version, width=fitted, short=short,
            cut_version=cut_version,
        )  # fmt: skip
        return out + verdict

    def _findings(
        self, shown: Sequence[Finding], hidden: Sequence[Finding], compact: bool = False
    ) -> RenderableType:
        state = self.state
        at = state.at.astimezone(UTC).replace(microsecond=0)
        out: list[RenderableType] = []
        if shown and compact:
            out.append(_one_line_table(shown, state.tracked, at, fold=self.fold))
        elif shown:
            out.append(FindingsTable(shown, _history_columns(state.tracked, at), fold=self.fold))
        elif not hidden:
            out.append(Text(no_discrepancies(state.report), style="green"))
        if hidden:
            out.append(_more(hidden))
        return Group(*out)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # The screen may hold only some: the nodes with the most urgent rows first (in
        # natural order within each action), so a fold never hides a reclaim row
        # behind a spare one. The table shows what fits in the one order.
        groups = grouped(t.finding for t in self.state.tracked)
        groups.sort(key=lambda g: ACTION_RANK[g[1][0].action])
        findings = [f for _, rows in groups for f in rows]
        head = Group(*self._head(options.max_width))
        tail: Text = Text(context_line(self.state.report), style="dim")
        height = self.height
        if self.fit_terminal:
            # One line spare: the cursor rests under the view, and a view as tall as
            # the terminal would scroll its first line away.
            height = max((options.height or options.size.height) - 1, 1)
        render = options.update(height=None)

        def lines(renderable: RenderableType) -> int:
            return len(console.render_lines(renderable, render, pad=False))

        shown = len(findings)
        compact = False
        if height is not None and findings:
            room = height - lines(head) - lines(tail)

            def fits(k: int) -> bool:
                return lines(self._findings(findings[:k], findings[k:], compact)) <= room

            if not fits(shown):
                # Short of lines: one line a finding, its reason and times cut to the room
                # its cells leave (the command above is never cut), then as many as fit.
                compact = True
            if compact and not fits(shown):
                # Still short: the totals, the warnings and where the view came from one
                # line each too, before any finding is left out. The version note stays
                # whole: it is told in one round only (docs/watch.md).
                head = Group(*self._head(options.max_width, short=True))
                tail = _a_line(tail)
                room = height - lines(head) - lines(tail)
            if compact and not fits(0):
                # Too short even with every finding folded: the version note one line too,
                # rather than the view's last lines lost below the screen.
                head = Group(*self._head(options.max_width, short=True, cut_version=True))
                room = height - lines(head) - lines(tail)
            if compact and not fits(shown):
                # The largest k that fits (0 is assumed to); each finding takes a line at least.
                low, high = 0, max(min(shown - 1, room), 0)
                while low < high:
                    mid = (low + high + 1) // 2
                    if fits(mid):
                        low = mid
                    else:
                        high = mid - 1
                shown = low
        yield head
        yield self._findings(findings[:shown], findings[shown:], compact)
        yield tail


def watch_renderable(
    state: WatchRound,
    *,
    live: bool = False,
    running: bool = False,
    height: int | None = None,
    fit_terminal: bool | None = None,
    fold: bool = True,
    ack: str | None = None,
    tell_version: bool = True,
) -> RenderableType:
    """The whole view of one round (see WatchView).

    `live`: drawn on a terminal (says how to stop); `running`: the next round's
    audit is under way; `height`: at most that many lines; `fit_terminal`: at most
    the terminal's height (default: when `live`); `fold`: findings that differ only
    in their node (and history) as one row; `ack`, `tell_version`: whether the
    controller-version line is shown (render.audit.version_text).
    """
    fit = live if fit_terminal is None else fit_terminal
    return WatchView(
        state, live=live, running=running, height=height, fit_terminal=fit, fold=fold,
        ack=ack, tell_version=tell_version,
    )  # fmt: skip


def render_watch_round(
    state: WatchRound,
    *,
    console_width: int | None = None,
    height: int | None = None,
    fold: bool = True,
    ack: str | None = None,
    tell_version: bool = True,
) -> str:
    """One round as plain text (no colour, no trailing blanks), for logs and pipes:
    every finding unless `height` limits the lines; a command to run next whole on
    its line, however wide.

    `console_width` defaults to what `audit` uses when not on a terminal.
    """
    view = watch_renderable(state, height=height, fold=fold, ack=ack, tell_version=tell_version)
    buf = io.StringIO()
    console = Console(
        file=buf, width=console_width or pipe_width(), color_system=None, force_terminal=False,
        highlight=False, emoji=False, markup=False,
    )  # fmt: skip
    console.print(view, crop=False)
    # rich pads every line to the console width; strip it so the text diffs and greps cleanly.
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def first_round_interrupted(doing: str) -> None:
    """The one line for a watch stopped before it could show anything."""
    print(f"spurctl: interrupted during the first round: {doing}", file=sys.stderr)


Hold = Callable[[], AbstractContextManager[None]]


class RoundWriter:
    """What the watch loop writes its rounds to (WatchScreen, render/watch_json.JsonLines):
    `show` writes one round and sets `shown`; `follow` writes them all."""

    shown: WatchRound | None = None

    def show(self, state: WatchRound) -> None:
        raise NotImplementedError

    def follow(self, rounds: Iterable[WatchRound]) -> WatchRound:
        """Write every round until they end or Ctrl-C; return the last one written.

        Ctrl-C before any round was written is re-raised: there is nothing to leave behind.
        """
        try:
            for state in rounds:
                self.show(state)
        except KeyboardInterrupt:
            if self.shown is None:
                raise
        assert self.shown is not None
        return self.shown


class WatchScreen(RoundWriter):
    """Where the rounds go: on a terminal (`env.tty`) one view redrawn in place, which
    keeps the last round on screen when the watch ends; elsewhere one plain block per
    round. `hold()`: a context in which Ctrl-C waits for the drawing in hand to be
    written (commands/watch_loop.interrupts_held); `resize(columns, lines)` redraws
    the view at a new terminal size at once."""

    def __init__(
        self,
        env: Environment,
        file: TextIO | None = None,
        *,
        fold: bool = True,
        ack: str | None = None,
        hold: Hold = nullcontext,
    ) -> None:
        self.out = sys.stdout if file is None else file
        self.env = env
        self.fold = fold
        self.ack = ack
        self.hold = hold
        self.shown: WatchRound | None = None
        # The controller-version line is news once a session: the version it was told
        # for, and the round that told it (its redraws keep it).
        self._told: tuple[str, int] | None = None
        self._on_terminal = env.tty
        self._live = Live(console=self._console(), auto_refresh=False)
        # What is drawn now (running or not), for a redraw at the terminal's new size.
        self._running = False
        self._drawing = False
        self._resized: tuple[int, int] | None = None

    def _console(self) -> Console:
        """A console of the terminal's size as the Environment says it: rich is never left
        to probe the terminal. The data is escaped before it is drawn."""
        env = self.env
        console = Console(
            file=styled(self.out), highlight=False, emoji=False, markup=False,
            force_terminal=env.tty, no_color=not env.colour or None,
        )  # fmt: skip
        if env.tty and env.width and env.height:
            console.size = (env.width, env.height)
        return console

    def __enter__(self) -> WatchScreen:
        if self._on_terminal:
            self._live.__enter__()
        return self

    def resize(self, columns: int, lines: int) -> None:
        """The terminal now has this size: redraw the view at it (after the drawing in
        hand, if one is being written)."""
        self._resized = (columns, lines)
        if not self._drawing:
            self._redraw_resized()

    def _redraw_resized(self) -> None:
        while self._resized is not None and self.shown is not None:
            size, self._resized = self._resized, None
            self._live.console.size = size
            self._draw(self._view(self.shown, live=True, running=self._running))

    def _draw(self, view: RenderableType) -> None:
        self._drawing = True
        try:
            with self.hold():
                self._live.update(view, refresh=True)
        finally:
            self._drawing = False
        if self._resized is not None:
            self._redraw_resized()

    def _tell_version(self, state: WatchRound) -> bool:
        version = state.report.controller_version
        if self._told is None or self._told[0] != version:
            self._told = (version, state.number)
        return self._told == (version, state.number)

    def _view(self, state: WatchRound, **how: bool) -> RenderableType:
        tell = self._tell_version(state)
        return watch_renderable(state, fold=self.fold, ack=self.ack, tell_version=tell, **how)

    def show(self, state: WatchRound) -> None:
        if not self._on_terminal:
            with self.hold():  # a log or a pipe: one plain block per round
                self.shown = state
                tell = self._tell_version(state)
                block = render_watch_round(state, fold=self.fold, ack=self.ack, tell_version=tell)
                self.out.write(("\n" if state.number > 1 else "") + block)
                self.out.flush()
            return
        self.shown, self._running = state, False
        self._draw(self._view(state, live=True))

    def running(self) -> None:
        """Say that the next round is under way, under the last one shown."""
        if self._on_terminal and self.shown is not None:
            self._running = True
            self._draw(self._view(self.shown, live=True, running=True))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._on_terminal:
            return
        # Clear the view redrawn in place, then print the last round once, as it
        # ended: nothing of a "round N running" or "Ctrl-C to stop" drawing stays
        # above it, however the interrupt cut the drawing short. Printed, not drawn in
        # place: a command wider than the terminal is written whole (not cropped).
        with self.hold():
            self._live.transient = True
            self._live.update(Text(""), refresh=False)
            self._live.__exit__(exc_type, exc, tb)
            if self.shown is not None:
                self._live.console.print(self._view(self.shown, fit_terminal=True), crop=False)
