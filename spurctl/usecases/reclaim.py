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
"""

from __future__ import annotations

import enum
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from spurctl.decide.plan import (
    Entry,
    Outcome,
    ReclaimRun,
    Result,
    confirmed,
    plan,
    recheck,
    stale_reason,
    unmatched_jobs,
)
from spurctl.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_INVENTORY_AGE_S,
    DEFAULT_SETTLE_S,
    NAMES_COMMAND,
)
from spurctl.errors import ExitStatus, SpurctlError, redact
from spurctl.hostlist import fold
from spurctl.model import (
    PLAN_SCHEMA,
    Action,
    AuditReport,
    Finding,
    Job,
    PlanController,
    PlanDocument,
    PlannedCancel,
    utcnow,
)

if TYPE_CHECKING:
    from spurctl.act.journal import Journal, Unresolved
    from spurctl.audit_view import AuditInputs
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection

# Told, before the re-collect's wait, each (node, job) it waits to see freed and --settle.
OnSettle = Callable[[Sequence[tuple[str, int]], float], None]


class JournalFailed(OSError):
    """The journal could not be written mid-run: nothing more was sent.

    `run` is the run so far (every outcome known, journaled or not), for the summary.
    """

    def __init__(self, path: Path, cause: OSError, run: ReclaimRun | None = None) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path = path
        self.run = run or ReclaimRun()

    def sentence(self) -> str:
        return (
            f"journal {self.path}: {self.strerror}; stopped sending, the summary shows what "
            "was sent (free space, or pass --journal PATH elsewhere, before the next reclaim)"
        )


class JobSource(Protocol):
    def get_job(self, job_id: int) -> Job | None: ...


class Canceller(Protocol):
    def cancel(self, address: str, job_id: int) -> None: ...


def execute(
    entries: Sequence[Entry],
    *,
    jobs: JobSource,
    agents: Canceller,
    journal: Journal,
    watermark: int,
    concurrency: int = DEFAULT_CONCURRENCY,
    stop: threading.Event | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    not_found_doubt: str | None = None,
    max_inventory_age_s: float | None = None,
    clock: Callable[[], datetime] = utcnow,
    spared: Mapping[tuple[str, int], str] | None = None,
) -> ReclaimRun:
    """Re-check, journal and send each entry; parallel across nodes, ordered within one.

    A journal that cannot be written stops every send and raises JournalFailed
    carrying the run so far.
    """
    from spurctl.act.agents import AgentError

    stop = stop or threading.Event()
    run = ReclaimRun()
    lock = threading.Lock()
    by_node: dict[str, list[Entry]] = {}
    for e in entries:
        by_node.setdefault(e.node, []).append(e)

    def record(outcome: Outcome) -> None:
        # Details quote agents and the controller; none of them may carry a secret onward.
        outcome.detail = redact(outcome.detail)
        # In the run first: an outcome the journal then cannot take is still reported.
        with lock:
            run.outcomes.append(outcome)
        try:
            journal.outcome(
                outcome.entry.node,
                outcome.entry.job_id,
                outcome.entry.finding.kind.value,
                outcome.result.value,
                outcome.detail,
            )
        except OSError as exc:
            raise JournalFailed(journal.path, exc) from exc
        if on_outcome is not None:
            on_outcome(outcome)

    def attempt(entry: Entry) -> Outcome:
        if spared and (why := spared.get((entry.node, entry.job_id))) is not None:
            return Outcome(entry, Result.SKIPPED, why)
        if max_inventory_age_s is not None:
            stale = stale_reason(entry, clock(), max_inventory_age_s)
            if stale is not None:
                return Outcome(entry, Result.SKIPPED, stale)
        try:
            reason = recheck(entry, jobs.get_job(entry.job_id), watermark, not_found_doubt)
        except Exception as exc:  # controller gone, unreadable answer: never send unchecked
            return Outcome(entry, Result.SKIPPED, f"re-check failed, not sent: {exc}")
        if reason is not None:
            return Outcome(entry, Result.SKIPPED, reason)
        if stop.is_set():
            # Ctrl-C landed during the re-check: its intent is journaled, so close it.
            return Outcome(entry, Result.SKIPPED, "interrupted before the cancel was sent")
        try:
            agents.cancel(entry.address, entry.job_id)
        except AgentError as exc:
            return Outcome(entry, Result.FAILED, str(exc))
        except Exception as exc:  # whatever broke, this node's outcome must be journaled
            return Outcome(
                entry,
                Result.FAILED,
                f"cancel not confirmed ({type(exc).__name__}: {exc}); check the node",
            )
        return Outcome(entry, Result.SENT, f"agent {entry.address} accepted CancelJob signal 0")

    def one_node(node_entries: list[Entry]) -> None:
        for i, entry in enumerate(node_entries):
            if stop.is_set():
                with lock:
                    run.not_attempted.extend(node_entries[i:])
                return
            kind = entry.finding.kind.value
            try:
                journal.intent(entry.node, entry.job_id, kind)
            except OSError as exc:
                with lock:
                    run.not_attempted.extend(node_entries[i:])
                raise JournalFailed(journal.path, exc) from exc
            try:
                record(attempt(entry))
            except JournalFailed:
                with lock:
                    run.not_attempted.extend(node_entries[i + 1 :])
                raise

    def guarded(node_entries: list[Entry]) -> None:
        # A worker that dies (journal unwritable, say) stops every other worker's
        # next send: nothing goes out that the journal could not record.
        try:
            one_node(node_entries)
        except BaseException:
            stop.set()
            raise

    workers = max(1, min(concurrency, len(by_node)))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reclaim")
    futures: list[Future[None]] = []
    failure: BaseException | None = None
    try:
        # Submitting inside the try: a Ctrl-C between two submits still sets `stop`,
        # and queued nodes then start only to record themselves as not attempted.
        for node_entries in by_node.values():
            futures.append(pool.submit(guarded, node_entries))
        for f in futures:
            # In short slices: a Ctrl-C is then seen within 0.1 s even where a blocked
            # wait is not woken by it, so no further send starts after it.
            while True:
                try:
                    f.result(timeout=0.1)
                    break
                except TimeoutError:
                    continue
    except KeyboardInterrupt:
        # Ctrl-C (or SIGTERM/SIGHUP, which send() turns into one): no new send
        # starts; sends in flight finish and are journaled.
        stop.set()
        run.interrupted = True
        for f in futures:
            try:
                f.result()
            except JournalFailed as exc:
                failure = failure or exc
    except JournalFailed as exc:
        stop.set()
        failure = exc
        for f in futures:  # the others' outcomes belong in the summary too
            with suppress(JournalFailed):
                f.result()
    except BaseException:
        stop.set()
        raise
    finally:
        # Never abandon a worker mid-send: its outcome still has to reach the journal.
        pool.shutdown(wait=True)
    order = {id(e): i for i, e in enumerate(entries)}
    run.outcomes.sort(key=lambda o: order[id(o.entry)])
    run.not_attempted.sort(key=lambda e: order[id(e)])
    if isinstance(failure, JournalFailed):
        failure.run = run
        raise failure
    return run


@contextmanager
def _opened(path: Path) -> Iterator[Journal]:
    """The journal, closed at the end without letting a failed close hide why the run stopped.

    Every record was flushed and fsynced when it was written, so a close can
    only fail on a record whose write already failed (and was reported).
    """
    from spurctl.act.journal import Journal

    journal = Journal(path)
    try:
        yield journal
    finally:
        with suppress(OSError):
            journal.close()


_STOP_SIGNALS = ("SIGTERM", "SIGHUP")


@contextmanager
def graceful_stop(run_box: dict[str, str]) -> Iterator[None]:
    """SIGTERM and SIGHUP stop a send as Ctrl-C does: as a KeyboardInterrupt in the main thread.

    The name of the signal that landed goes into `run_box["signal"]`. Outside
    the main thread (signals cannot be caught there) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: object) -> None:
        run_box.setdefault("signal", signal.Signals(signum).name)
        raise KeyboardInterrupt

    try:
        for name in _STOP_SIGNALS:
            number = getattr(signal, name, None)
            if number is not None:
                previous[number] = signal.signal(number, handler)
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def send(
    entries: Sequence[Entry],
    conn: Connection,
    *,
    journal_path: Path,
    watermark: int,
    concurrency: int = DEFAULT_CONCURRENCY,
    unresolved: Sequence[Unresolved] = (),
    max_inventory_age_s: float | None = DEFAULT_MAX_INVENTORY_AGE_S,
    spared: Mapping[tuple[str, int], str] | None = None,
) -> ReclaimRun:
    """`spurctl reclaim` after the plan is approved: journal, re-check, cancel.

    Intents an earlier, interrupted run left open are closed first with an
    outcome saying their fate is unknown, so the journal stays a faithful record.
    SIGTERM and SIGHUP stop the run as Ctrl-C does.
    """
    from spurctl.act.agents import AgentPool
    from spurctl.sources.controller import ControllerClient

    agents = AgentPool(jwt_key=conn.jwt_key, timeout=conn.timeout)
    box: dict[str, str] = {}
    try:
        with (
            graceful_stop(box),
            _opened(journal_path) as journal,
            ControllerClient(conn) as client,
        ):
            for u in journal.still_open(unresolved):
                try:
                    journal.outcome(
                        u.node,
                        u.job_id,
                        u.kind,
                        Result.FAILED.value,
                        "unknown: an earlier run was interrupted before recording this "
                        "outcome; check the node",
                    )
                except OSError as exc:
                    not_sent = ReclaimRun(not_attempted=[*entries])
                    raise JournalFailed(journal_path, exc, not_sent) from exc
            run = execute(
                entries,
                jobs=client,
                agents=agents,
                journal=journal,
                watermark=watermark,
                concurrency=concurrency,
                not_found_doubt=conn.not_found_doubt(),
                max_inventory_age_s=max_inventory_age_s,
                spared=spared,
            )
            run.stopped_by = box.get("signal", "SIGINT") if run.interrupted else None
            return run
    finally:
        agents.close()


