"""`spurctl autopilot`: rounds of audit -> decide -> act within budgets, until stopped.

Each round audits the scope afresh (audit_view.run_audit, as `audit` does), lets the
manual commands' own planners say what they would do (reclaim: decide/reclaim_plan.py
with its endpoint and cluster guards; drain and resume: decide/drains.py), lets
decide/autopilot.py choose what goes out now (grace, budgets, flapping, the breaker),
and sends through the same act/ paths as the manual commands: reclaim's `execute`
(a fresh GetJob right before each cancel, one cancel per holding, journaled) and
NodeAdmin (the node re-read right before each UpdateNode, journaled). With --repair,
a phantom-alloc node is planned as `spurctl repair` plans it (repair_view.judge_node,
where spur.conf shows a removed node registers again) and repaired by its run
(act/repair_run.run_within), one a round, bounded by --tick and --wait. Its own lock
(act/journal.autopilot_lock) is held from start to stop: one autopilot per journal.
The journal's lock it holds only while a round acts, taken only if free: a manual
reclaim, drain, resume or repair waits for it between rounds (--lock-wait), and a round
that finds a manual run holding it sends nothing (state `journal-busy`). A journal
written since the round's audit read it is audited again under the lock.

Signals: SIGTERM and SIGINT stop it; a call in flight finishes and its outcome is
journaled first (reclaim's pool finishes what it sent; a node call runs under
`stops_deferred`). SIGHUP re-reads the configuration before the next round. An
intent a killed autopilot left open is closed (fate unknown) before anything is sent.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.decide.autopilot import (
    DEFAULT_BREAKER,
    DEFAULT_REPAIR_WAIT_S,
    FLAPPING,
    ORIGIN,
    Act,
    Breaker,
    Candidate,
    Choice,
    Limits,
    Sightings,
    Spent,
    State,
    Threshold,
    breaker_step,
    choose,
    spent,
    waits_by_budget,
)
from spurctl.decide.budget import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_MAX_UNAVAILABLE,
    OUT_OF_SERVICE,
    MaxUnavailable,
    cooling,
    out_by_spurctl,
    resumed_at,
)
from spurctl.decide.drains import NodeChange, cancel_states, drain_plan, resume_plan
from spurctl.decide.lost_reason import lost_drains, lost_line
from spurctl.decide.one_cancel import WAIT as CANCEL_WAIT
from spurctl.decide.one_cancel import AfterCancel, after_cancel
from spurctl.decide.owner import Ownership, Seen, journaled_drains
from spurctl.decide.plan import Entry, reclaimable
from spurctl.decide.reclaim_plan import decide, selection
from spurctl.decide.repair import Refusal, Target, repair_progress
from spurctl.decide.send_guards import key_refusal, legit_nodes
from spurctl.defaults import DEFAULT_MAX_INVENTORY_AGE_S, DEFAULT_TICK_S
from spurctl.errors import ExitStatus, SpurctlError, redact
from spurctl.hostlist import fold
from spurctl.model import Kind, utcnow
from spurctl.releases import replaces_hold_reason
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.act.node_admin import NodeAdmin
    from spurctl.audit_view import AuditInputs
    from spurctl.model import AuditReport
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection

# What no agent cancel can free now: the autopilot drains these (and only these).
DRAINED_KINDS = frozenset({Kind.AGENT_ORPHAN.value, Kind.LEFTOVER.value})
TICK_S = 10.0
FLAPPING_PREFIX = f"spurctl: {FLAPPING}:"


REJOIN_WITHOUT_REPAIR = "--rejoin-checked goes with --repair: add --repair, or leave it out"


@dataclass(frozen=True, slots=True)
class AutopilotRequest:
    """What `spurctl autopilot` was asked: options only, as reclaim's request; an option that
    means nothing without another refused when it is built (SpurctlError), before anything
    is read or any connection made (the run is given its Sources and Connection beside it).
    Each option's own range is its parser's (option_values)."""

    scope: Scope
    journal_path: Path
    pause_file: Path
    interval_s: float = 30.0
    rounds: int | None = None
    limits: Limits = field(default_factory=Limits)
    breaker: Threshold = DEFAULT_BREAKER
    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE
    cooldown_s: float = DEFAULT_COOLDOWN_S
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S
    dry_run: bool = False
    # --repair (phantom-alloc nodes, one a round), --rejoin-checked, --tick and --wait.
    repair: bool = False
    rejoin_checked: bool = False
    tick_s: float = DEFAULT_TICK_S
    wait_s: float = DEFAULT_REPAIR_WAIT_S

    def __post_init__(self) -> None:
        if self.rejoin_checked and not self.repair:
            raise SpurctlError(REJOIN_WITHOUT_REPAIR)


@dataclass(frozen=True, slots=True)
class Done:
    """One call the round sent (or, in a dry run, would send), and what came of it."""

    act: str
    node: str
    job_id: int
    kind: str
    result: str  # sent, failed, skipped, would-send
    detail: str


@dataclass(slots=True)
class RoundReport:
    """One round: what the JSON line, the stderr line and the metrics say."""

    round: int
    started_at: datetime
    took_s: float
    state: State
    why: list[str]
    findings: dict[str, int]
    nodes_audited: int = 0
    nodes_needing_action: int = 0
    actions: list[Done] = field(default_factory=list)
    waiting: dict[str, int] = field(default_factory=dict)
    budgets: dict[str, int] = field(default_factory=dict)
    breaker: Breaker = field(default_factory=Breaker)
    settled: int = 0  # open intents of a killed run closed before this round
    # Since the autopilot started: rounds, and calls by (action, result).
    rounds_total: int = 0
    actions_total: dict[tuple[str, str], int] = field(default_factory=dict)
    paused: bool = False
    # Nodes left to a person this round, and why (a phantom charge without --repair, a
    # repair refused, a drain of spurctl's whose reason Spur v0.8.0 replaced).
    to_person: dict[str, str] = field(default_factory=dict)
    # Those in scope DOWN `Not responding` since spurctl's drain (decide/lost_reason.py).
    reason_lost: int = 0


@dataclass(slots=True)
class _Flags:
    stopping: bool = False
    reload: bool = False


@contextmanager
def _signals(flags: _Flags) -> Iterator[None]:
    """SIGTERM/SIGINT: stop (a KeyboardInterrupt where it lands; the send paths defer it
    past the call in flight); SIGHUP: re-read the configuration before the next round."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_n: int, _f: object) -> None:
        flags.stopping = True
        raise KeyboardInterrupt

    def reload(_n: int, _f: object) -> None:
        flags.reload = True

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, stop),
        signal.SIGINT: signal.signal(signal.SIGINT, stop),
        signal.SIGHUP: signal.signal(signal.SIGHUP, reload),
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run(
    request: AutopilotRequest,
    src: Sources,
    conn: Connection,
    *,
    on_round: Callable[[RoundReport], None],
    tick: Callable[[], object] | None = None,
    reconnect: Callable[[], Connection] | None = None,
) -> ExitStatus:
    """Rounds until stopped (a signal) or `request.rounds` are done; exit 0 then. Each
    round reads the holdings through `src` (its scope the request's) and the cluster
    through `conn`; SIGHUP: `conn` read again by `reconnect` (the options, spur.conf and
    the config file) before the next round.
    `on_round` is told each round's report. A second autopilot (or a manual run) on the
    same journal: SpurctlError naming the first's pid (exit 2). `tick` is called at least
    every 10 s between rounds (systemd's watchdog)."""
    from spurctl.act.journal import autopilot_lock

    flags = _Flags()
    pilot = _Pilot(unsettled=not request.dry_run)
    with _signals(flags), autopilot_lock(request.journal_path):
        try:
            due = time.monotonic()
            n = 0
            while True:
                if flags.reload and reconnect is not None:
                    flags.reload = False
                    conn = reconnect()
                n += 1
                # A round's time is when it was due (as the watch's): the ages it judges are
                # whole intervals, however late a round started.
                late = max(0.0, time.monotonic() - due)
                on_round(pilot.round(n, request, src, conn, late))
                if flags.stopping or (request.rounds is not None and n >= request.rounds):
                    break
                due += request.interval_s
                wait = due - time.monotonic()
                if wait <= 0:  # behind: the next round starts now, not in a burst
                    due = time.monotonic()
                while wait > 0:
                    time.sleep(min(wait, TICK_S))
                    if tick is not None:
                        tick()
                    wait = due - time.monotonic()
        except KeyboardInterrupt:
            pass
    return ExitStatus.OK


