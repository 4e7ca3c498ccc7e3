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

The run itself (its calls, the waits, what a stop leaves owed) is act/repair_run.py.
Uses `audit_view.run_audit` for the plan: the phantom-alloc finding is the
classifier's, over the same view and inventories as `audit` reads.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from spurctl.act.repair_run import NodeResult, Status
from spurctl.decide.budget import (
    cooling,
    over_budget,
    resumed_at,
)
from spurctl.decide.owner import Ownership
from spurctl.decide.repair import (
    Refusal,
    RepairProgress,
    Target,
    narrowed_to_saved,
    repair_progress,
)
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.hostlist import fold
from spurctl.model import Inventory, NextStep, utcnow
from spurctl.releases import replaces_hold_reason
from spurctl.repair_view import RepairPlan as RepairPlan
from spurctl.repair_view import RepairRequest as RepairRequest
from spurctl.repair_view import judge_node, rejoin_said
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.sources.inventories import Sources
    from spurctl.sources.repair_plan import SavedRepairPlan
    from spurctl.sources.settings import Connection


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
    # The one error line after the run so far is shown (the journal failed), and the
    # command that settles what it left (the line ends with it).
    error: str | None = None
    settle: NextStep | None = None
    # A dry run a real run would carry out: the command that does.
    apply: NextStep | None = None


# -- the plan ------------------------------------------------------------------------


def _earlier(
    request: RepairRequest, conn: Connection
) -> tuple[dict[str, RepairProgress], Ownership, dict[str, datetime]]:
    """What the journal says of earlier repairs, which drains are spurctl's, and when
    spurctl last resumed each node."""
    from spurctl.sources.journal_records import run_records
    from spurctl.sources.settings import credential_uid

    found = run_records(request.journal_path, conn)
    owned = Ownership.of(found, credential_uid(conn))
    return repair_progress(found), owned, resumed_at(found)


def prepare(
    request: RepairRequest,
    src: Sources,
    conn: Connection,
    progress: Mapping[str, RepairProgress],
    owned: Ownership | None = None,
    resumed: Mapping[str, datetime] | None = None,
) -> RepairPlan:
    """Audit the nodes afresh (`src`: where the holdings come from, its scope the
    request's) and judge each: a target, a refusal, or no charge (`owned`:
    spurctl's drains; none without it; `resumed`: when spurctl last resumed each node,
    for --cooldown). A plan that would take more nodes out of service than
    --max-unavailable allows is refused whole (SpurctlError)."""
    from spurctl.audit_view import refuse_another_cluster, run_audit
    from spurctl.sources.controller import ControllerClient

    rejoin, unsendable = rejoin_said(conn, request.rejoin_checked, request.dry_run)
    # -x: an excluded node is never repaired (the scope was checked when it was parsed).
    scope = set(request.scope.kept())
    src = dataclasses.replace(src, scope=Scope(frozenset(scope)))
    report, inputs = run_audit(src, conn, journal=request.journal_path)
    refuse_another_cluster(inputs, conn, "the repair")
    view = inputs.view
    plan = RepairPlan(
        view.address, view.version, view.taken_at, fold(sorted(scope)), rejoin=rejoin,
        tick_s=request.tick_s, wait_s=request.wait_s, unsendable=unsendable,
    )  # fmt: skip
    unknown = []
    now = utcnow()
    with ControllerClient(conn) as client, client.sharing():
        for name in sorted(scope):
            pending = progress.get(name)
            node = view.nodes.get(name)
            if node is None and (pending is None or not pending.removed):
                unknown.append(name)
                continue
            decision = judge_node(
                name, node, pending, report.findings, inputs.inventories, client, view.version,
                now=now, max_age_s=request.max_inventory_age_s, view_complete=view.complete,
                restore_hold=request.restore_drain, owned=owned or Ownership(),
            )  # fmt: skip
            if isinstance(decision, Target) and decision.removed:
                plan.targets.append(decision)
                continue
            fresh = isinstance(decision, Target) and decision.resumes is None
            if fresh and (cool := cooling(name, resumed or {}, now=now, verb="repair",
                          cooldown_s=request.cooldown_s, named_alone=len(scope) == 1)):  # fmt: skip
                plan.refusals.append(Refusal(name, cool))
            elif decision is None:
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
    # Counted over every node the controller lists; a removed node is out already.
    taking = [t.node for t in plan.targets if not t.removed]
    # A drain of spurctl's Spur v0.8.0 turned DOWN `Not responding` counts (decide/budget.py).
    replaced = replaces_hold_reason(view.version)
    if refused := over_budget(view.nodes, owned or Ownership(), taking, request.max_unavailable,
                              "repair", reason_replaced=replaced):  # fmt: skip
        raise SpurctlError(refused)
    return plan


