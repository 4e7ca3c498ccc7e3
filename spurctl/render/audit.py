"""Show an AuditReport: the table for eyes, json/csv for scripts, markdown for
incident write-ups, prometheus for node_exporter's textfile collector.

`--format json` (the `spurctl.audit/v1` document) is the stable interface;
the table may change to read better. Every renderer sees the same report, so
the formats never disagree about what the audit found.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from tabulate import tabulate

from spurctl.errors import SpurctlError
from spurctl.model import Action, AuditReport, Finding, Kind, format_time
from spurctl.sources.documents import dump_json

AUDIT_SCHEMA = "spurctl.audit/v1"
FORMATS = ("table", "json", "csv", "markdown", "prometheus")

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
)

# Most urgent first: what an operator acts on belongs at the top.
_ACTION_RANK = {Action.RECLAIM: 0, Action.INVESTIGATE: 1, Action.SPARE: 2, Action.NONE: 3}
ACTION_STYLE = {
    Action.RECLAIM: "red",
    Action.INVESTIGATE: "yellow",
    Action.SPARE: "cyan",
    Action.NONE: "green",
}


# -- the json document -------------------------------------------------------


def _finding_to_dict(f: Finding) -> dict[str, Any]:
    return {
        "node": f.node,
        "job_id": f.job_id,
        "kind": f.kind.value,
        "action": f.action.value,
        "live": f.live,
        "reason": f.reason,
        "controller_state": f.controller_state,
        "allocated_nodes": f.allocated_nodes,
        "gpus": list(f.gpus),
        "pids": list(f.pids),
    }


def audit_document(report: AuditReport) -> dict[str, Any]:
    """The `spurctl.audit/v1` document (docs/contract.md, "Documents"), findings in report order."""
    return {
        "schema": AUDIT_SCHEMA,
        "controller": {
            "address": report.controller_address,
            "version": report.controller_version,
            "taken_at": format_time(report.taken_at),
        },
        "watermark": {"value": report.watermark.value, "source": str(report.watermark.source)},
        "view": {
            "complete": report.view_complete,
            "jobs_seen": report.jobs_seen,
            "jobs_total": report.jobs_total,
        },
        "notes": list(report.notes),
        "findings": [_finding_to_dict(f) for f in report.findings],
        "summary": {
            "nodes": report.nodes_in_scope,
            "nodes_inventoried": report.nodes_inventoried,
            "by_kind": report.by_kind,
            "needs_action": report.needs_action,
        },
    }


# -- shared by the human formats ---------------------------------------------


def _natural_key(name: str) -> tuple[Any, ...]:
    # gpu2 before gpu10, as an operator reads a hostlist; re.split with a group
    # alternates text and digits, so equal positions always compare like types.
    parts = re.split(r"(\d+)", name)
    return (*(int(p) if i % 2 else p.lower() for i, p in enumerate(parts)), name)


def grouped(findings: Iterable[Finding]) -> list[tuple[str, list[Finding]]]:
    """Findings grouped by node, most urgent row first in each group, and the
    groups holding the most urgent rows first (then by node name)."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.node, []).append(f)
    for rows in groups.values():
        rows.sort(key=lambda f: (_ACTION_RANK[f.action], f.job_id is None, f.job_id or 0))
    return sorted(groups.items(), key=lambda g: (_ACTION_RANK[g[1][0].action], _natural_key(g[0])))


def live_text(live: bool | None) -> str:
    return "" if live is None else ("yes" if live else "no")


def job_text(job_id: int | None) -> str:
    return "-" if job_id is None else str(job_id)


def summary_line(report: AuditReport) -> str:
    counts = report.by_kind
    # Contract order, so the same kinds always appear in the same place.
    by_kind = ", ".join(f"{k.value} {counts[k.value]}" for k in Kind if k.value in counts)
    return (
        f"{report.nodes_in_scope} nodes in scope, {report.nodes_inventoried} inventoried; "
        f"findings: {by_kind or 'none'}; {report.needs_action} need action."
    )


