"""`spurctl journal`: the journal read back as runs (reclaim, repair, drain, resume,
node-release), newest first.

`summarize` is pure (records in, runs out); `load` reads the journal through
act.journal, which reports and skips a torn line. A run is every record with
one `run` id (one reclaim, or one node-release). Records written before run ids
existed are grouped in the order written: a new group starts when the operator
changes, when more than LEGACY_GAP_S passed since the group's previous record,
or when an intent repeats one the group already holds (a second attempt); such
a group's id is `legacy-<first record's time>-<operator>`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from spurctl.decide.repair import RepairProgress, repair_progress
from spurctl.errors import SpurctlError
from spurctl.errors import warn as _warn
from spurctl.model import parse_time
from spurctl.scope import Scope

# Records of one old (run-less) reclaim are seconds apart (a re-collect waits --settle).
LEGACY_GAP_S = 300.0
DEFAULT_LAST = 20
# node-release journals these kinds; reclaim never sends them an agent cancel.
_RELEASE_KINDS = frozenset({"agent-orphan", "leftover"})
# What a node administration's call that went through did, by its `action`.
_DONE_WORD = {"drain": "drained", "resume": "resumed", "repair": "repaired"}


def command_of(rec: Mapping[str, Any]) -> str:
    """The spurctl command that wrote `rec`: its `command` when it names one (a run that
    drives the others, as autopilot), else its node administration's `action` (`repair`,
    `drain`, `resume`), else `node-release` for the kinds it journals, else `reclaim`.
    The autopilot's records say so by their `origin`."""
    if rec.get("origin") == "autopilot":
        return "autopilot"
    for key in ("command", "action"):
        value = rec.get(key)
        if isinstance(value, str) and value:
            return value
    return "node-release" if rec.get("kind") in _RELEASE_KINDS else "reclaim"


def _action(rec: Mapping[str, Any]) -> str | None:
    value = rec.get("action")
    return value if isinstance(value, str) and value else None


def cluster_words(rec: Mapping[str, Any]) -> str | None:
    """The cluster a record names, for a reader: its name, else its controller URL(s)."""
    from spurctl.sources.journal_records import recorded_cluster

    named = recorded_cluster(dict(rec))
    return named.cluster or (",".join(named.controllers) or None)


@dataclass(frozen=True, slots=True)
class NoOutcome:
    """An intent its run never closed: the cancel may or may not have gone out."""

    at: str
    node: str
    job_id: int
    kind: str
    # A later run closed it as "unknown" (failed, check the node): still no outcome of its own.
    closed_later: bool
    # The command that wrote it (command_of), and a node administration's step.
    command: str = "reclaim"
    step: str | None = None


@dataclass(slots=True)
class Run:
    run: str
    legacy: bool
    operators: list[str] = field(default_factory=list)
    started_at: str | None = None
    ended_at: str | None = None
    nodes: list[str] = field(default_factory=list)
    intents: int = 0
    sent: int = 0
    confirmed: int = 0
    # The node of each unconfirmed cancel, for the command that confirms them.
    unconfirmed_nodes: list[str] = field(default_factory=list)
    skipped: int = 0
    failed: int = 0
    other: int = 0
    no_outcome: list[NoOutcome] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    # The signal that stopped the run (its `interrupted` records), and the cancels it
    # then never sent.
    stopped_by: str | None = None
    not_sent: int = 0
    # What the run was (command_of: reclaim, node-release, repair, drain, resume, ...), and
    # the clusters its records name (cluster_words), in the order first written.
    commands: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    # Of `sent`, what went through that was no agent cancel, by what it did: `drained`,
    # `resumed`, `repaired`, `released`, and `incomplete` (a repair whose last call went
    # through without its `done`).
    done: dict[str, int] = field(default_factory=dict)

    @property
    def cancels_sent(self) -> int:
        """Agent cancels sent (reclaim's)."""
        return self.sent - sum(self.done.values())

    @property
    def unconfirmed(self) -> int:
        """Sent cancels no re-collect journaled the job gone for."""
        return len(self.unconfirmed_nodes)

    @property
    def interrupted(self) -> bool:
        """Stopped by a signal (Ctrl-C, SIGTERM, SIGHUP), or cut off with an intent left open."""
        return self.stopped_by is not None or bool(self.no_outcome)


