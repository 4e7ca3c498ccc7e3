"""Job ids end to end: uint32 at both ends (the last id breaks nothing) and id 0 is no Spur run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from spurctl.model import MAX_JOB_ID, Holding, JobState, utcnow
from spurctl_sim import SimCluster, incident
from tests.cli import run_cli


def audit(sim: SimCluster, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    run = run_cli(
        "audit", "--controller", sim.controller_address, "--inventory", str(inventory),
        "--format", "json", *args,
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout), run.stderr


def test_the_highest_uint32_job_id_running_audits_and_is_healthy(tmp_path: Path) -> None:
    with SimCluster(incident()) as sim:
        job = sim.job(4711)
        assert job is not None
        last = msgspec.structs.replace(job, job_id=MAX_JOB_ID, nodelist="gpu015")
        sim.set_job(last)
        sim.hold("gpu015", Holding(job_id=MAX_JOB_ID, gpus=(0,), pids=(4242,), started_at=utcnow()))
        _, doc, err = audit(sim, tmp_path, "--all", "--nodes", "gpu015")
        assert "internal error" not in err
        # The estimate stays a uint32: the last id itself, a lower bound that spares more.
        assert doc["watermark"]["value"] == MAX_JOB_ID
        found = {(f["node"], f["job_id"]): f for f in doc["findings"]}
        assert found[("gpu015", MAX_JOB_ID)]["kind"] == "healthy"


def test_a_snapshot_taken_with_the_last_job_id_tracked_reads_back(tmp_path: Path) -> None:
    with SimCluster(incident(), agents=False) as sim:
        job = sim.job(4702)
        assert job is not None
        sim.set_job(msgspec.structs.replace(job, job_id=MAX_JOB_ID, state=JobState.COMPLETED))
        snap = tmp_path / "snap.json"
        taken = run_cli("snapshot", "--controller", sim.controller_address, "-o", str(snap))
        assert taken.returncode == 0, taken.stderr
    inventory = tmp_path / "inv.json"
    inventory.write_text(
        json.dumps({"schema": "spurctl.inventory/v1", "node": "gpu012", "held": []})
    )
    run = run_cli(
        "audit", "--snapshot", str(snap), "--inventory", str(inventory), "--nodes", "gpu012",
        "--format", "json",
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    assert json.loads(run.stdout)["watermark"]["value"] == MAX_JOB_ID


def test_job_options_beyond_uint32_are_usage_errors() -> None:
    for args in (
        ("audit", "--watermark", str(MAX_JOB_ID + 1)),
        ("reclaim", "--node", "gpu001", "--job", str(MAX_JOB_ID + 1), "--dry-run"),
        ("checklist", "post-wipe", "--watermark", str(MAX_JOB_ID + 1)),
    ):
        run = run_cli(*args)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, run.stderr
        assert args[-2 if args[-1] != "--dry-run" else -3] in lines[0], run.stderr
        assert f"from 1 to {MAX_JOB_ID}" in lines[0] or f"from 0 to {MAX_JOB_ID}" in lines[0]


def test_a_holding_of_job_zero_is_investigated_never_reclaimed(tmp_path: Path) -> None:
    with SimCluster(incident()) as sim:
        sim.hold("gpu013", Holding(job_id=0, gpus=(5,), pids=(31337,), started_at=utcnow()))
        _, doc, _ = audit(sim, tmp_path, "--nodes", "gpu013")
        zero = next(f for f in doc["findings"] if f["job_id"] == 0)
        assert zero["action"] == "investigate", zero
        assert "never issues job id 0" in zero["reason"]
        inventory = tmp_path / "inventory.jsonl"
        plan = run_cli(
            "reclaim", "--node", "gpu013", "--dry-run", "--inventory", str(inventory),
            "--controller", sim.controller_address, "--format", "json",
        )  # fmt: skip
        assert plan.returncode in (0, 1), plan.stderr
        planned = json.loads(plan.stdout)
        assert [e["job_id"] for e in planned["plan"]] == [4388], planned["plan"]
