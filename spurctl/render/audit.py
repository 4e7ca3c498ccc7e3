"""Show an AuditReport: the table for eyes, json/csv for scripts, markdown for
incident write-ups, prometheus for node_exporter's textfile collector.

`--format json` (the `spurctl.audit/v1` document) is the stable interface;
the table may change to read better. Every renderer sees the same report, so
the formats never disagree about what the audit found.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich is imported where a table is drawn: JSON, CSV and the rest need none
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.text import Text

    from spurctl.render.environment import Environment
    from spurctl.render.table import Table

from spurctl.errors import NOTE_PREFIX, visible
from spurctl.heap import gc_paused
from spurctl.model import Action, AuditReport, Finding, Kind, NextStep, format_time
from spurctl.render.common import (
    ACTION_STYLE,
    NOTE_LABEL,
    WARNING_LABEL,
    WHOLE,
    AuditFormat,
    choose,
    command_line,
    console_for,
    context_line,
    csv_safe,
    dump_json,
    escaped,
    folded,
    grouped,
    job_text,
    live_text,
    markdown_table,
    no_discrepancies,
    node_cell,
    note_label,
    pipe_width,
    report_header,
    same_version,
    summary_line,
)
from spurctl.render.finding_filter import NO_FILTER, FindingFilter
from spurctl.render.prometheus import render_prometheus
from spurctl.render.sink import styled

AUDIT_SCHEMA = "spurctl.audit/v1"

# The contract's finding fields, in contract order: the csv header and the
# first keys of every finding in the json document.
FINDING_FIELDS = (
    "node",
    "job_id",
    "kind",
    "action",
    "live",
    "reason",
    "controller_state",
    "allocated_nodes",
    "inventory_age_s",
)
# The CSV's header: the contract's fields, then since when each finding has lasted (and
# what dates it), as the JSON carries them.
CSV_FIELDS = (*FINDING_FIELDS, "since", "since_evidence")


# -- the json document -------------------------------------------------------


# Each member's value, read once: an enum's `.value` is a Python-level property, and a
# large audit's document reads two per finding (~11,000 findings at 20,000 nodes).
_KIND_VALUE = {k: k.value for k in Kind}
_ACTION_VALUE = {a: a.value for a in Action}


def _finding_to_dict(f: Finding) -> dict[str, Any]:
    """The contract's fields in order (FINDING_FIELDS), then gpus, pids and what dates it
    (decide/onset.py). One literal, no lookup by name: a large audit has ~11,000."""
    return {
        "node": f.node,
        "job_id": f.job_id,
        "kind": _KIND_VALUE[f.kind],
        "action": _ACTION_VALUE[f.action],
        "live": f.live,
        "reason": f.reason,
        "controller_state": f.controller_state,
        "allocated_nodes": f.allocated_nodes,
        "inventory_age_s": f.inventory_age_s,
        "gpus": list(f.gpus),
        "pids": list(f.pids),
        "since": None if f.since is None else format_time(f.since),
        "since_evidence": None if f.since_evidence is None else f.since_evidence.value,
    }


def audit_document(report: AuditReport, only: FindingFilter = NO_FILTER) -> dict[str, Any]:
    """The `spurctl.audit/v1` document (docs/contract.md, "Documents"), findings in report
    order; with a filter on, only the findings it keeps and a `filter` key saying what it
    hid (the `summary` still counts them all)."""
    shown = only.shown(report.findings)
    filtered: dict[str, Any] = {}
    if only.active:
        filtered["filter"] = {
            "kinds": [k.value for k in only.kinds],
            "actions": [a.value for a in only.actions],
            "shown": len(shown),
            "hidden": len(report.findings) - len(shown),
        }
    return {
        "schema": AUDIT_SCHEMA,
        **report_header(report),
        **filtered,
        "findings": [_finding_to_dict(f) for f in shown],
        "summary": {
            "nodes": report.nodes_in_scope,
            "nodes_inventoried": report.nodes_inventoried,
            "by_kind": report.by_kind,
            "needs_action": report.needs_action,
        },
    }


# -- table -------------------------------------------------------------------
# Every piece of report text goes in as Text, never as a markup string:
# hostlists like gpu[001-004] would otherwise be eaten as rich markup.


@dataclass(frozen=True, slots=True)
class Column:
    """A column added to the findings table, before the reason: its heading, its
    cell, and its words on the finding's line in the narrow layout (empty: none)."""

    name: str
    cell: Callable[[Finding], Text]
    inline: Callable[[Finding], Text]
    # The cell's text alone, where that is cheaper than the cell (folding compares it).
    plain: Callable[[Finding], str] | None = None


