"""Show an AuditReport: the table for eyes, json/csv for scripts, markdown for
incident write-ups, prometheus for node_exporter's textfile collector.

`--format json` (the `spurctl.audit/v1` document) is the stable interface;
the table may change to read better. Every renderer sees the same report, so
the formats never disagree about what the audit found.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich is imported where a table is drawn: JSON, CSV and the rest need none
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.style import Style
    from rich.text import Text

from spurctl.model import Action, AuditReport, Finding, Kind, format_time
from spurctl.render.common import (
    ACTION_STYLE,
    NARROW,
    AuditFormat,
    choose,
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
    pipe_width,
    report_header,
    same_version,
    summary_line,
)
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


# -- --kind / --action: which findings a report shows ------------------------


@dataclass(frozen=True, slots=True)
class FindingFilter:
    """Which findings a report shows (`audit --kind`, `--action`; empty: any).

    It chooses the rows only: the summary, the JSON `summary` and the exit
    status are the whole report's, and every format says how many rows it hid.
    """

    kinds: tuple[Kind, ...] = ()
    actions: tuple[Action, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.kinds or self.actions)

    def keeps(self, f: Finding) -> bool:
        return (not self.kinds or f.kind in self.kinds) and (
            not self.actions or f.action in self.actions
        )

    def shown(self, findings: Sequence[Finding]) -> list[Finding]:
        return [f for f in findings if self.keeps(f)] if self.active else list(findings)

    def flags(self) -> str:
        """The filter as typed, e.g. `--kind active-elsewhere --action reclaim`."""
        return " ".join(
            [*(f"--kind {k.value}" for k in self.kinds)]
            + [f"--action {a.value}" for a in self.actions]
        )

    def sentence(self, total: int, shown: int) -> str:
        """One line: the filter is on, and what it hid from the rows."""
        hidden = total - shown
        return (
            f"Filter {self.flags()}: showing {shown} of {total} findings, "
            f"{hidden} hidden; the summary and the exit status count all {total}."
        )


NO_FILTER = FindingFilter()


# -- the json document -------------------------------------------------------


def _finding_to_dict(f: Finding) -> dict[str, Any]:
    """The contract's fields in order, then gpus, pids and what dates it (decide/onset.py)."""
    doc = {name: getattr(f, name) for name in FINDING_FIELDS}
    doc.update(kind=f.kind.value, action=f.action.value, gpus=list(f.gpus), pids=list(f.pids))
    evidence = None if f.since_evidence is None else f.since_evidence.value
    return {**doc, "since": format_time(f.since), "since_evidence": evidence}


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

    def _rows(self) -> list[_Row]:
        rows = []
        for i, (node, group) in enumerate(self.groups):
            shown = node_cell(node) if id(group[0]) in self._stands_for else node
            for j, f in enumerate(group):
                added = [self._cell(c, f) for c in self.columns]
                cells = [
                    shown if j == 0 else "",
                    job_text(f.job_id),
                    f.kind.value,
                    f.action.value,
                    live_text(f.live),
                    *(t.plain for t in added),
                ]
                styles = [str(t.style) or None for t in added]
                rows.append(_Row(f, cells, styles, i > 0 and j == 0))
        return rows

    def _headers(self) -> list[str]:
        return ["node", "job", "kind", "action", "live", *(c.name for c in self.columns)]

    def plain_lines(self, width: int) -> list[str] | None:
        """The wide table as lines of plain text, as rich would draw it, without rich:
        None when it is small (rich draws it) or the reasons have no room."""
        if width < NARROW or self.count <= FAST_ROWS:
            return None
        rows = self._rows()
        layout = _layout(width, self._headers(), rows)
        if layout is None:
            return None
        widths, reason_width = layout
        drawn = _drawn_lines(widths, reason_width, self._headers(), rows, None)
        return ["".join(text for text, _ in line).rstrip() for line in drawn]

    def whole_lines(self, header: bool = True) -> list[str]:
        """One line per finding, as a pipe wants them: every row names its node (a
        folded row its hostlist cell), the reason whole at the end of its line, never
        wrapped onto a line of its own; `header`: the column heading and its rule first."""
        rows = self._rows()
        for i, row in enumerate(rows):
            if not row.cells[0]:
                rows[i] = _Row(
                    row.finding, [rows[i - 1].cells[0], *row.cells[1:]], row.styles, False
                )
        headers = self._headers()
        widths = [_cells(h) for h in headers]
        for row in rows:
            for k, cell in enumerate(row.cells):
                widths[k] = max(widths[k], _cells(cell))
        gap = " " * _GAP
        out = []
        if header:
            head = gap.join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
            out += [f"{head}{gap}reason", "─" * (len(head) + _GAP + len("reason"))]
        for row in rows:
            cells = [c + " " * (w - _cells(c)) for c, w in zip(row.cells, widths, strict=True)]
            out.append(f"{gap.join(cells)}{gap}{row.finding.reason}".rstrip())
        return out

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
                for text in _wrapped(f.reason, width - _STACK_INDENT):
                    yield indent
                    yield Segment(text, reason_style)
                    yield newline

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich import box
        from rich.segment import Segment
        from rich.table import Table
        from rich.text import Text

        headers = self._headers()
        table_rows = self._rows()
        layout = _layout(options.max_width, headers, table_rows)
        if options.max_width < NARROW or layout is None:
            # Narrow, or columns too wide to leave the reasons room (a watch's history
            # beside a folded hostlist): each finding's reason on its own lines, rather
            # than rich cutting every cell short.
            yield from self._stacked(console, options.max_width)
            return
        if len(table_rows) > FAST_ROWS:
            widths, reason_width = layout
            newline = Segment.line()
            for pieces in _drawn_lines(widths, reason_width, headers, table_rows, console):
                for text, piece_style in pieces:
                    yield Segment(text, piece_style)
                yield newline
            return
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for name in headers:
            table.add_column(name, no_wrap=True)
        table.add_column("reason", ratio=1, overflow="fold")
        for row in table_rows:
            if row.new_section:
                table.add_section()
            cells = [Text(row.cells[0], style="bold"), *(Text(c) for c in row.cells[1:5])]
            cells += [
                Text(c, style=st or "") for c, st in zip(row.cells[5:], row.styles, strict=True)
            ]
            table.add_row(*cells, Text(row.finding.reason), style=ACTION_STYLE[row.finding.action])
        yield table


