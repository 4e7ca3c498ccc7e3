"""`spurctl repair`: rebuild a node's phantom charge through Spur's one path, journaled.

The charge no job owns is cleared only by a fresh record (docs/spur-facts.md,
"Phantom charges and node administration"). For each named node: spurctl's drain
(UpdateNode DRAIN, its own reason), a scheduler tick, a re-read (no active job
lists the node, a fresh inventory shows spurd running and holding nothing, the
charge is the one planned), DeregisterNode(force=false), a bounded wait for the
node's spurd to register it again, GetNode showing no charge, and then what the
fresh record dropped put back: the labels spurctl recorded and a drain someone else
had set. Every call is journaled (intent before, outcome after); the journal also
keeps what must be put back, so a repair stopped part way (Ctrl-C, a crash, a node
that does not come back) is taken up by the next `spurctl repair` of that node.

Uses `audit_view.run_audit` for the plan: the phantom-alloc finding is the
classifier's, over the same view and inventories as `audit` reads.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.decide.repair import (
    HOLDS,
    Refusal,
    RepairProgress,
    Target,
    charge_record,
    charge_text,
    judge,
    labels_to_restore,
    recheck,
    rejoin_refusal,
    repair_progress,
)
from spurctl.defaults import (
    DEFAULT_MAX_INVENTORY_AGE_S,
    DEFAULT_REJOIN_WAIT_S,
    DEFAULT_TICK_S,
    NAMES_COMMAND,
)
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.hostlist import fold
from spurctl.model import (
    Allocation,
    Inventory,
    Kind,
    NextStep,
    Node,
    NodeState,
    format_time,
    utcnow,
)
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.act.node_admin import NodeAdmin, Step
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.inventories import Sources
    from spurctl.sources.repair_plan import SavedRepairPlan
    from spurctl.sources.settings import Connection

KIND = Kind.PHANTOM_ALLOC.value


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """Everything `spurctl repair` was asked, checked by the command line."""

    nodes: str | None  # a hostlist; None with `saved`
    src: Sources
    conn: Connection
    journal_path: Path
    dry_run: bool = False
    yes: bool = False
    saved: SavedRepairPlan | None = None
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S
    tick_s: float = DEFAULT_TICK_S
    wait_s: float = DEFAULT_REJOIN_WAIT_S
    rejoin_checked: bool = False
    restore_drain: bool = False
    # argv words that read this view again (the resume command the result prints).
    view_flags: tuple[str, ...] = ()
    names_command: str = NAMES_COMMAND


@dataclass(slots=True)
class RepairPlan:
    """What a repair would do: targets, refusals, nodes with no charge, and from what."""

    controller: str
    controller_version: str
    taken_at: datetime
    nodes: str
    targets: list[Target] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    uncharged: list[str] = field(default_factory=list)
    # What spur.conf said about a removed node registering again, or that it was checked.
    rejoin: str = ""
    tick_s: float = DEFAULT_TICK_S
    wait_s: float = DEFAULT_REJOIN_WAIT_S

    def document(self) -> dict[str, Any]:
        """The plan as `repair --dry-run -o FILE` saves it (spurctl.repair-plan/v1)."""
        from spurctl.sources.repair_plan import REPAIR_PLAN_SCHEMA

        return {
            "schema": REPAIR_PLAN_SCHEMA,
            "controller": {"address": self.controller, "version": self.controller_version},
            "taken_at": format_time(self.taken_at),
            "nodes": self.nodes,
            "targets": [{"node": t.node, **t.restore()} for t in self.targets],
        }


class Status(enum.StrEnum):
    REPAIRED = "repaired"
    REFUSED = "refused"  # re-checked and not removed (spurctl's drain lifted)
    FAILED = "failed"
    NOT_BACK = "not-back"  # removed, and not registered again within --wait
    INTERRUPTED = "interrupted"


@dataclass(slots=True)
class NodeResult:
    node: str
    status: Status
    detail: str
    next_steps: list[NextStep] = field(default_factory=list)


class Stage(enum.StrEnum):
    PLANNED = "planned"  # --dry-run
    NOTHING = "nothing"  # no target
    DECLINED = "declined"
    DONE = "done"


@dataclass(slots=True)
class Repaired:
    plan: RepairPlan
    stage: Stage
    exit_status: ExitStatus
    results: list[NodeResult] = field(default_factory=list)
    # The one error line after the run so far is shown (the journal failed).
    error: str | None = None


# -- the plan ------------------------------------------------------------------------


def _rejoin(conn: Connection, checked: bool) -> str:
    """What spur.conf says about rejoining (one phrase for the plan), or SpurctlError."""
    from spurctl.sources.node_records import rejoin_conf

    rc = rejoin_conf(conn.conf)
    refused = rejoin_refusal(
        rc.path, wg_enabled=rc.wg_enabled, k0s_enabled=rc.k0s_enabled,
        admission=rc.admission, unreadable=rc.unreadable, checked=checked,
    )  # fmt: skip
    if refused is not None:
        raise SpurctlError(refused)
    if rc.path is None or rc.unreadable is not None or rc.admission == "token":
        return "the operator checked that a removed node registers again (--rejoin-checked)"
    return f"{rc.path}: no WireGuard mesh, no k0s, admission {rc.admission}"


def _progress(path: Path) -> dict[str, RepairProgress]:
    from spurctl.sources.journal_records import records

    if not path.is_file():
        return {}
    return repair_progress(records(path))


def prepare(request: RepairRequest, progress: Mapping[str, RepairProgress]) -> RepairPlan:
    """Audit the nodes afresh and judge each: a target, a refusal, or no charge."""
    from spurctl.audit_view import run_audit
    from spurctl.hostlist import parse_scope
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.node_records import active_jobs_on

    rejoin = _rejoin(request.conn, request.rejoin_checked)
    hostlist = request.saved.nodes if request.saved is not None else request.nodes
    assert hostlist is not None
    # -x: an excluded node is never repaired (the scope was checked when it was parsed).
    scope = set(request.src.scope.keep(parse_scope(hostlist)))
    src = dataclasses.replace(request.src, scope=Scope(frozenset(scope)))
    report, inputs = run_audit(src, request.conn, journal=request.journal_path)
    view = inputs.view
    plan = RepairPlan(
        view.address, view.version, view.taken_at, fold(sorted(scope)), rejoin=rejoin,
        tick_s=request.tick_s, wait_s=request.wait_s,
    )  # fmt: skip
    unknown = []
    now = utcnow()
    with ControllerClient(request.conn) as client:
        for name in sorted(scope):
            pending = progress.get(name)
            node = view.nodes.get(name)
            if pending is not None and pending.removed and (node is None or node.alloc.empty):
                # An earlier run removed it: wait for it (or take it as it came back).
                plan.targets.append(
                    Target(name, Allocation(), pending.labels, pending.hold, pending.run, True)
                )
                continue
            if node is None:
                unknown.append(name)
                continue
            inv = _inventory_of(name, inputs.inventories)
            found = [f for f in report.findings if f.node == name]
            jobs = active_jobs_on(client, name, view.version) if not node.alloc.empty else []
            decision = judge(
                node, found, jobs, inv, now=now, max_age_s=request.max_inventory_age_s,
                view_complete=view.complete, restore_hold=request.restore_drain,
                pending=pending,
            )  # fmt: skip
            if decision is None:
                plan.uncharged.append(name)
            elif isinstance(decision, Refusal):
                plan.refusals.append(decision)
            else:
                plan.targets.append(decision)
    if unknown:
        raise SpurctlError(
            f"unknown node{'s' if len(unknown) > 1 else ''} {fold(unknown)}: the controller "
            f"has no such node, and no repair of it is under way in {request.journal_path}; "
            f"check the names with `{request.names_command}`"
        )
    if request.saved is not None:
        _only_saved(plan, request.saved, request.max_inventory_age_s, now)
    return plan


def _inventory_of(name: str, inventories: Mapping[str, Inventory]) -> Inventory | None:
    from spurctl.hostlist import loose_key

    inv = inventories.get(name)
    if inv is not None:
        return inv
    loose = [i for n, i in inventories.items() if loose_key(n) == loose_key(name)]
    return loose[0] if len(loose) == 1 else None


def _only_saved(plan: RepairPlan, saved: SavedRepairPlan, max_age_s: float, now: datetime) -> None:
    """The fresh plan narrowed to the saved targets; one whose charge is no longer the
    saved one is refused. A plan too old, dated ahead of this host's clock, or from
    another controller is refused whole, as reclaim's is (decide.saved_plan.check_view)."""
    from spurctl.decide.saved_plan import check_view
    from spurctl.model import NextStep

    remake = NextStep.spurctl("repair", "--node", saved.nodes, "--dry-run", "-o", "FILE")
    check_view(saved.taken_at, saved.controller, plan.controller, max_age_s, now, remake)
    wanted = {t.node: t for t in saved.targets}
    kept = []
    for t in plan.targets:
        was = wanted.get(t.node)
        if was is None:
            continue
        if not t.removed and charge_record(t.charge) != was.charge:
            plan.refusals.append(
                Refusal(
                    t.node,
                    f"the charge changed since the saved plan: it was {was.charge_text}, it "
                    f"is {charge_text(t.charge)}",
                )
            )
            continue
        kept.append(t)
    plan.targets = kept
    plan.refusals = [r for r in plan.refusals if r.node in wanted]
    plan.uncharged = [n for n in plan.uncharged if n in wanted]


