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

Where each part lives: this module runs the rounds and their reads (the audit, the
journal, the locks, the planners' I/O); what a round makes of them, pure, is
decide/autopilot_round.py (with decide/autopilot.py's choice); the repairs it plans
are repair_view.round_repairs; what it sends, and the intents it settles, are
act/autopilot_send.py; its signals act/stops.daemon_signals.

Signals: SIGTERM and SIGINT stop it; a call in flight finishes and its outcome is
journaled first (reclaim's pool finishes what it sent; a node call runs under
`stops_deferred`). SIGHUP re-reads the configuration before the next round. An
intent a killed autopilot left open is closed (fate unknown) before anything is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.decide.autopilot import (
    DEFAULT_BREAKER,
    DEFAULT_REPAIR_WAIT_S,
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
)
from spurctl.decide.autopilot_round import (
    Done,
    Plans,
    RoundReport,
    after_cancel_of,
    blind,
    flapping,
    node_plans,
    round_state,
    spent_by,
    waits,
    would,
)
from spurctl.decide.budget import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_MAX_UNAVAILABLE,
    MaxUnavailable,
    out_by_spurctl,
)
from spurctl.decide.lost_reason import lost_drains, lost_line
from spurctl.decide.owner import Ownership, journaled_drains
from spurctl.decide.plan import Entry, reclaimable
from spurctl.decide.reclaim_plan import decide, selection
from spurctl.decide.send_guards import legit_nodes
from spurctl.defaults import DEFAULT_MAX_INVENTORY_AGE_S, DEFAULT_TICK_S
from spurctl.errors import ExitStatus, SpurctlError, redact
from spurctl.model import Kind, utcnow
from spurctl.releases import replaces_hold_reason
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.audit_view import AuditInputs
    from spurctl.model import AuditReport
    from spurctl.repair_view import RepairRequest
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection

# Done, RoundReport and the pure round judgements live in decide/autopilot_round.py; its
# sends in act/autopilot_send.py. The report's types are named here too: the result.
__all__ = ["AutopilotRequest", "Done", "RoundReport", "run"]

TICK_S = 10.0


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
    from spurctl.act.stops import DaemonFlags, daemon_signals

    flags = DaemonFlags()
    pilot = _Pilot(unsettled=not request.dry_run)
    with daemon_signals(flags), autopilot_lock(request.journal_path):
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
        from spurctl.act.autopilot_send import send
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
            actions = [would(c) for c in look.going] if look.state is State.DRY_RUN else []
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
            sent = send(
                look.going, look.plans, _asked(look.going, request, src), src, conn, look.inputs,
                journal_path=path, max_inventory_age_s=request.max_inventory_age_s, n=n,
                run=self.run,
            )  # fmt: skip
            return look.report(n, request, sent)

    def _settle(self, request: AutopilotRequest, conn: Connection) -> None:
        from spurctl.act.autopilot_send import settle

        self.settled += settle(request.journal_path, conn, self.run)
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
            no_view = redact(f"no view to act on this round: {said}")
            self.breaker = breaker_step(self.breaker, 0, 0, no_view)
            # The budget the journal counts is known; the view's is not (so not said).
            left = request.limits.max_actions - spent(found, now).last_hour
            return RoundReport(0, now, 0.0, State.BREAKER_OPEN, [no_view], {}, breaker=self.breaker,
                               paused=paused, budgets={"max-actions": max(0, left)})  # fmt: skip
        needing = len({f.node for f in report.findings if f.needs_action})
        threshold = request.breaker.of(report.nodes_in_scope)
        unfit = blind(report, inputs.inventories, now, request.max_inventory_age_s)
        self.breaker = breaker_step(self.breaker, needing, threshold, unfit)
        self.sightings.seen(
            [(f.node, "finding", f.job_id or 0, f.kind.value) for f in report.findings
             if f.needs_action],
            now,
        )  # fmt: skip
        if self.breaker.open:  # nothing planned either: the view is not one to act on
            plans = Plans([], Ownership.of(found, None), {}, {}, {}, [], {}, {})
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
        choices = choose(plans.candidates, now=now, limits=request.limits, spent_=budget,
                         room=room, left_to_person=flapping(journaled))  # fmt: skip
        state = round_state(breaker_open=self.breaker.open, paused=paused, dry_run=request.dry_run)
        why = list(plans.notes)
        if self.breaker.open:
            why.insert(0, f"breaker open, nothing sent: {self.breaker.why}")
        elif paused:
            why.insert(0, f"paused ({request.pause_file} exists): audit only, nothing sent")
        to_person = {**plans.to_person, **{n: lost_line(n, lost[n], version) for n in lost_here}}
        return _Look(now, report, inputs, plans, choices, state, why, needing, room, budget,
                     self.breaker, paused, waits(choices, plans), to_person,
                     len(lost_here))  # fmt: skip


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
    plans: Plans
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
        sent, drained = spent_by(actions, self.going, self.state is State.ACTING)
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


def _plans(
    request: AutopilotRequest,
    conn: Connection,
    report: AuditReport,
    inputs: AuditInputs,
    found: list[dict[str, Any]],
    now: datetime,
    sightings: Sightings,
) -> Plans:
    """What the manual commands' planners would do with this round's audit."""
    from spurctl.repair_view import round_repairs
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
                cancelled = after_cancel_of(e, inputs.inventories, inputs.cancelled)
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
    drains, resumes, node_cands = node_plans(
        names, view.nodes, report.findings, inputs.inventories, found, owned, sightings,
        lingering=lingering, now=now, cooldown_s=request.cooldown_s,
        max_age_s=request.max_inventory_age_s,
        lost_release=view.version if replaces_hold_reason(view.version) else None,
    )  # fmt: skip
    cands += node_cands
    repairs, to_person = round_repairs(
        request.scope, conn, report, inputs, found, owned, now, notes, repair=request.repair,
        rejoin_checked=request.rejoin_checked, max_age_s=request.max_inventory_age_s,
        cooldown_s=request.cooldown_s,
    )  # fmt: skip
    for t in repairs.values():
        since = sightings.since((t.node, "finding", 0, Kind.PHANTOM_ALLOC.value), now)
        cands.append(Candidate(Act.REPAIR, t.node, 0, Kind.PHANTOM_ALLOC.value, since,
                               t.reason, removed=t.removed))  # fmt: skip
    return Plans(cands, owned, entries, drains, resumes, notes, repairs, to_person,
                 settling)  # fmt: skip


def _asked(
    going: list[Choice], request: AutopilotRequest, src: Sources
) -> dict[str, RepairRequest | str]:
    """The request `spurctl repair -w NODE --yes` would be given, for each chosen repair
    (it names the one node: the round's scope may be every node), or why none can be."""
    from spurctl.repair_view import RepairRequest

    asked: dict[str, RepairRequest | str] = {}
    for c in going:
        if c.candidate.act is not Act.REPAIR:
            continue
        try:
            asked[c.candidate.node] = RepairRequest(
                Scope(frozenset({c.candidate.node})), request.journal_path,
                inventory=tuple(src.inventory or ()), yes=True,
                max_inventory_age_s=request.max_inventory_age_s, tick_s=request.tick_s,
                wait_s=request.wait_s, rejoin_checked=request.rejoin_checked,
                max_unavailable=request.max_unavailable, cooldown_s=request.cooldown_s,
            )  # fmt: skip
        except SpurctlError as refused:  # --inventory -: nothing to read again after the drain
            asked[c.candidate.node] = str(refused)
    return asked
