"""One `spurctl repair` run's calls, phase by phase over all its targets (the waits are
shared): spurctl's drain, the tick, the re-read, DeregisterNode(force=false), the wait
for each node to register again, and what it is owed put back. usecases/repair.py plans
the run and hands it here.

Whatever stops a run (Ctrl-C, SIGTERM, SIGHUP, a journal that cannot be written, a
controller that fails the re-read), nothing new is sent after it, and what the run owes
each node is put back or said: spurctl's drain of a node not removed is lifted (its
earlier drain put back), a removed node that is back gets its drain and labels back,
and one that is not is named with what it is owed and the command that settles it (the
journal keeps it for that run). The wait rides out a controller that does not answer
for a while; a put-back goes out whether the journal can record it or not.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spurctl.decide.owner import Seen
from spurctl.decide.repair import (
    HOLDS,
    Hold,
    Target,
    charge_text,
    labels_to_restore,
    landed_sentence,
    loose_inventories,
    not_back_sentence,
    owed_text,
    recheck,
    refused_for_running_jobs,
    unrecorded_sentence,
)
from spurctl.errors import SpurctlError
from spurctl.hostlist import fold, may_name
from spurctl.model import Inventory, Job, Kind, NextStep, Node, NodeState, format_time, utcnow
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.act.node_admin import NodeAdmin, Step
    from spurctl.repair_view import RepairPlan, RepairRequest
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection

KIND = Kind.PHANTOM_ALLOC.value
# RepairRun._update's answer when the node had changed: left as it is, its result said.
_LEFT = ""


class Status(enum.StrEnum):
    REPAIRED = "repaired"
    REFUSED = "refused"  # re-checked and not removed (spurctl's drain lifted)
    FAILED = "failed"
    NOT_BACK = "not-back"  # removed, and not registered again within --wait
    # Repaired, and a job landed on it before what it was owed went back: worth a look.
    LANDED = "landed"
    INTERRUPTED = "interrupted"


@dataclass(slots=True)
class NodeResult:
    node: str
    status: Status
    detail: str
    next_steps: list[NextStep] = field(default_factory=list)


class RepairRun:
    """One repair run over all its targets (the module's docstring says what it owes)."""

    def __init__(
        self, plan: RepairPlan, request: RepairRequest, src: Sources, conn: Connection,
        sleep: Callable[[float], None],
        inventory_of: Callable[[str, Mapping[str, Inventory]], Inventory | None],
        waiting: Callable[[str], None] = lambda _: None,
    ) -> None:  # fmt: skip
        from spurctl.sources.settings import credential_uid

        self.plan, self.request, self.sleep = plan, request, sleep
        self.src = src  # the holdings read again after the drain (its scope the request's)
        # Told what the run waits for before each wait that may pass a second (the
        # command shows it: an operator never watches a silent minute).
        self.waiting = waiting
        self.inventory_of = inventory_of  # the plan's match of a node to its inventory
        self.results: dict[str, NodeResult] = {}
        self.admin: NodeAdmin | None = None
        self.client: ControllerClient | None = None
        # Why nothing more is sent (the journal could not record a step).
        self.journal_failure: str | None = None
        # A put-back that meets a controller that does not answer tries again until then.
        self.deadline = 0.0
        # node -> what it is still owed, when the run could not put it back.
        self.owed: dict[str, str] = {}
        # Who the controller records as setting spurctl's drains (#860), where known.
        self.uid = credential_uid(conn)

    # -- plumbing ------------------------------------------------------------------

    def ordered(self) -> list[NodeResult]:
        return [self.results[t.node] for t in self.plan.targets if t.node in self.results]

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

    def _note(self, t: Target, step: str, result: str, detail: str, **extra: Any) -> None:
        """A journaled outcome of a put-back phase: a journal that cannot take it stops
        nothing (the journal keeps what to put back; the next run settles its record)."""
        assert self.admin is not None
        self.admin.outcome(self._step(t, step, "GetNode"), result, detail, restore=True, **extra)

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
        reason: str | None = None, labels: Mapping[str, str] | None = None,
        expect: Seen, changed: Status = Status.REFUSED, why: str = "",
        putting_back: bool = False, **extra: Any,
    ) -> str | None:  # fmt: skip
        """One journaled UpdateNode, sent only while the node is as `expect` says; the error
        when it did not go through, or _LEFT when the node had changed (left as it is: a
        `changed` result, after `why`). A put-back (`putting_back`) goes out whether the
        journal takes it or not, and one no controller took or whose node could not be
        read (nothing applied) is tried again until `deadline`."""
        from spurctl.act.node_admin import AdminCallFailed, NodeChanged

        words = [f"state={state.name}"] if state is not None else []
        words += [f"reason={reason!r}"] if state is not None else []
        words += [f"labels={dict(labels)}"] if labels else []
        if state is not None:
            extra["reason"] = reason or ""  # the reason the node will carry, for the metrics
        step_ = self._step(t, step, f"UpdateNode({t.node}, {', '.join(words)})", **extra)
        assert self.admin is not None
        while True:
            try:
                self.admin.send(
                    step_,
                    lambda w: w.update_node(t.node, state=state, reason=reason, labels=labels),
                    done,
                    confirm=self._shows(t.node, state, reason if state is not None else None),
                    expect=expect,
                    restore=putting_back,
                )
                return None
            except AdminCallFailed as exc:
                unread = isinstance(exc, NodeChanged) and not exc.read
                if putting_back and (exc.code == "UNAVAILABLE" or unread) and self._answers(t):
                    continue  # sent again (and journaled) only once the controller answers
                if isinstance(exc, NodeChanged) and not unread:
                    said = f"{why}; " if why else ""
                    self.results[t.node] = NodeResult(
                        t.node, changed, f"{said}{step} not sent: {exc.message}"
                    )
                    return _LEFT
                return f"{step} failed: {exc.message}"

    def _answers(self, t: Target) -> bool:
        """Whether the controller answers GetNode for `t` again before `deadline` (asked
        every so often; nothing journaled meanwhile)."""
        every = max(0.05, min(1.0, self.request.wait_s / 20))
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                return False
            self.sleep(min(every, left))
            try:
                self._read(t.node)
            except SpurctlError:
                continue
            return True

    def _lift(self, t: Target, why: str, status: Status = Status.REFUSED) -> None:
        """Undo spurctl's drain of a node it will not remove: its earlier hold back, or up;
        the node's result is `status` (refused after the re-read, failed, or interrupted).
        When that fails too, the result says what spurctl's drain stands in place of."""
        hold = t.hold
        # Only spurctl's drain, exactly as it set it: one set since (an admin's) stays.
        mine = self._mine(t)
        if hold is not None:
            failed = self._update(
                t, "undrain", f"{why}; its earlier drain put back: {hold.reason!r}",
                state=NodeState.DRAIN, reason=hold.reason, expect=mine, changed=status, why=why,
                putting_back=True,
            )  # fmt: skip
        else:
            failed = self._update(
                t, "undrain", f"{why}; spurctl's drain lifted", state=NodeState.IDLE,
                expect=mine, changed=status, why=why, putting_back=True,
            )  # fmt: skip
        if failed == _LEFT:
            return
        if failed is None:
            lifted = "its earlier drain put back" if hold else "spurctl's drain lifted"
            self.results[t.node] = NodeResult(t.node, status, f"{why} ({lifted})")
            return
        owed = (
            f"the drain {hold.reason!r} in place of spurctl's" if hold else "spurctl's drain lifted"
        )
        self._owing(t, Status.FAILED, f"{why}; {failed}", owed)

    # -- the phases --------------------------------------------------------------------

    def go(self) -> None:
        from spurctl.act.stops import stops_held

        removed = [t for t in self.plan.targets if t.removed]
        drained: list[Target] = []
        try:
            self._remove(drained, removed)
        except KeyboardInterrupt:
            with stops_held():  # a second Ctrl-C does not cut the putting back short
                self._unwind(drained, removed, "interrupted before DeregisterNode",
                             Status.INTERRUPTED)  # fmt: skip
                for t in removed:
                    if t.node not in self.results:
                        self._once_more(t)
            return
        except SpurctlError as exc:  # the journal, or the controller at the re-read
            from spurctl.act.node_admin import JournalUnwritable

            if isinstance(exc, JournalUnwritable):
                self.journal_failure = str(exc)
            self.deadline = time.monotonic() + self.request.wait_s
            with stops_held():
                self._unwind(drained, removed, f"not removed: {exc}", Status.FAILED)
        try:
            self._wait(removed)
        except KeyboardInterrupt:
            with stops_held():
                for t in removed:
                    if t.node not in self.results:
                        self._once_more(t)

    def _remove(self, drained: list[Target], removed: list[Target]) -> None:
        """Drain, tick, re-read, DeregisterNode: the sending phases, each call with its
        record (a stop lands between calls); what went out is in `drained` and `removed`."""
        from spurctl.act.node_admin import JournalUnwritable
        from spurctl.act.stops import stops_deferred

        for t in [t for t in self.plan.targets if not t.removed]:
            with stops_deferred():
                try:
                    if self._drain(t):
                        drained.append(t)
                except JournalUnwritable as exc:
                    if exc.sent:  # the drain went out; its outcome is what failed
                        drained.append(t)
                    raise
        if drained:
            if self.request.tick_s > 1:
                self.waiting(
                    f"waiting {self.request.tick_s:g} s (--tick) before re-reading "
                    f"{fold(t.node for t in drained)}: a dispatch already under way lands "
                    "or fails meanwhile"
                )
            self.sleep(self.request.tick_s)
        for t in self._rechecked(drained):
            with stops_deferred():
                try:
                    if self._deregister(t):
                        removed.append(t)
                except JournalUnwritable as exc:
                    if exc.sent:
                        removed.append(t)
                    raise

    def _unwind(self, drained: Sequence[Target], removed: Sequence[Target], why: str,
                status: Status) -> None:  # fmt: skip
        """After a stop before the removals: spurctl's drain lifted from each node drained
        and not removed; a node nothing was sent for says so."""
        for t in drained:
            if t.node not in self.results and t not in removed:
                self._lift(t, why, status)
        for t in self.plan.targets:
            if t not in removed:
                self.results.setdefault(
                    t.node, NodeResult(t.node, status, f"{why}: nothing was sent for it")
                )

    def _mine(self, t: Target) -> Seen:
        """`t`'s node carrying spurctl's drain, as spurctl set it."""
        return Seen.drained(t.reason, self.uid)

    def _drain(self, t: Target) -> bool:
        assert t.seen is not None  # every target the plan judged; a removed one is not drained
        failed = self._update(
            t, "drain", f"drained: {t.reason}", state=NodeState.DRAIN, reason=t.reason,
            expect=t.seen, restore=t.restore(),
        )  # fmt: skip
        if failed:
            self.results[t.node] = NodeResult(t.node, Status.FAILED, failed)
        return failed is None

    def _rechecked(self, drained: Sequence[Target]) -> list[Target]:
        """The drained targets that may be removed now, re-read after the tick; the others
        refused, each with what was seen, and spurctl's drain lifted where it is its own."""
        from spurctl.sources.node_records import active_jobs_on

        if not drained:
            return []
        assert self.admin is not None and self.client is not None
        if self.src.collect:
            self.waiting(f"collecting {fold(t.node for t in drained)} afresh before removing them")
        fresh = fresh_inventories(self.src, [t.node for t in drained])
        now = utcnow()
        passing = []
        # One read of the active jobs for every drained node.
        with self.client.sharing():
            for t in drained:
                node = self._read(t.node)
                jobs = active_jobs_on(self.client, t.node, self.plan.controller_version)
                refused = recheck(
                    t, node, jobs, self.inventory_of(t.node, fresh), now=now,
                    max_age_s=self.request.max_inventory_age_s,
                    loose=loose_inventories(t.node, fresh.values()),
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
        from spurctl.act.node_admin import AdminCallFailed, NodeChanged

        assert self.admin is not None
        reason = f"spurctl repair: phantom allocation {charge_text(t.charge)}"
        step = self._step(
            t, "deregister", f"DeregisterNode({t.node}, force=false, reason={reason!r})",
            restore=t.restore(),
        )  # fmt: skip
        try:
            self.admin.send(
                step, lambda w: w.deregister_node(t.node, reason), "removed", expect=self._mine(t)
            )
        except NodeChanged as exc:
            if exc.read and exc.now is None:
                return True  # gone already: the wait tells whether it comes back
            if not exc.read:  # a controller away: spurctl's drain must not stay for theirs
                self._lift(t, f"not removed: {exc.message}", Status.FAILED)
                return False
            self.results[t.node] = NodeResult(t.node, Status.REFUSED, f"not removed: {exc.message}")
            return False
        except AdminCallFailed as exc:
            if exc.code in ("NOT_FOUND", "UNKNOWN_OUTCOME"):
                return True  # gone already, or may be: the wait tells
            if exc.code == "FAILED_PRECONDITION" and refused_for_running_jobs(exc.message):
                self._lift(t, f"not removed: {exc.message}")
            else:  # spurctld answers every other remove_node error so too (a Raft propose)
                self._lift(t, f"DeregisterNode failed: {exc.message}", Status.FAILED)
            return False
        return True

    def _wait(self, removed: Sequence[Target]) -> None:
        """GetNode until every removed node is back or --wait is up (bounded); each node is
        finished as soon as it is back. A controller that does not answer (a restart, a
        leader election) is asked again until then: it ends no run."""
        from spurctl.act.stops import stops_deferred

        waiting = {t.node: t for t in removed if t.node not in self.results}
        if waiting:
            self.waiting(
                f"waiting up to {self.request.wait_s:g} s (--wait) for {fold(waiting)} to "
                "register again (its spurd's next heartbeat)"
            )
        self.deadline = time.monotonic() + self.request.wait_s
        every = max(0.05, min(1.0, self.request.wait_s / 20))
        unanswered: str | None = None
        while waiting:
            for name in sorted(waiting):
                try:
                    node = self._read(name)
                except SpurctlError as exc:
                    unanswered = str(exc)
                    break
                unanswered = None
                if node is not None:
                    with stops_deferred():  # its put-back is never cut in half
                        self._finish(waiting.pop(name), node)
            left = self.deadline - time.monotonic()
            if not waiting or left <= 0:
                break
            self.sleep(min(every, left))
        for t in waiting.values():
            self._not_back(t, unanswered)

    def _once_more(self, t: Target) -> None:
        """Stopped while waiting for `t`: finished if it is back now, else named with what
        it is owed and the command that settles it."""
        try:
            node = self._read(t.node)
        except SpurctlError:
            node = None
        if node is not None:
            return self._finish(t, node)
        why = f"interrupted after DeregisterNode: {t.node}'s record is gone until its spurd "
        self._owing(t, Status.INTERRUPTED, why + "registers it again", owed_text(t.hold, t.labels))
        return None

    def _resume_argv(self, node: str) -> tuple[str, ...]:
        return ("spurctl", "repair", "--node", node, *self.request.view_flags)

    def _owing(
        self, t: Target, status: Status, why: str, owed: str, steps: Sequence[NextStep] = ()
    ) -> None:
        """`t`'s result when the run could not settle it: why, what it is still owed (the
        journal keeps it), and the repair that settles it."""
        self.owed[t.node] = owed or "nothing but the journal's record"
        self.results[t.node] = NodeResult(
            t.node, status, f"{why}; owed: {self.owed[t.node]} (the journal keeps it)",
            [*steps, NextStep(self._resume_argv(t.node), "puts back what it is owed")],
        )  # fmt: skip

    def _not_back(self, t: Target, unanswered: str | None) -> None:
        why = not_back_sentence(t.node, self.request.wait_s, unanswered)
        self._note(t, "return", "failed", why)
        start = NextStep(("systemctl", "start", "spurd"), "starts its spurd", where=t.node)
        steps = [] if unanswered else [start]
        self._owing(t, Status.NOT_BACK, why, owed_text(t.hold, t.labels), steps)

    def _finish(self, t: Target, node: Node) -> None:
        """`t` is back: what it is owed put back first, whatever its charge shows (the hold
        before the labels: a drain stops the scheduler placing more there; each tried
        whatever became of the other), then the node read again and its charge judged."""
        since = format_time(node.agent_start_time) or "now"
        self._note(t, "return", "sent", f"{t.node} registered again (slurmd_start_time {since})")
        put_back: list[str] = []
        failures: list[str] = []
        owed_hold: Hold | None = None
        expect = Seen.of(node)  # as it registered again: nothing is put over a drain set since
        if t.hold is not None:
            done = f"drain put back: {t.hold.reason!r}"
            failed = self._update(
                t, "redrain", done, state=NodeState.DRAIN, reason=t.hold.reason, expect=expect,
                putting_back=True,
            )  # fmt: skip
            if failed == _LEFT:
                return None
            if failed is None:
                put_back.append(owed_text(t.hold, {}))
                expect = Seen.drained(t.hold.reason, self.uid)
            else:
                owed_hold = t.hold
                failures.append(failed)
        labels = labels_to_restore(t.labels, node.labels)
        owed_labels: dict[str, str] = {}
        if labels:
            failed = self._update(
                t, "labels", f"labels put back: {labels}", labels=labels, expect=expect,
                putting_back=True,
            )  # fmt: skip
            if failed == _LEFT:
                return None
            if failed is None:
                put_back.append(owed_text(None, labels))
            else:
                owed_labels = labels
                failures.append(failed)
        self._judge(t, node, put_back, failures, owed_text(owed_hold, owed_labels))
        return None

    def _judge(
        self, t: Target, node: Node, put_back: Sequence[str], failures: Sequence[str], owed: str
    ) -> None:
        """`t`'s charge judged once what it is owed went back (or could not): read again, as a
        job may have landed since it registered; the jobs that list it named."""
        from spurctl.sources.node_records import active_jobs_on

        assert self.client is not None
        version = self.plan.controller_version
        jobs: list[Job] | None = []
        try:
            node = self._read(t.node) or node
            if not node.alloc.empty:  # the active jobs are read only for a charged node
                jobs = [
                    j
                    for j in active_jobs_on(self.client, t.node, version)
                    if j.nodelist and may_name(j.nodelist, t.node)
                ]
        except SpurctlError:
            jobs = None  # not read: its charge is judged as the last read showed it
        said = f"; put back {' and '.join(put_back)}" if put_back else ""
        charge = "" if node.alloc.empty else landed_sentence(node.alloc, jobs)
        if failures:
            why = f"{t.node} registered again{said}; could not put back {owed}: " + "; ".join(
                failures
            )
            why += f"; {charge}" if charge else ""
            self._note(t, "verify", "owed", why)
            return self._owing(t, Status.FAILED, why, owed)
        if node.alloc.empty:
            detail = f"{t.node} registered again with no charge{said}"
            # Its registration is `return`'s outcome: `done` says the end, not that again.
            self._note(t, "done", "sent", f"repaired: no charge{said}", confirmed=True)
            self.results[t.node] = NodeResult(t.node, Status.REPAIRED, detail)
            return None
        if not jobs:
            why = f"{t.node} registered again but {charge}{said}"
            self._note(t, "verify", "failed", why)
            self.results[t.node] = NodeResult(t.node, Status.FAILED, why)
            return None
        # The phantom charge went with the old record; what it carries now is its jobs'.
        status = Status.LANDED if put_back else Status.REPAIRED
        detail = f"{t.node} registered again and {charge}{said}"
        if put_back:
            detail += (
                f": it landed before they went back; see that it belongs there "
                f"(spurctl explain {t.node})"
            )
        self._note(t, "done", "sent", detail, confirmed=True)
        self.results[t.node] = NodeResult(t.node, status, detail)
        return None

    def journal_line(self) -> tuple[str | None, NextStep | None]:
        """When the journal failed: one line saying so, what went out that it does not
        record and what is still owed; with the command that settles it."""
        assert self.admin is not None
        failure = self.journal_failure or self.admin.unwritable
        if failure is None:
            return None, None
        nodes = fold(sorted(t.node for t in self.plan.targets))
        line = unrecorded_sentence(failure, self.admin.unrecorded, self.owed)
        return line, NextStep(self._resume_argv(nodes), "settles it once the journal is writable")


def fresh_inventories(src: Sources, names: Sequence[str]) -> dict[str, Inventory]:
    """The targets' inventories read again: collected now with --collect, the files re-read
    otherwise (their age is judged against --max-inventory-age)."""
    from spurctl.holdings import inventories_by_node
    from spurctl.sources.inventories import gather_holdings

    again = dataclasses.replace(src, scope=Scope(frozenset(names)), progress=False)
    return inventories_by_node(gather_holdings(again, names))


def run_within(
    plan: RepairPlan,
    request: RepairRequest,
    src: Sources,
    conn: Connection,
    admin: NodeAdmin,
    client: ControllerClient,
) -> list[NodeResult]:
    """`plan` carried out through a caller's journal, writer and client (the autopilot's
    round: its journal lock held, its records tagged): each target's result. What a node
    not back within request.wait_s is owed stays in the journal for the next repair."""
    run = RepairRun(plan, request, src, conn, time.sleep, lambda name, found: found.get(name))
    run.admin, run.client = admin, client
    run.go()
    return run.ordered()
