"""A graceful and a crash spurd restart on the simulated cluster, through the real CLI.

On SIGTERM spurd deregisters and the controller evicts the node's active jobs to
NODE_FAIL, possibly requeueing them under the same id; the processes survive, and
a requeued run on the same node joins the same `job_<id>` cgroup. A crash sends no
deregistration: the controller keeps saying RUNNING. In the incident, gpu012 runs
job 4950 (and still holds finished 4702's reservation).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from spurctl.model import utcnow
from spurctl_sim import SimCluster
from tests.cli import run_cli
from tests.e2e.test_reclaim_confirm import kept_fresh, node_command
from tests.reclaim import cancelled, reclaim_collecting

RESTART_AGO = timedelta(minutes=10)


def _audit(sim: SimCluster, tmp_path: Path, live: Path) -> dict[str, Any]:
    proc = run_cli(
        "audit", "--controller", sim.controller_address, "--nodes", "gpu012", "--collect",
        "--command", node_command(tmp_path, live), "--format", "json",
        home=tmp_path / "home",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    [finding] = [f for f in json.loads(proc.stdout)["findings"] if f["job_id"] == 4950]
    return finding  # type: ignore[no-any-return]


def _reclaim_then_audit(sim: SimCluster, tmp_path: Path) -> dict[str, Any]:
    """Reclaim gpu012 (nothing of job 4950 may be planned), then audit it: 4950's finding."""
    live = sim.write_inventories(tmp_path / "live.jsonl")
    with kept_fresh(sim, live):
        proc = reclaim_collecting(sim, tmp_path, live, "--node", "gpu012", "--settle", "0")
        assert proc.returncode in (0, 1), proc.stderr
        assert [e["job_id"] for e in json.loads(proc.stdout)["plan"] if e["job_id"] == 4950] == []
        return _audit(sim, tmp_path, live)


def test_after_a_graceful_restart_with_requeue_no_cancel_reaches_spurds_own_run(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    [before] = [h for h in sim.state.inventory("gpu012").held if h.job_id == 4950]
    assert sim.restart_agent("gpu012", utcnow() - RESTART_AGO, graceful=True, requeue=True) == [
        4950
    ]
    [shared] = [h for h in sim.state.inventory("gpu012").held if h.job_id == 4950]
    assert set(shared.pids) > set(before.pids) and shared.tracked_pids
    assert sim.state.jobs[4950].state.name == "RUNNING"  # requeued under the same id

    finding = _reclaim_then_audit(sim, tmp_path)
    assert ("gpu012", 4950) not in cancelled(sim)
    assert (finding["kind"], finding["action"]) == ("agent-orphan", "investigate")
    old = " ".join(str(p) for p in before.pids)
    mine = " ".join(str(p) for p in shared.tracked_pids)
    assert f"holds processes {old}, begun at" in finding["reason"]
    assert (
        f"beside processes {mine} of the current spurd's own run of the job" in (finding["reason"])
    )
    assert "no agent cancel is planned" in finding["reason"]
    assert "spurctl node-release --job 4950 --started-at" in finding["reason"]


def test_a_graceful_restart_without_requeue_leaves_a_terminal_orphan_and_no_cancel(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    sim.restart_agent("gpu012", utcnow() - RESTART_AGO, graceful=True)
    assert sim.state.jobs[4950].state.name == "NODE_FAIL"
    finding = _reclaim_then_audit(sim, tmp_path)
    assert ("gpu012", 4950) not in cancelled(sim)
    assert (finding["kind"], finding["controller_state"]) == ("agent-orphan", "NODE_FAIL")
    assert "no agent cancel is planned" in finding["reason"]


def test_a_crash_restart_leaves_the_controller_saying_running(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    assert sim.restart_agent("gpu012", utcnow() - RESTART_AGO) == []
    assert sim.state.jobs[4950].state.name == "RUNNING"
    finding = _reclaim_then_audit(sim, tmp_path)
    assert ("gpu012", 4950) not in cancelled(sim)
    assert (finding["kind"], finding["controller_state"]) == ("agent-orphan", "RUNNING")
    assert "the run is legitimate, so do not release it" in finding["reason"]