@dataclass(frozen=True, slots=True)
class JournalFilter:
    """`journal --node/-x/--since/--cluster`: which nodes' records, from when, and of
    which cluster (as given; the cluster's records are chosen when the journal is read,
    `load`)."""

    scope: Scope = field(default_factory=Scope)
    since: datetime | None = None
    cluster: str | None = None

    @property
    def nodes(self) -> str | None:
        return self.scope.hostlist

    @property
    def exclude(self) -> str | None:
        return self.scope.exclude_hostlist

    @property
    def active(self) -> bool:
        return (
            self.nodes is not None
            or self.exclude is not None
            or self.since is not None
            or self.cluster is not None
        )


@dataclass(slots=True)
class JournalRuns:
    """What `spurctl journal` shows: the runs, newest first, and what could not be read.

    With a filter, `runs` are those it keeps and `in_journal` how many the journal holds."""

    path: Path
    exists: bool
    runs: list[Run]
    unreadable: int = 0
    filter: JournalFilter | None = None
    in_journal: int | None = None
    # Repairs a run began and no run finished (where each stopped): `spurctl repair` of
    # the node takes each up.
    repairs: list[RepairProgress] = field(default_factory=list)
    # `--cluster NAME` that no record names: why nothing is shown (one line), else None.
    cluster_note: str | None = None