class FindingsTable:
    """The findings laid out for the width they are drawn at: a table when the
    reasons fit beside the rows, otherwise each finding's reason on its own
    indented line under it. A redrawn view (the watch) re-lays it on resize.
    `fold`: findings that differ only in their node are one row (render.common.folded).
    """

    def __init__(
        self, findings: Iterable[Finding], columns: Sequence[Column] = (), *, fold: bool = True
    ) -> None:
        self.columns = columns
        if fold:
            pairs = folded(findings, self._column_texts if columns else None)
        else:
            pairs = [(f, f) for f in findings]
        self.groups = grouped(shown for shown, _ in pairs)
        # A folded row's columns are those of a finding it stands for (all alike).
        self._stands_for = {id(shown): first for shown, first in pairs if shown is not first}

    def _column_texts(self, f: Finding) -> tuple[str, ...]:
        return tuple(c.plain(f) if c.plain else c.cell(f).plain for c in self.columns)

    def _cell(self, column: Column, f: Finding) -> Text:
        return column.cell(self._stands_for.get(id(f), f))

    def _inline(self, column: Column, f: Finding) -> Text:
        return column.inline(self._stands_for.get(id(f), f))

    def table(self) -> Table:
        """The rows in the one table style (render/table.py): every row names its node (a
        folded row its hostlist), in bold, and takes its action's colour."""
        from spurctl.render.table import Row, Table

        rows = []
        for node, group in self.groups:
            shown = node_cell(node) if id(group[0]) in self._stands_for else node
            for f in group:
                added = [self._cell(c, f) for c in self.columns]
                cells = [
                    shown,
                    job_text(f.job_id),
                    f.kind.value,
                    f.action.value,
                    live_text(f.live),
                    *(t.plain for t in added),
                ]
                styles = ["bold", None, None, None, None, *(str(t.style) or None for t in added)]
                rows.append(Row(cells, f.reason, ACTION_STYLE[f.action], styles))
        return Table(self._headers(), rows, "reason")

    def _headers(self) -> list[str]:
        return ["node", "job", "kind", "action", "live", *(c.name for c in self.columns)]

    def plain_lines(self, width: int) -> list[str] | None:
        """The table as lines of plain text at `width`; None when its cells do not fit it
        (then each finding is stacked, as rich draws it)."""
        table = self.table()
        return table.plain_lines(width) if table.fits(width) else None

    def whole_lines(self, header: bool = True) -> list[str]:
        """One line per finding, as a pipe wants them: every row names its node (a
        folded row its hostlist cell), the reason whole at the end of its line, never
        wrapped onto a line of its own; `header`: the column heading first."""
        return self.table().whole_lines(heading=header)

    @property
    def count(self) -> int:
        return sum(len(group) for _, group in self.groups)

    def _stacked(self, console: Console, width: int) -> RenderResult:
        """Each node's name, then each of its findings on a line with its reason indented
        under it. Past FAST_ROWS the lines that fit go out as segments, the reasons
        wrapped as rich wraps them (rich's Padding measures every line it draws)."""
        from rich.padding import Padding
        from rich.segment import Segment
        from rich.text import Text

        from spurctl.render.table import wrapped

        fast = self.count > FAST_ROWS
        newline, indent = Segment.line(), Segment(" " * _STACK_INDENT)
        for node, rows in self.groups:
            shown = node_cell(node) if id(rows[0]) in self._stands_for else node
            name = Text(shown, style="bold")
            if fast and name.cell_len <= width:
                yield from name.render(console)
                yield newline
            else:
                yield name
            for f in rows:
                style = ACTION_STYLE[f.action]
                head = f"  {job_text(f.job_id):>6}  {f.kind.value}  {f.action.value}"
                if f.live is not None:
                    head += f"  live: {live_text(f.live)}"
                line = Text(head, style=style)
                for column in self.columns:
                    words = self._inline(column, f)
                    if words:
                        line.append("  ").append_text(words)
                if not fast or line.cell_len > width:
                    yield line
                    yield Padding(Text(f.reason, style=style), (0, 0, 0, _STACK_INDENT))
                    continue
                yield from line.render(console)
                yield newline
                reason_style = console.get_style(style) if style else None
                for text in wrapped(f.reason, width - _STACK_INDENT):
                    yield indent
                    yield Segment(text, reason_style)
                    yield newline

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table()
        if table.fits(options.max_width):
            yield table
        else:
            # The cells alone are wider than the screen (a folded hostlist beside a watch's
            # history): each finding stacked, rather than a cell cut short.
            yield from self._stacked(console, options.max_width)


