"""A guessed agent address is marked as one, with an agent map or without any.

Only --agent-map knows where each spurd listens; every other address is NODE:PORT, a
guess. Without a map every address is one, and the reclaim plan (table and JSON) and
`explain` mark it as they do for a node a map lacks. A map that lacks a planned node
is a warning on stderr (it may be a mistake); no map at all is said once in the plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spurctl_sim import SimCluster
from tests.cli import run_cli

Cluster = tuple[SimCluster, Path, Path]
NODES = "gpu[003-004]"


def _reclaim(cluster: Cluster, *extra: str) -> Any:
    sim, inventory, _ = cluster
    return run_cli(
        "reclaim", "--controller", sim.controller_address, "--node", NODES,
        "--inventory", str(inventory), "--dry-run", *extra,
    )  # fmt: skip


def _warnings(stderr: str) -> list[str]:
    """The warnings about agent addresses (a dry run without a key warns of that too)."""
    return [line for line in stderr.splitlines() if "warning" in line and "agent-map" in line]


def _partial_map(cluster: Cluster, tmp_path: Path) -> Path:
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"gpu003": cluster[0].agent_map()["gpu003"]}))
    return partial


def test_without_an_agent_map_every_planned_address_is_marked_guessed_in_json(
    incident_cluster: Cluster,
) -> None:
    run = _reclaim(incident_cluster, "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    plan = {p["node"]: p for p in doc["plan"]}
    assert sorted(plan) == ["gpu003", "gpu004"]
    assert all(p["agent"] == f"{node}:6818" for node, p in plan.items())
    assert all(p["agent_fallback"] is True for p in plan.values())
    assert doc["agent_fallback_nodes"] == ["gpu003", "gpu004"]
    assert _warnings(run.stderr) == []  # the operator chose no map: marked, not warned


def test_without_an_agent_map_the_plan_table_marks_each_address_and_says_why_once(
    incident_cluster: Cluster,
) -> None:
    run = _reclaim(incident_cluster)
    assert run.returncode == 0, run.stderr
    assert "gpu003:6818 (guessed)" in run.stdout
    assert "gpu004:6818 (guessed)" in run.stdout
    (note,) = [line for line in run.stdout.splitlines() if "--agent-map" in line]
    assert note.startswith("NOTE: no --agent-map: every cancel goes to a guessed address")
    assert "NODE:PORT (the node's name and --agent-port)" in note
    assert "pass --agent-map" in note
    assert _warnings(run.stderr) == []


def test_a_map_that_names_every_node_marks_nothing(incident_cluster: Cluster) -> None:
    agents = str(incident_cluster[2])
    run = _reclaim(incident_cluster, "--agent-map", agents, "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert [p["agent_fallback"] for p in doc["plan"]] == [False, False]
    assert doc["agent_fallback_nodes"] == []
    assert _warnings(run.stderr) == []
    table = _reclaim(incident_cluster, "--agent-map", agents)
    assert "guessed" not in table.stdout + table.stderr


def test_a_map_that_lacks_a_node_marks_that_one(incident_cluster: Cluster, tmp_path: Path) -> None:
    partial = str(_partial_map(incident_cluster, tmp_path))
    run = _reclaim(incident_cluster, "--agent-map", partial, "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert {p["node"]: p["agent_fallback"] for p in doc["plan"]} == {
        "gpu003": False,
        "gpu004": True,
    }
    (warning,) = _warnings(run.stderr)
    assert "--agent-map lacks gpu004: their cancels go to a guessed address" in warning
    table = _reclaim(incident_cluster, "--agent-map", partial)
    assert "gpu004:6818 (guessed)" in table.stdout
    assert f"{incident_cluster[0].agent_map()['gpu003']} (guessed)" not in table.stdout


def _explain(cluster: Cluster, *extra: str) -> Any:
    sim, inventory, _ = cluster
    return run_cli(
        "explain", "gpu003", "4711", "--controller", sim.controller_address,
        "--inventory", str(inventory), *extra,
    )  # fmt: skip


def _explain_reclaim(cluster: Cluster, *extra: str) -> dict[str, Any]:
    run = _explain(cluster, "--format", "json", *extra)
    assert run.returncode == 0, run.stderr
    reclaim: dict[str, Any] = json.loads(run.stdout)["job"]["reclaim"]
    assert reclaim["send"] is True
    return reclaim


def test_explain_marks_the_guess_with_a_map_and_without_one(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    bare = _explain_reclaim(incident_cluster)
    assert (bare["endpoint"], bare["agent_fallback"]) == ("gpu003:6818", True)
    assert bare["endpoint_from"] == "guessed: node:port, no --agent-map"
    text = _explain(incident_cluster)
    assert "to gpu003:6818 (guessed: node:port, no --agent-map)" in text.stdout

    mapped = _explain_reclaim(incident_cluster, "--agent-map", str(incident_cluster[2]))
    assert (mapped["agent_fallback"], mapped["endpoint_from"]) == (False, "agent map")

    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps({"gpu004": incident_cluster[0].agent_map()["gpu004"]}))
    partial = _explain_reclaim(incident_cluster, "--agent-map", str(lacking))
    assert partial["agent_fallback"] is True
    assert partial["endpoint_from"] == "guessed: node:port, not in --agent-map"