def _new_run() -> str:
    from spurctl.act.journal import new_run_id

    return new_run_id()


def _settle(path: Path, conn: Connection, run: str | None = None) -> int:
    """Close the intents a killed run of this cluster left open (their fate unknown)
    before any send."""
    from spurctl.act.cancels import close_unresolved
    from spurctl.act.journal import Journal
    from spurctl.act.stops import stops_deferred
    from spurctl.sources.journal_records import cluster_of, history

    earlier = history(path, cluster=cluster_of(conn))
    if not earlier.unresolved:
        return 0
    with stops_deferred(), Journal(path, conn, run=run) as journal:
        journal.tags = {"origin": ORIGIN, "round": 0}
        still = journal.still_open(earlier.unresolved)
        close_unresolved(journal, still, [])
    return len(still)


@dataclass(slots=True)
class _Pilot:
    """What the autopilot carries from round to round: first sightings, the breaker, totals."""

    sightings: Sightings = field(default_factory=Sightings)
    breaker: Breaker = field(default_factory=Breaker)
    rounds_total: int = 0
    actions_total: dict[tuple[str, str], int] = field(default_factory=dict)
    settled: int = 0
    # Intents a killed run left open not yet closed: done under the journal's lock, before
    # anything is sent (a dry run sends nothing, and closes none).
    unsettled: bool = False
    # One journal run for the autopilot's life, whichever rounds hold the lock.
    run: str = field(default_factory=lambda: _new_run())

    def round(
        self, n: int, request: AutopilotRequest, src: Sources, conn: Connection, late: float = 0.0
    ) -> RoundReport:
        started = utcnow() - timedelta(seconds=late)
        t0 = time.monotonic()
        report = self._round(n, request, src, conn, started)
        report.took_s = time.monotonic() - t0
        self.rounds_total += 1
        for d in report.actions:
            key = (d.act, d.result)
            self.actions_total[key] = self.actions_total.get(key, 0) + 1
        report.rounds_total = self.rounds_total
        report.actions_total = dict(self.actions_total)
        report.settled, self.settled = self.settled, 0
        return report

    def _round(
        self, n: int, request: AutopilotRequest, src: Sources, conn: Connection, now: datetime
    ) -> RoundReport:
        """Audit and decide without the journal's lock; take it only to act, and only if it
        is free (a manual run holding it: nothing sent this round, and why). A journal that
        changed since the audit read it (a manual run acted meanwhile) is audited again
        under the lock before anything goes out."""
        from spurctl.act.journal import journal_lock_if_free

        path = request.journal_path
        if self.unsettled:
            with journal_lock_if_free(path) as holder:
                if holder is None:
                    self._settle(request, conn)
        mark = journal_mark(path)
        breaker = self.breaker
        look = self._look(request, src, conn, now)
        if isinstance(look, RoundReport):
            return _numbered(look, n)
        if look.state is not State.ACTING or not look.going:
            actions = [_would(c) for c in look.going] if look.state is State.DRY_RUN else []
            return look.report(n, request, actions)
        with journal_lock_if_free(path) as holder:
            if holder is not None:  # a manual run between our rounds: it goes first
                look.state = State.JOURNAL_BUSY
                look.why.insert(0, f"journal in use by {holder}: nothing sent this round; "
                                "the next round audits again")  # fmt: skip
                look.waits["journal-busy"] = len(look.going)
                return look.report(n, request, [])
            if self.unsettled:
                self._settle(request, conn)
            if journal_mark(path) != mark:  # what the audit read is no longer all that is true
                self.breaker = breaker
                look = self._look(request, src, conn, now)
                if isinstance(look, RoundReport):
                    return _numbered(look, n)
                look.why.append("the journal changed since this round's audit (a manual run?): "
                                "audited again under its lock")  # fmt: skip
                if look.state is not State.ACTING:
                    return look.report(n, request, [])
            sent = _send(look.going, look.plans, request, src, conn, look.inputs, n, self.run)
            return look.report(n, request, sent)

    def _settle(self, request: AutopilotRequest, conn: Connection) -> None:
        self.settled += _settle(request.journal_path, conn, self.run)
        self.unsettled = False

    def _look(
        self, request: AutopilotRequest, src: Sources, conn: Connection, now: datetime
    ) -> _Look | RoundReport:
        """This round's audit and what the manual commands' planners and the budgets make
        of it; a RoundReport (numbered by the caller) when there is no view to act on."""
        from spurctl.audit_view import refuse_another_cluster, run_audit
        from spurctl.sources.controller import ControllerClient
        from spurctl.sources.journal_records import cluster_of, history, records

        path = request.journal_path
        paused = request.pause_file.exists()
        # This cluster's records only (journal_records): another cluster's sharing the
        # journal spend none of this one's budgets, own none of its drains.
        cluster = cluster_of(conn)
        found = records(path, cluster=cluster) if path.is_file() else []
        earlier = history(path, cluster=cluster)
        try:
            with ControllerClient(conn) as client:
                report, inputs = run_audit(src, conn, cancelled=earlier.cancelled, client=client)
            refuse_another_cluster(inputs, conn, "the autopilot")
        except Exception as exc:  # a daemon goes on: a round that cannot read acts on nothing
            said = str(exc) if isinstance(exc, SpurctlError) else f"{type(exc).__name__}: {exc}"
            blind = redact(f"no view to act on this round: {said}")
            self.breaker = breaker_step(self.breaker, 0, 0, blind)
            # The budget the journal counts is known; the view's is not (so not said).
            left = request.limits.max_actions - spent(found, now).last_hour
            return RoundReport(0, now, 0.0, State.BREAKER_OPEN, [blind], {}, breaker=self.breaker,
                               paused=paused, budgets={"max-actions": max(0, left)})  # fmt: skip
        needing = len({f.node for f in report.findings if f.needs_action})
        threshold = request.breaker.of(report.nodes_in_scope)
        self.breaker = breaker_step(self.breaker, needing, threshold, _blind(report, inputs, now,
                                    request.max_inventory_age_s))  # fmt: skip
        self.sightings.seen(
            [(f.node, "finding", f.job_id or 0, f.kind.value) for f in report.findings
             if f.needs_action],
            now,
        )  # fmt: skip
        if self.breaker.open:  # nothing planned either: the view is not one to act on
            plans = _Plans([], Ownership.of(found, None), {}, {}, {}, [], {}, {})
        else:
            plans = _plans(request, conn, report, inputs, found, now, self.sightings)
        owned = plans.owned
        nodes = inputs.view.nodes
        # Only a node the journal records spurctl draining can be out by spurctl's reason
        # (decide/owner.py): those are read, not all 20,000 nodes of the view.
        journaled = [nodes[n] for n in journaled_drains(found) if n in nodes]
        # Spur v0.8.0 turns a drain whose heartbeat timed out into DOWN `Not responding`,
        # locked: out by spurctl's drain all the same (counted), and left to a person.
        version = inputs.view.version
        replaced = replaces_hold_reason(version)
        lost = lost_drains(journaled, owned) if replaced else {}
        lost_here = request.scope.keep(n for n in lost if inputs.scope is None or n in inputs.scope)
        out = out_by_spurctl(journaled, owned, reason_replaced=replaced)
        room = request.max_unavailable.cap(len(nodes)) - len(out)
        budget = spent(found, now)
        flapping = frozenset(
            n.name for n in journaled
            if n.state in OUT_OF_SERVICE and n.state_reason.startswith(FLAPPING_PREFIX)
        )  # fmt: skip
        choices = choose(plans.candidates, now=now, limits=request.limits, spent_=budget,
                         room=room, left_to_person=flapping)  # fmt: skip
        state = (
            State.BREAKER_OPEN if self.breaker.open
            else State.PAUSED if paused
            else State.DRY_RUN if request.dry_run
            else State.ACTING
        )  # fmt: skip
        why = list(plans.notes)
        if self.breaker.open:
            why.insert(0, f"breaker open, nothing sent: {self.breaker.why}")
        elif paused:
            why.insert(0, f"paused ({request.pause_file} exists): audit only, nothing sent")
        to_person = {**plans.to_person, **{n: lost_line(n, lost[n], version) for n in lost_here}}
        return _Look(now, report, inputs, plans, choices, state, why, needing, room, budget,
                     self.breaker, paused, _waits(choices, plans), to_person,
                     len(lost_here))  # fmt: skip