# Past this many rows the stacked layout goes out as segments, the reasons wrapped as
# rich wraps them: rich measures every line it draws, ~0.7 ms a row, 8 s for an
# 11,000-row audit (bench/audit_formats.py).
FAST_ROWS = 100
_STACK_INDENT = 10  # a reason's indent in the stacked layout


def acknowledged(report: AuditReport, ack: str | None) -> bool:
    """Whether the operator acknowledged this controller's version (--ack-version,
    SPURCTL_ACK_VERSION, config ack_version): `v0.8.0` and `0.8.0` are one version."""
    return same_version(ack, report.controller_version)


def other_notes(report: AuditReport) -> list[str]:
    """The notes a screen shows in full: all but the controller-version note."""
    return [note for note in report.notes if note != report.version_note]


def version_text(report: AuditReport, *, ack: str | None = None, tell: bool = True) -> list[Text]:
    """The controller-version note as a screen shows it: its short form, wrapped at words
    (releases.spur_version_line: what it means, how to hide it; the whole note is in
    explain and JSON notes); none once told (`tell` false), or acknowledged (`ack`)."""
    from rich.text import Text

    if not report.version_line or not tell or acknowledged(report, ack):
        return []
    return [Text(f"{NOTE_LABEL} {report.version_line}", style="yellow")]


def screen_notes(
    report: AuditReport, *, ack: str | None = None, tell_version: bool = True
) -> list[Text]:
    """The notes on a screen: each WARNING in full, then the version line."""
    from rich.text import Text

    warnings = [
        Text(f"{WARNING_LABEL} {note}", style="bold yellow") for note in other_notes(report)
    ]
    return warnings + version_text(report, ack=ack, tell=tell_version)


def audit_view(
    report: AuditReport,
    findings: Sequence[Finding] | None = None,
    columns: Sequence[Column] = (),
    after_findings: Iterable[RenderableType] = (),
    only: FindingFilter = NO_FILTER,
    fold: bool = True,
    ack: str | None = None,
    next_steps: Sequence[NextStep] = (),
) -> list[RenderableType]:
    """The notes, the findings (default: the report's) `only` keeps or that there are
    none, `after_findings`, the filter's line when one is on, then the summary, where
    the view came from and `next_steps` (each: why, then the command on a line of its own).
    `fold`: one row for findings that differ only in their node; `ack`: the
    acknowledged controller version (screen_notes)."""
    from rich.text import Text

    findings = report.findings if findings is None else findings
    total = len(findings)
    findings = only.shown(findings)
    out: list[RenderableType] = list(screen_notes(report, ack=ack))
    if findings:
        out.append(FindingsTable(findings, columns, fold=fold))
    elif only.active and total:
        out.append(Text(f"No finding matches {only.flags()}.", style="yellow"))
    else:
        out.append(Text(no_discrepancies(report), style="green"))
    out.extend(after_findings)
    if only.active:
        out.append(Text(only.sentence(total, len(findings)), style="yellow"))
    out.append(Text(summary_line(report), style="bold"))
    out.append(Text(context_line(report), style="dim"))
    for step in next_steps:
        out += step_text(step)
    return out


def step_text(step: NextStep) -> list[RenderableType]:
    """A next step as a screen shows it: why, then the command indented on a line of its
    own, never wrapped (a command broken over two lines does not paste)."""
    from rich.text import Text

    from spurctl.render.table import OneLine

    # Its words name nodes, as the cluster spells them: every control character shown.
    return [Text(f"{visible(step.why)}:"), OneLine(f"  {command_line(step)}")]