# -- the whole command ------------------------------------------------------------


def repair(
    request: RepairRequest,
    *,
    show_plan: Callable[[RepairPlan], None],
    ask: Callable[[RepairPlan], bool] | None,
    sleep: Callable[[float], None] = time.sleep,
) -> Repaired:
    """Plan, show the plan, ask unless --yes (`ask` None: no terminal, so refuse), carry out.

    Exit 0 only when every node in scope was repaired or had no charge; 1 when one was
    refused, failed, did not come back, or the operator declined.
    """
    progress = _progress(request.journal_path)
    plan = prepare(request, progress)
    show_plan(plan)
    unmet = ExitStatus.ACTION_NEEDED if plan.refusals else ExitStatus.OK
    if request.dry_run:
        return Repaired(plan, Stage.PLANNED, unmet)
    if not plan.targets:
        return Repaired(plan, Stage.NOTHING, unmet)
    if not request.yes:
        if ask is None:
            raise SpurctlError("refusing to repair without --yes: standard input is not a terminal")
        if not ask(plan):
            return Repaired(plan, Stage.DECLINED, ExitStatus.ACTION_NEEDED)
    results, error = carry_out(plan, request, sleep=sleep)
    ok = not plan.refusals and all(r.status is Status.REPAIRED for r in results)
    status = ExitStatus.ERROR if error else ExitStatus.OK if ok else ExitStatus.ACTION_NEEDED
    return Repaired(plan, Stage.DONE, status, results, error)