@dataclass(frozen=True, slots=True)
class _Row:
    """One row of the findings table: its finding, its cells' text before the reason,
    the styles of its added columns' cells, and whether a new node's section starts."""

    finding: Finding
    cells: list[str]
    styles: list[str | None]  # a Text's style, as text (rich parses it)
    new_section: bool


# Past this many rows the wide table is drawn by _drawn_lines, which lays out the
# same text as rich's Table line by line: rich measures every cell of every row,
# ~0.7 ms a row, 8 s for an 11,000-row audit (bench/audit_formats.py).
FAST_ROWS = 100
_STACK_INDENT = 10  # a reason's indent in the stacked layout
_GAP = 3  # between two columns: a cell's right padding, the (blank) rule, the next's left


def _cells(text: str) -> int:
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _layout(
    width: int, headers: Sequence[str], rows: Sequence[_Row]
) -> tuple[list[int], int] | None:
    """The no-wrap columns' widths and what is left for the reason, as rich's
    Table(box=SIMPLE_HEAD, pad_edge=False, show_edge=False) lays them out; None when
    the reason would have no room (rich then squeezes the columns)."""
    widths = [_cells(h) for h in headers]
    for row in rows:
        for k, cell in enumerate(row.cells):
            n = _cells(cell)
            if n > widths[k]:
                widths[k] = n
    reason_width = width - sum(widths) - _GAP * len(widths)
    if reason_width < 10:
        return None
    return widths, reason_width


Piece = tuple[str, "Style | None"]


def _drawn_lines(
    widths: Sequence[int],
    reason_width: int,
    headers: Sequence[str],
    rows: Sequence[_Row],
    console: Console | None,
) -> Iterator[list[Piece]]:
    """Each line of the table as its pieces of text and their styles (no styles
    without a console: plain text)."""
    gap = " " * _GAP
    width = sum(widths) + _GAP * len(widths) + reason_width

    def style(name: str | None) -> Style | None:
        return None if console is None or not name else console.get_style(name)

    action_style = {a: style(name) for a, name in ACTION_STYLE.items()}
    bold = style("bold")
    head = gap.join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    yield [(f"{head}{gap}reason".ljust(width), style("table.header"))]
    yield [("─" * width, None)]
    indent = " " * (width - reason_width)
    blank = " " * width
    for row in rows:
        if row.new_section:
            yield [(blank, None)]
        row_style = action_style[row.finding.action]
        cells = [c + " " * (w - _cells(c)) for c, w in zip(row.cells, widths, strict=True)]
        lines = _wrapped(row.finding.reason, reason_width)
        if console is None:
            yield [(gap.join(cells) + gap + lines[0], None)]
        else:
            node_style = row_style + bold if row_style and bold else row_style
            line: list[Piece] = [(cells[0], node_style), (gap + gap.join(cells[1:5]), row_style)]
            for cell, name in zip(cells[5:], row.styles, strict=True):
                extra = style(name)
                line.append((gap + cell, row_style + extra if row_style and extra else row_style))
            yield [*line, (gap + lines[0], row_style)]
        for rest in lines[1:]:
            yield [(indent + rest, row_style)]