def _waits(choices: list[Choice], plans: _Plans) -> dict[str, int]:
    waits = waits_by_budget(choices)
    if plans.cancel_sent:
        waits[CANCEL_WAIT] = plans.cancel_sent
    return waits


def journal_mark(path: Path) -> tuple[int, int] | None:
    """What says whether the journal was written since (it is only appended to): its file
    and its size, or None when there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size)


def _numbered(report: RoundReport, n: int) -> RoundReport:
    report.round = n
    return report


@dataclass(slots=True)
class _Look:
    """A round's audit and what it would send, before anything is sent."""

    now: datetime
    audit: AuditReport
    inputs: AuditInputs
    plans: _Plans
    choices: list[Choice]
    state: State
    why: list[str]
    needing: int
    room: int
    budget: Spent
    breaker: Breaker
    paused: bool
    waits: dict[str, int]
    # Nodes left to a person (the plans' and the lost-reason drains'), and how many of
    # those in scope are DOWN `Not responding` since spurctl's drain (decide/lost_reason.py).
    to_person: dict[str, str]
    reason_lost: int

    @property
    def going(self) -> list[Choice]:
        return [c for c in self.choices if c.go]

    def report(self, n: int, request: AutopilotRequest, actions: list[Done]) -> RoundReport:
        acting = self.state is State.ACTING
        going = self.going
        sent = sum(1 for d in actions if d.result not in ("would-send", "skipped")
                   and d.act != Act.REPAIR.value)  # fmt: skip
        # A repair's calls, as decide/autopilot counts them (its journal, next round).
        sent += sum(c.candidate.calls for c in going
                    if acting and c.candidate.act is Act.REPAIR)  # fmt: skip
        drained = sum(1 for d in actions if d.act == Act.DRAIN.value and d.result == "sent")
        drained += sum(1 for c in going if acting and c.candidate.act is Act.REPAIR
                       and not c.candidate.removed)  # fmt: skip
        return RoundReport(
            n, self.now, 0.0, self.state, self.why, self.audit.by_kind,
            nodes_audited=self.audit.nodes_in_scope,
            nodes_needing_action=self.needing,
            actions=actions,
            waiting=self.waits,
            budgets={
                "max-actions": max(0, request.limits.max_actions - self.budget.last_hour - sent),
                "max-unavailable": max(0, self.room - drained),
            },
            breaker=self.breaker,
            paused=self.paused,
            to_person=self.to_person,
            reason_lost=self.reason_lost,
        )  # fmt: skip