def carry_out(
    plan: RepairPlan, request: RepairRequest, *, sleep: Callable[[float], None] = time.sleep
) -> tuple[list[NodeResult], str | None]:
    """Drain, tick, re-check, remove, wait, verify, put back; journaled. Returns each
    target's result, and the error that stopped the run (the journal), if one did."""
    from spurctl.act.journal import Journal, journal_lock
    from spurctl.act.node_admin import ControllerWriter, JournalUnwritable, NodeAdmin
    from spurctl.sources.controller import ControllerClient

    run = _Run(plan, request, sleep)
    try:
        with (
            journal_lock(request.journal_path),
            Journal(request.journal_path) as journal,
            ControllerWriter(request.conn) as writer,
            ControllerClient(request.conn) as client,
        ):
            run.admin, run.client = NodeAdmin(writer, journal), client
            run.go()
    except JournalUnwritable as exc:
        run.stop_all(Status.FAILED, f"not finished: {exc}")
        return run.ordered(), str(exc)
    return run.ordered(), None


class _Run:
    """One repair run's steps over all its targets, phase by phase: the waits are shared."""

    def __init__(
        self, plan: RepairPlan, request: RepairRequest, sleep: Callable[[float], None]
    ) -> None:
        self.plan, self.request, self.sleep = plan, request, sleep
        self.results: dict[str, NodeResult] = {}
        self.admin: NodeAdmin | None = None
        self.client: ControllerClient | None = None

    # -- plumbing ------------------------------------------------------------------

    def ordered(self) -> list[NodeResult]:
        return [self.results[t.node] for t in self.plan.targets if t.node in self.results]

    def stop_all(self, status: Status, detail: str) -> None:
        for t in self.plan.targets:
            self.results.setdefault(t.node, NodeResult(t.node, status, detail))

    def _step(self, t: Target, step: str, call: str, **extra: Any) -> Step:
        from spurctl.act.node_admin import Step

        fields: dict[str, Any] = dict(extra)
        if t.resumes:
            fields["resumes"] = t.resumes
        return Step(t.node, KIND, "repair", step, call, fields)

    def _read(self, name: str) -> Node | None:
        from spurctl.sources.node_records import read_node

        assert self.client is not None
        return read_node(self.client, name)

    def _shows(self, name: str, state: NodeState | None, reason: str | None) -> Callable[[], bool]:
        def check() -> bool:
            node = self._read(name)
            if node is None:
                return False
            in_state = (
                state is None
                or node.state is state
                or (state is NodeState.DRAIN and node.state in HOLDS)
            )
            return in_state and (reason is None or node.state_reason == reason)

        return check

    def _update(
        self, t: Target, step: str, done: str, *, state: NodeState | None = None,
        reason: str | None = None, labels: Mapping[str, str] | None = None, **extra: Any,
    ) -> bool:  # fmt: skip
        """One journaled UpdateNode; False (and a FAILED result) when it did not go through."""
        from spurctl.act.node_admin import AdminCallFailed

        words = [f"state={state.name}"] if state is not None else []
        words += [f"reason={reason!r}"] if state is not None else []
        words += [f"labels={dict(labels)}"] if labels else []
        if state is not None:
            extra["reason"] = reason or ""  # the reason the node will carry, for the metrics
        step_ = self._step(t, step, f"UpdateNode({t.node}, {', '.join(words)})", **extra)
        assert self.admin is not None
        try:
            self.admin.send(
                step_,
                lambda w: w.update_node(t.node, state=state, reason=reason, labels=labels),
                done,
                confirm=self._shows(t.node, state, reason if state is not None else None),
            )
        except AdminCallFailed as exc:
            self.results[t.node] = NodeResult(
                t.node, Status.FAILED, f"{step} failed: {exc.message}"
            )
            return False
        return True

    def _lift(self, t: Target, why: str, status: Status = Status.REFUSED) -> None:
        """Undo spurctl's drain of a node it will not remove: its earlier hold back, or up;
        the node's result is `status` (refused after the re-read, or interrupted)."""
        hold = t.hold
        if hold is not None:
            done = self._update(
                t, "undrain", f"{why}; its earlier drain put back: {hold.reason!r}",
                state=NodeState.DRAIN, reason=hold.reason,
            )  # fmt: skip
        else:
            done = self._update(
                t, "undrain", f"{why}; spurctl's drain lifted", state=NodeState.IDLE
            )
        if done:
            lifted = "its earlier drain put back" if hold else "spurctl's drain lifted"
            self.results[t.node] = NodeResult(t.node, status, f"{why} ({lifted})")

    # -- the phases --------------------------------------------------------------------

    def go(self) -> None:
        live = [t for t in self.plan.targets if not t.removed]
        removed = [t for t in self.plan.targets if t.removed]
        from spurctl.act.stops import stops_deferred

        drained: list[Target] = []
        try:
            # A Ctrl-C lands between calls, never between a call and the run's record of it.
            for t in live:
                with stops_deferred():
                    if self._drain(t):
                        drained.append(t)
            if drained:
                self.sleep(self.request.tick_s)
            for t in self._rechecked(drained):
                with stops_deferred():
                    if self._deregister(t):
                        removed.append(t)
        except KeyboardInterrupt:
            with stops_deferred():  # a second Ctrl-C does not cut the clean-up short
                for t in drained:
                    if t.node not in self.results and t not in removed:
                        self._lift(t, "interrupted before DeregisterNode", Status.INTERRUPTED)
                self.stop_all(Status.INTERRUPTED, "interrupted before anything was sent for it")
                for t in removed:
                    self.results[t.node] = self._interrupted_wait(t)
            return
        try:
            back = self._wait([t.node for t in removed])
        except KeyboardInterrupt:
            for t in removed:
                self.results[t.node] = self._interrupted_wait(t)
            return
        for t in removed:
            self._finish(t, back.get(t.node))

    def _drain(self, t: Target) -> bool:
        return self._update(
            t, "drain", f"drained: {t.reason}", state=NodeState.DRAIN, reason=t.reason,
            restore=t.restore(),
        )  # fmt: skip

    def _rechecked(self, drained: Sequence[Target]) -> list[Target]:
        """The drained targets that may be removed now, re-read after the tick; the others
        refused, each with what was seen, and spurctl's drain lifted where it is its own."""
        from spurctl.sources.node_records import active_jobs_on

        if not drained:
            return []
        assert self.admin is not None and self.client is not None
        fresh = _fresh_inventories(self.request.src, [t.node for t in drained])
        now = utcnow()
        passing = []
        for t in drained:
            node = self._read(t.node)
            jobs = active_jobs_on(self.client, t.node, self.plan.controller_version)
            refused = recheck(
                t, node, jobs, _inventory_of(t.node, fresh), now=now,
                max_age_s=self.request.max_inventory_age_s,
            )  # fmt: skip
            if refused is None:
                passing.append(t)
                continue
            why, ours = refused
            self.admin.outcome(
                self._step(t, "recheck", "re-read"), "skipped", f"not removed: {why}"
            )
            if ours:
                self._lift(t, f"not removed: {why}")
            else:
                self.results[t.node] = NodeResult(t.node, Status.REFUSED, f"not removed: {why}")
        return passing

    def _deregister(self, t: Target) -> bool:
        """DeregisterNode(force=false); True when the record is (or may be) gone."""
        from spurctl.act.node_admin import AdminCallFailed

        assert self.admin is not None
        reason = f"spurctl repair: phantom allocation {charge_text(t.charge)}"
        step = self._step(
            t, "deregister", f"DeregisterNode({t.node}, force=false, reason={reason!r})",
            restore=t.restore(),
        )  # fmt: skip
        try:
            self.admin.send(step, lambda w: w.deregister_node(t.node, reason), "removed")
        except AdminCallFailed as exc:
            if exc.code in ("NOT_FOUND", "UNKNOWN_OUTCOME"):
                return True  # gone already, or may be: the wait tells
            self._lift(t, f"not removed: {exc.message}")
            if exc.code != "FAILED_PRECONDITION":
                self.results[t.node] = NodeResult(t.node, Status.FAILED, exc.message)
            return False
        return True

    def _wait(self, names: Sequence[str]) -> dict[str, Node]:
        """GetNode until every node answers again or --wait is up (bounded)."""
        waiting, back = set(names), {}
        deadline = time.monotonic() + self.request.wait_s
        every = max(0.05, min(1.0, self.request.wait_s / 20))
        while waiting:
            for name in sorted(waiting):
                node = self._read(name)
                if node is not None:
                    back[name] = node
            waiting -= back.keys()
            left = deadline - time.monotonic()
            if not waiting or left <= 0:
                break
            self.sleep(min(every, left))
        return back

    def _resume_argv(self, node: str) -> tuple[str, ...]:
        return ("spurctl", "repair", "--node", node, *self.request.view_flags)

    def _interrupted_wait(self, t: Target) -> NodeResult:
        return NodeResult(
            t.node, Status.INTERRUPTED,
            f"interrupted after DeregisterNode: {t.node}'s record is gone until its spurd "
            "registers it again; the journal keeps what to put back",
            [NextStep(self._resume_argv(t.node), "finishes the repair once it is back")],
        )  # fmt: skip

    def _finish(self, t: Target, node: Node | None) -> None:
        assert self.admin is not None
        wait = f"{self.request.wait_s:g} s"
        if node is None:
            why = (
                f"{t.node} did not register again within {wait} (--wait): its spurd is not "
                "running, cannot reach the controller, or is refused (an expired join token)"
            )
            self.admin.outcome(self._step(t, "return", "GetNode"), "failed", why)
            self.results[t.node] = NodeResult(
                t.node, Status.NOT_BACK, why,
                [
                    NextStep(("systemctl", "start", "spurd"), "starts its spurd", where=t.node),
                    NextStep(self._resume_argv(t.node), "finishes the repair once it is back"),
                ],
            )  # fmt: skip
            return
        since = format_time(node.agent_start_time) or "now"
        if not node.alloc.empty:
            why = (
                f"{t.node} registered again but is charged {charge_text(node.alloc)}: a job "
                "may have landed there; audit it"
            )
            self.admin.outcome(self._step(t, "verify", "GetNode"), "failed", why)
            self.results[t.node] = NodeResult(t.node, Status.FAILED, why)
            return
        self.admin.outcome(
            self._step(t, "return", "GetNode"), "sent",
            f"{t.node} registered again (slurmd_start_time {since}) with no charge",
        )  # fmt: skip
        put_back = []
        labels = labels_to_restore(t.labels, node.labels)
        if labels:
            if not self._update(t, "labels", f"labels put back: {labels}", labels=labels):
                return
            put_back.append("labels " + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())))
        if t.hold is not None:
            done = f"drain put back: {t.hold.reason!r}"
            if not self._update(t, "redrain", done, state=NodeState.DRAIN, reason=t.hold.reason):
                return
            put_back.append(f"the drain {t.hold.reason!r}")
        detail = f"{t.node} registered again with no charge" + (
            f"; put back {' and '.join(put_back)}" if put_back else ""
        )
        self.admin.outcome(self._step(t, "done", "GetNode"), "sent", detail, confirmed=True)
        self.results[t.node] = NodeResult(t.node, Status.REPAIRED, detail)


def _fresh_inventories(src: Sources, names: Sequence[str]) -> dict[str, Inventory]:
    """The targets' inventories read again: collected now with --collect, the files re-read
    otherwise (their age is judged against --max-inventory-age)."""
    from spurctl.holdings import inventories_by_node
    from spurctl.sources.inventories import gather_holdings

    again = dataclasses.replace(src, scope=Scope(frozenset(names)), progress=False)
    return inventories_by_node(gather_holdings(again, names))