def _wrapped(reason: str, width: int) -> list[str]:
    """The reason's lines at `width`, as rich folds a Text (words, then long words)."""
    if _cells(reason) <= width:
        return [reason]
    simple = reason.isascii() and reason.isprintable() and "  " not in reason
    if simple and reason.strip(" ") == reason:
        return _folded_words(reason, width)
    from rich.text import Text

    return [line.plain for line in Text(reason).wrap(_measuring(), width, overflow="fold")]


def _folded_words(text: str, width: int) -> list[str]:
    """Rich's Text.wrap(overflow="fold") for one-cell-per-character text with single
    spaces (rich takes 0.6 ms a line; a reason naming 10,000 scattered nodes has 500).
    As rich: a word carries its trailing space, fits if the line's length (spaces
    included) plus the word without its space is at most `width`, and a word longer
    than `width` starts a line and is cut into `width` pieces, its space included."""
    words = [f"{w} " for w in text.split(" ")]
    words[-1] = words[-1][:-1]
    lines: list[str] = []
    line = ""
    for word in words:
        size = len(word.rstrip(" "))
        if width - len(line) >= size:
            line += word
        elif size > width:
            if line:
                lines.append(line)
            pieces = [word[i : i + width] for i in range(0, len(word), width)]
            lines += pieces[:-1]
            line = pieces[-1]
        else:
            lines.append(line)
            line = word
    lines.append(line)
    return [ln[:width] if len(ln) > width and not ln[width:].strip(" ") else ln for ln in lines]


@functools.cache
def _measuring() -> Console:
    from rich.console import Console

    return Console(file=io.StringIO(), color_system=None, width=10_000)


def acknowledged(report: AuditReport, ack: str | None) -> bool:
    """Whether the operator acknowledged this controller's version (--ack-version,
    SPURCTL_ACK_VERSION, config ack_version): `v0.8.0` and `0.8.0` are one version."""
    return same_version(ack, report.controller_version)


def other_notes(report: AuditReport) -> list[str]:
    """The notes a screen shows in full: all but the controller-version note."""
    return [note for note in report.notes if note != report.version_note]


def version_text(report: AuditReport, *, ack: str | None = None, tell: bool = True) -> list[Text]:
    """The controller-version note as a screen shows it: one line cut to the width (its
    whole text is in explain and JSON notes); none once told (`tell` false), or when
    the operator acknowledged the version (`ack`)."""
    from rich.text import Text

    if not report.version_line or not tell or acknowledged(report, ack):
        return []
    line = f"NOTE: {report.version_line}"
    return [Text(line, style="yellow", no_wrap=True, overflow="ellipsis")]


def screen_notes(
    report: AuditReport, *, ack: str | None = None, tell_version: bool = True
) -> list[Text]:
    """The notes on a screen: each WARNING in full, then the version line."""
    from rich.text import Text

    warnings = [Text(f"WARNING: {note}", style="bold yellow") for note in other_notes(report)]
    return warnings + version_text(report, ack=ack, tell=tell_version)


def audit_view(
    report: AuditReport,
    findings: Sequence[Finding] | None = None,
    columns: Sequence[Column] = (),
    after_findings: Iterable[RenderableType] = (),
    only: FindingFilter = NO_FILTER,
    fold: bool = True,
    ack: str | None = None,
) -> list[RenderableType]:
    """The notes, the findings (default: the report's) `only` keeps or that there are
    none, `after_findings`, the filter's line when one is on, then the summary and where
    the view came from. `fold`: one row for findings that differ only in their node;
    `ack`: the acknowledged controller version (screen_notes)."""
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
    return out


