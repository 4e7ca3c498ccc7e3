"""What `spurctl journal` shows: each run of the reclaim journal, newest first.

Node names, operators and details come from the journal file: they reach the
terminal as Text, never as rich markup.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.text import Text

from spurctl.decide.reasons import plural
from spurctl.decide.repair import stopped_sentence
from spurctl.hostlist import fold
from spurctl.model import format_time, parse_time
from spurctl.render.common import (
    ReclaimFormat,
    choose,
    console_for,
    dump_json,
    escaped,
    text_time,
)
from spurctl.render.environment import Environment
from spurctl.render.table import Row, Table

if TYPE_CHECKING:
    from spurctl.usecases.journal_runs import JournalRuns, Run

SCHEMA = "spurctl.journal-runs/v1"


# Where no Environment is given: not a terminal (every line whole).
PIPE = Environment()


def _console(file: TextIO | None, env: Environment) -> Console:
    return console_for(env, file)  # the data is escaped before it is drawn


def when(at: str | None) -> str:
    """`2026-12-02 14:47 UTC` for a record's time (render.common.text_time, as every
    screen says a time); the text as written if it is not one."""
    try:
        value = parse_time(at)
    except (ValueError, TypeError):
        value = None
    if value is None:
        return at or "?"
    return text_time(value)


def missing_sentence(view: JournalRuns) -> str:
    return f"no reclaim has been journaled at {view.path}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def run_document(run: Run, *, records: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "run": run.run,
        "legacy": run.legacy,
        "commands": run.commands,
        "clusters": run.clusters,
        "operators": run.operators,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "nodes": fold(run.nodes),
        "intents": run.intents,
        "sent": run.sent,
        "confirmed": run.confirmed,
        "unconfirmed": run.unconfirmed,
        "done": run.done,
        "skipped": run.skipped,
        "failed": run.failed,
        "other": run.other,
        "interrupted": run.interrupted,
        "stopped_by": run.stopped_by,
        "not_sent": run.not_sent,
        "no_outcome": [
            {
                "node": u.node,
                "job_id": u.job_id,
                "kind": u.kind,
                "command": u.command,
                "step": u.step,
                "at": u.at,
                "closed_later": u.closed_later,
            }
            for u in run.no_outcome
        ],
    }
    if records:
        doc["records"] = run.records
    return doc


def document(view: JournalRuns, runs: list[Run], *, records: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "journal": str(view.path),
        "exists": view.exists,
        "unreadable_lines": view.unreadable,
        "total_runs": len(view.runs),
    }
    only = view.filter
    if only is not None:
        doc["filter"] = {
            "nodes": only.nodes,
            "exclude": only.exclude,
            "since": format_time(only.since),
            "cluster": only.cluster,
            "runs_in_journal": view.in_journal,
        }
    doc["runs"] = [run_document(r, records=records) for r in runs]
    doc["repairs_not_finished"] = [
        {"node": p.node, "run": p.run, "stopped": stopped_sentence(p), "removed": p.removed}
        for p in view.repairs
    ]
    return doc


def filter_words(view: JournalRuns) -> str:
    """'--node gpu017 --since 2026-12-02T12:00:00Z': the filter as the operator gave it."""
    only = view.filter
    if only is None:
        return ""
    words = [
        f"{flag} {value}"
        for flag, value in (
            ("--node", only.nodes),
            ("-x", only.exclude),
            ("--since", format_time(only.since)),
            ("--cluster", only.cluster),
        )
        if value is not None
    ]
    return " ".join(words)


def outcome_words(run: Run) -> list[tuple[str, str]]:
    """`9 sent (9 unconfirmed)`, `1 skipped`, `2 failed`, `7 not sent`, `1 without an
    outcome`, and `interrupted (SIGINT)` for a run a signal stopped: the ones that apply."""
    words: list[tuple[str, str]] = []
    if run.cancels_sent:
        sent = f"{run.cancels_sent} sent"
        if run.unconfirmed:
            sent += f" ({run.unconfirmed} unconfirmed)"
        words.append((sent, "yellow" if run.unconfirmed else "green"))
    for word, count in run.done.items():  # drained, resumed, repaired, released, incomplete
        words.append((f"{count} {word}", "yellow" if word == "incomplete" else "green"))
    if run.skipped:
        words.append((f"{run.skipped} skipped", "yellow"))
    if run.failed:
        words.append((f"{run.failed} failed", "red"))
    if run.other:
        words.append((f"{run.other} other", ""))
    if run.not_sent:
        words.append((f"{run.not_sent} not sent", "yellow"))
    if run.no_outcome:
        words.append((f"{len(run.no_outcome)} without an outcome", "bold red"))
    if run.stopped_by is not None:
        words.append((f"interrupted ({run.stopped_by})", "bold yellow"))
    return words or [("nothing recorded", "")]


def _run_style(run: Run) -> str | None:
    """A run's row colour: its most worrying outcome's (outcome_words)."""
    styles = [style for _, style in outcome_words(run)]
    for worst in ("bold red", "red", "bold yellow", "yellow", "green"):
        if worst in styles:
            return worst
    return None


def outcomes_text(run: Run) -> Text:
    parts: list[tuple[str, str] | str] = []
    for i, (word, style) in enumerate(outcome_words(run)):
        if i:
            parts.append(", ")
        parts.append((word, style))
    return Text.assemble(*parts)


def _interrupted_lines(run: Run) -> list[Text]:
    lines = []
    for u in run.no_outcome:
        later = "; a later run closed it as unknown" if u.closed_later else ""
        what = f"job {u.job_id} on {u.node}"
        if u.command not in ("reclaim", "node-release"):  # a node administration's call
            what = " ".join(filter(None, (u.command, u.step))) + f" of {u.node}"
            what += f" for job {u.job_id}" if u.job_id else ""
        lines.append(Text(f"  {what} ({u.kind}, intent {when(u.at)}): check the node{later}"))
    return lines


def _interrupted_head(run: Run, named: bool = True) -> Text:
    which = f"run {run.run} left" if named else "the run left"
    return Text.assemble(
        ("INTERRUPTED:", "bold red"),
        f" {which} {_plural(len(run.no_outcome), 'intent')} without an outcome: "
        "its cancel may or may not have gone out",
    )


def _stopped_line(run: Run) -> Text:
    not_sent = f": {_plural(run.not_sent, 'cancel')} not sent" if run.not_sent else ""
    return Text.assemble(
        ("INTERRUPTED:", "bold yellow"),
        f" the run was stopped by {run.stopped_by}{not_sent} (its `interrupted` records)",
    )


_HEADINGS = ("run", "when", "operator", "cluster", "command", "nodes")


def cluster_cell(run: Run) -> str:
    """The clusters a run's records name (their name, else controller), `-` for none."""
    return ", ".join(run.clusters) or "-"


