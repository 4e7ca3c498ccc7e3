"""The changing commands' requests (usecases/reclaim.ReclaimRequest, usecases/drain.DrainRequest,
repair_view.RepairRequest, usecases/autopilot.AutopilotRequest): every mix of options that
cannot mean anything is refused when the request is built; no cluster, simulated or real, is
needed to ask (repair's and the autopilot's carry a connection, never asked while building)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from spurctl import repair_view
from spurctl.errors import SpurctlError
from spurctl.model import PlanDocument
from spurctl.repair_view import RepairRequest
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.repair_plan import SavedRepairPlan
from spurctl.sources.settings import Connection
from spurctl.usecases import drain
from spurctl.usecases.autopilot import AutopilotRequest
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

NO_CONNECTION = cast(Connection, SimpleNamespace())  # never asked while a request is built


def repair_asked(
    nodes: str | None = "gpu[001-004]",
    exclude: str | None = None,
    inventory: list[str] | None = None,
    **more: Any,
) -> RepairRequest:
    src = Sources(Scope.parse(nodes, exclude), inventory, inventory is None, "", 1)
    return RepairRequest(src, NO_CONNECTION, JOURNAL, **more)


def test_a_repair_request_keeps_its_nodes_less_the_exclusion() -> None:
    request = repair_asked(exclude="gpu002", dry_run=True, plan_output=Path("plan.json"))
    assert request.src.scope.kept() == {"gpu001", "gpu003", "gpu004"}
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
        repair_asked(inventory=["inv.jsonl", "-"])
    assert str(refused.value) == (
        "repair reads the inventories again after its drain, and standard input (-) can be "
        "read only once: write them to a file (spurctl collect -o FILE), or --collect"
    )
    assert repair_asked(inventory=["inv.jsonl"]).src.inventory == ["inv.jsonl"]


def test_a_saved_repair_plan_brings_its_nodes_and_keeps_the_typed_exclusion() -> None:
    saved = cast(SavedRepairPlan, SimpleNamespace(nodes="gpu[001-004]"))
    request = repair_asked(None, exclude="gpu002", plan_file=Path("plan.json")).with_saved(saved)
    assert request.saved is saved
    assert request.src.scope.kept() == {"gpu001", "gpu003", "gpu004"}


# -- autopilot (usecases/autopilot.AutopilotRequest) -----------------------------------


def autopilot_asked(**more: Any) -> AutopilotRequest:
    src = Sources(Scope.parse(None), None, True, "", 1)
    return AutopilotRequest(src, NO_CONNECTION, JOURNAL, JOURNAL.parent / "autopilot.pause", **more)


def test_an_autopilot_checked_rejoin_without_repair_is_refused() -> None:
    with pytest.raises(SpurctlError) as refused:
        autopilot_asked(rejoin_checked=True)
    assert str(refused.value) == (
        "--rejoin-checked goes with --repair: add --repair, or leave it out"
    )
    request = autopilot_asked(rejoin_checked=True, repair=True, rounds=1)
    assert request.repair and request.rejoin_checked and request.src.scope.everything