@dataclass(slots=True)
class Carried(ReclaimRun):
    """A run carried out, and whether its nodes were re-collected to judge what it sent."""

    # Whether a re-collect judged each SENT outcome by what its node holds now; without
    # one, SENT only says the agent answered Ok (spurd does so for an unknown id too).
    verified: bool = False


def verify(
    run: ReclaimRun,
    held_now: Mapping[str, set[int]],
    settle: float,
    failed: Mapping[str, str] | None = None,
    waited: Mapping[tuple[str, int], float] | None = None,
) -> list[Outcome]:
    """Judge each SENT outcome by the node's re-collected inventory.

    Still held: FAILED. No inventory (the node is in `failed`, with why, or
    absent from `held_now`): UNCONFIRMED, since nothing shows the job gone.
    Gone: stays SENT, its detail saying the node confirmed it. `waited` is how
    long after the sends each (node, job) was last looked at (default `settle`),
    kept in the outcome's `waited_s`. Returns the outcomes whose result it changed.
    """
    failed = failed or {}
    waited = waited or {}
    changed = []
    for o in run.outcomes:
        if o.result is not Result.SENT:
            continue
        node, j = o.entry.node, o.entry.job_id
        after = waited.get((node, j), settle)
        if node in failed or node not in held_now:
            why = failed.get(node) or "no inventory came back"
            o.result = Result.UNCONFIRMED
            o.detail = (
                f"sent, but the re-collect of {node} failed ({why}), so nothing shows job "
                f"{j} gone; check the node"
            )
            changed.append(o)
            continue
        o.waited_s = after
        if j in held_now[node]:
            o.result = Result.FAILED
            if o.entry.finding.live is False:
                # spurd's CancelJob acts only on jobs in its running map; a job with no
                # process is not in it (docs/spur-facts.md, "The agent's CancelJob").
                o.detail = (
                    f"sent, but {node} still holds job {j} {after:g} s later and no process "
                    "of it runs: a leftover no further agent cancel removes (the next audit "
                    f"calls it leftover); free it on the node with `spurctl node-release`, as "
                    f"`spurctl explain {node} {j}` gives it"
                )
            else:
                o.detail = f"sent, but {node} still holds job {j} {after:g} s later; check the node"
            changed.append(o)
        else:
            o.detail = f"{o.detail}; confirmed: {node} no longer holds it {after:g} s later"
    return changed


