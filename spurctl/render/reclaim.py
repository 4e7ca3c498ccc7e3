"""What `spurctl reclaim` shows: the plan before, the outcome after.

Reasons, details and node names come from agents, the controller and
inventories: every one reaches the terminal as Text, never as rich markup, so
`[auth]` in an error or `gpu[a-b]` in a hostlist prints as written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from spurctl.decide.confirm import confirm_step, unconfirmed_nodes
from spurctl.decide.plan import Entry, ReclaimRun, Result, confirmed
from spurctl.decide.reasons import id_ranges, plural
from spurctl.errors import visible, warn
from spurctl.model import AuditReport, NextStep, PlanDocument
from spurctl.render.audit import other_notes, version_text
from spurctl.render.common import (
    NOTE_LABEL,
    WARNING_LABEL,
    ReclaimFormat,
    choose,
    command_line,
    console_for,
    context_line,
    escaped,
    text_time,
    watermark_document,
)
from spurctl.render.environment import Environment
from spurctl.render.table import Row, Table

if TYPE_CHECKING:
    from spurctl.usecases.reclaim import Prepared, Reclaimed

# What a run that sent no cancel says of it: declining or Ctrl-C at the prompt (stderr),
# and the last line of a dry run's plan.
NOTHING_SENT = "nothing sent"

RESULT_STYLE = {
    Result.SENT: "green",
    Result.SKIPPED: "yellow",
    Result.FAILED: "red",
    Result.UNCONFIRMED: "red",
}


# What the plan's notes point at when no command says how these nodes were read.
PLAIN_AUDIT = NextStep.spurctl("audit", why="what the nodes hold")


@dataclass(frozen=True, slots=True)
class PlanFacts:
    """What the plan says beyond its entries: the use case's Prepared, as the renderer needs it."""

    # Planned nodes the agent map lacks, or every one without a map (the node:port guess).
    fallback_nodes: Sequence[str] = ()
    # Whether an --agent-map was given: without one, the plan says once why every
    # address is marked (guessed); with one, a warning names the nodes it lacks.
    agent_map_given: bool = True
    # --job ids that name no planned entry.
    unmatched_jobs: Sequence[int] = ()
    # (node, job) -> why that entry will be skipped: an old inventory, or (--plan) a saved
    # entry the fresh audit no longer plans.
    stale: Mapping[tuple[str, int], str] = field(default_factory=dict)
    max_inventory_age_s: float | None = None
    # The one-line error when the journal could not be written mid-run.
    journal_error: str | None = None
    # After the run: whether the touched nodes were re-collected and every sent cancel
    # judged by what its node holds now (without that, "sent" is unconfirmed).
    verified: bool = False
    # Options the confirming `spurctl audit` needs beyond --nodes and --collect, as
    # argv words (the --command, --fanout, --controller and --conf this run used).
    confirm_flags: Sequence[str] = ()
    # The journal this run writes its intents and outcomes to (a dry run writes nothing):
    # printed when the run ends, so nobody has to find it.
    journal_path: str | None = None
    # "kind on node" for each finding on the named nodes that needs a person, not a cancel.
    investigate: Sequence[str] = ()
    # The re-collect's wait after the sends (None: none ran), and --settle, its limit.
    waited_s: float | None = None
    settle_s: float | None = None
    # `spurctl audit` of the planned nodes with the options that produced this view:
    # what the plan points at for what the nodes hold.
    view: NextStep = PLAIN_AUDIT


