"""`spurctl audit --columns/-O`: the findings table with the columns an operator chose,
in the order chosen (as `sinfo -O` and `squeue -O`).

One finding per line, the columns aligned, each cell whole (a reason is never
wrapped: a terminal soft-wraps what is wider than it); on a terminal, findings that
differ only in their node are one row naming the hostlist (as the default table,
unless -N), down a pipe or into a file one line per finding, for grep. The notes
come first and the summary and the view's line last, as in the default table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from spurctl.model import AuditReport, Finding
from spurctl.render.audit import screen_notes
from spurctl.render.common import (
    context_line,
    escaped,
    folded,
    job_text,
    live_text,
    no_discrepancies,
    node_cell,
    summary_line,
    write_output,
)
from spurctl.render.finding_filter import NO_FILTER, FindingFilter
from spurctl.render.since import since_text


def _inventory_age(f: Finding, _: datetime) -> str:
    if f.inventory_age_s is None:
        return "-"
    from spurctl.decide.reasons import duration

    age = duration(abs(f.inventory_age_s))
    return f"{age} ahead" if f.inventory_age_s < 0 else age


# Column name -> its cell, given the finding and the report's time (for `since`).
CELLS: dict[str, Callable[[Finding, datetime], str]] = {
    "node": lambda f, _: f.node,
    "job": lambda f, _: job_text(f.job_id),
    "kind": lambda f, _: f.kind.value,
    "action": lambda f, _: f.action.value,
    "live": lambda f, _: live_text(f.live) or "-",
    "since": lambda f, at: since_text(f.since, f.since_evidence, at),
    "controller-state": lambda f, _: f.controller_state or "-",
    "allocated-nodes": lambda f, _: f.allocated_nodes or "-",
    "gpus": lambda f, _: ",".join(map(str, f.gpus)) or "-",
    "pids": lambda f, _: ",".join(map(str, f.pids)) or "-",
    "inventory-age": _inventory_age,
    "reason": lambda f, _: f.reason,
}
COLUMN_NAMES = tuple(CELLS)
_GAP = "  "


def column_name(typed: str) -> str | None:
    """The column `typed` names (case and `_` for `-` as the operator likes), or None."""
    name = typed.strip().lower().replace("_", "-")
    return name if name in CELLS else None


def column_lines(
    report: AuditReport,
    columns: Sequence[str],
    findings: Sequence[Finding],
    *,
    fold: bool,
    header: bool = True,
) -> list[str]:
    """`findings` (already filtered) as aligned lines of `columns`, the heading first
    unless `header` is False; `fold`: one row for findings that differ only in their node."""
    at = report.taken_at
    shown: list[tuple[Finding, Finding]]
    if fold and "node" in columns:
        others = [c for c in columns if c not in ("node", "reason")]
        shown = folded(findings, lambda f: tuple(CELLS[c](f, at) for c in others))
    else:
        shown = [(f, f) for f in findings]
    stands_for = {id(drawn) for drawn, first in shown if drawn is not first}
    rows = []
    for drawn, _ in shown:
        cells = [CELLS[c](drawn, at) for c in columns]
        if id(drawn) in stands_for and "node" in columns:
            cells[columns.index("node")] = node_cell(drawn.node)
        rows.append(cells)
    if header:
        rows.insert(0, list(columns))
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(len(columns))]
    return [
        _GAP.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def render_columns(
    report: AuditReport,
    columns: Sequence[str],
    *,
    only: FindingFilter = NO_FILTER,
    fold: bool = True,
    ack: str | None = None,
    header: bool = True,
) -> str:
    """The report as text: its notes, the chosen columns of the findings `only` keeps
    (render.audit.FindingFilter), the filter's line, the summary and the view's line;
    `header` False (`--no-header`): the finding lines alone."""
    chosen = only
    report = escaped(report)
    findings = chosen.shown(report.findings)
    if not header:
        return "".join(
            f"{line}\n" for line in column_lines(report, columns, findings, fold=fold, header=False)
        )
    lines = [text.plain for text in screen_notes(report, ack=ack)]
    if findings:
        lines += column_lines(report, columns, findings, fold=fold)
    elif chosen.active and report.findings:
        lines.append(f"No finding matches {chosen.flags()}.")
    else:
        lines.append(no_discrepancies(report))
    if chosen.active:
        lines.append(chosen.sentence(len(report.findings), len(findings)))
    lines += [summary_line(report), context_line(report)]
    return "".join(f"{line}\n" for line in lines)


def show_columns(
    report: AuditReport,
    columns: Sequence[str],
    only: FindingFilter,
    output: Path | None,
    *,
    fold: bool,
    ack: str | None = None,
    header: bool = True,
) -> None:
    """The report with the chosen columns on stdout, or whole into `output`; with
    `header` False its warnings go to stderr."""
    if not header:
        from spurctl.render.audit import warn_notes

        warn_notes(report)
    text = render_columns(report, columns, only=only, fold=fold, ack=ack, header=header)
    write_output(text, output)
