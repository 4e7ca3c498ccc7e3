"""`spurctl snapshot` saves the controller's view whole; `audit --snapshot` decides the same.

The CLI runs for real against the simulated cluster; the saved file is compared
with what the simulated controller actually holds, field by field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spurctl.sources import credentials as auth
from spurctl.sources.documents import job_to_dict, node_to_dict
from spurctl.sources.snapshot_document import read_snapshot
from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli, stderr_lines
from tests.live import KEY


def snapshot(sim: SimCluster, path: Path, home: Path, *extra: str) -> dict[str, Any]:
    proc = run_cli(
        "snapshot", "-o", str(path), "--controller", sim.controller_address, *extra, home=home
    )
    assert proc.returncode == 0, proc.stderr
    assert len(stderr_lines(proc)) == 1 and str(path) in proc.stderr
    assert proc.stdout == ""
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def audit_json(home: Path, *args: str) -> dict[str, Any]:
    proc = run_cli("audit", "--format", "json", *args, home=home)
    assert proc.returncode in (0, 1), proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_snapshot_saves_every_job_and_node_with_states_nodelists_and_resources(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    doc = snapshot(lone_controller, tmp_path / "snap.json", tmp_path / "home")

    assert doc["schema"] == "spurctl.snapshot/v1"
    assert doc["view"] == {"complete": True, "jobs_seen": 22, "jobs_total": 22}
    assert doc["watermark"] == {"value": 5121, "source": "estimated"}
    assert doc["controller"]["address"] == lone_controller.controller_address
    assert doc["controller"]["version"] == "0.8.0"
    # Every record exactly as the controller holds it: nothing dropped, nothing rounded.
    saved_jobs = {j["job_id"]: j for j in doc["jobs"]}
    saved_nodes = {n["name"]: n for n in doc["nodes"]}
    assert saved_jobs == {i: job_to_dict(j) for i, j in lone_controller.state.jobs.items()}
    assert saved_nodes == {n: node_to_dict(node) for n, node in lone_controller.state.nodes.items()}
    # The cases an audit turns on, spelled out.
    moe = saved_jobs[4712]
    assert (moe["state"], moe["nodelist"]) == ("RUNNING", "gpu[016-017]")
    assert moe["resources"]["cpus"] == 256
    assert saved_jobs[5119]["nodelist"] == ""  # RUNNING, allocation not committed yet
    assert saved_jobs[4702]["state"] == "COMPLETED"
    assert (saved_nodes["gpu003"]["state"], saved_nodes["gpu003"]["state_reason"]) == (
        "DOWN",
        "Not responding",
    )
    assert saved_nodes["gpu009"]["alloc_resources"]["cpus"] == 64  # the phantom allocation


def test_a_saved_snapshot_reads_back_as_the_same_view(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    path = tmp_path / "snap.json"
    snapshot(lone_controller, path, tmp_path / "home")
    view, watermark = read_snapshot(path)
    assert view.jobs == lone_controller.state.jobs
    assert view.nodes == lone_controller.state.nodes
    assert view.complete and watermark.value == 5121


def test_audit_of_a_snapshot_reaches_the_same_findings_as_the_live_audit(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    inventory = str(lone_controller.write_inventories(tmp_path / "inventory.jsonl"))
    path = tmp_path / "snap.json"
    snapshot(lone_controller, path, home)

    live = audit_json(
        home, "--controller", lone_controller.controller_address, "--inventory", inventory
    )
    offline = audit_json(home, "--snapshot", str(path), "--inventory", inventory)

    # inventory_age_s is measured from each view's own taken_at, so it differs by design.
    def decided(doc: dict[str, Any]) -> list[dict[str, Any]]:
        # The reasons differ only in how an untracked id was proven: the snapshot holds
        # every job, the live audit asked for the held ids by id.
        skip = ("inventory_age_s", "reason")
        return [{k: v for k, v in f.items() if k not in skip} for f in doc["findings"]]

    assert decided(offline) == decided(live)
    assert offline["summary"] == live["summary"]
    assert offline["view"]["complete"] and live["view"]["complete"]
    assert offline["view"]["jobs_total"] == live["view"]["jobs_total"]
    proofs = {f["reason"].split("(")[1].split(")")[0] for f in live["findings"]
              if f["kind"] == "below-watermark-unknown"}  # fmt: skip
    assert proofs == {"GetJobs did not return it when asked for it by id"}
    assert offline["watermark"] == {"value": live["watermark"]["value"], "source": "snapshot"}
    kinds = {f["kind"] for f in live["findings"]}
    assert {"active-elsewhere", "terminal-held", "below-watermark-unknown"} <= kinds


@pytest.mark.parametrize(
    ("subject", "admin", "seen", "offline_reclaims"),
    [
        # alice's own 4711 runs on gpu015 now: its stale run on gpu003 is visible offline too.
        ("alice", False, 4, {("gpu003", 4711)}),
        ("ops", True, 0, set()),
    ],
)
def test_a_scoped_snapshot_stays_incomplete_and_offline_never_reclaims_more_than_live(
    secured_controller: SimCluster,
    tmp_path: Path,
    subject: str,
    admin: bool,
    seen: int,
    offline_reclaims: set[tuple[str, int]],
) -> None:
    home = tmp_path / "home"
    token = auth.mint(KEY, subject, admin=admin)
    inventory = str(secured_controller.write_inventories(tmp_path / "inventory.jsonl"))
    path = tmp_path / "snap.json"
    doc = snapshot(secured_controller, path, home, "--token", token)
    assert doc["view"] == {"complete": False, "jobs_seen": seen, "jobs_total": 22}

    live = audit_json(
        home,
        "--controller",
        secured_controller.controller_address,
        "--token",
        token,
        "--inventory",
        inventory,
    )
    offline = audit_json(home, "--snapshot", str(path), "--inventory", inventory)

    def reclaims(doc: dict[str, Any]) -> set[tuple[str, int]]:
        return {(f["node"], f["job_id"]) for f in doc["findings"] if f["action"] == "reclaim"}

    # Offline nothing can be confirmed with GetJob: a held id the scoped view lacks is spared.
    assert reclaims(offline) == offline_reclaims
    assert reclaims(offline) <= reclaims(live)
    visible = {j["job_id"] for j in doc["jobs"]}
    for f in offline["findings"]:
        if f["job_id"] is not None and f["job_id"] not in visible:
            assert f["action"] in ("spare", "investigate"), f


def _forged(doc: dict[str, Any], change: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    if change == "no-jobs-total":
        del doc["view"]["jobs_total"]
    elif change == "no-view":
        del doc["view"]
    elif change == "truncated":
        doc["jobs"] = doc["jobs"][:-3]
    elif change == "truncated-no-counts":
        doc["jobs"] = doc["jobs"][:-3]
        del doc["view"]["jobs_seen"]
    elif change == "watermark-over-uint32":
        doc["watermark"]["value"] = 2**32
    elif change == "job-id-over-uint32":
        doc["jobs"][0]["job_id"] = 2**32 + 4711
    elif change == "jobs-total-over-uint32":
        doc["view"]["jobs_total"] = 2**40
    elif change == "no-watermark":
        del doc["watermark"]
    return doc


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("no-jobs-total", "view.jobs_total"),
        ("no-view", "view.jobs_total"),
        ("truncated", "view.jobs_seen"),
        ("truncated-no-counts", "view.complete"),
        ("watermark-over-uint32", "'value'"),
        ("job-id-over-uint32", "job_id"),
        ("jobs-total-over-uint32", "'jobs_total'"),
        ("no-watermark", "watermark.value"),
    ],
)
def test_a_forged_or_truncated_snapshot_is_refused_never_read_as_complete(
    lone_controller: SimCluster, tmp_path: Path, change: str, field: str
) -> None:
    """Completeness is never inferred from absence; ids, watermark: uint32."""
    home = tmp_path / "home"
    inventory = str(lone_controller.write_inventories(tmp_path / "inventory.jsonl"))
    path = tmp_path / "snap.json"
    doc = snapshot(lone_controller, path, home)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(_forged(doc, change)))
    for fmt in ("table", "json"):
        proc = run_cli(
            "audit", "--snapshot", str(forged), "--inventory", inventory, "--format", fmt, home=home
        )
        one_line_error(proc, str(forged), field)
        assert proc.stdout == ""