def plain_text(
    renderables: Iterable[RenderableType], console_width: int | None, *, whole: bool = False
) -> str:
    """Renderables as text without colour, at `console_width` (default: pipe_width());
    `whole`: every line whole however long, the findings one to a line."""
    from rich.console import Console

    from spurctl.render.table import OneLine

    buf = io.StringIO()
    console = Console(
        file=buf,
        width=WHOLE if whole else console_width or pipe_width(),
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
        markup=False,
    )
    for renderable in renderables:
        lines = None
        if isinstance(renderable, FindingsTable):
            lines = renderable.whole_lines() if whole else renderable.plain_lines(console.width)
        if lines is None:
            console.print(renderable, soft_wrap=isinstance(renderable, OneLine))
        else:  # a large table, drawn without rich (FindingsTable.plain_lines)
            buf.write("".join(f"{line}\n" for line in lines))
    # rich pads every line to the console width; strip it so the text diffs and greps cleanly.
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def terminal_console(file: TextIO | None = None, env: Environment | None = None) -> Console:
    """A console that takes every string as text, never as markup: as `env` describes
    stdout (render.common.console_for), or without `env`, as rich finds `file`."""
    # rich decides the colours here, so TERM=dumb is honoured.
    from rich.console import Console

    if env is not None:
        return console_for(env, file)
    out = None if file is None else styled(file)  # the data is escaped before it is drawn
    return Console(file=out, highlight=False, emoji=False, markup=False)


# -- csv ---------------------------------------------------------------------


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"  # as in the json, not Python's True/False
    return csv_safe(value)


def _render_csv(report: AuditReport, only: FindingFilter = NO_FILTER) -> str:
    import csv  # only for CSV

    buf = io.StringIO()
    # "\n", not csv's default "\r\n": this goes to a terminal or a Unix pipe.
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    writer.writerows(
        [
            _csv_cell(v)
            for v in (
                f.node,
                f.job_id,
                f.kind.value,
                f.action.value,
                f.live,
                f.reason,
                f.controller_state,
                f.allocated_nodes,
                f.inventory_age_s,
                None if f.since is None else format_time(f.since),
                None if f.since_evidence is None else f.since_evidence.value,
            )
        ]
        for f in only.shown(report.findings)
    )
    return buf.getvalue()


# -- markdown ----------------------------------------------------------------


def _render_markdown(
    report: AuditReport, only: FindingFilter = NO_FILTER, fold: bool = True
) -> str:
    lines = ["# spurctl audit", "", context_line(report), ""]
    shown = only.shown(report.findings)
    for note in report.notes:
        note_lines = note.splitlines() or [""]
        label = note_label(note, report.version_note)
        lines.append(f"> **{label}** {note_lines[0]}")
        lines.extend(f"> {extra}" for extra in note_lines[1:])
        lines.append("")
    lines += [f"**Summary:** {summary_line(report)}", ""]
    if only.active:
        lines += [f"**Filter:** {only.sentence(len(report.findings), len(shown))}", ""]
    if not shown:
        lines.append(
            f"No finding matches {only.flags()}."
            if only.active and report.findings
            else no_discrepancies(report)
        )
    else:
        headers = [
            "node",
            "job",
            "kind",
            "action",
            "live",
            "controller state",
            "allocated nodes",
            "reason",
        ]
        pairs = folded(shown) if fold else [(f, f) for f in shown]
        stands_for = {id(drawn) for drawn, first in pairs if drawn is not first}
        rows = [
            [
                node_cell(f.node) if id(f) in stands_for else f.node,
                job_text(f.job_id),
                f.kind.value,
                f.action.value,
                live_text(f.live),
                f.controller_state or "",
                f.allocated_nodes or "",
                f.reason,
            ]
            for _, group in grouped(drawn for drawn, _ in pairs)
            for f in group
        ]
        lines.append(markdown_table(headers, rows))
    return "\n".join(lines) + "\n"


# -- entry points ------------------------------------------------------------

_RENDERERS: dict[AuditFormat, Callable[[AuditReport, FindingFilter], str]] = {
    AuditFormat.JSON: lambda r, only: dump_json(audit_document(r, only)) + "\n",
    AuditFormat.CSV: _render_csv,
    AuditFormat.PROMETHEUS: render_prometheus,
}


def check_format(fmt: str) -> None:
    choose(AuditFormat, fmt)