def command_cell(run: Run) -> str:
    return ", ".join(run.commands) or "-"


def print_runs(
    view: JournalRuns,
    runs: list[Run],
    *,
    fmt: ReclaimFormat | str,
    file: TextIO | None = None,
    env: Environment = PIPE,
) -> None:
    """The runs as a table (newest first) with every interrupted run spelled out, or JSON;
    `env`: stdout's terminal (down a pipe, each run is one line)."""
    out = file or sys.stdout
    if choose(ReclaimFormat, str(fmt), "journal") is ReclaimFormat.JSON:
        out.write(dump_json(document(view, runs)) + "\n")
        return
    view, runs = escaped((view, runs))
    console = _console(out, env)
    if not view.exists:
        console.print(Text(missing_sentence(view)))
        return
    matching = ""
    if view.filter is not None:
        matching = f" matching {filter_words(view)} (of {view.in_journal})"
    if not view.runs:
        empty = f"no run{matching}" if matching else "no readable record"
        console.print(Text(f"the journal at {view.path} holds {empty}"))
        return
    shown = f"newest {len(runs)} of {len(view.runs)}" if len(runs) < len(view.runs) else "all"
    # A line of its own: a table's title wraps at the table's width.
    console.print(
        Text(
            f"Journal {view.path}: {_plural(len(view.runs), 'run')}{matching} "
            f"({shown}, newest first)"
        ),
        soft_wrap=True,
    )
    cells = [
        (
            Text(r.run),
            Text(when(r.started_at)),
            Text(", ".join(r.operators) or "?"),
            Text(cluster_cell(r)),
            Text(command_cell(r)),
            Text(fold(r.nodes)),
            outcomes_text(r),
        )
        for r in runs
    ]
    rows = [
        Row([c.plain for c in row[:6]], row[6].plain, _run_style(r), ("bold",))
        for row, r in zip(cells, runs, strict=True)
    ]
    table = Table(_HEADINGS, rows, "outcomes")
    if table.fits(console.width):
        console.print(table)
    else:
        # Too narrow for every cell whole on one line: each run on lines of its own, its
        # hostlist whole on one of them (a hostlist folded across lines no longer
        # reads, greps or pastes), as audit stacks its findings.
        for run_id, at, operators, cluster, command, nodes, outcomes in cells:
            console.print(
                Text.assemble(run_id, "  ", at, "  ", operators, "  ", command), soft_wrap=True
            )
            console.print(Text.assemble("    cluster:   ", cluster), soft_wrap=True)
            console.print(Text.assemble("    nodes:     ", nodes), soft_wrap=True)
            console.print(Text.assemble("    outcomes:  ", outcomes))
    for r in runs:
        if r.no_outcome:
            console.print(_interrupted_head(r))
            for line in _interrupted_lines(r):
                console.print(line)
    unconfirmed = sorted({node for r in runs for node in r.unconfirmed_nodes})
    if unconfirmed:
        from spurctl.render.reclaim import confirm_command

        console.print(
            Text(
                "unconfirmed: sent, but no re-collect journaled the job gone; confirm with "
                "(and the run's --command, if any):"
            )
        )
        # On a line of its own and never folded: it is pasted as it stands.
        console.print(Text("  " + confirm_command(unconfirmed)), soft_wrap=True)
    if len(runs) < len(view.runs):
        console.print(
            Text(f"{plural(len(view.runs) - len(runs), 'older run')} not shown: --last N")
        )
    for p in view.repairs:  # on lines of their own, never folded: the command is pasted
        console.print(Text(f"not finished: {stopped_sentence(p)}; take it up with:"))
        resume = shlex.join(["spurctl", "repair", "--node", p.node, "--journal", str(view.path)])
        console.print(Text(f"  {resume}"), soft_wrap=True)