class Unresolved(Protocol):
    """A cancel the journal never closed (act.journal.Unresolved)."""

    @property
    def at(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def job_id(self) -> int: ...
    @property
    def kind(self) -> str: ...


# Where no Environment is given: not a terminal (every line whole).
PIPE = Environment()


def _console(file: TextIO | None, env: Environment, *, err: bool = False) -> Console:
    """A console on `file` (else stdout; stderr with `err`, a terminal when it is one)."""
    if err:
        return console_for(replace(env, tty=env.stderr_tty, colour=False), file or sys.stderr)
    return console_for(env, file)  # the data is escaped before it is drawn


def _command(console: Console, step: NextStep) -> None:
    """A command to run next, on a line of its own and never folded: it is meant to be
    copied and run as printed."""
    console.print(Text("  " + command_line(step)), soft_wrap=True)


def _stops(entry: Entry) -> str:
    f = entry.finding
    parts = []
    if f.live:
        parts.append(f"{len(f.pids)} process{'es' if len(f.pids) > 1 else ''}")
    if f.gpus:
        parts.append(f"GPU{'s' if len(f.gpus) > 1 else ''} {id_ranges(f.gpus)}")
    return ", ".join(parts) or "reservation only"


def _labelled(label: str, style: str, text: str) -> Text:
    return Text.assemble((label, style), " ", text)


def print_unresolved(
    items: Sequence[Unresolved],
    file: TextIO | None = None,
    env: Environment = PIPE,
    *,
    err: bool = False,
) -> None:
    if not items:
        return
    items = escaped(items)
    console = _console(file, env, err=err)
    console.print(
        _labelled(
            WARNING_LABEL,
            "bold yellow",
            f"the journal has {plural(len(items), 'cancel')} sent or about to be sent by an "
            "interrupted run, with no recorded outcome:",
        )
    )
    for u in items:
        console.print(
            Text(f"  unknown: check the node — job {u.job_id} on {u.node} ({u.kind}, {_at(u.at)})")
        )


def _at(at: str) -> str:
    """A journal record's time as every screen says one; as written if it is not one."""
    from spurctl.model import parse_time

    try:
        moment = parse_time(at)
    except ValueError:
        moment = None
    return at if moment is None else text_time(moment)


def unmatched_sentence(jobs: Sequence[int]) -> str:
    """What a --job that names no planned entry says; the audit of the nodes follows it."""
    ids = ", ".join(str(j) for j in jobs)
    return (
        f"--job {ids}: no reclaimable finding names {'it' if len(jobs) == 1 else 'them'} "
        "on these nodes; what the nodes hold:"
    )


def fallback_sentence(nodes: Sequence[str], agent_map_given: bool = True) -> str:
    """Why the plan's addresses marked `(guessed)` are guesses, and how to make them exact."""
    from spurctl.hostlist import fold

    guess = "a guessed address, NODE:PORT (the node's name and --agent-port), marked in the plan"
    if not agent_map_given:
        return (
            f"no --agent-map: every cancel goes to {guess}; pass --agent-map (node to the "
            "host:port each spurd listens on) to send each where its spurd listens"
        )
    return (
        f"--agent-map lacks {fold(nodes)}: their cancels go to {guess}; add them to the "
        "map if that is not where their spurd listens"
    )


def confirm_command(nodes: Sequence[str], flags: Sequence[str] = ()) -> str:
    """The command that confirms from the nodes themselves that their cancels freed them
    (decide.confirm.confirm_step), as one line."""
    return command_line(confirm_step(nodes, flags))


def _result_word(result: Result, verified: bool) -> str:
    # An unconfirmed cancel went out: its row reads as the summary counts it, among the sent.
    if result is Result.UNCONFIRMED or (result is Result.SENT and not verified):
        return "sent, unconfirmed"
    return result.value


def plan_text(document: PlanDocument) -> str:
    """A saved plan (`reclaim --dry-run -o FILE`) as its JSON file holds it."""
    import msgspec

    return msgspec.json.format(msgspec.json.encode(document).decode(), indent=2) + "\n"


_PLAN_HEADERS = ("node", "job", "kind", "agent", "will stop")
_STACK_INDENT = 10  # the reason's indent in the stacked plan, as in audit's


def _agent_text(entry: Entry) -> str:
    return entry.address + (" (guessed)" if entry.fallback else "")


class PlanTable:
    """The plan laid out for the width it is drawn at: the one table style
    (render/table.py), whose node, job, kind, agent and will-stop cells are never broken,
    when they fit beside each other; otherwise, as audit's FindingsTable does, each
    node's name, then each of its cancels on a line with its agent, what it stops and
    its reason under it."""

    def __init__(self, entries: Sequence[Entry], skipped: Collection[tuple[str, int]] = ()) -> None:
        self.entries = list(entries)
        self.skipped = skipped  # a WILL SKIP entry stops nothing, whatever it was planned on

    def _stops(self, e: Entry) -> str:
        return "nothing: will skip" if (e.node, e.job_id) in self.skipped else _stops(e)

    def _cells(self, e: Entry) -> tuple[str, ...]:
        return (e.node, str(e.job_id), e.finding.kind.value, _agent_text(e), self._stops(e))

    def table(self) -> Table:
        rows = [Row(self._cells(e), e.finding.reason, cell_styles=("bold",)) for e in self.entries]
        return Table(_PLAN_HEADERS, rows, "why")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.padding import Padding

        table = self.table()
        if table.fits(options.max_width):
            yield table
            return
        node = None
        for e in self.entries:
            if e.node != node:
                node = e.node
                yield Text(e.node, style="bold")
            yield Text(f"  {e.job_id:>6}  {e.finding.kind.value}  will stop: {self._stops(e)}")
            yield Padding(Text(f"agent {_agent_text(e)}"), (0, 0, 0, _STACK_INDENT))
            yield Padding(Text(e.finding.reason), (0, 0, 0, _STACK_INDENT))


def print_plan(
    entries: Sequence[Entry],
    report: AuditReport,
    file: TextIO | None = None,
    facts: PlanFacts | None = None,
    ack: str | None = None,
    env: Environment = PIPE,
) -> None:
    entries, report, facts = escaped((entries, report, facts or PlanFacts()))
    console = _console(file, env)
    console.print(Text(context_line(report)))
    for note in other_notes(report):
        console.print(_labelled(WARNING_LABEL, "bold yellow", note))
    for line in version_text(report, ack=ack):
        console.print(line)
    if facts.unmatched_jobs:
        unmatched = unmatched_sentence(facts.unmatched_jobs)
        console.print(_labelled(NOTE_LABEL, "bold yellow", unmatched))
        _command(console, facts.view)
    if not entries:
        if facts.investigate:
            n = len(facts.investigate)
            console.print(
                Text(
                    f"Nothing to reclaim on these nodes, but {plural(n, 'finding')} "
                    f"need{'s' if n == 1 else ''} investigating instead: "
                    f"{'; '.join(facts.investigate)}. What the nodes hold:"
                )
            )
            _command(console, facts.view)
        else:
            console.print(Text("Nothing to reclaim on these nodes."))
        return
    console.print(Text(f"Reclaim plan: {plural(len(entries), 'cancel')}"))
    console.print(PlanTable(entries, facts.stale))
    if not facts.agent_map_given and facts.fallback_nodes:
        note = fallback_sentence(facts.fallback_nodes, agent_map_given=False)
        console.print(_labelled(NOTE_LABEL, "bold yellow", note))
    for (node, job_id), why in sorted(facts.stale.items()):
        console.print(_labelled("WILL SKIP:", "bold yellow", f"job {job_id} on {node}: {why}"))
    going = [e for e in entries if (e.node, e.job_id) not in facts.stale]
    skips = f" ({len(entries) - len(going)} will skip)" if len(going) < len(entries) else ""
    live = sum(1 for e in going if e.finding.live)
    console.print(
        Text(
            f"{plural(len(entries), 'cancel')}{skips} on "
            f"{plural(len({e.node for e in entries}), 'node')}; "
            f"{plural(live, 'live run')} will be stopped (agent CancelJob, signal 0, that node "
            "only)."
        )
    )


def run_document(
    run: ReclaimRun | None,
    entries: Sequence[Entry],
    report: AuditReport,
    *,
    dry_run: bool,
    facts: PlanFacts | None = None,
) -> dict[str, Any]:
    facts = facts or PlanFacts()
    outcomes = run.outcomes if run else []
    confirmation: dict[str, Any] | None = None
    if run is not None and not dry_run:
        pending = unconfirmed_nodes(run, facts.verified)
        judged = [confirmed(o.result, facts.verified) for o in outcomes]
        confirmation = {
            "verified": facts.verified,
            "confirmed": sum(1 for c in judged if c is True),
            "unconfirmed": sum(1 for c in judged if c is False),
            "command": confirm_command(pending, facts.confirm_flags) if pending else None,
        }
        if facts.waited_s is not None:
            # How long the re-collect waited for the nodes to free the jobs, of --settle.
            confirmation.update(waited_s=facts.waited_s, settle_s=facts.settle_s)
    return {
        "schema": "spurctl.reclaim/v1",
        "dry_run": dry_run,
        "controller": report.controller_address,
        "watermark": watermark_document(report.watermark),
        "max_inventory_age_s": facts.max_inventory_age_s,
        "agent_fallback_nodes": list(facts.fallback_nodes),
        "unmatched_jobs": list(facts.unmatched_jobs),
        "journal": facts.journal_path,
        "journal_error": facts.journal_error,
        "plan": [
            {
                "node": e.node,
                "job_id": e.job_id,
                "kind": e.finding.kind.value,
                "live": e.finding.live,
                "gpus": list(e.finding.gpus),
                "pids": list(e.finding.pids),
                "agent": e.address,
                "agent_fallback": e.fallback,
                "collected_at": e.collected_at.isoformat().replace("+00:00", "Z")
                if e.collected_at
                else None,
                "will_skip": facts.stale.get((e.node, e.job_id)),
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
                # True: a re-collect showed the job gone; False: sent, but nothing
                # shows it freed (the agent answers Ok for an id it does not track).
                "confirmed": confirmed(o.result, facts.verified),
                # How long after the sends a re-collect last looked at the node.
                "waited_s": o.waited_s,
                "detail": o.detail,
            }
            for o in outcomes
        ],
        "confirmation": confirmation,
        "not_attempted": [
            {"node": e.node, "job_id": e.job_id} for e in (run.not_attempted if run else [])
        ],
        "stopped_by": run.stopped_by if run else None,
        "summary": {
            "planned": len(entries),
            # "unconfirmed" (sent, but the re-collect failed) appears only when some are,
            # so the summary of every other run reads as it always did.
            **{
                r.value: n
                for r in Result
                if (n := sum(1 for o in outcomes if o.result is r)) or r is not Result.UNCONFIRMED
            },
            "interrupted": bool(run and run.interrupted),
        },
    }


def print_run(
    run: ReclaimRun | None,
    entries: Sequence[Entry],
    report: AuditReport,
    *,
    fmt: ReclaimFormat | str,
    dry_run: bool = False,
    file: TextIO | None = None,
    facts: PlanFacts | None = None,
    env: Environment = PIPE,
) -> None:
    if choose(ReclaimFormat, fmt, "reclaim") is ReclaimFormat.JSON:
        doc = run_document(run, entries, report, dry_run=dry_run, facts=facts)
        # ASCII escapes, unlike the audit and checklist documents: as this document always was.
        (file or sys.stdout).write(json.dumps(doc, indent=2) + "\n")
        return
    if run is None:
        return
    run, entries, report, facts = escaped((run, entries, report, facts or PlanFacts()))
    console = _console(file, env)
    rows = []
    for o in run.outcomes:
        shown = _result_word(o.result, facts.verified)
        colour = (
            RESULT_STYLE[o.result] if o.result is not Result.SENT or facts.verified else "yellow"
        )
        cells = (o.entry.node, str(o.entry.job_id), o.entry.finding.kind.value, shown)
        rows.append(Row(cells, o.detail, cell_styles=("bold", None, None, colour)))
    why = "journal unwritable" if facts.journal_error else "interrupted"
    for e in run.not_attempted:
        cells = (e.node, str(e.job_id), e.finding.kind.value, "not sent")
        rows.append(Row(cells, why, cell_styles=("bold", None, None, "red")))
    console.print(Text("Reclaim result"))
    console.print(Table(("node", "job", "kind", "result"), rows, "detail"))
    console.print(Text(summary_sentence(run, entries, facts)))
    print_confirmation(run, facts, console)
    if facts.journal_path and not facts.journal_error:
        # Last, on a line of its own: `spurctl journal` reads it back.
        console.print(Text(f"Journal: {facts.journal_path}"), soft_wrap=True)


def summary_sentence(run: ReclaimRun, entries: Sequence[Entry], facts: PlanFacts) -> str:
    """The run's one count line. A cancel that went out counts as sent, however its
    node answered the re-collect, and those no node showed freed are counted among
    them, as the UNCONFIRMED line under it counts them: `2 sent (2 unconfirmed)`."""
    sent = sum(1 for o in run.outcomes if o.result in (Result.SENT, Result.UNCONFIRMED))
    unconfirmed = sum(1 for o in run.outcomes if confirmed(o.result, facts.verified) is False)
    words = [f"{sent} sent" + (f" ({unconfirmed} unconfirmed)" if unconfirmed else "")]
    words += [
        f"{sum(1 for o in run.outcomes if o.result is r)} {r.value}"
        for r in (Result.SKIPPED, Result.FAILED)
    ]
    if run.not_attempted:
        why = "journal unwritable" if facts.journal_error else "interrupted"
        words.append(f"{len(run.not_attempted)} not sent ({why})")
    stopped = f" Stopped by {run.stopped_by}." if run.interrupted and run.stopped_by else ""
    return f"{len(entries)} planned: {', '.join(words)}.{stopped}"


def print_confirmation(run: ReclaimRun, facts: PlanFacts, console: Console) -> None:
    """What the nodes showed of the sent cancels, or the command that shows it."""
    pending = unconfirmed_nodes(run, facts.verified)
    sent = sum(1 for o in run.outcomes if o.result is Result.SENT)
    if pending:
        count = sum(1 for o in run.outcomes if confirmed(o.result, facts.verified) is False)
        # The way to confirm that this run did not already take.
        if facts.verified:
            how = "Their re-collect still showed them held: confirm again once the agents free them"
        elif run.interrupted:
            how = "The run stopped before a re-collect showed them freed: confirm from the nodes"
        else:
            how = (
                "Confirm from the nodes (or reclaim with --verify-inventory, which re-collects "
                "them)"
            )
        console.print(
            _labelled(
                "UNCONFIRMED:",
                "bold yellow",
                f"{plural(count, 'sent cancel')} not shown freed: an agent answers CancelJob "
                f"with Ok even for a job it does not track, so sent is not freed. {how}:",
            )
        )
        # One line, never folded: it is meant to be copied and run as printed.
        _command(console, confirm_step(pending, facts.confirm_flags))
    elif facts.verified and sent:
        freed = [o.entry for o in run.outcomes if o.result is Result.SENT]
        nodes = len({e.node for e in freed})
        console.print(
            Text(
                f"Confirmed: a re-collect of {plural(nodes, 'node')} no longer shows "
                f"{held_words(sent, len({e.job_id for e in freed}))}."
            )
        )
    if facts.verified and facts.waited_s is not None:
        limit = f" (--settle {facts.settle_s:g} at most)" if facts.settle_s is not None else ""
        console.print(Text(f"Waited {facts.waited_s:g} s for the nodes to free them{limit}."))


# -- the command's printing, around the use case's `reclaim` -------------------------


def facts_of(prepared: Prepared, agent_map_given: bool = True) -> PlanFacts:
    """What the plan shows beyond its entries, from the use case's Prepared;
    `agent_map_given`: whether an --agent-map was given."""
    return PlanFacts(
        view=prepared.view,
        fallback_nodes=prepared.fallback_nodes,
        agent_map_given=agent_map_given,
        unmatched_jobs=prepared.unmatched_jobs,
        stale={**prepared.stale, **prepared.spared},
        max_inventory_age_s=prepared.max_inventory_age_s,
        journal_path=str(prepared.journal_path),
        investigate=[
            f"{f.kind.value} on {f.node}" + (f" (job {f.job_id})" if f.job_id is not None else "")
            for f in prepared.investigate
        ],
    )


def show_plan(
    prepared: Prepared,
    fmt: ReclaimFormat | str,
    env: Environment,
    ack: str | None = None,
    agent_map_given: bool = True,
) -> None:
    """The plan before anything is sent; with --format json, only its warnings (on stderr:
    stdout is the document, printed at the end). `ack`: the acknowledged controller
    version (render.audit.version_text); `agent_map_given`: whether an --agent-map was
    given (a map that lacks a planned node is warned about; without one, every address
    is a guess, which the plan says once); `env`: the terminal."""
    entries, report = prepared.entries, prepared.report
    facts = facts_of(prepared, agent_map_given)
    if prepared.fallback_nodes and agent_map_given:
        warn(fallback_sentence(prepared.fallback_nodes))
    if fmt == "table":
        print_unresolved(prepared.unresolved, env=env)
        print_plan(entries, report, facts=facts, ack=ack, env=env)
    else:
        print_unresolved(prepared.unresolved, env=env, err=True)
        if prepared.unmatched_jobs:
            warn(escaped(unmatched_sentence(prepared.unmatched_jobs)))
            _command(_console(None, env, err=True), prepared.view)


def saved_plan(output: Path, apply: NextStep, env: Environment) -> None:
    """On stderr, last, as terraform says it: where the dry run's plan went, and the
    command that applies exactly it."""
    console = _console(None, env, err=True)
    console.print(Text(f"Saved the plan to {escaped(str(output))}; apply it with:"))
    _command(console, apply)


def question(prepared: Prepared) -> str:
    """The prompt before a real run: how many cancels, nodes and live runs, of the entries
    not already known to be skipped (an old inventory, a saved entry no longer planned)."""
    skip = {**prepared.stale, **prepared.spared}
    entries = [e for e in prepared.entries if (e.node, e.job_id) not in skip]
    live = sum(1 for e in entries if e.finding.live)
    skips = f" ({len(skip)} more will skip)" if skip else ""
    cluster = prepared.report.cluster
    of = f" of cluster {visible(cluster)}" if cluster else ""
    return (
        f"Send {plural(len(entries), 'cancel')} to "
        f"{plural(len({e.node for e in entries}), 'node')}{of}{skips}, killing "
        f"{plural(live, 'live run')}?"
    )


def settling(pairs: Sequence[tuple[str, int]], settle_s: float) -> None:
    """On stderr, before the re-collect's wait: what it waits for, and how long at most."""
    from spurctl.hostlist import fold

    pairs = escaped(pairs)
    nodes = fold(sorted({node for node, _ in pairs}))
    ids = sorted({job for _, job in pairs})
    jobs = (
        f"job {ids[0]}"
        if len(ids) == 1
        else f"jobs {', '.join(map(str, ids))}"
        if len(ids) <= 4
        else f"{len(ids)} jobs"
    )
    if len(pairs) != len(ids):  # a job held on several nodes: say both counts
        jobs = (
            f"{plural(len(pairs), 'holding')} of {jobs}"
            if len(ids) <= 4
            else held_words(len(pairs), len(ids))
        )
    if settle_s <= 0:
        said = f"re-collecting {nodes} once to see {jobs} freed"
    else:
        said = (
            f"waiting up to {settle_s:g} s (--settle) for {nodes} to free {jobs}; "
            "Ctrl-C stops the wait and leaves them unconfirmed"
        )
    print(f"spurctl: {said} ...", file=sys.stderr, flush=True)


def held_words(holdings: int, jobs: int) -> str:
    """`3 jobs`, or `9 holdings of 8 jobs` where a job is held on several nodes: one count
    for the wait and the confirmation alike."""
    if holdings == jobs:
        return plural(jobs, "job")
    return f"{plural(holdings, 'holding')} of {plural(jobs, 'job')}"


def show_reclaimed(
    done: Reclaimed,
    fmt: ReclaimFormat | str,
    env: Environment,
    *,
    confirm_flags: Sequence[str],
    settle_s: float,
) -> None:
    """What the run did, after the plan: the outcome table or the JSON document.
    `confirm_flags`: the options the command that confirms the sent cancels repeats."""
    from spurctl.usecases.reclaim import Stage

    prepared = done.prepared
    entries, report, facts = prepared.entries, prepared.report, facts_of(prepared)
    if done.stage is Stage.PLANNED:
        if done.key_warning is not None:
            warn(done.key_warning)
        if fmt == "json":
            print_run(None, entries, report, fmt="json", dry_run=True, facts=facts)
        else:
            # Last, so that the end of the output says it, whatever scrolled past.
            _console(None, env).print(_labelled("DRY RUN:", "bold", NOTHING_SENT))
    elif done.stage is Stage.NOTHING:
        if fmt == "json":
            print_run(done.run, entries, report, fmt="json", facts=facts)
    elif done.stage is Stage.DECLINED:
        print(NOTHING_SENT, file=sys.stderr)
    elif done.stage is Stage.JOURNAL_FAILED:
        # The summary so far; the error line naming the journal follows.
        stopped = replace(facts, journal_path=None, investigate=(), journal_error=done.error)
        print_run(done.run, entries, report, fmt=fmt, facts=stopped, env=env)
    else:
        facts = replace(
            facts,
            verified=done.verified,
            confirm_flags=confirm_flags,
            waited_s=None if done.run is None else done.run.waited_s,
            settle_s=settle_s,
        )
        print_run(done.run, entries, report, fmt=fmt, facts=facts, env=env)
