"""A count of one is singular wherever spurctl prints one: "1 node", never "1 nodes"."""

from __future__ import annotations

from pathlib import Path

from spurctl_sim import SimCluster, node_line
from tests.cli import run_cli


def test_one_node_is_one_node_in_every_line_that_counts_it(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    healthy = run_cli("audit", "-w", "gpu001", "--inventory", str(inventory), env=env)
    assert healthy.returncode == 0, healthy.stderr
    assert "No discrepancies: 1 node, 1 inventoried." in healthy.stdout

    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    unknown = run_cli("audit", "-w", "gpu003", "--inventory", str(empty), env=env)
    assert unknown.returncode == 1, unknown.stderr
    text = unknown.stdout
    assert "1 node in scope has no inventory and was not audited: gpu003 (collect it," in text
    assert "1 node in scope, 0 inventoried; findings: not-inventoried 1; 1 needs action." in text

    collected = run_cli("collect", "-w", "gpu003", "--command", node_line.command(inventory))
    assert collected.returncode == 0, collected.stderr
    assert collected.stderr.splitlines()[0] == "collected 1 of 1 node"

    for run in (healthy, unknown, collected):
        assert "1 nodes" not in run.stdout + run.stderr
