"""An admin's UpdateNode(state=DOWN), end to end: runs left behind, and the cause named.

The simulated controller applies UpdateNode(state=DOWN) as spurctld does (cluster.rs
`update_node_state`): the node's active jobs go to NODE_FAIL and no cancel reaches any
agent. On the incident cluster job 4711 runs on gpu015; after an admin sets gpu015
DOWN, gpu015 still holds it, and `audit` and `explain` say why.
"""

from __future__ import annotations

import json
from pathlib import Path

from spurctl.model import NodeState
from spurctl_sim import SimCluster
from tests.cli import run_cli
from tests.e2e.test_checklist import set_node_state

Cluster = tuple[SimCluster, Path, Path]
CAUSE = "an admin's UpdateNode(state=DOWN) evicts the node's active jobs to NODE_FAIL"


def cli(cluster: Cluster, tmp_path: Path, *args: str) -> tuple[int, str]:
    sim, _, agents = cluster
    inventory = sim.write_inventories(tmp_path / "after.jsonl")
    mapped = ("--agent-map", str(agents)) if args[0] == "explain" else ()
    run = run_cli(
        *args,
        "--inventory",
        str(inventory),
        *mapped,
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, run.stdout


def test_an_admins_down_leaves_the_run_held_and_the_finding_names_why(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    assert 4711 in {h.job_id for h in sim.holdings("gpu015")}
    set_node_state(sim, "gpu015", NodeState.DOWN, "swap DIMM B2")

    job = sim.job(4711)
    assert job is not None and job.state.name == "NODE_FAIL"
    assert job.state_reason == "NodeDown"
    # No cancel went anywhere: both nodes still hold their runs.
    assert 4711 in {h.job_id for h in sim.holdings("gpu015")}
    assert 4711 in {h.job_id for h in sim.holdings("gpu003")}

    _, out = cli(incident_cluster, tmp_path, "audit", "--format", "json")
    findings = {(f["node"], f["job_id"]): f for f in json.loads(out)["findings"]}
    on_down = findings["gpu015", 4711]
    assert (on_down["kind"], on_down["action"]) == ("terminal-held", "reclaim")
    assert CAUSE in on_down["reason"]
    assert "gpu015 is DOWN with reason 'swap DIMM B2'" in on_down["reason"]
    # gpu003 is not the node the admin set DOWN: no cause is claimed there.
    assert CAUSE not in findings["gpu003", 4711]["reason"]

    _, text = cli(incident_cluster, tmp_path, "explain", "gpu015", "4711")
    assert "State:          DOWN (swap DIMM B2)" in text
    assert "Cause:" in text and CAUSE in text
    _, doc = cli(incident_cluster, tmp_path, "explain", "gpu015", "--format", "json")
    assert CAUSE in json.loads(doc)["controller_node"]["cause"]
