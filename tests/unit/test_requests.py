"""The commands' requests (usecases/reclaim.ReclaimRequest, usecases/drain.DrainRequest,
repair_view.RepairRequest, usecases/autopilot.AutopilotRequest, usecases/checklist.ChecklistRequest,
commands/audit.AuditRequest, commands/collect.CollectRequest): every mix of options that
cannot mean anything is refused when the request is built; no cluster, simulated or real, is
needed to ask, and a request holds options only (no connection, no sources: those are read
after it is built, tests/e2e/test_option_checks_first_e2e.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from spurctl import repair_view
from spurctl.commands.audit import AuditRequest
from spurctl.commands.collect import CollectRequest
from spurctl.errors import SpurctlError
from spurctl.model import Kind, PlanDocument
from spurctl.options import COLLECT_NODE_TIMEOUT_S
from spurctl.render.common import AuditFormat
from spurctl.repair_view import RepairRequest
from spurctl.scope import Scope
from spurctl.sources.repair_plan import SavedRepairPlan
from spurctl.usecases import checklist, drain
from spurctl.usecases.autopilot import AutopilotRequest
from spurctl.usecases.checklist import ChecklistRequest
from spurctl.usecases.drain import DrainRequest, Verb
from spurctl.usecases.reclaim import MISSING_NODES, ReclaimRequest

JOURNAL = Path("/nonexistent/journal.jsonl")


def asked(
    nodes: str | None = "gpu[001-004]", exclude: str | None = None, **more: Any
) -> ReclaimRequest:
    return ReclaimRequest(scope=Scope.parse(nodes, exclude), journal_path=JOURNAL, **more)


def test_a_request_names_its_nodes_as_one_hostlist() -> None:
    request = asked("gpu001,gpu[002-004]", jobs=(4711,))
    assert request.nodes == "gpu[001-004]"
    assert request.jobs == (4711,) and not request.dry_run


def test_no_node_and_no_plan_is_refused() -> None:
    with pytest.raises(SpurctlError, match="missing option --node") as refused:
        asked(None)
    assert str(refused.value) == MISSING_NODES


@pytest.mark.parametrize(
    ("more", "says"),
    [
        ({"plan_output": Path("plan.json")}, "-o saves the plan of a dry run"),
        ({"detailed_exitcode": True}, "--detailed-exitcode says whether a dry run"),
    ],
)
def test_what_only_a_dry_run_means_is_refused_without_one(more: dict[str, Any], says: str) -> None:
    with pytest.raises(SpurctlError, match=says):
        asked(**more)
    asked(dry_run=True, **more)  # with it: a request


def test_a_saved_plan_is_refused_beside_nodes_jobs_or_a_dry_run() -> None:
    plan = Path("plan.json")
    for given in ({"nodes": "gpu001"}, {"nodes": None, "jobs": (4711,)}):
        with pytest.raises(SpurctlError, match="--plan names its own nodes and jobs"):
            asked(plan_file=plan, **given)
    with pytest.raises(SpurctlError, match="--plan applies a saved plan: drop --dry-run"):
        asked(None, plan_file=plan, dry_run=True)
    assert asked(None, plan_file=plan).saved is None


def test_a_saved_plan_brings_its_nodes_and_keeps_the_typed_exclusion() -> None:
    saved = cast(PlanDocument, SimpleNamespace(nodes="gpu[001-004]"))
    request = asked(None, exclude="gpu002", plan_file=Path("plan.json")).with_saved(saved)
    assert request.saved is saved
    assert request.scope.kept() == {"gpu001", "gpu003", "gpu004"}
    assert request.nodes == "gpu[001-004]"


@pytest.mark.parametrize("verb", list(Verb))
def test_drain_and_resume_refuse_a_request_that_names_no_node(verb: Verb) -> None:
    with pytest.raises(SpurctlError) as refused:
        DrainRequest(verb, Scope.parse(None, "gpu002"), JOURNAL)
    assert str(refused.value) == drain.MISSING_NODES
    request = DrainRequest(verb, Scope.parse("gpu[001-003]", "gpu002"), JOURNAL, yes=True)
    assert request.scope.kept() == {"gpu001", "gpu003"} and not request.dry_run


# -- repair (repair_view.RepairRequest: shared with the autopilot's --repair) ----------


def repair_asked(
    nodes: str | None = "gpu[001-004]", exclude: str | None = None, **more: Any
) -> RepairRequest:
    return RepairRequest(Scope.parse(nodes, exclude), JOURNAL, **more)


def test_a_repair_request_keeps_its_nodes_less_the_exclusion() -> None:
    request = repair_asked(exclude="gpu002", dry_run=True, plan_output=Path("plan.json"))
    assert request.scope.kept() == {"gpu001", "gpu003", "gpu004"}
    assert request.saved is None and request.plan_file is None
    apply = request.applying("gpu[001,003-004]")
    assert apply.argv == ("spurctl", "repair", "--plan", "plan.json"), apply


def test_a_repair_that_names_no_node_and_no_plan_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        repair_asked(None)
    assert str(refused.value) == (
        "missing option --node: name the nodes to repair with --node HOSTLIST (or -w), "
        "or carry out a saved plan with --plan FILE"
    )
    assert str(refused.value) == repair_view.MISSING_NODES


def test_a_repair_plan_output_without_a_dry_run_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        repair_asked(plan_output=Path("plan.json"))
    assert str(refused.value) == (
        "-o saves the plan of a dry run: add --dry-run (then repair with --plan FILE)"
    )


def test_a_saved_repair_plan_is_refused_beside_nodes_or_a_dry_run() -> None:
    plan = Path("plan.json")
    with pytest.raises(SpurctlError) as refused:
        repair_asked("gpu001", plan_file=plan)
    assert str(refused.value) == "--plan names its own nodes: drop --node, or drop --plan"
    with pytest.raises(SpurctlError) as refused:
        repair_asked(None, plan_file=plan, dry_run=True)
    assert str(refused.value) == "--plan carries out a saved plan: drop --dry-run, or drop --plan"
    assert repair_asked(None, plan_file=plan).saved is None  # alone: a request


def test_a_repair_from_standard_input_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        repair_asked(inventory=("inv.jsonl", "-"))
    assert str(refused.value) == (
        "repair reads the inventories again after its drain, and standard input (-) can be "
        "read only once: write them to a file (spurctl collect -o FILE), or --collect"
    )
    assert repair_asked(inventory=("inv.jsonl",)).inventory == ("inv.jsonl",)


def test_a_saved_repair_plan_brings_its_nodes_and_keeps_the_typed_exclusion() -> None:
    saved = cast(SavedRepairPlan, SimpleNamespace(nodes="gpu[001-004]"))
    request = repair_asked(None, exclude="gpu002", plan_file=Path("plan.json")).with_saved(saved)
    assert request.saved is saved
    assert request.scope.kept() == {"gpu001", "gpu003", "gpu004"}


# -- autopilot (usecases/autopilot.AutopilotRequest) -----------------------------------


def autopilot_asked(**more: Any) -> AutopilotRequest:
    return AutopilotRequest(Scope.parse(None), JOURNAL, JOURNAL.parent / "autopilot.pause", **more)


def test_an_autopilot_checked_rejoin_without_repair_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        autopilot_asked(rejoin_checked=True)
    assert str(refused.value) == (
        "--rejoin-checked goes with --repair: add --repair, or leave it out"
    )
    request = autopilot_asked(rejoin_checked=True, repair=True, rounds=1)
    assert request.repair and request.rejoin_checked and request.scope.everything


# -- checklist post-wipe (usecases/checklist.ChecklistRequest) -------------------------


def test_a_post_wipe_verify_that_names_no_node_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        ChecklistRequest(Scope.parse(None), verify=True)
    assert str(refused.value) == (
        "--verify needs --nodes: the nodes the first run said to recycle "
        "(its verify command lists them)"
    )
    assert str(refused.value) == checklist.VERIFY_NEEDS_NODES
    # -x alone names no node either: still nothing to verify against.
    with pytest.raises(SpurctlError, match="--verify needs --nodes"):
        ChecklistRequest(Scope.parse(None, "gpu002"), verify=True)
    assert ChecklistRequest(Scope.parse(None)).verify is False  # every node: a first run
    request = ChecklistRequest(Scope.parse("gpu[001-003]", "gpu002"), verify=True)
    assert request.scope.kept() == {"gpu001", "gpu003"}


# -- audit (commands/audit.AuditRequest) -------------------------------------------------


def audit_asked(**more: Any) -> AuditRequest:
    return AuditRequest(Scope.parse(None), JOURNAL, **more)


@pytest.mark.parametrize(
    ("more", "says"),
    [
        ({"interval": 5.0}, "--interval and --rounds only apply with --watch"),
        ({"rounds": 2}, "--interval and --rounds only apply with --watch"),
        (
            {"watch": True, "fmt": AuditFormat.CSV},
            "--watch draws a table or writes JSON Lines (--format json); --format csv is for "
            "one-shot audits (drop --watch)",
        ),
        (
            {"watch": True, "snapshot": Path("view.json")},
            "--watch follows the live controller; a saved --snapshot never changes",
        ),
        (
            {"watch": True, "inventory": ("inv.jsonl", "-")},
            "--watch re-reads the inventories every round and standard input (-) can be read "
            "only once: write them to a file (spurctl collect -o FILE)",
        ),
        (
            {"watch": True, "kinds": (Kind.AGENT_ORPHAN,)},
            "--kind, --action and -o do not apply with --watch (every round shows every "
            "finding, on stdout: redirect it to keep it)",
        ),
        (
            {"watch": True, "columns": ("node",)},
            "--columns is for a one-shot table: drop --watch or --columns",
        ),
        (
            {"fmt": AuditFormat.JSON, "columns": ("node",)},
            "--columns chooses the table's columns, and --format json carries every field: "
            "drop one of them",
        ),
        (
            {"fmt": AuditFormat.CSV, "header": False},
            "--no-header is for the table: drop --watch and --format (or drop --no-header)",
        ),
    ],
)
def test_an_audit_option_mix_that_means_nothing_is_refused(more: dict[str, Any], says: str) -> None:
    with pytest.raises(SpurctlError) as refused:
        audit_asked(**more)
    assert str(refused.value) == says


def test_an_audit_request_holds_what_each_option_means_on_its_own() -> None:
    request = audit_asked(watch=True, interval=5.0, rounds=2, inventory=("inv.jsonl",))
    assert (request.watch, request.interval, request.rounds) == (True, 5.0, 2)
    # One-shot, what --watch refuses is a request: stdin, a snapshot, filters, -o.
    one_shot = audit_asked(
        inventory=("-",), snapshot=Path("view.json"), kinds=(Kind.AGENT_ORPHAN,),
        output=Path("audit.txt"), columns=("node",), header=False,
    )  # fmt: skip
    assert one_shot.inventory == ("-",) and not one_shot.watch


# -- collect (commands/collect.CollectRequest) ---------------------------------------------


def test_a_collect_that_names_no_node_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        CollectRequest(Scope.parse(None))
    assert str(refused.value) == (
        "missing option --nodes: name the nodes to collect with -w HOSTLIST"
    )


def test_collects_old_timeout_name_beside_the_new_one_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        CollectRequest(Scope.parse("gpu001"), node_timeout_s=5.0, old_timeout_s=7.0)
    assert str(refused.value) == (
        "collect's --timeout is the old name of --node-timeout; give --node-timeout only"
    )


def test_a_collects_node_limit_is_the_one_given_else_the_default() -> None:
    nodes = Scope.parse("gpu[001-002]")
    assert CollectRequest(nodes).limit == COLLECT_NODE_TIMEOUT_S
    assert CollectRequest(nodes, node_timeout_s=5.0).limit == 5.0
    assert CollectRequest(nodes, old_timeout_s=7.0).limit == 7.0
