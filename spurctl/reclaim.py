"""`spurctl reclaim`: targeted, re-checked, journaled agent cancels.

Plan = the audit's `reclaim` findings on the chosen nodes. Immediately before
each send the entry is re-checked with a fresh GetJob (a requeue may have landed
since the audit); one that no longer qualifies is skipped with its reason. Sends
run in parallel across nodes and in order within a node, each journaled (intent
before, outcome after, fsynced) so an interrupted run leaves an exact record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from spurctl.decide.plan import Entry, Outcome, ReclaimRun, Result, plan, recheck
from spurctl.errors import SpurctlError, redact
from spurctl.model import AuditReport, Job

if TYPE_CHECKING:
    from pathlib import Path

    from spurctl.act.journal import Journal, Unresolved
    from spurctl.audit import AuditInputs
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection


# Nodes re-checked and cancelled at once. Each entry is two round trips (GetJob to
# the controller, CancelJob to the agent) and two journal syncs: at ~50 ms each, 32
# at once took ~4 s for 1,000 nodes and 64 takes ~2 s (bench/reclaim_fanout.py).
# 64 is also collect's and ClusterShell's fan-out. Safety does not depend on it:
# every send is re-checked and journaled on its own.
DEFAULT_CONCURRENCY = 64


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
) -> ReclaimRun:
    """Re-check, journal and send each entry; parallel across nodes, ordered within one."""
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
        journal.outcome(
            outcome.entry.node,
            outcome.entry.job_id,
            outcome.entry.finding.kind.value,
            outcome.result.value,
            outcome.detail,
        )
        with lock:
            run.outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    def one_node(node_entries: list[Entry]) -> None:
        for i, entry in enumerate(node_entries):
            if stop.is_set():
                with lock:
                    run.not_attempted.extend(node_entries[i:])
                return
            kind = entry.finding.kind.value
            journal.intent(entry.node, entry.job_id, kind)
            try:
                reason = recheck(entry, jobs.get_job(entry.job_id), watermark)
            except Exception as exc:  # controller gone, unreadable answer: never send unchecked
                record(Outcome(entry, Result.SKIPPED, f"re-check failed, not sent: {exc}"))
                continue
            if reason is not None:
                record(Outcome(entry, Result.SKIPPED, reason))
                continue
            if stop.is_set():
                # Ctrl-C landed during the re-check: its intent is journaled, so close it.
                record(Outcome(entry, Result.SKIPPED, "interrupted before the cancel was sent"))
                continue
            try:
                agents.cancel(entry.address, entry.job_id)
            except AgentError as exc:
                record(Outcome(entry, Result.FAILED, str(exc)))
                continue
            except Exception as exc:  # whatever broke, this node's outcome must be journaled
                record(
                    Outcome(
                        entry,
                        Result.FAILED,
                        f"cancel not confirmed ({type(exc).__name__}: {exc}); check the node",
                    )
                )
                continue
            record(
                Outcome(entry, Result.SENT, f"agent {entry.address} accepted CancelJob signal 0")
            )

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
    try:
        # Submitting inside the try: a Ctrl-C between two submits still sets `stop`,
        # and queued nodes then start only to record themselves as not attempted.
        for node_entries in by_node.values():
            futures.append(pool.submit(guarded, node_entries))
        for f in futures:
            f.result()
    except KeyboardInterrupt:
        # Ctrl-C: no new send starts; sends in flight finish and are journaled.
        stop.set()
        run.interrupted = True
        for f in futures:
            f.result()
    except BaseException:
        stop.set()
        raise
    finally:
        # Never abandon a worker mid-send: its outcome still has to reach the journal.
        pool.shutdown(wait=True)
    order = {id(e): i for i, e in enumerate(entries)}
    run.outcomes.sort(key=lambda o: order[id(o.entry)])
    return run


def send(
    entries: Sequence[Entry],
    conn: Connection,
    *,
    journal_path: Path,
    watermark: int,
    concurrency: int = DEFAULT_CONCURRENCY,
    unresolved: Sequence[Unresolved] = (),
) -> ReclaimRun:
    """`spurctl reclaim` after the plan is approved: journal, re-check, cancel.

    Intents an earlier, interrupted run left open are closed first with an
    outcome saying their fate is unknown, so the journal stays a faithful record.
    """
    from spurctl.act.agents import AgentPool
    from spurctl.act.journal import Journal
    from spurctl.sources.controller import ControllerClient

    agents = AgentPool(jwt_key=conn.jwt_key, timeout=conn.timeout)
    try:
        with Journal(journal_path) as journal, ControllerClient(conn) as client:
            for u in unresolved:
                journal.outcome(
                    u.node,
                    u.job_id,
                    u.kind,
                    Result.FAILED.value,
                    "unknown: an earlier run was interrupted before recording this outcome; "
                    "check the node",
                )
            return execute(
                entries,
                jobs=client,
                agents=agents,
                journal=journal,
                watermark=watermark,
                concurrency=concurrency,
            )
    finally:
        agents.close()


def verify(run: ReclaimRun, held_now: dict[str, set[int]], settle: float) -> list[Outcome]:
    """Turn a SENT outcome into FAILED when the node still holds the job afterwards.

    Returns the outcomes it changed, for the journal.
    """
    changed = []
    for o in run.outcomes:
        if o.result is Result.SENT and o.entry.job_id in held_now.get(o.entry.node, set()):
            o.result = Result.FAILED
            o.detail = (
                f"sent, but {o.entry.node} still holds job {o.entry.job_id} "
                f"{settle:g} s later; check the node"
            )
            changed.append(o)
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


def prepare(
    nodes: str,
    src: Sources,
    conn: Connection,
    *,
    jobs: Sequence[int] | None = None,
    journal_path: Path | None = None,
) -> Prepared:
    """Audit `nodes` afresh and plan the cancels for their reclaimable findings.

    Raises SpurctlError when a named node is one the controller does not know:
    a typo would otherwise plan nothing and look like a clean node.
    """
    from spurctl.act.journal import default_path, unresolved
    from spurctl.audit import run_audit
    from spurctl.hostlist import parse_scope

    scope = parse_scope(nodes)
    report, inputs = run_audit(src, conn)
    unknown_nodes = sorted(n for n in scope if n not in inputs.view.nodes)
    if unknown_nodes:
        raise SpurctlError(
            f"unknown node(s) {', '.join(unknown_nodes[:5])}: the controller has no such node; "
            "check the names with `spurctl audit --all`"
        )
    path = journal_path or default_path()
    entries = plan(report, scope, jobs, conn.agent_address)
    return Prepared(report, inputs, entries, path, unresolved(path))


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
    settle: float = 5.0,
) -> ReclaimRun:
    """Send the approved plan: journal, re-check, cancel; then, with `recollect`, verify.

    With `recollect` (a live collect), the touched nodes are inventoried again
    after `settle` seconds, and a cancel whose job is still held turns failed,
    in the run and in the journal. After a Ctrl-C the operator wants the
    summary now, not a settle and a re-collect.
    """
    check_can_send(conn)
    run = send(
        prepared.entries,
        conn,
        journal_path=prepared.journal_path,
        watermark=prepared.inputs.watermark.value,
        concurrency=concurrency,
        unresolved=prepared.unresolved,
    )
    touched = sorted({o.entry.node for o in run.outcomes if o.result is Result.SENT})
    if recollect is not None and recollect.collect and touched and not run.interrupted:
        import time

        from spurctl.act.journal import Journal
        from spurctl.audit import COLLECT_TIMEOUT
        from spurctl.sources.collect import collect

        time.sleep(settle)
        again = collect(
            touched, command=recollect.command, fanout=recollect.fanout, timeout=COLLECT_TIMEOUT
        )
        held_now = {inv.node: {h.job_id for h in inv.held} for inv in again if not inv.error}
        with Journal(prepared.journal_path) as journal:
            for o in verify(run, held_now, settle):
                journal.outcome(
                    o.entry.node,
                    o.entry.job_id,
                    o.entry.finding.kind.value,
                    o.result.value,
                    o.detail,
                )
    return run