# -- the command, callable without Typer ----------------------------------------


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


def prepare(
    nodes: str,
    src: Sources,
    conn: Connection,
    *,
    jobs: Sequence[int] | None = None,
    journal_path: Path | None = None,
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S,
    now: datetime | None = None,
    names_command: str = NAMES_COMMAND,
) -> Prepared:
    """Audit `nodes` afresh and plan the cancels for their reclaimable findings.

    Raises SpurctlError when a named node is one the controller does not know
    (a typo would otherwise plan nothing and look like a clean node), and when
    the plan's cancels could reach the wrong agent (send_guards.check_endpoints).
    """
    from spurctl.act.journal import default_path, unresolved
    from spurctl.audit_view import run_audit
    from spurctl.decide.plan import stale_reason

    # -x: an excluded node is never planned, whichever of its names --node gave (the
    # scope refused one that leaves out every node when it was parsed).
    scope = frozenset(src.scope.keep(src.scope.named or ()))
    path = journal_path or default_path()
    # The journal of earlier runs is the memory of cancels sent: a holding with no
    # process gets one at most (then it is a leftover, for node-release).
    report, inputs = run_audit(src, conn, journal=path)
    # An inventory whose job processes all name one controller node (SPUR_TARGET_NODE)
    # speaks for that node: its findings sit under the name it reports, and either name
    # selects them.
    speaks_for = {
        name: inv.target_node
        for name, inv in inputs.inventories.items()
        if inv.target_node is not None and inv.target_node in inputs.view.nodes
    }
    unknown_nodes = sorted(n for n in scope if n not in inputs.view.nodes and n not in speaks_for)
    if unknown_nodes:
        raise SpurctlError(
            f"unknown node{'s' if len(unknown_nodes) > 1 else ''} {fold(unknown_nodes)}: the "
            f"controller has no such node; check the names with `{names_command}`"
        )
    collected = {node: inv.collected_at for node, inv in inputs.inventories.items()}
    selected = set(scope) | {name for name, target in speaks_for.items() if target in scope}
    entries = plan(
        report,
        selected,
        jobs,
        conn.agent_address,
        collected_at=collected,
        fallback=conn.agent_map_lacks,
    )
    from spurctl.usecases.send_guards import check_cluster, check_endpoints

    check_cluster(inputs, conn)
    check_endpoints(entries, inputs, conn)
    when = now or utcnow()
    stale = {
        (e.node, e.job_id): why
        for e in entries
        if (why := stale_reason(e, when, max_inventory_age_s)) is not None
    }
    earlier = unresolved(path)
    return Prepared(
        report,
        inputs,
        entries,
        path,
        earlier,
        unmatched_jobs=unmatched_jobs(entries, jobs),
        fallback_nodes=sorted({e.node for e in entries if e.fallback}),
        max_inventory_age_s=max_inventory_age_s,
        stale=stale,
        investigate=[
            f for f in report.findings if f.node in selected and f.action is Action.INVESTIGATE
        ],
    )


