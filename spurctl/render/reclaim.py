"""What `spurctl reclaim` shows: the plan before, the outcome after."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from spurctl.act.journal import Unresolved
from spurctl.decide.classify import id_ranges
from spurctl.model import AuditReport
from spurctl.reclaim import Entry, ReclaimRun, Result
from spurctl.render.audit import pipe_width

RESULT_STYLE = {Result.SENT: "green", Result.SKIPPED: "yellow", Result.FAILED: "red"}


def _console(file: TextIO | None) -> Console:
    out = file or sys.stdout
    width = None if out.isatty() else pipe_width()
    return Console(file=out, width=width, soft_wrap=False, highlight=False)


def _stops(entry: Entry) -> str:
    f = entry.finding
    parts = []
    if f.live:
        parts.append(f"{len(f.pids)} process{'es' if len(f.pids) > 1 else ''}")
    if f.gpus:
        parts.append(f"GPU{'s' if len(f.gpus) > 1 else ''} {id_ranges(f.gpus)}")
    return ", ".join(parts) or "reservation only"


def print_unresolved(items: Sequence[Unresolved], file: TextIO | None = None) -> None:
    if not items:
        return
    console = _console(file)
    console.print(
        f"[bold yellow]WARNING:[/] the journal has {len(items)} cancel(s) sent or about to be "
        "sent by an interrupted run, with no recorded outcome:"
    )
    for u in items:
        console.print(f"  unknown: check the node — job {u.job_id} on {u.node} ({u.kind}, {u.at})")


def print_plan(entries: Sequence[Entry], report: AuditReport, file: TextIO | None = None) -> None:
    console = _console(file)
    for note in report.notes:
        console.print(f"[bold yellow]NOTE:[/] {note}")
    if not entries:
        console.print("Nothing to reclaim on these nodes.")
        return
    table = Table(title=f"Reclaim plan: {len(entries)} cancel(s)", title_justify="left")
    for col in ("node", "job", "kind", "will stop", "why"):
        table.add_column(col, overflow="fold")
    for e in entries:
        table.add_row(e.node, str(e.job_id), e.finding.kind.value, _stops(e), e.finding.reason)
    console.print(table)
    live = sum(1 for e in entries if e.finding.live)
    console.print(
        f"{len(entries)} cancel(s) on {len({e.node for e in entries})} node(s); "
        f"{live} live run(s) will be stopped (agent CancelJob, signal 0, that node only)."
    )


def run_document(
    run: ReclaimRun | None, entries: Sequence[Entry], report: AuditReport, *, dry_run: bool
) -> dict[str, Any]:
    outcomes = run.outcomes if run else []
    return {
        "schema": "spurctl.reclaim/v1",
        "dry_run": dry_run,
        "controller": report.controller_address,
        "watermark": {"value": report.watermark.value, "source": str(report.watermark.source)},
        "plan": [
            {
                "node": e.node,
                "job_id": e.job_id,
                "kind": e.finding.kind.value,
                "live": e.finding.live,
                "gpus": list(e.finding.gpus),
                "pids": list(e.finding.pids),
                "agent": e.address,
                "reason": e.finding.reason,
            }
            for e in entries
        ],
        "outcomes": [
            {
                "node": o.entry.node,
                "job_id": o.entry.job_id,
                "kind": o.entry.finding.kind.value,
                "result": o.result.value,
                "detail": o.detail,
            }
            for o in outcomes
        ],
        "not_attempted": [
            {"node": e.node, "job_id": e.job_id} for e in (run.not_attempted if run else [])
        ],
        "summary": {
            "planned": len(entries),
            **{r.value: sum(1 for o in outcomes if o.result is r) for r in Result},
            "interrupted": bool(run and run.interrupted),
        },
    }


def print_run(
    run: ReclaimRun | None,
    entries: Sequence[Entry],
    report: AuditReport,
    *,
    fmt: str,
    dry_run: bool = False,
    file: TextIO | None = None,
) -> None:
    if fmt == "json":
        doc = run_document(run, entries, report, dry_run=dry_run)
        (file or sys.stdout).write(json.dumps(doc, indent=2) + "\n")
        return
    if run is None:
        return
    console = _console(file)
    table = Table(title="Reclaim result", title_justify="left")
    for col in ("node", "job", "kind", "result", "detail"):
        table.add_column(col, overflow="fold")
    for o in run.outcomes:
        style = RESULT_STYLE[o.result]
        table.add_row(
            o.entry.node,
            str(o.entry.job_id),
            o.entry.finding.kind.value,
            f"[{style}]{o.result.value}[/]",
            o.detail,
        )
    for e in run.not_attempted:
        table.add_row(
            e.node, str(e.job_id), e.finding.kind.value, "[red]not sent[/]", "interrupted"
        )
    console.print(table)
    counts = {r: sum(1 for o in run.outcomes if o.result is r) for r in Result}
    line = ", ".join(f"{counts[r]} {r.value}" for r in Result)
    if run.not_attempted:
        line += f", {len(run.not_attempted)} not sent (interrupted)"
    console.print(f"{len(entries)} planned: {line}.")