def context_line(report: AuditReport) -> str:
    if report.view_complete:
        view = f"complete ({report.jobs_seen} jobs)"
    else:
        view = f"INCOMPLETE ({report.jobs_seen} of {report.jobs_total} jobs seen)"
    version = f" (version {report.controller_version})" if report.controller_version else ""
    return (
        f"Controller {report.controller_address}{version}, view taken "
        f"{format_time(report.taken_at)}: {view}; watermark {report.watermark.value} "
        f"({report.watermark.source})."
    )


def _no_discrepancies(report: AuditReport) -> str:
    return (
        f"No discrepancies: {report.nodes_in_scope} nodes, {report.nodes_inventoried} inventoried."
    )


# -- table -------------------------------------------------------------------


# Below this many columns the reason column would be squeezed to a sliver: each
# finding's reason goes on its own indented line instead.
NARROW = 110
_PIPE_WIDTH = 120


def _table_renderables(report: AuditReport, width: int) -> list[RenderableType]:
    # Every piece of report text goes in as Text, never as a markup string:
    # hostlists like gpu[001-004] would otherwise be eaten as rich markup.
    out: list[RenderableType] = [
        Text(f"WARNING: {note}", style="bold yellow") for note in report.notes
    ]
    if not report.findings:
        out.append(Text(_no_discrepancies(report), style="green"))
    elif width < NARROW:
        for node, rows in grouped(report.findings):
            out.append(Text(node, style="bold"))
            for f in rows:
                style = ACTION_STYLE[f.action]
                head = f"  {job_text(f.job_id):>6}  {f.kind.value}  {f.action.value}"
                if f.live is not None:
                    head += f"  live: {live_text(f.live)}"
                out.append(Text(head, style=style))
                out.append(Padding(Text(f.reason, style=style), (0, 0, 0, 10)))
    else:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for name in ("node", "job", "kind", "action", "live"):
            table.add_column(name, no_wrap=True)
        table.add_column("reason", ratio=1, overflow="fold")
        for i, (node, rows) in enumerate(grouped(report.findings)):
            if i:
                table.add_section()
            for j, f in enumerate(rows):
                table.add_row(
                    Text(node if j == 0 else "", style="bold"),
                    Text(job_text(f.job_id)),
                    Text(f.kind.value),
                    Text(f.action.value),
                    Text(live_text(f.live)),
                    Text(f.reason),
                    style=ACTION_STYLE[f.action],
                )
        out.append(table)
    out.append(Text(summary_line(report), style="bold"))
    out.append(Text(context_line(report), style="dim"))
    return out


def pipe_width() -> int:
    """Width for output that is not a terminal: $COLUMNS, else wide enough for the table."""
    try:
        return int(os.environ.get("COLUMNS", "")) or _PIPE_WIDTH
    except ValueError:
        return _PIPE_WIDTH


def _render_table(report: AuditReport, console_width: int | None) -> str:
    buf = io.StringIO()
    width = console_width or pipe_width()
    console = Console(
        file=buf,
        width=width,
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
        markup=False,
    )
    for renderable in _table_renderables(report, width):
        console.print(renderable)
    # rich pads every line to the console width; strip it so the text diffs and greps cleanly.
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


# -- csv ---------------------------------------------------------------------


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"  # as in the json, not Python's True/False
    return value


def _render_csv(report: AuditReport) -> str:
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
            )
        ]
        for f in report.findings
    )
    return buf.getvalue()


# -- markdown ----------------------------------------------------------------


def _md_cell(text: str) -> str:
    # A raw | ends the cell and a newline ends the table; a backslash is escaped
    # first so one already in the text cannot swallow the pipe escape.
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.splitlines())