def _blind(report: AuditReport, inputs: AuditInputs, now: datetime, max_age_s: float) -> str | None:
    """Why this round's view cannot be trusted to act on, or None."""
    if not report.view_complete:
        return (
            f"the controller's view is incomplete ({report.jobs_seen} of {report.jobs_total} "
            "jobs): a controller restart?"
        )
    old = sorted(
        name
        for name, inv in inputs.inventories.items()
        if inv.collected_at is not None and (now - inv.collected_at).total_seconds() > max_age_s
    )
    if old:
        return (
            f"the inventories of {len(old)} nodes ({fold(old)}) are older than "
            f"--max-inventory-age ({max_age_s:.0f}s): re-collect"
        )
    return None


@dataclass(slots=True)
class _Plans:
    candidates: list[Candidate]
    owned: Ownership
    entries: dict[tuple[str, int], Entry]
    drains: dict[str, NodeChange]
    resumes: dict[str, NodeChange]
    notes: list[str]
    repairs: dict[str, Target]
    to_person: dict[str, str]
    # Holdings whose journaled cancel spurd may still be acting on: neither cancelled
    # again nor drained this round (decide/one_cancel.py).
    cancel_sent: int = 0


def _plans(
    request: AutopilotRequest,
    conn: Connection,
    report: AuditReport,
    inputs: AuditInputs,
    found: list[dict[str, Any]],
    now: datetime,
    sightings: Sightings,
) -> _Plans:
    """What the manual commands' planners would do with this round's audit."""
    from spurctl.sources.send_targets import resolve_targets
    from spurctl.sources.settings import credential_uid

    view = inputs.view
    names = sorted(request.scope.keep(inputs.scope if inputs.scope is not None else view.nodes))
    notes: list[str] = []
    cands: list[Candidate] = []
    # reclaim: the plan reclaim would make of every node in scope, its guards included.
    selected, _unknown = selection(names, view.nodes, inputs.inventories)
    wanted = reclaimable(report, selected, None)
    entries: dict[tuple[str, int], Entry] = {}
    settling = 0  # holdings cancelled that spurd may still be freeing: they wait
    lingering: set[str] = set()  # nodes still holding what their one cancel did not free
    if wanted:
        legit = legit_nodes(
            sorted({f.job_id for f in wanted if f.job_id is not None}),
            lambda j: view.jobs.get(j) or inputs.confirmed.get(j),
        )
        targets = resolve_targets({f.node for f in wanted}, legit, inputs.inventories, conn)
        decided = decide(
            report, selected, None, targets, legit, inputs.inventories, view.nodes,
            inputs.watermark.value, now, request.max_inventory_age_s,
        )  # fmt: skip
        if decided.refusal is not None:
            notes.append(f"no reclaim this round: {decided.refusal}")
        else:
            for e in decided.entries:
                if (e.node, e.job_id) in decided.stale:
                    notes.append(decided.stale[(e.node, e.job_id)])
                    continue
                cancelled = _after_cancel(e, inputs)
                if cancelled is not None:  # one cancel per holding: never a second
                    if cancelled.lingers:
                        lingering.add(e.node)
                    else:
                        settling += 1
                    notes.append(cancelled.why)
                    continue
                entries[(e.node, e.job_id)] = e
                key = (e.node, "finding", e.job_id, e.finding.kind.value)
                cands.append(Candidate(Act.RECLAIM, e.node, e.job_id, e.finding.kind.value,
                                       sightings.since(key, now)))  # fmt: skip
    owned = Ownership.of(found, credential_uid(conn))
    # Only a node whose own name holds a finding can be drained (drain_plan sets a drain
    # on nothing else), so only those are planned: not 20,000 nodes a round. The autopilot
    # never names a node alone: the cooldown always holds.
    held = sorted({f.node for f in report.findings if f.job_id is not None} & set(names))
    changes, _left = drain_plan(
        held, view.nodes, report.findings, cancel_states(found), owned,
        resumed=resumed_at(found), now=now, cooldown_s=request.cooldown_s, alone=False,
        lost_release=view.version if replaces_hold_reason(view.version) else None,
    )  # fmt: skip
    # What no cancel frees: agent orphans, leftovers, and a holding its one cancel did not.
    drains = {c.node: c for c in changes if c.kind in DRAINED_KINDS or c.node in lingering}
    for c in drains.values():
        key = (c.node, "finding", c.job_id, c.kind)
        cands.append(Candidate(Act.DRAIN, c.node, c.job_id, c.kind, sightings.since(key, now),
                               c.reason))  # fmt: skip
    # Only a drain the journal records spurctl setting can be spurctl's (decide/owner.py).
    drained = sorted(set(journaled_drains(found)) & set(names))
    lifts, _left = resume_plan(
        drained, view.nodes, report.findings, inputs.inventories, now=now,
        max_age_s=request.max_inventory_age_s, owned=owned, repairing=repair_progress(found),
    )  # fmt: skip
    resumes = {c.node: c for c in lifts}
    sightings.seen([(c.node, "clean", 0, "resume") for c in lifts], now, family="clean")
    for c in lifts:
        since = sightings.since((c.node, "clean", 0, "resume"), now)
        cands.append(Candidate(Act.RESUME, c.node, 0, c.kind, since, c.reason))
    repairs, to_person = _repairs(request, conn, report, inputs, found, owned, now, notes)
    for t in repairs.values():
        since = sightings.since((t.node, "finding", 0, Kind.PHANTOM_ALLOC.value), now)
        cands.append(Candidate(Act.REPAIR, t.node, 0, Kind.PHANTOM_ALLOC.value, since,
                               t.reason, removed=t.removed))  # fmt: skip
    return _Plans(cands, owned, entries, drains, resumes, notes, repairs, to_person,
                  settling)  # fmt: skip