def plain_text(
    renderables: Iterable[RenderableType], console_width: int | None, *, whole: bool = False
) -> str:
    """Renderables as text without colour, at `console_width` (default: pipe_width());
    `whole`: the findings one to a line however wide (FindingsTable.whole_lines)."""
    from rich.console import Console

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
    for renderable in renderables:
        lines = None
        if isinstance(renderable, FindingsTable):
            lines = renderable.whole_lines() if whole else renderable.plain_lines(console.width)
        if lines is None:
            console.print(renderable)
        else:  # a large table, drawn without rich (FindingsTable.plain_lines)
            buf.write("".join(f"{line}\n" for line in lines))
    # rich pads every line to the console width; strip it so the text diffs and greps cleanly.
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def terminal_console(file: TextIO | None = None) -> Console:
    """A console for a terminal that takes every string as text, never as markup."""
    # rich decides colour here, so NO_COLOR, FORCE_COLOR and TERM=dumb are honoured.
    from rich.console import Console

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
    buf = io.StringIO()
    # "\n", not csv's default "\r\n": this goes to a terminal or a Unix pipe.
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(FINDING_FIELDS)
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
        lines.append(f"> **Warning:** {note_lines[0]}")
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


def _render_prometheus(report: AuditReport, only: FindingFilter = NO_FILTER) -> str:
    from spurctl.render.prometheus import render_prometheus

    return render_prometheus(report, only)


_RENDERERS: dict[AuditFormat, Callable[[AuditReport, FindingFilter], str]] = {
    AuditFormat.JSON: lambda r, only: dump_json(audit_document(r, only)) + "\n",
    AuditFormat.CSV: _render_csv,
    AuditFormat.PROMETHEUS: _render_prometheus,
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
) -> str:
    """The report as text in `fmt`, ending in a newline; the table has no colour.

    `console_width` sets the table's width (default: $COLUMNS, else 120); the
    other formats ignore it. `only` chooses the findings shown (see FindingFilter).
    `fold`: the table and Markdown draw findings that differ only in their node as
    one row (JSON, CSV and Prometheus keep one record per finding). `whole`: the
    table as a pipe or a file gets it, one finding per line, its reason never wrapped;
    `header` False (`--no-header`): those lines alone, no heading, notes or summary.
    """
    fmt = choose(AuditFormat, fmt)
    if fmt in (AuditFormat.JSON, AuditFormat.CSV, AuditFormat.PROMETHEUS):
        return _RENDERERS[fmt](report, only)  # each quotes or escapes what it must
    report = escaped(report)
    if fmt is AuditFormat.TABLE and not header:
        shown = only.shown(report.findings)
        lines = FindingsTable(shown, fold=fold).whole_lines(header=False) if shown else []
        return "".join(f"{line}\n" for line in lines)
    if fmt is AuditFormat.TABLE:
        view = audit_view(report, only=only, fold=fold, ack=ack)
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
    return f"spurctl: note: {only.sentence(len(report.findings), shown)}"


def print_audit(
    report: AuditReport,
    fmt: AuditFormat | str,
    file: TextIO | None = None,
    *,
    only: FindingFilter = NO_FILTER,
    fold: bool = True,
    ack: str | None = None,
    header: bool = True,
) -> None:
    """Write the report to `file` (default stdout); the table is coloured on a terminal,
    and one finding per line down a pipe. `header` False (`--no-header`): the findings'
    lines alone, the notes on stderr."""
    fmt = choose(AuditFormat, fmt)
    out = sys.stdout if file is None else file
    # FORCE_COLOR colours a table sent down a pipe (`| less -R`); NO_COLOR wins over it,
    # as rich decides.
    forced = bool(os.environ.get("FORCE_COLOR")) and not os.environ.get("NO_COLOR")
    if fmt is AuditFormat.TABLE and not header:
        warn_notes(report)
        out.write(render_audit(report, fmt, only=only, fold=fold, ack=ack, header=False))
    elif fmt is AuditFormat.TABLE and (out.isatty() or forced):
        console = terminal_console(out)
        if not out.isatty():
            console.width = pipe_width()
        for renderable in audit_view(escaped(report), only=only, fold=fold, ack=ack):
            console.print(renderable)
    else:
        whole = fmt is AuditFormat.TABLE
        out.write(render_audit(report, fmt, only=only, fold=fold, ack=ack, whole=whole))
    out.flush()


def warn_notes(report: AuditReport) -> None:
    """The report's warnings on stderr, one line each, where stdout carries rows alone
    (`--no-header`): an incomplete view must still be said."""
    from spurctl.render.terminal import warn_lines

    warn_lines(other_notes(escaped(report)))
