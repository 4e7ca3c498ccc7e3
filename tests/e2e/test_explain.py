"""`spurctl explain NODE [JOB]` end to end: the real CLI against the simulated incident cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spurctl_sim import SimCluster
from tests.cli import run_cli

Cluster = tuple[SimCluster, Path, Path]


def explain(cluster: Cluster, *args: str, inventory: Path | None = None) -> Any:
    sim, inv, agents = cluster
    return run_cli(
        "explain",
        *args,
        "--inventory",
        str(inventory or inv),
        "--agent-map",
        str(agents),
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )


def explain_json(cluster: Cluster, *args: str, inventory: Path | None = None) -> dict[str, Any]:
    run = explain(cluster, *args, "--format", "json", inventory=inventory)
    assert run.returncode == 0, run.stderr
    doc: dict[str, Any] = json.loads(run.stdout)
    return doc


def test_an_active_elsewhere_holding_shows_the_record_the_arm_and_the_cancel(
    incident_cluster: Cluster,
) -> None:
    sim = incident_cluster[0]
    run = explain(incident_cluster, "gpu003", "4711")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "Controller (from GetJobs):" in out and "RUNNING" in out and "gpu015" in out
    assert "Submitted:    2026-12-01 13:40 UTC" in out
    assert "GPUs:         0-7" in out
    assert "arm 2: the job is active and allocated to other nodes: reclaim" in out
    assert "Finding:        active-elsewhere -> reclaim" in out
    endpoint = sim.agent_map()["gpu003"]
    assert f"AgentCancelJob(job_id=4711, signal=0) to {endpoint} (agent map)" in out
    assert "Watermark:        5121 (estimated: the highest job id the controller tracks" in out


def test_a_healthy_holding_is_arm_5_and_nothing_is_sent(incident_cluster: Cluster) -> None:
    run = explain(incident_cluster, "gpu015", "4711")
    assert run.returncode == 0, run.stderr
    assert "arm 5: the job is active and allocated on this node: spare" in run.stdout
    assert "Finding:        healthy -> none" in run.stdout
    assert "Reclaim sends:  nothing: the finding's action is none" in run.stdout


def test_a_loose_name_turns_reclaim_into_investigate_and_names_the_guard(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    # gpu003's agent reports its FQDN and no job process names the controller's node.
    _, inv, _ = incident_cluster
    lines = []
    for line in inv.read_text().splitlines():
        doc = json.loads(line)
        if doc["node"] == "gpu003":
            doc["node"] = "gpu003.cluster.local"
            doc.pop("target_node", None)
            doc.pop("target_nodes", None)
        lines.append(json.dumps(doc))
    loose = tmp_path / "loose.jsonl"
    loose.write_text("\n".join(lines) + "\n")
    doc = explain_json(incident_cluster, "gpu003", "4711", inventory=loose)
    job = doc["job"]
    assert doc["inventory"]["node"] == "gpu003.cluster.local"
    assert job["arm"]["kind"] == "active-elsewhere"  # what Spur's predicate says ...
    assert job["finding"]["action"] == "investigate"  # ... and what spurctl does
    assert "only by short name" in job["finding"]["reason"]
    assert [g["guard"] for g in job["guards"]] == ["loose-name"]
    assert job["reclaim"]["send"] is False
    assert "investigate" in job["reclaim"]["why"]


def test_an_untracked_id_below_the_watermark_says_how_absence_was_proven(
    incident_cluster: Cluster,
) -> None:
    doc = explain_json(incident_cluster, "gpu013", "4388")
    assert doc["controller"]["view_complete"] is True
    job = doc["job"]
    assert job["controller"]["tracked"] is False
    assert job["controller"]["proof"] == "GetJobs did not return it when asked for it by id"
    assert job["arm"]["kind"] == "below-watermark-unknown"
    assert job["finding"]["kind"] == "below-watermark-unknown"
    assert job["finding"]["action"] == "reclaim"
    assert job["reclaim"]["request"] == "AgentCancelJob(job_id=4388, signal=0)"
    assert doc["watermark"] == {"value": 5121, "source": "estimated"}


def test_an_unknown_node_is_one_clear_error(incident_cluster: Cluster) -> None:
    sim, inv, _ = incident_cluster
    run = explain(incident_cluster, "gpu099")
    assert run.returncode == 2
    assert run.stdout == ""
    # The listing it points at reads what this explain read: its inventory as given, its
    # controller from the environment (SPUR_CONTROLLER_ADDR), which the pasted one finds too.
    assert run.stderr.strip().splitlines() == [
        "spurctl: error: unknown node gpu099: the controller has no such node and no "
        f"inventory names it; check the name with `spurctl nodes --inventory {inv}`"
    ]
    assert sim.controller_address not in run.stderr


def test_a_job_the_node_does_not_hold_shows_what_the_controller_says(
    incident_cluster: Cluster,
) -> None:
    doc = explain_json(incident_cluster, "gpu003", "4690")
    assert doc["job"]["held"] is False
    assert doc["job"]["controller"]["job"]["nodelist"] == "gpu[001-002]"
    assert "arm" not in doc["job"]


def test_the_node_view_lists_every_finding_and_the_json_document(
    incident_cluster: Cluster,
) -> None:
    doc = explain_json(incident_cluster, "gpu006")
    assert doc["schema"] == "spurctl.explain/v1"
    assert doc["controller_node"]["name"] == "gpu006"
    assert doc["inventory"]["held"] == [4715, 4716]
    assert [(f["job_id"], f["kind"], f["action"]) for f in doc["findings"]] == [
        (4715, "active-elsewhere", "reclaim"),
        (4716, "active-elsewhere", "reclaim"),
    ]
    assert "job" not in doc


def test_collect_gathers_only_the_node_explained(incident_cluster: Cluster, tmp_path: Path) -> None:
    sim, inv, agents = incident_cluster
    per_node = tmp_path / "nodes"
    per_node.mkdir()
    for line in inv.read_text().splitlines():
        doc = json.loads(line)
        (per_node / f"{doc['node']}.json").write_text(line + "\n")
    log = tmp_path / "collected.log"
    command = f"sh -c 'echo %h >> {log}; cat {per_node}/%h.json'"
    run = run_cli(
        "explain",
        "gpu003",
        "4711",
        "--collect",
        "--command",
        command,
        "--agent-map",
        str(agents),
        "--format",
        "json",
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )
    assert run.returncode == 0, run.stderr
    assert log.read_text().split() == ["gpu003"]
    assert json.loads(run.stdout)["job"]["finding"]["kind"] == "active-elsewhere"


def test_a_hostlist_is_not_a_node(incident_cluster: Cluster) -> None:
    run = explain(incident_cluster, "gpu[003-004]")
    assert run.returncode == 2
    assert "one node name, not a hostlist" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_explain_says_what_no_inventory_of_the_node_can_show(incident_cluster: Cluster) -> None:
    # gpu001 holds nothing: exactly where an unseen SSH session or allocation-only entry
    # would be mistaken for a free node.
    text = explain(incident_cluster, "gpu001")
    assert text.returncode == 0, text.stderr
    after = text.stdout.split("What no inventory shows:", 1)[1]
    assert "SSH session into gpu001" in after and "SPUR_JOB_ID" in after and "#799" in after
    assert "keeps its GPU access after the job is cancelled" in after
    assert "allocation-only entry" in after and "no process, cgroup or spool" in after
    assert "#580" in after
    doc = explain_json(incident_cluster, "gpu003", "4711")
    unseen = " ".join(doc["cannot_see"])
    assert "SSH session into gpu003" in unseen and "allocation-only entry" in unseen