def _after_cancel(e: Entry, inputs: AuditInputs) -> AfterCancel | None:
    """What the journal's cancel of this holding (if any) leaves for it (one_cancel)."""
    inv = inputs.inventories.get(e.node)
    names = (e.node,) if inv is None or inv.node == e.node else (e.node, inv.node)
    sent = max((t for n in names if (t := inputs.cancelled.get((n, e.job_id)))), default=None)
    held = [h for h in inv.held if h.job_id == e.job_id] if inv is not None else []
    started = held[0].started_at if len(held) == 1 else None
    return after_cancel(e.node, e.job_id, sent=sent, started=started, collected=e.collected_at)


def _repairs(
    request: AutopilotRequest,
    conn: Connection,
    report: AuditReport,
    inputs: AuditInputs,
    found: list[dict[str, Any]],
    owned: Ownership,
    now: datetime,
    notes: list[str],
) -> tuple[dict[str, Target], dict[str, str]]:
    """The repairs `spurctl repair` would plan of this round's phantom-alloc nodes (and of
    the nodes an earlier repair removed and still owes), and the nodes left to a person,
    each with why: no --repair, spur.conf not saying a removed node registers again, or
    the repair's own guards (decide/repair.judge, the cooldown)."""
    from spurctl.repair_view import judge_node, rejoin_said
    from spurctl.sources.controller import ControllerClient

    view = inputs.view
    scope = request.scope
    phantom = sorted({f.node for f in report.findings if f.kind is Kind.PHANTOM_ALLOC})
    phantom = scope.keep(phantom)
    progress = repair_progress(found)
    # Removed by an earlier repair (back since, or not yet): judge_node says what is owed.
    owed = [n for n, p in progress.items() if p.removed]
    owed = [n for n in scope.keep(owed) if scope.named is None or n in scope.kept()]
    if not phantom and not owed:
        return {}, {}
    if not request.repair:
        said = "phantom allocation: rebuilt only by a repair (--repair, or spurctl repair -w {})"
        owes = "removed by an earlier repair, owed a put-back (--repair, or spurctl repair -w {})"
        return {}, {n: (said if n in phantom else owes).format(n) for n in {*phantom, *owed}}
    said, refused = rejoin_said(conn, request.rejoin_checked, dry_run=True)
    if refused:
        notes.append(f"no repair: {said}")
        return {}, {n: f"repair refused: {said}" for n in phantom}
    targets: dict[str, Target] = {}
    person: dict[str, str] = {}
    resumed = resumed_at(found)
    with ControllerClient(conn) as client, client.sharing():
        for name in sorted({*phantom, *owed}):
            decision = judge_node(
                name, view.nodes.get(name), progress.get(name), report.findings,
                inputs.inventories, client, view.version, now=now,
                max_age_s=request.max_inventory_age_s, view_complete=view.complete,
                restore_hold=False, owned=owned,
            )  # fmt: skip
            if isinstance(decision, Refusal):
                person[name] = decision.why
            elif isinstance(decision, Target):
                cool = cooling(name, resumed, now=now, verb="repair",
                               cooldown_s=request.cooldown_s, named_alone=False)  # fmt: skip
                if cool and not decision.removed and decision.resumes is None:
                    person[name] = cool
                else:
                    targets[name] = decision
    return targets, person


