"""What `spurctl audit --watch` shows each round: the findings, how long each has
lasted, and which reclaimable holdings the controller is leaving stranded.

A terminal gets one view redrawn in place; anything else (a log, a pipe) gets
one plain block per round.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from spurctl.decide.tracker import STRANDED_AFTER, TrackedFinding, WatchRound
from spurctl.hostlist import fold
from spurctl.model import format_time
from spurctl.render.audit import (
    ACTION_STYLE,
    NARROW,
    context_line,
    grouped,
    job_text,
    live_text,
    pipe_width,
    summary_line,
)


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


class _FindingsTable:
    """The findings with their history, laid out for the width they are drawn at:
    a table when the reasons fit beside the rows, as the audit table does;
    otherwise each finding's reason on its own indented line under it."""

    def __init__(self, tracked: Sequence[TrackedFinding], at: datetime) -> None:
        self.tracked = tracked
        self.at = at

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # By identity: the classifier may emit two equal findings, each is a row.
        history = {id(t.finding): t for t in self.tracked}
        groups = grouped(t.finding for t in self.tracked)
        if options.max_width < NARROW:
            for node, rows in groups:
                yield Text(node, style="bold")
                for f in rows:
                    t = history[id(f)]
                    style = ACTION_STYLE[f.action]
                    head = f"  {job_text(f.job_id):>6}  {f.kind.value}  {f.action.value}"
                    if f.live is not None:
                        head += f"  live: {live_text(f.live)}"
                    head += f"  since {_clock(t.first_seen, self.at)}  age {format_age(t.age)}"
                    line = Text(head, style=style)
                    status = _status(t)
                    if status:
                        line.append("  ").append_text(status)
                    yield line
                    yield Padding(Text(f.reason, style=style), (0, 0, 0, 10))
            return
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for name in ("node", "job", "kind", "action", "live", "since", "age", "status"):
            table.add_column(name, no_wrap=True)
        table.add_column("reason", ratio=1, overflow="fold")
        for i, (node, rows) in enumerate(groups):
            if i:
                table.add_section()
            for j, f in enumerate(rows):
                t = history[id(f)]
                table.add_row(
                    Text(node if j == 0 else "", style="bold"),
                    Text(job_text(f.job_id)),
                    Text(f.kind.value),
                    Text(f.action.value),
                    Text(live_text(f.live)),
                    Text(_clock(t.first_seen, self.at)),
                    Text(format_age(t.age)),
                    _status(t),
                    Text(f.reason),
                    style=ACTION_STYLE[f.action],
                )
        yield table


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
    out.extend(Text(f"WARNING: {note}", style="bold yellow") for note in report.notes)

    if not state.tracked:
        out.append(
            Text(
                f"No discrepancies: {report.nodes_in_scope} nodes, "
                f"{report.nodes_inventoried} inventoried.",
                style="green",
            )
        )
    else:
        out.append(_FindingsTable(state.tracked, at))

    heartbeats = int(STRANDED_AFTER.total_seconds())
    stranded = [t for t in state.tracked if t.stranded]
    if stranded:
        nodes = fold(sorted({t.finding.node for t in stranded}))
        out.append(
            Text(
                f"STRANDED: {len(stranded)} reclaimable holding(s) outlived two agent "
                f"heartbeats ({heartbeats} s): the controller is not releasing them. "
                f"Reclaim with: spurctl reclaim --node '{nodes}'",
                style="bold red",
            )
        )
    stale = [t for t in state.tracked if t.evidence_stale]
    if stale:
        nodes = fold(sorted({t.finding.node for t in stale}))
        out.append(
            Text(
                f"stale inv: {len(stale)} reclaim finding(s) on {nodes} cannot be called "
                "stranded: their inventories were not re-collected since first seen. "
                "Re-collect into the --inventory files (spurctl collect -o FILE) or watch "
                "with --collect.",
                style="yellow",
            )
        )
    out.append(Text(summary_line(report), style="bold"))
    out.append(Text(context_line(report), style="dim"))
    return Group(*out)


def render_watch_round(state: WatchRound, *, console_width: int | None = None) -> str:
    """One round as plain text (no colour, no trailing blanks), for logs and pipes.

    `console_width` defaults to what `audit` uses when not on a terminal.
    """
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=console_width or pipe_width(),
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
        markup=False,
    )
    console.print(watch_renderable(state))
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())