def _inventory_of(name: str, inventories: Mapping[str, Inventory]) -> Inventory | None:
    """The node's exact-named inventory, the only one that can vouch for its repair (the
    loosely named ones can only refuse it: decide.repair.loose_inventories)."""
    return inventories.get(name)


def _only_saved(plan: RepairPlan, saved: SavedRepairPlan, max_age_s: float, now: datetime) -> None:
    """The fresh plan narrowed to the saved targets; one whose charge is no longer the
    saved one is refused. A plan too old, dated ahead of this host's clock, or from
    another controller is refused whole, as reclaim's is (decide.saved_plan.check_view)."""
    from spurctl.decide.saved_plan import check_view
    from spurctl.model import NextStep

    remake = NextStep.spurctl("repair", "--node", saved.nodes, "--dry-run", "-o", "FILE")
    check_view(saved.taken_at, saved.controller, plan.controller, max_age_s, now, remake)
    plan.targets, plan.refusals, plan.uncharged = narrowed_to_saved(
        plan.targets, plan.refusals, plan.uncharged, saved.targets
    )


# -- the whole command ------------------------------------------------------------


def repair(
    request: RepairRequest,
    src: Sources,
    conn: Connection,
    *,
    show_plan: Callable[[RepairPlan], None],
    ask: Callable[[RepairPlan], bool] | None,
    sleep: Callable[[float], None] = time.sleep,
    waiting: Callable[[str], None] = lambda _: None,
) -> Repaired:
    """Plan, show the plan, ask unless --yes (`ask` None: no terminal, so refuse), carry out;
    the holdings read through `src` (its scope the request's), the cluster through `conn`.

    Exit 0 only when every node in scope was repaired or had no charge; 1 when one was
    refused, failed, did not come back, or the operator declined. A real run holds the
    journal's lock from before it reads the journal to its last record (waiting for it
    --lock-wait at most: an autopilot's round); a dry run takes none.
    """
    from spurctl.act.journal import journal_lock

    wait = request.lock_wait_s
    with nullcontext() if request.dry_run else journal_lock(request.journal_path, wait):
        return _repair(request, src, conn, show_plan, ask, sleep, waiting)


def _repair(
    request: RepairRequest,
    src: Sources,
    conn: Connection,
    show_plan: Callable[[RepairPlan], None],
    ask: Callable[[RepairPlan], bool] | None,
    sleep: Callable[[float], None],
    waiting: Callable[[str], None],
) -> Repaired:
    progress, owned, resumed = _earlier(request, conn)
    plan = prepare(request, src, conn, progress, owned, resumed)
    show_plan(plan)
    unsendable = plan.unsendable and bool(plan.targets)
    unmet = ExitStatus.ACTION_NEEDED if plan.refusals or unsendable else ExitStatus.OK
    if request.dry_run:
        sendable = plan.targets and not unsendable
        apply = request.applying(plan.nodes) if sendable else None
        return Repaired(plan, Stage.PLANNED, unmet, apply=apply)
    if not plan.targets:
        return Repaired(plan, Stage.NOTHING, unmet)
    if not request.yes:
        if ask is None:
            raise SpurctlError("refusing to repair without --yes: standard input is not a terminal")
        if not ask(plan):
            return Repaired(plan, Stage.DECLINED, ExitStatus.ACTION_NEEDED)
    results, error, settle = carry_out(plan, request, src, conn, sleep=sleep, waiting=waiting)
    ok = not plan.refusals and all(r.status is Status.REPAIRED for r in results)
    status = ExitStatus.ERROR if error else ExitStatus.OK if ok else ExitStatus.ACTION_NEEDED
    return Repaired(plan, Stage.DONE, status, results, error, settle)


def carry_out(
    plan: RepairPlan,
    request: RepairRequest,
    src: Sources,
    conn: Connection,
    *,
    sleep: Callable[[float], None] = time.sleep,
    waiting: Callable[[str], None] = lambda _: None,
) -> tuple[list[NodeResult], str | None, NextStep | None]:
    """Drain, tick, re-check, remove, wait, put back, verify; journaled (`waiting`: told
    what each long wait waits for). Returns each
    target's result and, when the journal failed, the one line saying so (what went out
    unrecorded, what is still owed) with the command that settles it."""
    from spurctl.act.journal import Journal
    from spurctl.act.node_admin import ControllerWriter, NodeAdmin
    from spurctl.act.repair_run import RepairRun
    from spurctl.sources.controller import ControllerClient

    run = RepairRun(plan, request, src, conn, sleep, _inventory_of, waiting)
    # The Journal holds the journal's lock from the first record to the last.
    with (
        Journal(request.journal_path, conn) as journal,
        ControllerWriter(conn) as writer,
        ControllerClient(conn) as client,
    ):
        run.admin, run.client = NodeAdmin(writer, journal), client
        run.go()
    error, settle = run.journal_line()
    return run.ordered(), error, settle