def _render_markdown(report: AuditReport) -> str:
    lines = ["# spurctl audit", "", context_line(report), ""]
    for note in report.notes:
        note_lines = note.splitlines() or [""]
        lines.append(f"> **Warning:** {note_lines[0]}")
        lines.extend(f"> {extra}" for extra in note_lines[1:])
        lines.append("")
    lines += [f"**Summary:** {summary_line(report)}", ""]
    if not report.findings:
        lines.append(_no_discrepancies(report))
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
        rows = [
            [
                _md_cell(f.node),
                job_text(f.job_id),
                f.kind.value,
                f.action.value,
                live_text(f.live),
                _md_cell(f.controller_state or ""),
                _md_cell(f.allocated_nodes or ""),
                _md_cell(f.reason),
            ]
            for _, group in grouped(report.findings)
            for f in group
        ]
        # numparse off: a node named "1e3" or a job id must print as written.
        lines.append(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    return "\n".join(lines) + "\n"


# -- prometheus --------------------------------------------------------------


def _label_value(value: str) -> str:
    """Escape a label value per the Prometheus text exposition format."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _render_prometheus(report: AuditReport) -> str:
    lines: list[str] = []

    def family(name: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        # HELP and TYPE even without samples, so the family is always documented.
        lines.append(f"# HELP spurctl_{name} {help_text}")
        lines.append(f"# TYPE spurctl_{name} gauge")
        lines.extend(f"spurctl_{name}{labels} {_number(v)}" for labels, v in samples)

    counts = report.by_kind
    reclaimable: dict[str, int] = {}
    for f in report.findings:
        if f.action is Action.RECLAIM:
            reclaimable[f.node] = reclaimable.get(f.node, 0) + 1

    # Every kind gets a series, 0 when absent, so alert rules never see one vanish.
    family(
        "findings",
        "Findings of the last spurctl audit, by kind.",
        [(f'{{kind="{_label_value(k.value)}"}}', counts.get(k.value, 0)) for k in Kind],
    )
    family(
        "node_reclaimable_holdings",
        "Holdings on the node that the last spurctl audit found reclaimable.",
        [
            (f'{{node="{_label_value(node)}"}}', reclaimable[node])
            for node in sorted(reclaimable, key=_natural_key)
        ],
    )
    family(
        "findings_needing_action",
        "Findings of the last spurctl audit whose action is reclaim or investigate.",
        [("", report.needs_action)],
    )
    family("nodes_in_scope", "Nodes the last spurctl audit covered.", [("", report.nodes_in_scope)])
    family(
        "nodes_inventoried",
        "Nodes whose holdings the last spurctl audit could read.",
        [("", report.nodes_inventoried)],
    )
    family(
        "controller_view_complete",
        "1 when the controller returned every job it tracks, 0 when its answer was partial.",
        [("", 1 if report.view_complete else 0)],
    )
    family(
        "watermark",
        "Lowest job id the controller had not issued, as the last spurctl audit took it.",
        [("", report.watermark.value)],
    )
    family(
        "audit_timestamp_seconds",
        "Unix time of the controller view the last spurctl audit used.",
        [("", report.taken_at.timestamp())],
    )
    return "\n".join(lines) + "\n"


# -- entry points ------------------------------------------------------------

_RENDERERS: dict[str, Callable[[AuditReport], str]] = {
    "json": lambda r: dump_json(audit_document(r)) + "\n",
    "csv": _render_csv,
    "markdown": _render_markdown,
    "prometheus": _render_prometheus,
}


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise SpurctlError(f"unknown format {fmt!r}; use table, json, csv, markdown or prometheus")


def render_audit(report: AuditReport, fmt: str, *, console_width: int | None = None) -> str:
    """The report as text in `fmt`, ending in a newline; the table has no colour.

    `console_width` sets the table's width (default: $COLUMNS or the terminal's,
    else 80); the other formats ignore it.
    """
    check_format(fmt)
    if fmt == "table":
        return _render_table(report, console_width)
    return _RENDERERS[fmt](report)


def print_audit(report: AuditReport, fmt: str, file: TextIO | None = None) -> None:
    """Write the report to `file` (default stdout); the table is coloured on a terminal."""
    check_format(fmt)
    out = sys.stdout if file is None else file
    if fmt == "table" and out.isatty():
        # rich decides colour here, so NO_COLOR, FORCE_COLOR and TERM=dumb are honoured.
        console = Console(file=out, highlight=False, emoji=False, markup=False)
        for renderable in _table_renderables(report, console.width):
            console.print(renderable)
    else:
        out.write(render_audit(report, fmt))
    out.flush()