def _time(rec: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_time(rec.get("at"))
    except (ValueError, TypeError):
        return None


def _run_id(rec: Mapping[str, Any]) -> str | None:
    run = rec.get("run")
    return run if isinstance(run, str) and run else None


def group(records: Iterable[dict[str, Any]]) -> list[tuple[str, bool, list[dict[str, Any]]]]:
    """(run id, legacy, records) per run, in the order each run first appears."""
    groups: dict[str, tuple[bool, list[dict[str, Any]]]] = {}
    legacy_id: str | None = None
    legacy_op: object = None
    legacy_last: datetime | None = None
    legacy_intended: set[tuple[str, int]] = set()
    for rec in records:
        run = _run_id(rec)
        if run is not None:
            groups.setdefault(run, (False, []))[1].append(rec)
            continue
        when = _time(rec)
        key = (rec["node"], rec["job_id"])
        op = rec.get("operator")
        fresh = (
            legacy_id is None
            or op != legacy_op
            or (
                when is not None
                and legacy_last is not None
                and (when - legacy_last).total_seconds() > LEGACY_GAP_S
            )
            or (rec.get("event") == "intent" and key in legacy_intended)
        )
        if fresh:
            legacy_id = f"legacy-{rec.get('at')}-{op}"
            while legacy_id in groups:
                legacy_id += "+"
            legacy_op, legacy_intended = op, set()
            groups[legacy_id] = (True, [])
        assert legacy_id is not None
        groups[legacy_id][1].append(rec)
        legacy_last = when or legacy_last
        if rec.get("event") == "intent":
            legacy_intended.add(key)
    return [(run, legacy, recs) for run, (legacy, recs) in groups.items()]


def summarize_run(run_id: str, legacy: bool, records: list[dict[str, Any]]) -> Run:
    """One run's counts: each intent judged by the last outcome its own run recorded."""
    out = Run(run_id, legacy, records=records)
    ats = [str(r["at"]) for r in records if isinstance(r.get("at"), str)]
    out.started_at = ats[0] if ats else None
    out.ended_at = ats[-1] if ats else None
    # An autopilot's calls read as its operator's, marked: `root (autopilot)`.
    out.operators = sorted(
        {
            str(r.get("operator")) + (" (autopilot)" if r.get("origin") == "autopilot" else "")
            for r in records
            if r.get("operator")
        }
    )
    out.commands = list(dict.fromkeys(command_of(r) for r in records))
    out.clusters = list(dict.fromkeys(c for c in map(cluster_words, records) if c))
    # (node, job, action) -> [intent or None, own outcome or None, closed by a later run]
    state: dict[tuple[str, int, str | None], list[Any]] = {}
    for rec in records:
        key = (rec["node"], rec["job_id"], _action(rec))
        event = rec.get("event")
        if event == "interrupted":
            # A stop the run journaled itself: never an intent or an outcome.
            out.stopped_by = str(rec.get("signal") or "a signal")
            out.not_sent += rec.get("sent") is False
            continue
        if event == "intent":
            state[key] = [rec, None, False]
        elif event == "outcome":
            if "recorded_by" in rec and rec.get("recorded_by") != run_id:
                # A later run closed this run's open intent as "unknown": not an outcome.
                if key in state and state[key][1] is None:
                    state[key][2] = True
                continue
            if "recorded_by" in rec and (key not in state or state[key][1] is not None):
                continue  # this run closing an older run-less intent: not this run's doing
            state.setdefault(key, [None, None, False])[1] = rec
    out.intents = sum(1 for s in state.values() if s[0] is not None)
    out.nodes = sorted({node for node, _, _ in state})
    for (node, job_id, action), (intent, outcome, closed_later) in state.items():
        if outcome is None:
            step = intent.get("step")
            out.no_outcome.append(
                NoOutcome(
                    str(intent.get("at")),
                    node,
                    job_id,
                    str(intent.get("kind")),
                    closed_later,
                    command_of(intent),
                    str(step) if step else None,
                )
            )
            continue
        result = outcome.get("result")
        if result in ("sent", "released", "unconfirmed"):
            out.sent += 1
            word = _done_word(action, outcome)
            if word is not None:
                out.done[word] = out.done.get(word, 0) + 1
                out.confirmed += result == "released" or outcome.get("confirmed") is True
            elif outcome.get("confirmed") is True:
                out.confirmed += 1
            else:
                out.unconfirmed_nodes.append(node)
        elif result == "skipped":
            out.skipped += 1
        elif result == "failed":
            out.failed += 1
        else:
            out.other += 1
    return out


def _done_word(action: str | None, outcome: Mapping[str, Any]) -> str | None:
    """What an outcome that went through did, unless it was an agent cancel (None)."""
    if action is None:
        return "released" if outcome.get("result") == "released" else None
    if action == "repair" and outcome.get("step") != "done":
        return "incomplete"  # this run stopped short of `done` (a later one may finish it)
    return _DONE_WORD.get(action, "done")


def summarize(records: Iterable[dict[str, Any]]) -> list[Run]:
    """Every run in the records, newest first (the journal is appended in time order)."""
    recs = list(records)
    runs = [summarize_run(run, legacy, found) for run, legacy, found in group(recs)]
    # A run-less intent a later run closed: that closing outcome carries the later run's
    # id (there was none to keep), so only the order of the records links the two.
    closed_at: dict[tuple[str, int], int] = {}
    for i, rec in enumerate(recs):
        if rec.get("event") == "outcome" and "recorded_by" in rec:
            closed_at[(rec["node"], rec["job_id"])] = i
    if closed_at:
        where = {id(rec): i for i, rec in enumerate(recs)}
        for run in runs:
            if not run.legacy:
                continue
            intents = {
                (r["node"], r["job_id"]): where[id(r)]
                for r in run.records
                if r.get("event") == "intent"
            }
            run.no_outcome = [
                replace(u, closed_later=True)
                if closed_at.get((u.node, u.job_id), -1) > intents.get((u.node, u.job_id), 0)
                else u
                for u in run.no_outcome
            ]
    return runs[::-1]


def select(runs: list[Run], run_id: str) -> Run:
    """The run whose id is `run_id` or starts with it (one only); SpurctlError otherwise."""
    if not run_id.strip():  # an empty prefix would match every run
        raise SpurctlError(
            "--run takes a run's id or the start of it; `spurctl journal` lists them"
        )
    exact = [r for r in runs if r.run == run_id]
    found = exact or [r for r in runs if r.run.startswith(run_id)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SpurctlError(
            f"--run {run_id}: no such run in the journal; `spurctl journal` lists them"
        )
    raise SpurctlError(f"--run {run_id}: {len(found)} runs start with it; give more of the id")


def load(
    path: Path, warn: Callable[[str], None] = _warn, cluster: str | None = None
) -> JournalRuns:
    """The journal at `path` as runs; a missing journal is no run (`exists` False).

    `cluster`: only that cluster's records, by the rule every run reads its own with
    (journal_records.belongs: a record naming no cluster is every cluster's); a name no
    record gives is no record at all, and `cluster_note` says so and which names the
    journal holds. A torn or unreadable line goes to `warn` (stderr) with its line number
    and is skipped. SpurctlError when the journal cannot be read or is not a file.
    """
    from spurctl.sources.cluster_binding import Binding
    from spurctl.sources.journal_records import belongs, recorded_cluster, records

    warnings: list[str] = []

    def report(message: str) -> None:
        warnings.append(message)
        warn(message)

    try:
        found = records(path, report)
    except FileNotFoundError:
        return JournalRuns(path, False, [])
    in_journal, note = None, None
    if cluster is not None:
        names = list(dict.fromkeys(n for r in found if (n := recorded_cluster(r).cluster)))
        in_journal = len(summarize(found))
        if cluster in names:
            found = [r for r in found if belongs(r, Binding(cluster=cluster))]
        else:
            held = f"the clusters it names: {', '.join(names)}" if names else "it names none"
            note = f"no record in journal {path} names cluster {cluster!r} ({held}): no run shown"
            found = []
    repairs = sorted(repair_progress(found).values(), key=lambda p: p.node)
    return JournalRuns(
        path, True, summarize(found), unreadable=len(warnings), repairs=repairs,
        in_journal=in_journal, cluster_note=note,
    )  # fmt: skip


def filtered(view: JournalRuns, only: JournalFilter) -> JournalRuns:
    """The runs that touched `only.nodes` (and not only -x's), each narrowed to those
    nodes' records (its counts, times and intents without an outcome), and that have a
    record at or after `only.since`. Nodes match by either name (case, domain)."""
    from spurctl.hostlist import loose_key

    if not only.active:
        return view
    named = only.scope.named
    wanted = None if named is None else {loose_key(n) for n in named}
    left_out = bool(only.scope.excluded)

    def keep(node: object) -> bool:
        name = str(node)
        return (wanted is None or loose_key(name) in wanted) and not only.scope.leaves_out(name)

    runs: list[Run] = []
    for run in view.runs:
        if wanted is not None or left_out:
            records = [r for r in run.records if keep(r.get("node"))]
            if not records:
                continue
            narrowed = summarize_run(run.run, run.legacy, records)
            narrowed.no_outcome = [u for u in run.no_outcome if keep(u.node)]
            # A stop is the whole run's, whichever nodes its records name.
            narrowed.stopped_by = narrowed.stopped_by or run.stopped_by
            run = narrowed
        if only.since is not None:
            times = [t for t in map(_time, run.records) if t is not None]
            if not times or max(times) < only.since:
                continue
        runs.append(run)
    repairs = [p for p in view.repairs if keep(p.node)]
    # --cluster: `load` kept that cluster's runs, and counted the journal's.
    whole = view.in_journal if view.in_journal is not None else len(view.runs)
    return replace(view, runs=runs, filter=only, in_journal=whole, repairs=repairs)
