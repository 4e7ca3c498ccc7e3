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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.act.repair_run import NodeResult, Status
from spurctl.decide.budget import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_MAX_UNAVAILABLE,
    MaxUnavailable,
    cooling,
    over_budget,
    resumed_at,
)
from spurctl.decide.owner import Ownership
from spurctl.decide.repair import (
    Refusal,
    RepairProgress,
    Target,
    judge,
    loose_inventories,
    narrowed_to_saved,
    rejoin_refusal,
    repair_progress,
    unchecked_rejoin,
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
    NextStep,
    format_time,
    utcnow,
)
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.sources.inventories import Sources
    from spurctl.sources.repair_plan import SavedRepairPlan
    from spurctl.sources.settings import Connection


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """Everything `spurctl repair` was asked, checked by the command line."""

    src: Sources  # its scope: the nodes named, or the saved plan's
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
    # spurctl's nodes out of service, this run's drains included, never above this; a
    # node spurctl resumed is not drained again before the cooldown (decide/budget.py).
    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE
    cooldown_s: float = DEFAULT_COOLDOWN_S
    # argv words that read this view again (the resume command the result prints).
    view_flags: tuple[str, ...] = ()
    names_command: str = NAMES_COMMAND
    # Where a dry run saves its plan (-o), for the command that carries it out.
    plan_file: Path | None = None

    def applying(self, nodes: str) -> NextStep:
        """This dry run's plan carried out: its saved file, else the same run without
        --dry-run, with the options it was given that a default would not restate."""
        given = list(self.view_flags)
        if self.max_inventory_age_s != DEFAULT_MAX_INVENTORY_AGE_S:
            given += ["--max-inventory-age", f"{self.max_inventory_age_s:g}s"]
        if self.max_unavailable != DEFAULT_MAX_UNAVAILABLE:
            given += ["--max-unavailable", str(self.max_unavailable)]
        if self.cooldown_s != DEFAULT_COOLDOWN_S:
            given += ["--cooldown", f"{self.cooldown_s:g}s"]
        if self.tick_s != DEFAULT_TICK_S:
            given += ["--tick", f"{self.tick_s:g}"]
        if self.wait_s != DEFAULT_REJOIN_WAIT_S:
            given += ["--wait", f"{self.wait_s:g}"]
        if self.plan_file is not None:
            return NextStep.spurctl(
                "repair", "--plan", str(self.plan_file), *given, why="Carry out the saved plan with"
            )
        return NextStep.spurctl("repair", "--node", nodes, *given, why="Carry out this plan with")


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
    # A dry run's plan that a real run would refuse for what spur.conf says (or does not).
    unsendable: bool = False

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


def _rejoin(conn: Connection, checked: bool, dry_run: bool = False) -> tuple[str, bool]:
    """What spur.conf says about rejoining (one phrase for the plan) and whether a real
    run would be refused for it; a real run's refusal is a SpurctlError, a dry run's is
    said in the phrase (the plan is still shown)."""
    from spurctl.sources.node_records import rejoin_conf

    rc = rejoin_conf(conn.conf)
    refused = rejoin_refusal(
        rc.path, wg_enabled=rc.wg_enabled, k0s_enabled=rc.k0s_enabled,
        admission=rc.admission, unreadable=rc.unreadable, checked=checked,
    )  # fmt: skip
    if refused is not None:
        if not dry_run:
            raise SpurctlError(refused)
        return unchecked_rejoin(refused, mesh=rc.wg_enabled or rc.k0s_enabled), True
    if rc.path is None or rc.unreadable is not None or rc.admission == "token":
        return "the operator checked that a removed node registers again (--rejoin-checked)", False
    return f"{rc.path}: no WireGuard mesh, no k0s, admission {rc.admission}", False