def print_one(
    view: JournalRuns,
    run: Run,
    *,
    fmt: ReclaimFormat | str,
    file: TextIO | None = None,
    env: Environment = PIPE,
) -> None:
    """One run in full: its summary, then every record it holds as written."""
    out = file or sys.stdout
    if choose(ReclaimFormat, str(fmt), "journal") is ReclaimFormat.JSON:
        doc = document(view, [run], records=True)
        out.write(dump_json(doc) + "\n")
        return
    view, run = escaped((view, run))
    console = _console(out, env)
    counts = ", ".join(word for word, _ in outcome_words(run))
    console.print(
        Text(
            f"Run {run.run} ({command_cell(run)}) by {', '.join(run.operators) or '?'}, "
            f"{when(run.started_at)} to {when(run.ended_at)}, cluster {cluster_cell(run)}, "
            f"on {fold(run.nodes) or 'no node'}: {counts}"
        )
    )
    rows = [
        Row([when(str(rec.get("at", ""))), *cells], str(rec.get("detail", "")))
        for rec, cells in _outcome_rows(run.records)
    ]
    console.print(
        Text(f"{_plural(len(run.records), 'record')}, one line per outcome (its intent in it):")
    )
    console.print(Table(("at", "command", "step", "node", "job", "kind", "result"), rows, "detail"))
    if run.stopped_by is not None:
        console.print(_stopped_line(run))
    if run.no_outcome:
        console.print(_interrupted_head(run, named=False))
        for line in _interrupted_lines(run):
            console.print(line)


def _outcome_rows(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    """One row per outcome, the intent it closes folded into it; an intent no outcome
    closed, and a stop's `interrupted` record, get a row of their own. A row: the record
    whose time and detail it shows, and its command, step, node, job (`-` for the node as
    a whole), kind and result."""
    from spurctl.usecases.journal_runs import command_of

    def cells(rec: dict[str, Any], result: str) -> list[str]:
        action = rec.get("action")
        job = rec.get("job_id")
        shown = "-" if action and job == 0 else str(job)
        step = str(rec.get("step") or "-")
        return [command_of(rec), step, str(rec.get("node")), shown, str(rec.get("kind")), result]

    rows: list[tuple[dict[str, Any], list[str]]] = []
    open_intents: dict[tuple[object, object, object], dict[str, Any]] = {}
    for rec in records:
        key = (rec.get("node"), rec.get("job_id"), rec.get("action"))
        event = rec.get("event")
        if event == "intent":
            open_intents[key] = rec
        elif event == "outcome":
            open_intents.pop(key, None)
            rows.append((rec, cells(rec, str(rec.get("result", "")))))
        elif event == "interrupted":
            rows.append((rec, cells(rec, f"interrupted ({rec.get('signal') or 'a signal'})")))
    for rec in open_intents.values():
        rows.append((rec, cells(rec, "no outcome")))
    return sorted(rows, key=lambda row: str(row[0].get("at", "")))
