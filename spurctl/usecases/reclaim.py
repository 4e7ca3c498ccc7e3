"""`spurctl reclaim`: targeted, re-checked, journaled agent cancels.

Plan = the audit's `reclaim` findings on the chosen nodes. Immediately before
each send the entry is re-checked with a fresh GetJob (a requeue may have landed
since the audit); one that no longer qualifies is skipped with its reason. Sends
run in parallel across nodes and in order within a node, each journaled (intent
before, outcome after, fsynced) so an interrupted run leaves an exact record.

Before anything is sent, every entry's agent address is resolved and the plan
is refused whole when a cancel could reach the wrong agent (two nodes on one
endpoint, or the endpoint of a node where the job legitimately runs).

"Sent" is not "freed": spurd's CancelJob answers Ok for an id it does not track
while doing nothing (its running map does not survive a restart, Spur #803). A
sent cancel is confirmed only by re-collecting its node (`--collect` or
`--verify-inventory`); until then it is reported sent and unconfirmed.

A run goes downhill, each step once, through one controller client and one
journal:

1. read: the journal of the earlier runs (sources/journal_records.history), then a fresh audit
   of the nodes;
2. resolve: where each cancel would go and which cluster the files name
   (sources/send_targets.py);
3. decide: the plan and every refusal (decide/plan.py, decide/send_guards.py);
4. act: re-check, journal, cancel (act/cancels.py);
5. re-read: the touched nodes re-collected (sources/recollect.py);
6. decide: each sent cancel judged by what its node shows (decide/confirm.py),
   and journaled.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.act.cancels import (
    JobSource,
    JournalFailed,
    graceful_stop,
    journal_judged,
    journal_stop,
    opened_journal,
    send,
)
from spurctl.decide.confirm import verify
from spurctl.decide.plan import Entry, ReclaimRun, Result, reclaimable
from spurctl.decide.reclaim_plan import decide, selection, would_send
from spurctl.decide.send_guards import key_refusal, key_warning, legit_nodes
from spurctl.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LOCK_WAIT_S,
    DEFAULT_MAX_INVENTORY_AGE_S,
    DEFAULT_SETTLE_S,
)
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.hostlist import fold
from spurctl.model import (
    PLAN_SCHEMA,
    AuditReport,
    Finding,
    NextStep,
    PlanController,
    PlanDocument,
    PlannedCancel,
    utcnow,
)
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.act.journal import Journal
    from spurctl.audit_view import AuditInputs
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.inventories import Sources
    from spurctl.sources.journal_records import Unresolved, WentOut
    from spurctl.sources.settings import Connection

# What a plan's notes point at when nothing says how its nodes were read.
PLAIN_VIEW = NextStep.spurctl("audit", why="what the nodes hold")

# Told, before the re-collect's wait, each (node, job) it waits to see freed and --settle.
OnSettle = Callable[[Sequence[tuple[str, int]], float], None]


@dataclass(frozen=True, slots=True)
class Given:
    """The options this run was given, as argv words: what each command it tells the
    operator to run next repeats, so that it reads what this run read (never --token)."""

    # What made the view: the holdings and controller options (options.view_flags).
    view: tuple[str, ...] = ()
    # What a send needs beyond the view: --agent-map, --agent-port, --jwt-key-file.
    agents: tuple[str, ...] = ()
    # --journal, when one was given: its record of cancels sent is part of the view.
    journal: tuple[str, ...] = ()
    # -x, as one hostlist.
    exclude: str | None = None

    def excluding(self) -> tuple[str, ...]:
        return ("-x", self.exclude) if self.exclude else ()


@dataclass(slots=True)
class Carried(ReclaimRun):
    """A run carried out, and whether its nodes were re-collected to judge what it sent."""

    # Whether a re-collect judged each SENT outcome by what its node holds now; without
    # one, SENT only says the agent answered Ok (spurd does so for an unknown id too).
    verified: bool = False


@dataclass(slots=True)
class Prepared:
    """A reclaim planned and ready to show: what would be sent, and from what."""

    report: AuditReport
    inputs: AuditInputs
    entries: list[Entry]
    journal_path: Path
    # Intents an earlier run left without an outcome: shown now, closed by the send.
    unresolved: list[Unresolved]
    # --job ids that no planned entry names.
    unmatched_jobs: list[int] = field(default_factory=list)
    # Planned nodes no agent map names (all, without a map): their address is a guess.
    fallback_nodes: list[str] = field(default_factory=list)
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S
    # Why each entry will be skipped for an old inventory, judged when planned.
    stale: dict[tuple[str, int], str] = field(default_factory=dict)
    # The findings on the named nodes that need a person, not a cancel.
    investigate: list[Finding] = field(default_factory=list)
    # --plan: saved entries the fresh audit no longer plans, and why each is not sent.
    spared: dict[tuple[str, int], str] = field(default_factory=dict)
    # The audit of these nodes as this run read them: what the plan's notes point at.
    view: NextStep = PLAIN_VIEW
    # The last cancel the journal records as sent, per (node, job): a saved entry whose
    # holding is gone since says so.
    went_out: Mapping[tuple[str, int], WentOut] = field(default_factory=dict)


def prepare(
    nodes: str,
    src: Sources,
    conn: Connection,
    *,
    journal_path: Path,
    jobs: Sequence[int] | None = None,
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S,
    now: datetime | None = None,
    given: Given = Given(),
    client: ControllerClient | None = None,
) -> Prepared:
    """Audit `nodes` afresh and plan the cancels for their reclaimable findings.

    Raises SpurctlError when a named node is one the controller does not know
    (a typo would otherwise plan nothing and look like a clean node), and when
    the plan's cancels could reach the wrong agent or what was read is not all
    this cluster's (decide/send_guards.py). `client`: the run's controller client;
    `given`: the options it was given, which the commands it points at repeat.
    """
    from spurctl.audit_view import run_audit
    from spurctl.sources.journal_records import cluster_of, history
    from spurctl.sources.send_targets import resolve_targets

    # Read: the journal of earlier runs, once (its open intents, and the memory of cancels
    # sent: a holding with no process gets one at most, then it is a leftover); the nodes.
    earlier = history(journal_path, cluster=cluster_of(conn))
    report, inputs = run_audit(src, conn, cancelled=earlier.cancelled, client=client)
    # -x: an excluded node is never planned, whichever of its names --node gave (the
    # scope refused one that leaves out every node when it was parsed).
    named = src.scope.keep(src.scope.named or ())
    selected, unknown = selection(named, inputs.view.nodes, inputs.inventories)
    if unknown:
        raise SpurctlError(
            f"unknown node{'s' if len(unknown) > 1 else ''} {fold(unknown)}: the controller "
            "has no such node; check the names with",
            step=NextStep.spurctl("nodes", *given.view, why="the names the controller knows"),
        )
    # Resolve: where each cancel would go, and which cluster the files name.
    wanted = reclaimable(report, selected, jobs)
    legit = legit_nodes(
        sorted({f.job_id for f in wanted if f.job_id is not None}),
        lambda j: inputs.view.jobs.get(j) or inputs.confirmed.get(j),
    )
    targets = resolve_targets({f.node for f in wanted}, legit, inputs.inventories, conn)
    # Decide, once: the plan, and whether it is refused whole.
    decided = decide(
        report, selected, jobs, targets, legit, inputs.inventories, inputs.view.nodes,
        inputs.watermark.value, now or utcnow(), max_inventory_age_s,
    )  # fmt: skip
    if decided.refusal is not None:
        raise SpurctlError(decided.refusal)
    return Prepared(
        report,
        inputs,
        decided.entries,
        journal_path,
        earlier.unresolved,
        unmatched_jobs=decided.unmatched_jobs,
        fallback_nodes=decided.fallback_nodes,
        max_inventory_age_s=max_inventory_age_s,
        stale=decided.stale,
        investigate=decided.investigate,
        view=NextStep.spurctl(
            "audit",
            "--nodes",
            nodes,
            *given.excluding(),
            *given.view,
            *given.journal,
            why="what the nodes hold",
        ),
        went_out=earlier.went_out,
    )


def carry_out(
    prepared: Prepared,
    conn: Connection,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    recollect: Sources | None = None,
    settle: float = DEFAULT_SETTLE_S,
    on_settle: OnSettle | None = None,
    client: JobSource | None = None,
) -> Carried:
    """Send the approved plan: journal, re-check, cancel; then, with `recollect`, verify.

    With `recollect` (a live collect: `--collect`, or `--verify-inventory` whose
    Sources collect with the same --command, --fanout and --topology), the touched nodes are
    inventoried again until the jobs are gone or `settle` seconds passed (`reverify`):
    a cancel whose job is gone is confirmed (`verified`), one whose job is still
    held turns failed (in the run and in the journal), one whose node could not be inventoried again
    turns unconfirmed (in the run). Without it every sent cancel stays
    unconfirmed: the agent's Ok proves nothing. After a Ctrl-C the operator
    wants the summary now, not a settle and a re-collect. `on_settle` is told,
    before the wait, which (node, job) it waits for and for how long at most.
    A run stopped by a signal journals that (`interrupted`, journal_stop). Raises
    JournalFailed, carrying the run so far, when the journal cannot be written.
    Every record goes through one Journal, held from the first intent to the last
    verified outcome; every re-check through `client` (the run's controller client).
    """
    from spurctl.act.agents import AgentPool

    refused = key_refusal(conn.jwt_key is not None, conn.conf.auth_mode)
    if refused is not None:
        raise SpurctlError(refused)
    # The Journal holds the journal's lock from the first intent to the last verified
    # outcome (a second run on it in between would resend cancels and close our intents);
    # under `reclaim` it joins the run's lock, taken before the journal was read.
    with opened_journal(prepared.journal_path, conn) as journal:
        agents = AgentPool(jwt_key=conn.jwt_key, timeout=conn.timeout)
        try:
            with _asking(conn, client) as jobs:
                run = send(
                    prepared.entries,
                    jobs=jobs,
                    agents=agents,
                    journal=journal,
                    watermark=prepared.inputs.watermark.value,
                    concurrency=concurrency,
                    unresolved=prepared.unresolved,
                    not_found_doubt=conn.not_found_doubt(),
                    max_inventory_age_s=prepared.max_inventory_age_s,
                    spared=prepared.spared,
                )
        finally:
            agents.close()
        carried = Carried(
            outcomes=run.outcomes,
            not_attempted=run.not_attempted,
            interrupted=run.interrupted,
            stopped_by=run.stopped_by,
        )
        touched = sorted({o.entry.node for o in run.outcomes if o.result is Result.SENT})
        will_verify = recollect is not None and recollect.collect and bool(touched)
        if recollect is not None and will_verify and not run.interrupted:
            carried.verified = reverify(
                carried, journal, touched, recollect, settle, on_settle=on_settle
            )
        if carried.interrupted:
            journal_stop(carried, journal, cut_short=will_verify)
    return carried


@contextmanager
def _asking(conn: Connection, client: JobSource | None) -> Iterator[JobSource]:
    """The run's controller client, or one of its own for a caller that has none."""
    if client is not None:
        with nullcontext(client) as given:
            yield given
        return
    from spurctl.sources.controller import ControllerClient

    with ControllerClient(conn) as own:
        yield own


def reverify(
    run: ReclaimRun,
    journal: Journal,
    touched: list[str],
    recollect: Sources,
    settle: float,
    *,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    on_settle: OnSettle | None = None,
) -> bool:
    """Re-collect the touched nodes until every sent cancel's job is gone from its node,
    or `settle` seconds have passed (sources/recollect.py), judge the sent cancels by
    what they showed (decide/confirm.verify) and journal that.

    Each outcome says how long after the sends its node was last looked at, and
    `run.waited_s` how long the whole wait took. A SIGTERM, SIGHUP or Ctrl-C while
    waiting leaves the cancels unconfirmed. Returns whether a re-collect ran, so that
    each sent cancel was judged. `on_settle(pairs, settle)` is called once, before the
    first look, with each (node, job) it waits to see freed.
    """
    from spurctl.sources.recollect import until_freed

    sent = [o for o in run.outcomes if o.result is Result.SENT]
    pairs = [(o.entry.node, o.entry.job_id) for o in sent]
    box: dict[str, str] = {}
    try:
        with graceful_stop(box):
            # Told inside: a Ctrl-C as soon as it is said is a stop too.
            said = None if on_settle is None else (lambda: on_settle(pairs, settle))
            looked = until_freed(
                pairs, touched, recollect, settle, clock=clock, sleep=sleep, on_look=said
            )
    except KeyboardInterrupt:
        run.interrupted = True
        run.stopped_by = box.get("signal", "SIGINT")
        verify(run, {}, settle, dict.fromkeys(touched, f"stopped by {run.stopped_by}"))
        return False
    except Exception as exc:  # the collect itself broke: no node is confirmed
        why = f"{type(exc).__name__}: {exc}"
        verify(run, {}, settle, dict.fromkeys(touched, why))
        return False
    run.waited_s = looked.waited_s
    waited = {(node, job): looked.seen_at.get(node, settle) for node, job in pairs}
    verify(run, looked.held_now, settle, looked.errors, waited)
    if sent:
        journal_judged(journal, sent, run)
    return True


def fresh_plan(saved: PlanDocument, path: Path, given: Given = Given()) -> NextStep:
    """The dry run that saves a fresh plan of a saved plan's nodes and jobs over `path`,
    reading them as this run does: what a refused saved plan points at."""
    jobs = sorted({p.finding.job_id for p in saved.entries if p.finding.job_id is not None})
    return NextStep.spurctl(
        "reclaim", "--nodes", saved.nodes, *(w for j in jobs for w in ("--job", str(j))),
        *given.excluding(), "--dry-run", "-o", str(path), *given.view, *given.agents,
        *given.journal, why="make a fresh plan of the same nodes and jobs",
    )  # fmt: skip


def only_saved(
    prepared: Prepared,
    saved: PlanDocument,
    max_age_s: float,
    remake: NextStep | None = None,
    excluded: Collection[str] = (),
) -> Prepared:
    """The fresh plan narrowed to the saved entries (decide.saved_plan); a saved entry the
    fresh audit no longer plans stays in, spared with why: the fresh finding, the
    journal's record of the cancel that freed it, or this run's -x (`excluded`).
    `remake`: the command that makes a new plan, which a refusal ends with."""
    from spurctl.decide.saved_plan import check_saved, narrow_to_saved

    check_saved(saved, prepared.report.controller_address, max_age_s, utcnow(), fresh=remake)
    inputs = prepared.inputs
    entries, spared = narrow_to_saved(
        saved, prepared.entries, prepared.report.findings,
        lambda job_id: inputs.view.jobs.get(job_id) or inputs.confirmed.get(job_id),
        excluded=excluded, went_out=prepared.went_out,
    )  # fmt: skip
    keys = {(e.node, e.job_id) for e in entries}
    return dataclasses.replace(
        prepared,
        entries=entries,
        spared=spared,
        stale={k: v for k, v in prepared.stale.items() if k in keys and k not in spared},
        unmatched_jobs=[],
    )


def plan_document(prepared: Prepared, nodes: str) -> PlanDocument:
    """The plan as `reclaim --dry-run -o` saves it: enough for `reclaim --plan` to send
    exactly these entries after a fresh re-check."""
    from spurctl import __version__

    report = prepared.report
    return PlanDocument(
        schema=PLAN_SCHEMA,
        spurctl_version=__version__,
        controller=PlanController(report.controller_address, report.controller_version),
        taken_at=report.taken_at,
        nodes=nodes,
        entries=tuple(
            PlannedCancel(e.finding, e.address, e.collected_at) for e in prepared.entries
        ),
    )


class Stage(enum.Enum):
    """How far a `spurctl reclaim` went."""

    PLANNED = "planned"  # --dry-run: the plan only
    NOTHING = "nothing"  # no cancel to send on these nodes
    DECLINED = "declined"  # the operator answered no at the prompt
    JOURNAL_FAILED = "journal-failed"  # stopped: the journal could not be written
    SENT = "sent"


@dataclass(slots=True)
class Reclaimed:
    """What one `spurctl reclaim` did, and the exit status it earns."""

    prepared: Prepared
    stage: Stage
    exit_status: ExitStatus
    run: ReclaimRun | None = None
    # Whether a re-collect judged every sent cancel (Carried.verified).
    verified: bool = False
    # A dry run: what the real run's credential would meet (send_warning).
    key_warning: str | None = None
    # The command's one error line (JOURNAL_FAILED), after the run so far is shown.
    error: str | None = None
    # A dry run that saved its plan (-o): the command that applies it.
    apply: NextStep | None = None


MISSING_NODES = (
    "missing option --node: name the nodes to act on with --node HOSTLIST (or --nodes, -w), "
    "or apply a saved plan with --plan FILE; see `spurctl reclaim --help`"
)


@dataclass(frozen=True, slots=True)
class ReclaimRequest:
    """One reclaim as asked: the nodes (those named, or the saved plan's), the journal, the
    run's options; every mix of them that cannot mean anything refused when it is built
    (SpurctlError), before anything is read or any connection made."""

    scope: Scope
    journal_path: Path
    jobs: tuple[int, ...] | None = None
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S
    dry_run: bool = False
    yes: bool = False
    settle: float = DEFAULT_SETTLE_S
    concurrency: int = DEFAULT_CONCURRENCY
    verify_inventory: bool = False
    # --plan FILE, and the plan read from it (with_saved): the only entries that may be sent.
    plan_file: Path | None = None
    saved: PlanDocument | None = None
    # -o: where a dry run's plan is saved, which its result then says how to apply.
    plan_output: Path | None = None
    detailed_exitcode: bool = False
    given: Given = Given()
    # --lock-wait: how long a real run waits for the journal's lock (an autopilot's round).
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S

    def __post_init__(self) -> None:
        if self.plan_output is not None and not self.dry_run:
            raise SpurctlError(
                "-o saves the plan of a dry run: add --dry-run (then apply it with --plan FILE)"
            )
        if self.detailed_exitcode and not self.dry_run:
            raise SpurctlError(
                "--detailed-exitcode says whether a dry run would send anything: add --dry-run"
            )
        if self.plan_file is not None:
            if self.saved is None and (not self.scope.everything or self.jobs):
                raise SpurctlError(
                    "--plan names its own nodes and jobs: drop --node/--job, or drop --plan"
                )
            if self.dry_run:
                raise SpurctlError("--plan applies a saved plan: drop --dry-run, or drop --plan")
        elif self.scope.everything:
            raise SpurctlError(MISSING_NODES)

    def with_saved(self, saved: PlanDocument) -> ReclaimRequest:
        """This request carrying out `saved` (read from --plan): its nodes, less -x."""
        scope = Scope.parse(saved.nodes, self.scope.exclude_typed)
        return dataclasses.replace(self, scope=scope, saved=saved)

    @property
    def nodes(self) -> str:
        """The nodes named, as one hostlist (for the commands the run points at)."""
        hostlist = self.scope.hostlist
        assert hostlist is not None  # refused when built
        return hostlist


def reclaim(
    request: ReclaimRequest,
    src: Sources,
    conn: Connection,
    *,
    show_plan: Callable[[Prepared], None],
    ask: Callable[[Prepared], bool] | None,
    on_settle: OnSettle | None = None,
) -> Reclaimed:
    """The whole command: plan, show the plan (`show_plan`), ask unless `yes` (`ask`;
    None: there is no terminal to ask on, so refuse), then send and verify
    (`on_settle`: told what the re-collect waits for, and how long at most).

    Exit 0 only when everything planned was sent and a node showed it freed; a --job
    that matches nothing is a request not met (1), even with nothing to do. A dry run
    exits 0, or with `detailed_exitcode` says whether the real run would send: 1 when
    it would send a cancel, 0 when it would send none. One controller client serves
    the whole run: the audit, and every re-check.

    A real run holds the journal's lock from before the journal is read to its last
    record, the prompt included: a second reclaim on this journal waits for it at most
    --lock-wait, then refuses naming this one's pid, instead of planning, asking and
    sending beside it; and the plan is made from a journal no other run writes
    meanwhile. A dry run takes no lock (it must not wait for a running reclaim).
    """
    from spurctl.act.journal import journal_lock
    from spurctl.sources.controller import ControllerClient

    r, given = request, request.given
    locked = nullcontext() if r.dry_run else journal_lock(r.journal_path, r.lock_wait_s)
    with locked, ControllerClient(conn) as client:
        prepared = prepare(
            r.nodes, src, conn, jobs=r.jobs, journal_path=r.journal_path,
            max_inventory_age_s=r.max_inventory_age_s, given=given,
            client=client,
        )  # fmt: skip
        if r.saved is not None:
            remake = fresh_plan(r.saved, r.plan_file, given) if r.plan_file is not None else None
            prepared = only_saved(
                prepared, r.saved, r.max_inventory_age_s, remake, src.scope.excluded
            )
        show_plan(prepared)
        entries = prepared.entries
        unmet = ExitStatus.ACTION_NEEDED if prepared.unmatched_jobs else ExitStatus.OK
        has_key, auth_mode = conn.jwt_key is not None, conn.conf.auth_mode
        if r.dry_run:
            warning = key_warning(has_key, auth_mode) if entries else None
            if r.detailed_exitcode:
                sends = would_send(entries, prepared.stale, prepared.spared)
                unmet = ExitStatus.ACTION_NEEDED if sends else ExitStatus.OK
            apply = None
            if r.plan_output is not None:
                apply = NextStep.spurctl(
                    "reclaim", "--plan", str(r.plan_output), *given.excluding(), *given.view,
                    *given.agents, *given.journal,
                    why="send exactly this plan's cancels, each re-checked",
                )  # fmt: skip
            return Reclaimed(prepared, Stage.PLANNED, unmet, key_warning=warning, apply=apply)
        if not entries:
            return Reclaimed(prepared, Stage.NOTHING, unmet, run=ReclaimRun())
        refused = key_refusal(has_key, auth_mode)
        if refused is not None:  # before the prompt: every agent would reject the sends
            raise SpurctlError(refused)
        if not r.yes:
            if ask is None:
                raise SpurctlError(
                    "refusing to reclaim without --yes: standard input is not a terminal"
                )
            if not ask(prepared):
                return Reclaimed(prepared, Stage.DECLINED, ExitStatus.ACTION_NEEDED)
        # --verify-inventory: re-collect the touched nodes as --collect would, whatever the
        # plan was read from.
        recollect = dataclasses.replace(src, collect=True) if r.verify_inventory else src
        try:
            run = carry_out(
                prepared,
                conn,
                concurrency=r.concurrency,
                recollect=recollect,
                settle=r.settle,
                on_settle=on_settle,
                client=client,
            )
        except JournalFailed as exc:
            return Reclaimed(
                prepared, Stage.JOURNAL_FAILED, ExitStatus.ERROR, run=exc.run, error=exc.sentence()
            )
    done = run.ok and run.verified and unmet is ExitStatus.OK
    status = ExitStatus.OK if done else ExitStatus.ACTION_NEEDED
    return Reclaimed(prepared, Stage.SENT, status, run=run, verified=run.verified)
