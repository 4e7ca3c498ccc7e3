"""What a repair is asked and what it plans, below the use cases that repair.

`spurctl repair` (usecases/repair.py) and the autopilot's `--repair`
(usecases/autopilot.py) both plan a repair of a node from a fresh audit and hand the
plan to act/repair_run.py: the request, the plan, what spur.conf says of a removed
node registering again, and each node's judgement (decide/repair.judge) live here,
below them both, as audit_view does for the audit; so do the repairs an autopilot
round plans (round_repairs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.decide.budget import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_MAX_UNAVAILABLE,
    MaxUnavailable,
    cooling,
    resumed_at,
)
from spurctl.decide.owner import Ownership
from spurctl.decide.repair import (
    Refusal,
    RepairProgress,
    Target,
    judge,
    loose_inventories,
    rejoin_refusal,
    repair_progress,
    unchecked_rejoin,
)
from spurctl.defaults import (
    DEFAULT_LOCK_WAIT_S,
    DEFAULT_MAX_INVENTORY_AGE_S,
    DEFAULT_REJOIN_WAIT_S,
    DEFAULT_TICK_S,
    NAMES_COMMAND,
)
from spurctl.errors import SpurctlError
from spurctl.model import Allocation, Finding, Inventory, Kind, NextStep, Node, format_time
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.audit_view import AuditInputs
    from spurctl.model import AuditReport
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.repair_plan import SavedRepairPlan
    from spurctl.sources.settings import Connection


MISSING_NODES = (
    "missing option --node: name the nodes to repair with --node HOSTLIST (or -w), "
    "or carry out a saved plan with --plan FILE"
)


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """Everything `spurctl repair` (or the autopilot's --repair) was asked: options only,
    as reclaim's request; every mix of them that cannot mean anything refused when it is
    built (SpurctlError), before anything is read (spur.conf, the token, the topology, a
    saved plan) or any connection made. The run is given its Sources (built from `scope`)
    and its Connection beside it."""

    scope: Scope  # the nodes named, or the saved plan's (with_saved)
    journal_path: Path
    # --inventory as given: read by the run's Sources, checked here (standard input once).
    inventory: tuple[str, ...] = ()
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
    # --plan FILE, and the plan read from it (with_saved): the only nodes repaired.
    plan_file: Path | None = None
    # -o: where a dry run saves its plan, for the command that carries it out.
    plan_output: Path | None = None
    # --lock-wait: how long a real run waits for the journal's lock (an autopilot's round).
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S

    def __post_init__(self) -> None:
        if self.plan_output is not None and not self.dry_run:
            raise SpurctlError(
                "-o saves the plan of a dry run: add --dry-run (then repair with --plan FILE)"
            )
        if self.plan_file is not None:
            if self.saved is None and not self.scope.everything:
                raise SpurctlError("--plan names its own nodes: drop --node, or drop --plan")
            if self.dry_run:
                raise SpurctlError(
                    "--plan carries out a saved plan: drop --dry-run, or drop --plan"
                )
        elif self.scope.hostlist is None:
            raise SpurctlError(MISSING_NODES)
        if "-" in self.inventory:
            raise SpurctlError(
                "repair reads the inventories again after its drain, and standard input (-) "
                "can be read only once: write them to a file (spurctl collect -o FILE), or "
                "--collect"
            )

    def with_saved(self, saved: SavedRepairPlan) -> RepairRequest:
        """This request carrying out `saved` (read from --plan): its nodes, less -x."""
        scope = Scope.parse(saved.nodes, self.scope.exclude_typed)
        return dataclasses.replace(self, scope=scope, saved=saved)

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
        if self.plan_output is not None:
            saved = str(self.plan_output)
            return NextStep.spurctl(
                "repair", "--plan", saved, *given, why="Carry out the saved plan with"
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


def rejoin_said(conn: Connection, checked: bool, dry_run: bool = False) -> tuple[str, bool]:
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


def judge_node(
    name: str,
    node: Node | None,
    pending: RepairProgress | None,
    findings: Sequence[Finding],
    inventories: Mapping[str, Inventory],
    client: ControllerClient,
    version: str,
    *,
    now: datetime,
    max_age_s: float,
    view_complete: bool,
    restore_hold: bool,
    owned: Ownership,
) -> Target | Refusal | None:
    """One node's repair as a fresh audit shows it (`node` None: the controller has no such
    node): one an earlier run removed is waited for (or taken as it came back: one back and
    still owed its hold or labels is taken up whatever landed on it); else
    decide/repair.judge over its findings, its exact-named inventory and its active jobs.
    None: nothing to repair (no phantom charge, or no such node and no repair under way)."""
    from spurctl.sources.node_records import active_jobs_on

    if (
        pending is not None
        and pending.removed
        and (node is None or node.alloc.empty or pending.owes)
    ):
        return Target(name, Allocation(), pending.labels, pending.hold, pending.run, True)
    if node is None:
        return None
    found = [f for f in findings if f.node == name]
    jobs = active_jobs_on(client, name, version) if not node.alloc.empty else []
    return judge(
        node, found, jobs, inventories.get(name), now=now, max_age_s=max_age_s,
        view_complete=view_complete, restore_hold=restore_hold, owned=owned, pending=pending,
        loose=loose_inventories(name, inventories.values()),
    )  # fmt: skip


def round_repairs(
    scope: Scope,
    conn: Connection,
    report: AuditReport,
    inputs: AuditInputs,
    found: list[dict[str, Any]],
    owned: Ownership,
    now: datetime,
    notes: list[str],
    *,
    repair: bool,
    rejoin_checked: bool,
    max_age_s: float,
    cooldown_s: float,
) -> tuple[dict[str, Target], dict[str, str]]:
    """The autopilot's round (usecases/autopilot.py): the repairs `spurctl repair` would
    plan of its phantom-alloc nodes in `scope` (and of the nodes an earlier repair removed
    and still owes), and the nodes left to a person, each with why: no --repair (`repair`
    False), spur.conf not saying a removed node registers again, or the repair's own guards
    (decide/repair.judge, the cooldown). A round-wide refusal is added to `notes`."""
    from spurctl.sources.controller import ControllerClient

    view = inputs.view
    phantom = sorted({f.node for f in report.findings if f.kind is Kind.PHANTOM_ALLOC})
    phantom = scope.keep(phantom)
    progress = repair_progress(found)
    # Removed by an earlier repair (back since, or not yet): judge_node says what is owed.
    owed = [n for n, p in progress.items() if p.removed]
    owed = [n for n in scope.keep(owed) if scope.named is None or n in scope.kept()]
    if not phantom and not owed:
        return {}, {}
    if not repair:
        said = "phantom allocation: rebuilt only by a repair (--repair, or spurctl repair -w {})"
        owes = "removed by an earlier repair, owed a put-back (--repair, or spurctl repair -w {})"
        return {}, {n: (said if n in phantom else owes).format(n) for n in {*phantom, *owed}}
    said, refused = rejoin_said(conn, rejoin_checked, dry_run=True)
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
                max_age_s=max_age_s, view_complete=view.complete,
                restore_hold=False, owned=owned,
            )  # fmt: skip
            if isinstance(decision, Refusal):
                person[name] = decision.why
            elif isinstance(decision, Target):
                cool = cooling(name, resumed, now=now, verb="repair",
                               cooldown_s=cooldown_s, named_alone=False)  # fmt: skip
                if cool and not decision.removed and decision.resumes is None:
                    person[name] = cool
                else:
                    targets[name] = decision
    return targets, person
