"""`spurctl checklist post-wipe` against a simulated post-wipe cluster over real gRPC.

The scenario (spurctl_sim.post_wipe): the counter restarted at 1 and stands at 41;
gpu001-007 still hold pre-wipe runs (44, 57, 63 and 61 never issued yet; 23
reissued to a run on gpu010, 12 to a completed run, 35 to a pending one);
gpu009-016 were recycled and run post-wipe work.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from spurctl.decide.post_wipe import (
    Hazard,
    StepId,
)
from spurctl.model import (
    ControllerView,
    NodeState,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl.sources import credentials as auth
from spurctl.sources.documents import dump_json
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl.usecases.checklist import post_wipe
from spurctl_sim import SimCluster
from spurctl_sim import post_wipe as post_wipe_scenario
from spurctl_sim.releases import MAIN_4CC3DA8, SPUR_RELEASES, SpurRelease
from tests.cli import run_cli

KEY = "post-wipe-test-cluster-key-0123456789"
PRE_WIPE = ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005", "gpu006", "gpu007"]
RECYCLED_AT = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)  # after every run in the scenario
STEP_ORDER = [s.value for s in StepId]


def make_sim() -> SimCluster:
    return SimCluster(post_wipe_scenario())  # the `sim` fixture (tests/conftest.py)


def spurctl(*args: str) -> tuple[int, str, str]:
    """The CLI as a subprocess (tests.cli.run_cli): (exit status, stdout, stderr)."""
    run = run_cli(*args)
    return run.returncode, run.stdout, run.stderr


def checklist_json(
    sim: SimCluster,
    inventory: Path,
    *extra: str,
) -> tuple[int, dict[str, Any]]:
    code, out, err = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inventory),
        "--format",
        "json",
        *extra,
    )
    assert code in (0, 1), err
    return code, json.loads(out)


def view_of(s: SimCluster) -> ControllerView:
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.settings import Connection

    with ControllerClient(Connection(controllers=(s.controller_address,))) as client:
        return client.view(everything=True)


def held(doc: dict[str, Any], node: str) -> dict[int, dict[str, Any]]:
    entry = next(n for n in doc["nodes"] if n["node"] == node)
    return {h["job_id"]: h for h in entry["held"]}


def step(doc: dict[str, Any], step_id: StepId) -> dict[str, Any]:
    return next(s for s in doc["steps"] if s["id"] == step_id.value)


def recycle(sim: SimCluster, node: str, job_ids: list[int], *, graceful: bool = False) -> None:
    """The recycle on the node: its pre-wipe runs are stopped, then spurd restarts.

    The node's own spurd start time changes (its inventory's `agent`). A crash restart
    leaves the controller's slurmd_start_time as it was; a graceful one (`systemctl
    restart spurd`) before Spur #784 removes the node's record, and the next spurd
    registers a fresh one (spurctl_sim/restarts.py).
    """
    for job_id in job_ids:
        assert sim.release(node, job_id)
    sim.restart_agent(node, RECYCLED_AT, graceful=graceful)


def set_node_state(sim: SimCluster, node: str, state: NodeState, reason: str = "") -> None:
    """What scontrol update NodeName=... does, over the controller's real UpdateNode RPC."""
    channel = grpc.insecure_channel(sim.controller_address.removeprefix("http://"))
    with channel:
        rpc.SlurmControllerStub(channel).UpdateNode(
            pb.UpdateNodeRequest(name=node, state=int(state), reason=reason),  # type: ignore[arg-type]
            timeout=5,
        )


PRE_WIPE_IDS = {
    "gpu001": [44],
    "gpu002": [57, 63],
    "gpu003": [23],
    "gpu004": [12],
    "gpu005": [35],
    "gpu006": [61],
    "gpu007": [61],
}


# -- the plan ---------------------------------------------------------------------


def test_plan_recycles_exactly_the_nodes_holding_pre_wipe_ids(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")
    code, doc = checklist_json(sim, inv)
    assert code == 1
    assert doc["schema"] == "spurctl.checklist/v1"
    assert doc["mode"] == "plan"
    assert doc["nodes_to_recycle"] == PRE_WIPE
    assert doc["nodes_not_inventoried"] == []
    assert doc["watermark"] == {"value": 41, "source": "estimated"}
    for node, ids in PRE_WIPE_IDS.items():
        assert sorted(held(doc, node)) == ids
        assert all(h["hazard"] != "healthy" for h in held(doc, node).values())
    # Recycled nodes running post-wipe work are neither listed nor touched by any step.
    shown = {n["node"] for n in doc["nodes"]}
    assert shown == set(PRE_WIPE)
    for s in doc["steps"]:
        assert "gpu010" not in s["nodes"] and "gpu010" not in s["command"]


def test_above_watermark_ids_say_how_many_submissions_until_they_are_cancelled(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")
    _, doc = checklist_json(sim, inv)
    # The controller's next id is 41: the 4th submission from now gets id 44.
    distances = {
        (node, j): h["submissions_until"]
        for node in ("gpu001", "gpu002", "gpu006")
        for j, h in held(doc, node).items()
    }
    assert distances == {
        ("gpu001", 44): 4,
        ("gpu002", 57): 17,
        ("gpu002", 63): 23,
        ("gpu006", 61): 21,
    }
    h44 = held(doc, "gpu001")[44]
    assert h44["hazard"] == "above-watermark-unknown"
    assert "at most 4 more submissions" in h44["reason"]
    assert "once it issues id 44" in h44["reason"]

    # A watermark the operator knows moves the distance, and an id it passed is due now.
    _, doc = checklist_json(sim, inv, "--watermark", "50")
    assert doc["watermark"] == {"value": 50, "source": "flag"}
    assert held(doc, "gpu001")[44]["hazard"] == "below-watermark-unknown"
    assert "next heartbeat" in held(doc, "gpu001")[44]["reason"]
    assert held(doc, "gpu002")[57]["submissions_until"] == 8
    assert "8 more submissions" in held(doc, "gpu002")[57]["reason"]
    assert "at most" not in held(doc, "gpu002")[57]["reason"]


def test_reissued_ids_name_the_new_runs_node_and_what_the_controller_will_do(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")
    _, doc = checklist_json(sim, inv)
    h23 = held(doc, "gpu003")[23]
    assert h23["hazard"] == "id-reuse-suspected"
    assert h23["new_run_nodes"] == "gpu010"
    assert h23["controller_state"] == "RUNNING"
    assert "RUNNING on gpu010" in h23["reason"]
    assert "cancels this run at the next heartbeat" in h23["reason"]
    assert "silently sharing id 23" in h23["reason"]

    h12 = held(doc, "gpu004")[12]
    assert (h12["hazard"], h12["controller_state"]) == ("id-reuse-suspected", "COMPLETED")
    assert "has ended COMPLETED" in h12["reason"]

    h35 = held(doc, "gpu005")[35]
    assert (h35["hazard"], h35["controller_state"]) == ("id-reuse-suspected", "PENDING")
    assert "collides" in h35["reason"]


def test_what_the_checklist_says_is_cancelled_at_the_next_heartbeat_is_what_spurctld_cancels(
    tmp_path: Path,
) -> None:
    # The simulated controller applies spurctld's post-#623 reclaim with the TRUE
    # next_job_id: the checklist's "next heartbeat" and "once it issues" must agree with it.
    with SimCluster(post_wipe_scenario(), heartbeat_reclaim=True) as s:
        view = view_of(s)
        result = post_wipe(view, s.inventories(), confirm=None)
        said_now = {
            (n.node, h.job_id)
            for n in result.assessment.nodes.values()
            for h in n.held
            if "at the next heartbeat" in h.reason and "once" not in h.reason
        }
        said_later = {
            (n.node, h.job_id)
            for n in result.assessment.nodes.values()
            for h in n.held
            if h.hazard is Hazard.ABOVE_WATERMARK
            or (h.hazard is Hazard.REISSUED and "once" in h.reason)
        }
        decisions = s.heartbeat()
    reclaimed = {(d.node, d.job_id) for d in decisions if d.reclaim}
    assert said_now == {("gpu003", 23), ("gpu004", 12)}
    assert said_now == reclaimed
    assert said_later.isdisjoint(reclaimed)
    assert said_later == {
        ("gpu001", 44),
        ("gpu002", 57),
        ("gpu002", 63),
        ("gpu005", 35),
        ("gpu006", 61),
        ("gpu007", 61),
    }


def test_markdown_has_open_boxes_and_the_commands_with_folded_hostlists(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")
    out_file = tmp_path / "recycle.md"
    code, out, err = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inv),
        "-o",
        str(out_file),
    )
    assert code == 1, err
    assert out == ""
    md = out_file.read_text()
    assert "**7 nodes to recycle: gpu[001-007].**" in md
    # A document keeps the controller-version note whole, as audit's Markdown does.
    assert "> **NOTE:** Spur 0.8.0 is release v0.8.0 or a build of main from before 0.9.0" in md
    boxes = [line for line in md.splitlines() if line.startswith("- [")]
    # A seventh box, stopping the pre-wipe runs before spurd restarts.
    assert len(boxes) == 7 and all(b.startswith("- [ ] ") for b in boxes)
    for command in (
        "scontrol update PartitionName=gpu State=DRAIN",
        "scontrol update 'NodeName=gpu[001-007]' State=DRAIN 'Reason=post-wipe agent recycle'",
        "clush -w 'gpu[001-007]' systemctl restart spurd",
        "spurctl collect --nodes 'gpu[001-007]' -o after.jsonl",
        # The verify reads the controller this run read (--controller was given).
        "spurctl checklist post-wipe --verify --nodes 'gpu[001-007]' --inventory after.jsonl "
        f"--controller {sim.controller_address}",
        "scontrol update 'NodeName=gpu[001-007]' State=RESUME",
        "scontrol update PartitionName=gpu State=UP",
    ):
        assert f"  {command}\n" in md, command
    # Each pre-wipe run is stopped on its node, checked against its id and start time.
    assert "  ssh gpu002 'spurctl node-release --job 63 --started-at 20" in md
    # Steps appear in the order an operator works through them.
    positions = [
        md.index(t)
        for t in (
            "Stop submissions",
            "Drain the",
            "Stop or wait out",
            "Restart spurd",
            "Verify their",
            "Resume the nodes",
            "Resume submissions",
        )
    ]
    assert positions == sorted(positions)
    table = [line for line in md.splitlines() if line.startswith("| gpu")]
    assert len(table) == 8  # one row per held id on gpu001-007
    reissued = "| gpu003 | 23 | **id-reuse-suspected** |"
    assert any(r.startswith(reissued) and "gpu010" in r for r in table)
    # The by-hand steps say so.
    assert "- [ ] **Stop submissions** *(by hand)*" in md


def test_json_steps_keep_stable_ids_and_carry_their_commands(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")
    _, doc = checklist_json(sim, inv)
    assert [s["id"] for s in doc["steps"]] == STEP_ORDER
    for s in doc["steps"]:
        assert set(s) >= {"id", "title", "done", "nodes", "command", "checkable", "detail"}
        assert s["done"] is False
        assert s["nodes"] == PRE_WIPE
        assert s["hostlist"] == "gpu[001-007]"
        assert s["command"]
    assert [s["id"] for s in doc["steps"] if not s["checkable"]] == [
        "stop-submissions",
        "resume-submissions",
    ]
    assert step(doc, StepId.VERIFY_INVENTORIES)["command"] == (
        "spurctl collect --nodes 'gpu[001-007]' -o after.jsonl && "
        "spurctl checklist post-wipe --verify --nodes 'gpu[001-007]' --inventory after.jsonl "
        f"--controller {sim.controller_address}"
    )
    node = next(n for n in doc["nodes"] if n["node"] == "gpu001")
    assert set(node) >= {"node", "recycle", "held", "state", "agent_start_time", "error"}
    assert node["recycle"] is True
    assert set(node["held"][0]) >= {"job_id", "hazard", "reason", "started_at", "live"}


def test_nothing_to_recycle_exits_0_with_no_steps(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")
    code, doc = checklist_json(sim, inv, "--nodes", "gpu[009-016]")
    assert code == 0
    assert doc["nodes_to_recycle"] == [] and doc["steps"] == []
    code, out, _ = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inv),
        "--nodes",
        "gpu[009-016]",
    )
    assert code == 0
    assert "nothing to recycle" in out and "- [" not in out


def test_a_node_in_scope_without_an_inventory_is_named_and_fails_the_run(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    partial = tmp_path / "partial.jsonl"
    partial.write_text(
        "".join(
            dump_json(inventory_to_dict(sim.inventory(n)), indent=None) + "\n"
            for n in ("gpu009", "gpu010")
        )
    )
    code, doc = checklist_json(sim, partial, "--nodes", "gpu[009-011]")
    assert code == 1
    assert doc["nodes_to_recycle"] == []
    assert doc["nodes_not_inventoried"] == ["gpu011"]


# -- verify -----------------------------------------------------------------------


def verify(
    sim: SimCluster,
    tmp_path: Path,
    *extra: str,
) -> tuple[int, dict[str, Any]]:
    after = sim.write_inventories(tmp_path / "after.jsonl")
    return checklist_json(sim, after, "--verify", "--nodes", "gpu[001-007]", *extra)


@pytest.mark.parametrize(
    ("release", "graceful"),
    [(r, True) for r in SPUR_RELEASES.values()] + [(MAIN_4CC3DA8, False)],
    ids=[f"{name}, systemctl restart" for name in SPUR_RELEASES] + ["crash"],
)
def test_verify_ticks_each_step_as_the_recycle_progresses(
    release: SpurRelease, graceful: bool, tmp_path: Path
) -> None:
    # The core loop's checklist against every Spur release, recycled as an operator
    # does it (a graceful restart), and once by a crash.
    with SimCluster(post_wipe_scenario(), spur_release=release) as sim:
        verify_ticks_each_step_as_the_recycle_progresses(sim, tmp_path, graceful=graceful)


def verify_ticks_each_step_as_the_recycle_progresses(
    sim: SimCluster, tmp_path: Path, *, graceful: bool
) -> None:
    code, doc = verify(sim, tmp_path)
    assert code == 1
    assert doc["mode"] == "verify"
    assert not any(s["done"] for s in doc["steps"])

    for node in PRE_WIPE:
        set_node_state(sim, node, NodeState.DRAIN, "post-wipe agent recycle")
    code, doc = verify(sim, tmp_path)
    assert code == 1
    assert [s["id"] for s in doc["steps"] if s["done"]] == ["drain-nodes"]

    before = {n: sim.node(n).agent_start_time for n in PRE_WIPE}
    for node, ids in PRE_WIPE_IDS.items():
        recycle(sim, node, ids, graceful=graceful)
    renewed = graceful and not sim.spur_release.deregister_keeps_node
    for node in PRE_WIPE:
        # Up to 0.11 a graceful restart made the node a fresh record: a new
        # slurmd_start_time and no drain, as the checklist's restart step warns.
        now = sim.node(node)
        assert now.agent_start_time == (RECYCLED_AT if renewed else before[node])
        assert now.state is (NodeState.IDLE if renewed else NodeState.DRAIN)
        if renewed:
            set_node_state(sim, node, NodeState.DRAIN, "post-wipe agent recycle")
    code, doc = verify(sim, tmp_path)
    assert code == 1
    assert [s["id"] for s in doc["steps"] if s["done"]] == [
        "drain-nodes",
        "stop-pre-wipe-runs",
        "restart-agents",
        "verify-inventories",
    ]
    assert doc["nodes_to_recycle"] == []
    assert "gpu[001-007]: controller shows DRAIN" in step(doc, StepId.RESUME_NODES)["detail"]

    for node in PRE_WIPE:
        set_node_state(sim, node, NodeState.IDLE)
    code, doc = verify(sim, tmp_path)
    assert code == 0
    done = {s["id"]: s["done"] for s in doc["steps"]}
    assert done == {
        "stop-submissions": False,
        "drain-nodes": True,
        "stop-pre-wipe-runs": True,
        "restart-agents": True,
        "verify-inventories": True,
        "resume-nodes": True,
        "resume-submissions": False,
    }
    for s in doc["steps"]:
        if not s["checkable"]:
            assert "confirm by hand" in s["detail"]

    code, out, _ = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(tmp_path / "after.jsonl"),
        "--verify",
        "--nodes",
        "gpu[001-007]",
    )
    assert code == 0
    assert "- [x] **Verify their inventories hold no hazard**" in out
    assert "- [ ] **Resume submissions** *(by hand)*" in out


def test_a_node_still_holding_a_hazard_keeps_its_boxes_open_and_is_named(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    for node in PRE_WIPE:
        set_node_state(sim, node, NodeState.DRAIN, "post-wipe agent recycle")
    for node, ids in PRE_WIPE_IDS.items():
        if node == "gpu002":
            recycle(sim, node, [57])  # the agent restarted, but 63 survived it
        elif node != "gpu005":
            recycle(sim, node, ids)  # gpu005 was never restarted at all
    code, doc = verify(sim, tmp_path)
    assert code == 1
    assert doc["nodes_to_recycle"] == ["gpu002", "gpu005"]
    check = step(doc, StepId.VERIFY_INVENTORIES)
    assert check["done"] is False
    assert "gpu002: still holds 63 (above-watermark-unknown)" in check["detail"]
    assert "gpu005: still holds 35 (id-reuse-suspected)" in check["detail"]
    restart = step(doc, StepId.RESTART_AGENTS)
    # gpu002's agent did restart after 63 began; gpu005's never did.
    assert restart["done"] is False
    assert "gpu005: agent not restarted" in restart["detail"]
    assert "gpu002" not in restart["detail"]
    assert step(doc, StepId.DRAIN_NODES)["done"] is True
    assert step(doc, StepId.RESUME_NODES)["done"] is False
    # Even with the nodes resumed, an unclean inventory keeps resume open.
    for node in PRE_WIPE:
        set_node_state(sim, node, NodeState.IDLE)
    code, doc = verify(sim, tmp_path)
    assert code == 1
    assert step(doc, StepId.RESUME_NODES)["done"] is False
    assert step(doc, StepId.DRAIN_NODES)["done"] is False


def test_verify_with_collect_keeps_an_unreachable_node_open(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    for node, ids in PRE_WIPE_IDS.items():
        recycle(sim, node, ids)
    inv_dir = tmp_path / "inv"
    inv_dir.mkdir()
    for node in PRE_WIPE:
        if node != "gpu004":  # gpu004 does not answer
            (inv_dir / f"{node}.json").write_text(
                dump_json(inventory_to_dict(sim.inventory(node)), indent=None)
            )
    code, out, err = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--verify",
        "--nodes",
        "gpu[001-007]",
        "--collect",
        "--format",
        "json",
        "--command",
        f"cat {inv_dir}/%h.json",
    )
    assert code == 1, err
    doc = json.loads(out)
    assert doc["nodes_not_inventoried"] == ["gpu004"]
    assert step(doc, StepId.VERIFY_INVENTORIES)["done"] is False
    assert "gpu004: not inventoried" in step(doc, StepId.VERIFY_INVENTORIES)["detail"]
    assert step(doc, StepId.RESTART_AGENTS)["done"] is False


def test_bad_usage_is_refused_with_one_line_and_exit_2(
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    inv = sim.write_inventories(tmp_path / "after.jsonl")
    code, out, err = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inv),
        "--verify",
    )
    assert code == 2 and out == ""
    assert err.startswith("spurctl: error: --verify needs --nodes")
    code, _, err = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inv),
        "--format",
        "table",
    )
    assert code == 2 and "use markdown or json" in err
    code, _, err = spurctl(
        "checklist",
        "post-wipe",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inv),
        "--nodes",
        "gpu[001-002],gpu999",
    )
    assert code == 2 and "unknown node gpu999:" in err


# -- a credential-scoped view --------------------------------------------------------


def test_scoped_credential_does_not_mislabel_another_users_job(
    tmp_path: Path,
) -> None:
    with SimCluster(post_wipe_scenario(), auth="required", jwt_key=KEY) as s:
        inv = s.write_inventories(tmp_path / "before.jsonl")
        # alice sees only her own jobs in GetJobs; 23, 31 and 39 are dmitri's.
        token = auth.mint(KEY, "alice", uid=1001)
        code, doc = checklist_json(s, inv, "--token", token)
    assert code == 1
    assert doc["view"]["complete"] is False
    assert any("INCOMPLETE" in n for n in doc["notes"])
    assert doc["nodes_to_recycle"] == PRE_WIPE
    # dmitri's post-wipe runs (31 on gpu011-012, 39 on gpu009) are not recycled: GetJob
    # found them, so their absence from alice's GetJobs did not make them "untracked".
    assert {n["node"] for n in doc["nodes"]} == set(PRE_WIPE)
    # dmitri's reissued 23 is still called reissued; its nodelist is hidden from alice.
    h23 = held(doc, "gpu003")[23]
    assert h23["hazard"] == "id-reuse-suspected"
    assert "hidden from this credential" in h23["reason"]
    # Only NOT_FOUND made 44 untracked.
    assert held(doc, "gpu001")[44]["hazard"] == "above-watermark-unknown"


def test_scoped_view_judges_other_users_runs_by_getjob_not_by_absence() -> None:
    with SimCluster(post_wipe_scenario(), auth="required", jwt_key=KEY) as s:
        from spurctl.sources.controller import ControllerClient
        from spurctl.sources.settings import Connection

        conn = Connection(
            controllers=(s.controller_address,), token=auth.mint(KEY, "alice", uid=1001)
        )
        with ControllerClient(conn) as client:
            view = client.view(everything=True)
            asked: list[int] = []

            def confirm(ids: Any) -> Any:
                asked.extend(ids)
                return client.confirm(ids)

            result = post_wipe(view, s.inventories(), confirm=confirm)
            blind = post_wipe(view, s.inventories(), confirm=None)
    assert not view.complete
    nodes = result.assessment.nodes
    for node, job_id in (("gpu011", 31), ("gpu012", 31), ("gpu009", 39), ("gpu013", 38)):
        assert job_id in asked
        (h,) = [h for h in nodes[node].held if h.job_id == job_id]
        assert h.hazard is Hazard.HEALTHY, h.reason
    assert result.assessment.nodes_to_recycle == PRE_WIPE
    # Without GetJob nothing absent is called untracked: it is undetermined, not recycled.
    assert blind.assessment.nodes["gpu011"].held[0].hazard is Hazard.UNDETERMINED
    assert "gpu001" not in blind.assessment.nodes_to_recycle
    assert not blind.ok


def test_the_installed_command_runs_end_to_end(sim: SimCluster, tmp_path: Path) -> None:
    inv = sim.write_inventories(tmp_path / "before.jsonl")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("checklist", "post-wipe", *args, home=tmp_path, env={"COLUMNS": "200"})

    done = run(
        "--controller", sim.controller_address, "--inventory", str(inv), "--nodes", "gpu[001-004]"
    )
    assert done.returncode == 1, done.stderr
    assert "**4 nodes to recycle: gpu[001-004].**" in done.stdout
    assert "clush -w 'gpu[001-004]' systemctl restart spurd" in done.stdout
    help_text = run("--help").stdout
    assert "spurctl checklist post-wipe --verify --nodes 'gpu[001-007]'" in help_text
    assert "--verify" in help_text and "--nodes" in help_text


# -- a restart is proven by the node's own spurd start time ---------------------------


def set_slurmd_start_time(sim: SimCluster, node: str, at: datetime) -> None:
    """What the controller's NodeInfo.slurmd_start_time says: here, whatever a test wants."""
    with sim.state.lock:
        current = sim.state.nodes[node]
        sim.state.nodes[node] = dataclasses.replace(current, agent_start_time=at)
        sim.state.generation += 1


LONG_AGO = datetime(2026, 11, 1, tzinfo=UTC)  # before every run and the wipe


def test_slurmd_start_time_saying_restarted_does_not_tick_an_agent_that_was_not(
    sim: SimCluster, tmp_path: Path
) -> None:
    for node, ids in PRE_WIPE_IDS.items():
        for job_id in ids:
            assert sim.release(node, job_id)  # the runs are stopped ...
        # ... and the controller's slurmd_start_time claims a restart, but spurd never
        # restarted: the node's own start time (from its inventory) is the old one.
        set_slurmd_start_time(sim, node, RECYCLED_AT)
    code, doc = verify(sim, tmp_path)
    assert code == 1
    assert step(doc, StepId.STOP_RUNS)["done"] is True
    restart = step(doc, StepId.RESTART_AGENTS)
    assert restart["done"] is False
    assert "gpu[001-007]: agent not restarted since the wipe" in restart["detail"]
    node = next(n for n in doc["nodes"] if n["node"] == "gpu001")
    assert node["slurmd_start_time"] == "2026-12-02T11:00:00Z"
    assert node["agent_start_time"] == "2026-11-25T12:00:00Z"


def test_slurmd_start_time_saying_not_restarted_does_not_hold_back_an_agent_that_was(
    sim: SimCluster, tmp_path: Path
) -> None:
    for node, ids in PRE_WIPE_IDS.items():
        recycle(sim, node, ids)  # spurd restarts at RECYCLED_AT, as its inventory shows
        set_slurmd_start_time(sim, node, LONG_AGO)  # the controller still says long ago
    _, doc = verify(sim, tmp_path)
    assert step(doc, StepId.RESTART_AGENTS)["done"] is True, step(doc, StepId.RESTART_AGENTS)
    assert step(doc, StepId.STOP_RUNS)["done"] is True
    assert step(doc, StepId.VERIFY_INVENTORIES)["done"] is True


def test_an_inventory_without_the_agent_leaves_the_restart_unproven(tmp_path: Path) -> None:
    with SimCluster(post_wipe_scenario()) as sim:
        for node, ids in PRE_WIPE_IDS.items():
            recycle(sim, node, ids)
        with sim.state.lock:  # gpu001's inventory was written before `agent` existed
            del sim.state.agent_started_at["gpu001"]
        code, doc = verify(sim, tmp_path)
    assert code == 1
    restart = step(doc, StepId.RESTART_AGENTS)
    assert restart["done"] is False
    assert "gpu001: restart not proven" in restart["detail"]
    assert "`spurctl node-inventory`, which records the agent" in restart["detail"]
    assert "gpu002" not in restart["detail"]


def test_a_pre_wipe_run_that_outlived_the_restart_keeps_the_stop_step_open(
    sim: SimCluster, tmp_path: Path
) -> None:
    for node, ids in PRE_WIPE_IDS.items():
        # gpu002's spurd restarted before 63 was stopped: 63 survives, untracked.
        recycle(sim, node, [57] if node == "gpu002" else ids)
    code, doc = verify(sim, tmp_path)
    assert code == 1
    stop = step(doc, StepId.STOP_RUNS)
    assert stop["done"] is False
    assert "gpu002: still holds 63 (above-watermark-unknown)" in stop["detail"]
    assert "63 outlived spurd's restart" in stop["detail"]
    assert "spurctl node-release --job 63 --started-at" in stop["command"]
    assert step(doc, StepId.VERIFY_INVENTORIES)["done"] is False
