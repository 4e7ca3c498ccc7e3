"""Sending a reclaim's cancels, and everything a send journals.

`execute` is the send loop: parallel across nodes and in order within one, each
entry re-checked with a fresh GetJob immediately before its cancel and journaled
around it (intent before, outcome after, fsynced), so an interrupted run leaves an
exact record. `send` runs it under `graceful_stop` (SIGTERM and SIGHUP stop a
send as Ctrl-C does) after closing the intents an earlier, interrupted run left
open. What the journal must say after the sends (what a re-collect showed, that
a signal stopped the run) is written here too, through the one Journal a run
holds open from its first record to its last.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from spurctl.act.stops import stops_as_ctrl_c, stops_deferred
from spurctl.decide.plan import (
    Entry,
    Outcome,
    ReclaimRun,
    Result,
    confirmed,
    recheck,
    stale_reason,
)
from spurctl.defaults import DEFAULT_CONCURRENCY
from spurctl.errors import redact
from spurctl.model import Job, utcnow

if TYPE_CHECKING:
    from spurctl.act.journal import Journal
    from spurctl.sources.journal_records import Unresolved
    from spurctl.sources.settings import Connection


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
    from spurctl.act.agents import AgentError, TermRefused

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
        except TermRefused as exc:
            fenced[entry.node] = entry.address
            return Outcome(entry, Result.FAILED, str(exc))
        except AgentError as exc:
            return Outcome(entry, Result.FAILED, str(exc))
        except Exception as exc:  # whatever broke, this node's outcome must be journaled
            return Outcome(
                entry,
                Result.FAILED,
                f"cancel not confirmed ({type(exc).__name__}: {exc}); check the node",
            )
        return Outcome(entry, Result.SENT, f"agent {entry.address} accepted CancelJob signal 0")

    # node -> the agent that refused a cancel for its controller term (Spur #600): it refuses
    # every cancel spurctl can send, so none more is sent to it in this run.
    fenced: dict[str, str] = {}

    def fenced_out(entry: Entry) -> Outcome | None:
        address = fenced.get(entry.node)
        if address is None:
            return None
        return Outcome(
            entry,
            Result.SKIPPED,
            f"not sent: agent {address} refused this run's earlier cancel for its controller "
            "term (Spur #600) and refuses every cancel spurctl can send",
        )

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
                record(fenced_out(entry) or attempt(entry))
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
        # Every node handed to the pool before a Ctrl-C is acted on: one landing inside a
        # submit (which starts a worker before it records it) would leave a worker the
        # pool never waits for, and one between two submits nodes nobody records. Held
        # until all are queued, it sets `stop`, and queued nodes then start only to
        # record themselves as not attempted.
        with stops_deferred():
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


def graceful_stop(run_box: dict[str, str]) -> AbstractContextManager[None]:
    """SIGTERM and SIGHUP stop a send as Ctrl-C does (act/stops.stops_as_ctrl_c); the name of
    the signal that landed goes into `run_box["signal"]`."""
    return stops_as_ctrl_c(run_box)


def close_unresolved(
    journal: Journal, unresolved: Sequence[Unresolved], entries: Sequence[Entry]
) -> None:
    """Close, before the first send, each intent an earlier, interrupted run left open
    (and the journal, read now under the lock, still leaves open) with an outcome saying
    its fate is unknown, so the journal stays a faithful record. A journal that cannot
    take it raises JournalFailed with nothing sent."""
    if not unresolved:
        return
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
            raise JournalFailed(journal.path, exc, ReclaimRun(not_attempted=[*entries])) from exc


def send(
    entries: Sequence[Entry],
    *,
    jobs: JobSource,
    agents: Canceller,
    journal: Journal,
    watermark: int,
    concurrency: int = DEFAULT_CONCURRENCY,
    unresolved: Sequence[Unresolved] = (),
    not_found_doubt: str | None = None,
    max_inventory_age_s: float | None = None,
    spared: Mapping[tuple[str, int], str] | None = None,
) -> ReclaimRun:
    """The approved plan sent: earlier open intents closed, then `execute`, with SIGTERM
    and SIGHUP stopping it as Ctrl-C does (`stopped_by` names the signal)."""
    box: dict[str, str] = {}
    with graceful_stop(box):
        close_unresolved(journal, unresolved, entries)
        run = execute(
            entries,
            jobs=jobs,
            agents=agents,
            journal=journal,
            watermark=watermark,
            concurrency=concurrency,
            not_found_doubt=not_found_doubt,
            max_inventory_age_s=max_inventory_age_s,
            spared=spared,
        )
    run.stopped_by = box.get("signal", "SIGINT") if run.interrupted else None
    return run


def journal_judged(journal: Journal, outcomes: Iterable[Outcome], run: ReclaimRun) -> None:
    """Journal what the re-collect showed of each sent cancel (`confirmed`), so that a
    later reader (`spurctl journal`) tells a confirmed cancel from one only sent."""
    try:
        for o in outcomes:
            journal.outcome(
                o.entry.node,
                o.entry.job_id,
                o.entry.finding.kind.value,
                o.result.value,
                o.detail,
                confirmed=confirmed(o.result, verified=True),
            )
    except OSError as exc:
        raise JournalFailed(journal.path, exc, run) from exc


def journal_stop(run: ReclaimRun, journal: Journal, *, cut_short: bool) -> None:
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
    try:
        for entry, sent, why in marks:
            journal.interrupted(
                entry.node, entry.job_id, entry.finding.kind.value, by, why, sent=sent
            )
    except OSError as exc:
        raise JournalFailed(journal.path, exc, run) from exc


@contextmanager
def opened_journal(path: Path, conn: Connection | None = None) -> Iterator[Journal]:
    """The run's one Journal, closed at the end without letting a failed close hide why
    the run stopped.

    Every record was flushed and fsynced when it was written, so a close can
    only fail on a record whose write already failed (and was reported).
    """
    from spurctl.act.journal import Journal

    journal = Journal(path, conn)
    try:
        yield journal
    finally:
        with suppress(OSError):
            journal.close()