def render_audit(
    report: AuditReport,
    fmt: AuditFormat | str,
    *,
    console_width: int | None = None,
    only: FindingFilter = NO_FILTER,
    fold: bool = True,
    ack: str | None = None,
    whole: bool = False,
    header: bool = True,
    next_steps: Sequence[NextStep] = (),
) -> str:
    """The report as text in `fmt`, ending in a newline; the table has no colour.

    `console_width` sets the table's width (default: $COLUMNS, else 120); the
    other formats ignore it. `only` chooses the findings shown (see FindingFilter).
    `fold`: the table and Markdown draw findings that differ only in their node as
    one row (JSON, CSV and Prometheus keep one record per finding). `whole`: the
    table as a pipe or a file gets it, one finding per line, its reason never wrapped;
    `header` False (`--no-header`): those lines alone, no heading, notes or summary;
    `next_steps`: the table's last lines (audit_view).
    """
    # A record, a row or a line per finding (~11,000 in a large audit): bulk, and garbage
    # once the text is made, built with the collector off (spurctl/heap.py).
    with gc_paused():
        return _rendered(report, fmt, console_width, only, fold, ack, whole, header, next_steps)


def _rendered(
    report: AuditReport,
    fmt: AuditFormat | str,
    console_width: int | None,
    only: FindingFilter,
    fold: bool,
    ack: str | None,
    whole: bool,
    header: bool,
    next_steps: Sequence[NextStep],
) -> str:
    fmt = choose(AuditFormat, fmt)
    if fmt in (AuditFormat.JSON, AuditFormat.CSV, AuditFormat.PROMETHEUS):
        return _RENDERERS[fmt](report, only)  # each quotes or escapes what it must
    report = escaped(report)
    if fmt is AuditFormat.TABLE and not header:
        shown = only.shown(report.findings)
        lines = FindingsTable(shown, fold=fold).whole_lines(header=False) if shown else []
        return "".join(f"{line}\n" for line in lines)
    if fmt is AuditFormat.TABLE:
        view = audit_view(report, only=only, fold=fold, ack=ack, next_steps=next_steps)
        return plain_text(view, console_width, whole=whole)
    if fmt is AuditFormat.MARKDOWN:
        return _render_markdown(report, only, fold)
    return _RENDERERS[fmt](report, only)


def filter_notice(report: AuditReport, fmt: AuditFormat | str, only: FindingFilter) -> str | None:
    """What stderr must say of a filter the document itself cannot (CSV has no room for
    a note); None when the document says it, or no filter is on."""
    if not only.active or choose(AuditFormat, fmt) is not AuditFormat.CSV:
        return None
    shown = len(only.shown(report.findings))
    return f"{NOTE_PREFIX}{only.sentence(len(report.findings), shown)}"


def print_audit(
    report: AuditReport,
    fmt: AuditFormat | str,
    env: Environment,
    file: TextIO | None = None,
    *,
    only: FindingFilter = NO_FILTER,
    fold: bool = True,
    ack: str | None = None,
    header: bool = True,
    next_steps: Sequence[NextStep] = (),
) -> None:
    """Write the report to `file` (default stdout). The table on a terminal (`env`) is
    laid out at its width, coloured, folded unless `fold` is off; anywhere else it is
    one line per finding, unfolded and whole, for grep (coloured only under FORCE_COLOR).
    `header` False (`--no-header`): the findings' lines alone, the notes on stderr;
    `next_steps`: the table's last lines."""
    fmt = choose(AuditFormat, fmt)
    out = sys.stdout if file is None else file
    fold = fold and env.tty if fmt is AuditFormat.TABLE else fold
    if fmt is AuditFormat.TABLE and not header:
        warn_notes(report)
        out.write(render_audit(report, fmt, only=only, fold=fold, ack=ack, header=False))
    elif fmt is AuditFormat.TABLE and (env.tty or env.colour):
        from spurctl.render.table import OneLine  # the table's alone: JSON needs none of it

        console = terminal_console(out, env)
        view = audit_view(escaped(report), only=only, fold=fold, ack=ack, next_steps=next_steps)
        for renderable in view:
            # A command to paste goes out whole, however wide (never cropped or wrapped).
            console.print(renderable, soft_wrap=isinstance(renderable, OneLine))
    else:
        whole = fmt is AuditFormat.TABLE
        out.write(
            render_audit(
                report, fmt, only=only, fold=fold, ack=ack, whole=whole, next_steps=next_steps
            )
        )
    out.flush()


def warn_notes(report: AuditReport) -> None:
    """The report's warnings on stderr, one line each, where stdout carries rows alone
    (`--no-header`): an incomplete view must still be said."""
    from spurctl.render.terminal import warn_lines

    warn_lines(other_notes(escaped(report)))