def _would(c: Choice) -> Done:
    k = c.candidate
    return Done(k.act.value, k.node, k.job_id, k.kind, "would-send", c.why)


def _send(
    going: list[Choice],
    plans: _Plans,
    request: AutopilotRequest,
    src: Sources,
    conn: Connection,
    inputs: AuditInputs,
    n: int,
    run: str | None = None,
) -> list[Done]:
    """Send the round's chosen calls through the manual commands' act/ paths."""
    from spurctl.act.agents import AgentPool
    from spurctl.act.cancels import JournalFailed, execute
    from spurctl.act.journal import Journal
    from spurctl.act.node_admin import ControllerWriter, JournalUnwritable, NodeAdmin
    from spurctl.act.node_changes import change_node
    from spurctl.act.stops import stops_deferred
    from spurctl.sources.controller import ControllerClient

    done: list[Done] = []
    reclaims = [c for c in going if c.candidate.act is Act.RECLAIM]
    repairs = [c for c in going if c.candidate.act is Act.REPAIR]
    nodes = [c for c in going if c.candidate.act in (Act.DRAIN, Act.RESUME)]
    with Journal(request.journal_path, conn, run=run) as journal, ControllerClient(conn) as client:
        journal.tags = {"origin": ORIGIN, "round": n}
        if reclaims:
            refused = key_refusal(conn.jwt_key is not None, conn.conf.auth_mode)
            entries = [plans.entries[(c.candidate.node, c.candidate.job_id)] for c in reclaims]
            if refused is not None:
                done += [Done("reclaim", e.node, e.job_id, e.finding.kind.value, "skipped",
                              refused) for e in entries]  # fmt: skip
            else:
                agents = AgentPool(jwt_key=conn.jwt_key, timeout=conn.timeout)
                try:
                    ran = execute(
                        entries, jobs=client, agents=agents, journal=journal,
                        watermark=inputs.watermark.value, not_found_doubt=conn.not_found_doubt(),
                        max_inventory_age_s=request.max_inventory_age_s,
                    )  # fmt: skip
                    outcomes = ran.outcomes
                except JournalFailed as exc:
                    outcomes = exc.run.outcomes
                finally:
                    agents.close()
                done += [Done("reclaim", o.entry.node, o.entry.job_id, o.entry.finding.kind.value,
                              o.result.value, o.detail) for o in outcomes]  # fmt: skip
        if not nodes and not repairs:
            return done
        with ControllerWriter(conn) as writer:
            admin = NodeAdmin(writer, journal)
            for c in repairs:  # one a round (decide/autopilot.choose)
                t = plans.repairs[c.candidate.node]
                done += _repair(t, request, src, conn, inputs, admin, client)
                if any(d.result == "interrupted" for d in done):  # a stop: nothing more
                    return done
            for c in nodes:
                k = c.candidate
                change = _change_of(k, plans, inputs)
                if isinstance(change, str):
                    done.append(Done(k.act.value, k.node, k.job_id, k.kind, "skipped", change))
                    continue
                said: list[tuple[bool, str]] = []
                try:
                    # The call and its journal outcome are never cut apart by a stop.
                    with stops_deferred():
                        said.append(change_node(admin, client, k.act is Act.DRAIN, change))
                except JournalUnwritable as exc:  # nothing more is sent; a sent call is said
                    result = "sent" if exc.sent else "failed"
                    done.append(Done(k.act.value, k.node, k.job_id, k.kind, result, str(exc)))
                    break
                except KeyboardInterrupt:  # the stop, deferred past this call: no more calls
                    stopped = True
                else:
                    stopped = False
                if said:
                    ok, detail = said[0]
                    result = (
                        "sent" if ok else "skipped" if detail.startswith("not sent") else "failed"
                    )
                    done.append(Done(k.act.value, k.node, k.job_id, k.kind, result, detail))
                if stopped:
                    break
    return done