def send_warning(conn: Connection) -> str | None:
    """What a dry run must say about the real run's credential: None when a key is set."""
    if conn.jwt_key is not None:
        return None
    if (conn.conf.auth_mode or "").lower() == "required":
        return (
            "the real run would stop after this plan: spur.conf says [auth] mode = required "
            "but no cluster key is configured (pass --jwt-key-file, set SPUR_JWT_KEY_FILE, or "
            "set [auth] jwt_key)"
        )
    return (
        "no cluster key is configured: the real run sends its cancels without a credential, "
        "which an agent with authentication on refuses (pass --jwt-key-file, set "
        "SPUR_JWT_KEY_FILE, or set [auth] jwt_key)"
    )


def check_can_send(conn: Connection) -> None:
    """Refuse before any prompt a send that the agents would all reject for want of a key."""
    if conn.jwt_key is None and (conn.conf.auth_mode or "").lower() == "required":
        raise SpurctlError(
            "spur.conf says [auth] mode = required but no cluster key is configured: pass "
            "--jwt-key-file, set SPUR_JWT_KEY_FILE, or set [auth] jwt_key"
        )


def carry_out(
    prepared: Prepared,
    conn: Connection,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    recollect: Sources | None = None,
    settle: float = DEFAULT_SETTLE_S,
    on_settle: OnSettle | None = None,
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
    """
    from spurctl.act.journal import journal_lock

    check_can_send(conn)
    # One lock from the first intent to the last verified outcome: a second run on
    # this journal in between would resend cancels and close our intents.
    with journal_lock(prepared.journal_path):
        run = send(
            prepared.entries,
            conn,
            journal_path=prepared.journal_path,
            watermark=prepared.inputs.watermark.value,
            concurrency=concurrency,
            unresolved=prepared.unresolved,
            max_inventory_age_s=prepared.max_inventory_age_s,
            spared=prepared.spared,
        )
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
                carried, prepared.journal_path, touched, recollect, settle, on_settle=on_settle
            )
        if carried.interrupted:
            journal_stop(carried, prepared.journal_path, cut_short=will_verify)
    return carried


def journal_stop(run: ReclaimRun, journal_path: Path, *, cut_short: bool) -> None:
    """Journal that a signal stopped the run: an `interrupted` record for each entry the
    stop left undone, so `spurctl journal` reads the run as interrupted.

    Those are the entries never sent, and the sent cancels the stop left unconfirmed
    when a re-collect was to judge them (`cut_short`); a stop that cut nothing
    short (it landed after the last send of a run without a re-collect) marks the
    sent ones. Each record names the signal; `sent` says whether its cancel went out.
    """
    by = run.stopped_by or "SIGINT"
    marks: list[tuple[Entry, bool, str]] = [
        (e, False, f"not sent: the run was stopped by {by} before its cancel")
        for e in run.not_attempted
    ]
    went_out = [o for o in run.outcomes if o.result in (Result.SENT, Result.UNCONFIRMED)]
    if cut_short or not marks:
        why = (
            f"sent; stopped by {by} before a re-collect showed it freed"
            if cut_short
            else f"sent; the run was stopped by {by} after its cancel"
        )
        marks += [(o.entry, True, why) for o in went_out]
    if not marks:
        return
    try:
        with _opened(journal_path) as journal:
            for entry, sent, why in marks:
                journal.interrupted(
                    entry.node, entry.job_id, entry.finding.kind.value, by, why, sent=sent
                )
    except OSError as exc:
        raise JournalFailed(journal_path, exc, run) from exc


# Re-collect this often while waiting for the cancelled runs to go: spurd's monitor
# notices an exit every 2 s (docs/spur-facts.md, "The agent's CancelJob").
RECOLLECT_EVERY_S = 2.0


def reverify(
    run: ReclaimRun,
    journal_path: Path,
    touched: list[str],
    recollect: Sources,
    settle: float,
    *,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
    on_settle: OnSettle | None = None,
) -> bool:
    """Re-collect the touched nodes until every sent cancel's job is gone from its node,
    or `settle` seconds have passed, and judge the sent cancels by what they showed.

    spurd frees a run that ignores SIGTERM only after its 5 s SIGKILL grace and the
    next 2 s monitor tick, so one look at 5 s would call it failed. A node is looked
    at every RECOLLECT_EVERY_S (the first time at min(that, settle)) while one of its
    jobs is still there. Each outcome says how long after the sends its node was
    last looked at, and `run.waited_s` how long the whole wait took. A SIGTERM,
    SIGHUP or Ctrl-C while waiting leaves the cancels unconfirmed. Returns whether a
    re-collect ran, so that each sent cancel was judged. `on_settle(pairs, settle)` is
    called once, before the first look, with each (node, job) it waits to see freed.
    """
    import time

    from spurctl.sources.collect import collect

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    sent = [o for o in run.outcomes if o.result is Result.SENT]
    held_now: dict[str, set[int]] = {}
    errors: dict[str, str] = {}
    seen_at: dict[str, float] = {}  # node -> when (after the sends) it was last looked at
    box: dict[str, str] = {}
    begun = clock()
    check = min(RECOLLECT_EVERY_S, settle)
    nodes = list(touched)
    try:
        with graceful_stop(box):
            if on_settle is not None:  # inside: a Ctrl-C as soon as it is said is a stop too
                on_settle([(o.entry.node, o.entry.job_id) for o in sent], settle)
            while True:
                sleep(max(0.0, begun + check - clock()))
                at = round(clock() - begun, 1)
                again = collect(
                    nodes,
                    command=recollect.command,
                    fanout=recollect.fanout,
                    timeout=recollect.node_timeout,
                    tree=recollect.tree,
                )
                for inv in again:
                    if inv.error:
                        if inv.node not in held_now:  # an earlier look still stands
                            errors[inv.node] = str(inv.error)
                        continue
                    held_now[inv.node] = {h.job_id for h in inv.held}
                    errors.pop(inv.node, None)
                    seen_at[inv.node] = at
                nodes = sorted(
                    {
                        o.entry.node
                        for o in sent
                        if o.entry.node not in held_now or o.entry.job_id in held_now[o.entry.node]
                    }
                )
                if not nodes or check >= settle:
                    break
                check = min(check + RECOLLECT_EVERY_S, settle)
    except KeyboardInterrupt:
        run.interrupted = True
        run.stopped_by = box.get("signal", "SIGINT")
        verify(run, {}, settle, dict.fromkeys(touched, f"stopped by {run.stopped_by}"))
        return False
    except Exception as exc:  # the collect itself broke: no node is confirmed
        why = f"{type(exc).__name__}: {exc}"
        verify(run, {}, settle, dict.fromkeys(touched, why))
        return False
    run.waited_s = round(clock() - begun, 1)
    waited = {(o.entry.node, o.entry.job_id): seen_at.get(o.entry.node, settle) for o in sent}
    verify(run, held_now, settle, errors, waited)
    # What the node showed is journaled too: a later reader (`spurctl journal`) then
    # tells a confirmed cancel from one only sent.
    if sent:
        try:
            with _opened(journal_path) as journal:
                for o in sent:
                    journal.outcome(
                        o.entry.node,
                        o.entry.job_id,
                        o.entry.finding.kind.value,
                        o.result.value,
                        o.detail,
                        confirmed=confirmed(o.result, verified=True),
                    )
        except OSError as exc:
            raise JournalFailed(journal_path, exc, run) from exc
    return True


def only_saved(
    prepared: Prepared, saved: PlanDocument, max_age_s: float, excluded: Collection[str] = ()
) -> Prepared:
    """The fresh plan narrowed to the saved entries (decide.saved_plan); a saved entry the
    fresh audit no longer plans stays in, spared with why (`excluded`: this run's -x)."""
    import dataclasses

    from spurctl.decide.saved_plan import check_saved, narrow_to_saved

    check_saved(saved, prepared.report.controller_address, max_age_s, utcnow())
    inputs = prepared.inputs
    entries, spared = narrow_to_saved(
        saved, prepared.entries, prepared.report.findings,
        lambda job_id: inputs.view.jobs.get(job_id) or inputs.confirmed.get(job_id),
        excluded=excluded,
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


def reclaim(
    nodes: str,
    src: Sources,
    conn: Connection,
    *,
    show_plan: Callable[[Prepared], None],
    ask: Callable[[Prepared], bool] | None,
    jobs: Sequence[int] | None = None,
    journal_path: Path | None = None,
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S,
    dry_run: bool = False,
    yes: bool = False,
    settle: float = DEFAULT_SETTLE_S,
    concurrency: int = DEFAULT_CONCURRENCY,
    verify_inventory: bool = False,
    saved: PlanDocument | None = None,
    names_command: str = NAMES_COMMAND,
    on_settle: OnSettle | None = None,
) -> Reclaimed:
    """The whole command: plan, show the plan (`show_plan`), ask unless `yes` (`ask`;
    None: there is no terminal to ask on, so refuse), then send and verify
    (`on_settle`: told what the re-collect waits for, and how long at most).

    Exit 0 only when everything planned was sent and a node showed it freed; a --job
    that matches nothing is a request not met (1), even with nothing to do.
    """
    import dataclasses

    prepared = prepare(
        nodes, src, conn, jobs=jobs, journal_path=journal_path,
        max_inventory_age_s=max_inventory_age_s, names_command=names_command,
    )  # fmt: skip
    if saved is not None:
        prepared = only_saved(prepared, saved, max_inventory_age_s, src.scope.excluded)
    show_plan(prepared)
    entries = prepared.entries
    unmet = ExitStatus.ACTION_NEEDED if prepared.unmatched_jobs else ExitStatus.OK
    if dry_run:
        warning = send_warning(conn) if entries else None
        return Reclaimed(prepared, Stage.PLANNED, unmet, key_warning=warning)
    if not entries:
        return Reclaimed(prepared, Stage.NOTHING, unmet, run=ReclaimRun())
    check_can_send(conn)
    if not yes:
        if ask is None:
            raise SpurctlError(
                "refusing to reclaim without --yes: standard input is not a terminal"
            )
        if not ask(prepared):
            return Reclaimed(prepared, Stage.DECLINED, ExitStatus.ACTION_NEEDED)
    # --verify-inventory: re-collect the touched nodes as --collect would, whatever the plan
    # was read from.
    recollect = dataclasses.replace(src, collect=True) if verify_inventory else src
    try:
        run = carry_out(
            prepared,
            conn,
            concurrency=concurrency,
            recollect=recollect,
            settle=settle,
            on_settle=on_settle,
        )
    except JournalFailed as exc:
        return Reclaimed(
            prepared, Stage.JOURNAL_FAILED, ExitStatus.ERROR, run=exc.run, error=exc.sentence()
        )
    done = run.ok and run.verified and unmet is ExitStatus.OK
    status = ExitStatus.OK if done else ExitStatus.ACTION_NEEDED
    return Reclaimed(prepared, Stage.SENT, status, run=run, verified=run.verified)
