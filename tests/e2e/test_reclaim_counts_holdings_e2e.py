"""Issue 53.11: reclaim's wait and its confirmation count alike. Job 4712 is held on both
gpu004 and gpu005: freeing gpu[004-005] is two holdings of one job, said so both times."""

from __future__ import annotations

from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import run_cli
from tests.e2e.test_reclaim_confirm import files, kept_fresh, node_command


def test_a_job_held_on_two_nodes_is_two_holdings_of_one_job_in_the_wait_and_the_confirmation(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    plan_from, live = files(sim, tmp_path)
    with kept_fresh(sim, live):
        run = run_cli(
            "reclaim", "--controller", sim.controller_address, "--node", "gpu[004-005]",
            "--inventory", str(plan_from), "--command", node_command(tmp_path, live),
            "--agent-map", str(tmp_path / "agents.json"), "--journal", str(tmp_path / "j.jsonl"),
            "--yes", "--verify-inventory", "--settle", "0.5",
            home=tmp_path / "home",
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "to free 2 holdings of job 4712;" in run.stderr
    assert "Confirmed: a re-collect of 2 nodes no longer shows 2 holdings of 1 job." in run.stdout