def _repair(
    t: Target, request: AutopilotRequest, src: Sources, conn: Connection, inputs: AuditInputs,
    admin: NodeAdmin, client: ControllerClient,
) -> list[Done]:  # fmt: skip
    """`t` repaired as `spurctl repair` does (act/repair_run.py), within --tick and --wait."""
    from spurctl.act.repair_run import Status, run_within
    from spurctl.repair_view import RepairPlan, RepairRequest, rejoin_said

    rejoin, _ = rejoin_said(conn, request.rejoin_checked, dry_run=True)
    view = inputs.view
    # The request names the one node (the round's scope may be every node).
    one = Scope(frozenset({t.node}))
    try:
        asked = RepairRequest(
            one, request.journal_path, inventory=tuple(src.inventory or ()), yes=True,
            max_inventory_age_s=request.max_inventory_age_s, tick_s=request.tick_s,
            wait_s=request.wait_s, rejoin_checked=request.rejoin_checked,
            max_unavailable=request.max_unavailable, cooldown_s=request.cooldown_s,
        )  # fmt: skip
    except SpurctlError as refused:  # --inventory -: nothing to read again after the drain
        return [Done(Act.REPAIR.value, t.node, 0, Kind.PHANTOM_ALLOC.value, "skipped",
                     str(refused))]  # fmt: skip
    plan = RepairPlan(view.address, view.version, view.taken_at, t.node, [t], rejoin=rejoin,
                      tick_s=request.tick_s, wait_s=request.wait_s)  # fmt: skip
    result = {Status.REPAIRED: "sent", Status.LANDED: "sent", Status.REFUSED: "skipped",
              Status.NOT_BACK: "owed", Status.INTERRUPTED: "interrupted"}  # fmt: skip
    return [
        Done(Act.REPAIR.value, r.node, 0, Kind.PHANTOM_ALLOC.value,
             result.get(r.status, "failed"), r.detail)
        for r in run_within(plan, asked, dataclasses.replace(src, scope=one), conn, admin, client)
    ]  # fmt: skip


def _change_of(k: Candidate, plans: _Plans, inputs: AuditInputs) -> NodeChange | str:
    """The UpdateNode the manual command's plan would send for `k`, or why none goes out."""
    if k.act is Act.RESUME:
        return plans.resumes[k.node]
    if FLAPPING not in k.reason:
        return plans.drains[k.node]
    node = inputs.view.nodes.get(k.node)
    if node is None:
        return f"{k.node} is not a node the controller has"
    if node.state in OUT_OF_SERVICE:
        return (
            f"{k.node} is flapping but already {node.state.name} ({node.state_reason!r}): "
            "left as it is, to a person"
        )
    return NodeChange(k.node, k.reason, k.kind, k.job_id, Seen.of(node))