def _earlier(
    request: RepairRequest,
) -> tuple[dict[str, RepairProgress], Ownership, dict[str, datetime]]:
    """What the journal says of earlier repairs, which drains are spurctl's, and when
    spurctl last resumed each node."""
    from spurctl.sources.journal_records import run_records
    from spurctl.sources.settings import credential_uid

    found = run_records(request.journal_path, request.conn)
    owned = Ownership.of(found, credential_uid(request.conn))
    return repair_progress(found), owned, resumed_at(found)


def prepare(
    request: RepairRequest,
    progress: Mapping[str, RepairProgress],
    owned: Ownership | None = None,
    resumed: Mapping[str, datetime] | None = None,
) -> RepairPlan:
    """Audit the nodes afresh and judge each: a target, a refusal, or no charge (`owned`:
    spurctl's drains; none without it; `resumed`: when spurctl last resumed each node,
    for --cooldown). A plan that would take more nodes out of service than
    --max-unavailable allows is refused whole (SpurctlError)."""
    from spurctl.audit_view import refuse_another_cluster, run_audit
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.node_records import active_jobs_on

    rejoin, unsendable = _rejoin(request.conn, request.rejoin_checked, request.dry_run)
    # -x: an excluded node is never repaired (the scope was checked when it was parsed).
    scope = set(request.src.scope.kept())
    src = dataclasses.replace(request.src, scope=Scope(frozenset(scope)))
    report, inputs = run_audit(src, request.conn, journal=request.journal_path)
    refuse_another_cluster(inputs, request.conn, "the repair")
    view = inputs.view
    plan = RepairPlan(
        view.address, view.version, view.taken_at, fold(sorted(scope)), rejoin=rejoin,
        tick_s=request.tick_s, wait_s=request.wait_s, unsendable=unsendable,
    )  # fmt: skip
    unknown = []
    now = utcnow()
    with ControllerClient(request.conn) as client, client.sharing():
        for name in sorted(scope):
            pending = progress.get(name)
            node = view.nodes.get(name)
            if (
                pending is not None
                and pending.removed
                and (node is None or node.alloc.empty or pending.owes)
            ):
                # An earlier run removed it: wait for it (or take it as it came back; one
                # back and still owed its hold or labels is taken up whatever landed on it).
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
                owned=owned or Ownership(), pending=pending,
                loose=loose_inventories(name, inputs.inventories.values()),
            )  # fmt: skip
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
    if refused := over_budget(view.nodes, owned or Ownership(), taking, request.max_unavailable,
                              "repair"):  # fmt: skip
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
    *,
    show_plan: Callable[[RepairPlan], None],
    ask: Callable[[RepairPlan], bool] | None,
    sleep: Callable[[float], None] = time.sleep,
    waiting: Callable[[str], None] = lambda _: None,
) -> Repaired:
    """Plan, show the plan, ask unless --yes (`ask` None: no terminal, so refuse), carry out.

    Exit 0 only when every node in scope was repaired or had no charge; 1 when one was
    refused, failed, did not come back, or the operator declined.
    """
    progress, owned, resumed = _earlier(request)
    plan = prepare(request, progress, owned, resumed)
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
    results, error, settle = carry_out(plan, request, sleep=sleep, waiting=waiting)
    ok = not plan.refusals and all(r.status is Status.REPAIRED for r in results)
    status = ExitStatus.ERROR if error else ExitStatus.OK if ok else ExitStatus.ACTION_NEEDED
    return Repaired(plan, Stage.DONE, status, results, error, settle)


def carry_out(
    plan: RepairPlan,
    request: RepairRequest,
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

    run = RepairRun(plan, request, sleep, _inventory_of, waiting)
    # The Journal holds the journal's lock from the first record to the last.
    with (
        Journal(request.journal_path, request.conn) as journal,
        ControllerWriter(request.conn) as writer,
        ControllerClient(request.conn) as client,
    ):
        run.admin, run.client = NodeAdmin(writer, journal), client
        run.go()
    error, settle = run.journal_line()
    return run.ordered(), error, settle
