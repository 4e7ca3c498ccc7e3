"""`spurctl drain` and `spurctl resume`: spurctl's own drains, set and lifted, journaled.

`drain` drains the nodes in scope that hold what spurctl cannot free right now, so
the scheduler stops sending them work they reject; `resume` lifts spurctl's own
drains from the nodes whose fresh audit is clean. Neither touches a node drained
or DOWN for another reason (decide/drains.py). Each UpdateNode is journaled
(intent before, outcome after) and read back with GetNode.

Uses `audit_view.run_audit`: what a node holds, and whether its audit is clean,
is the classifier's judgement over the same view and inventories as `audit` reads.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.decide.budget import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_MAX_UNAVAILABLE,
    MaxUnavailable,
    over_budget,
    resumed_at,
)
from spurctl.decide.drains import (
    Left,
    NodeChange,
    cancel_states,
    drain_plan,
    lost_reason_plan,
    resume_plan,
)
from spurctl.decide.owner import Ownership
from spurctl.decide.repair import repair_progress
from spurctl.defaults import DEFAULT_LOCK_WAIT_S, DEFAULT_MAX_INVENTORY_AGE_S
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.hostlist import fold
from spurctl.model import NextStep, utcnow
from spurctl.releases import replaces_hold_reason
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection


MISSING_NODES = "missing option --node: name the nodes with --node HOSTLIST (or -w)"


class Verb(enum.StrEnum):
    DRAIN = "drain"
    RESUME = "resume"


@dataclass(frozen=True, slots=True)
class DrainRequest:
    """What `spurctl drain` or `spurctl resume` was asked: the nodes, the journal, the
    run's options; refused when built (SpurctlError) when no node is named, before
    anything is read or any connection made."""

    verb: Verb
    scope: Scope
    journal_path: Path
    dry_run: bool = False
    yes: bool = False
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S
    # drain: spurctl's nodes out of service, this run's included, never above this
    # (decide/budget.py); a node spurctl resumed is not drained again before the cooldown.
    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE
    cooldown_s: float = DEFAULT_COOLDOWN_S
    # resume --lost-reason: lift the named nodes whose drain of spurctl's a heartbeat
    # timeout replaced with `Not responding` (Spur v0.8.0: decide/lost_reason.py), only.
    lost_reason: bool = False
    # The options that made the view and the journal named, as a next command restates
    # them (opt.view_flags, plus --journal when one was given).
    given: tuple[str, ...] = ()
    # --lock-wait: how long a real run waits for the journal's lock (an autopilot's round).
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S

    def applying(self) -> NextStep:
        """This very run without --dry-run: the command that sends what it planned."""
        words = [self.verb.value, "--node", fold(sorted(self.scope.kept())), *self.given]
        if self.max_inventory_age_s != DEFAULT_MAX_INVENTORY_AGE_S:
            words += ["--max-inventory-age", f"{self.max_inventory_age_s:g}s"]
        if self.verb is Verb.DRAIN and self.max_unavailable != DEFAULT_MAX_UNAVAILABLE:
            words += ["--max-unavailable", str(self.max_unavailable)]
        if self.verb is Verb.DRAIN and self.cooldown_s != DEFAULT_COOLDOWN_S:
            words += ["--cooldown", f"{self.cooldown_s:g}s"]
        if self.lost_reason:
            words += ["--lost-reason"]
        return NextStep.spurctl(*words, why="Send this plan with")

    def __post_init__(self) -> None:
        if self.scope.named is None:
            raise SpurctlError(MISSING_NODES)
        if self.lost_reason and self.verb is not Verb.RESUME:
            raise SpurctlError("--lost-reason is resume's: it lifts a DOWN, never drains")


@dataclass(slots=True)
class DrainPlan:
    verb: Verb
    controller: str
    nodes: str
    changes: list[NodeChange] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)


@dataclass(slots=True)
class Changed:
    """What one `spurctl drain`/`resume` did, and the exit status it earns."""

    plan: DrainPlan
    dry_run: bool
    declined: bool
    exit_status: ExitStatus
    # node -> (sent, detail); a node absent was not attempted.
    done: dict[str, tuple[bool, str]] = field(default_factory=dict)
    error: str | None = None
    # Stopped by Ctrl-C (SIGTERM, SIGHUP) between two nodes: the rest not attempted.
    interrupted: bool = False
    # A dry run with something to send: the command that sends it.
    apply: NextStep | None = None


def plan_changes(request: DrainRequest, src: Sources, conn: Connection) -> DrainPlan:
    """The changes `request` asks of its nodes, read through `src` (whose scope is the
    request's) and the controller `conn` reaches."""
    from spurctl.audit_view import refuse_another_cluster, run_audit
    from spurctl.sources.journal_records import run_records
    from spurctl.sources.settings import credential_uid

    # -x: an excluded node is never drained or resumed (checked when it was parsed).
    scope = set(request.scope.kept())
    src = dataclasses.replace(src, scope=Scope(frozenset(scope)))
    report, inputs = run_audit(src, conn, journal=request.journal_path)
    refuse_another_cluster(inputs, conn, f"the {request.verb.value}")
    found = run_records(request.journal_path, conn)
    plan = DrainPlan(request.verb, report.controller_address, fold(sorted(scope)))
    nodes = inputs.view.nodes
    # spurctl's drains: exactly a reason its journal records it setting (decide/owner.py).
    owned = Ownership.of(found, credential_uid(conn))
    # Where a heartbeat timeout replaces a drain's reason (decide/lost_reason.py).
    version = inputs.view.version
    lost_release = version if replaces_hold_reason(version) else None
    if request.verb is Verb.DRAIN:
        plan.changes, plan.left = drain_plan(
            scope, nodes, report.findings, cancel_states(found), owned,
            resumed=resumed_at(found), now=utcnow(), cooldown_s=request.cooldown_s,
            lost_release=lost_release,
        )  # fmt: skip
        # Counted over every node the controller lists, not only the scope.
        refused = over_budget(
            nodes, owned, [c.node for c in plan.changes], request.max_unavailable, "drain",
            reason_replaced=lost_release is not None,
        )  # fmt: skip
        if refused is not None:
            raise SpurctlError(refused)
        return plan
    if request.lost_reason:
        plan.changes, plan.left = lost_reason_plan(
            scope, nodes, report.findings, inputs.inventories, now=utcnow(),
            max_age_s=request.max_inventory_age_s, owned=owned,
            lost_release=lost_release, version=version,
        )  # fmt: skip
    else:
        plan.changes, plan.left = resume_plan(
            scope, nodes, report.findings, inputs.inventories, now=utcnow(),
            max_age_s=request.max_inventory_age_s, owned=owned,
            repairing=repair_progress(found), lost_release=lost_release,
        )  # fmt: skip
    return plan


def change(
    request: DrainRequest,
    src: Sources,
    conn: Connection,
    *,
    show_plan: Callable[[DrainPlan], None],
    ask: Callable[[DrainPlan], bool] | None,
) -> Changed:
    """Plan, show, ask unless --yes (`ask` None: no terminal, so refuse), send. A real run
    holds the journal's lock from before it reads the journal to its last record (waiting
    for it --lock-wait at most: an autopilot's round); a dry run takes none."""
    from spurctl.act.journal import journal_lock

    wait = request.lock_wait_s
    with nullcontext() if request.dry_run else journal_lock(request.journal_path, wait):
        return _change(request, src, conn, show_plan=show_plan, ask=ask)


def _change(
    request: DrainRequest,
    src: Sources,
    conn: Connection,
    *,
    show_plan: Callable[[DrainPlan], None],
    ask: Callable[[DrainPlan], bool] | None,
) -> Changed:
    from spurctl.act.node_changes import send_changes

    plan = plan_changes(request, src, conn)
    show_plan(plan)
    # resume: a spurctl drain kept (not clean) still needs action; drain: nothing does.
    kept = any(left.kept for left in plan.left)
    unmet = ExitStatus.ACTION_NEEDED if kept else ExitStatus.OK
    if request.dry_run or not plan.changes:
        apply = request.applying() if request.dry_run and plan.changes else None
        return Changed(plan, request.dry_run, False, unmet, apply=apply)
    if not request.yes:
        if ask is None:
            raise SpurctlError(
                f"refusing to {request.verb.value} without --yes: standard input is not a terminal"
            )
        if not ask(plan):
            return Changed(plan, False, True, ExitStatus.ACTION_NEEDED)
    sent = send_changes(
        plan.changes,
        drain=plan.verb is Verb.DRAIN,
        conn=conn,
        journal_path=request.journal_path,
    )
    failed = sent.interrupted or any(not ok for ok, _ in sent.done.values())
    unmet = ExitStatus.ACTION_NEEDED if failed or kept else ExitStatus.OK
    status = ExitStatus.ERROR if sent.error else unmet
    return Changed(plan, False, False, status, sent.done, sent.error, sent.interrupted)
