"""SPUR_TARGET_NODE end to end: the controller's own name for a node, from its job processes.

The incident's gpu021 agent reports gpu021.cluster.local; spurd sets SPUR_TARGET_NODE
(the name the controller launched the job under, gpu021) on every job process, so
the simulated inventories carry `target_node` beside `hostname`. Here gpu021 also
holds a stale run of 4980 (COMPLETED on gpu022).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spurctl.model import Holding
from spurctl.sources import credentials as auth
from spurctl_sim import SimCluster, incident
from tests.cli import run_cli
from tests.live import KEY

STALE = Holding(
    job_id=4980, gpus=(0,), pids=(7001,), started_at=datetime(2026, 12, 2, 3, 0, 1, tzinfo=UTC)
)
FQDN = "gpu021.cluster.local"


def _sim(**changes: Any) -> Iterator[SimCluster]:
    with SimCluster(dataclasses.replace(incident(), **changes), auth="required", jwt_key=KEY) as s:
        s.hold("gpu021", STALE)
        yield s


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    yield from _sim()


@pytest.fixture
def disagreeing() -> Iterator[SimCluster]:
    # One process of gpu021 names gpu022: which node this is cannot be told.
    yield from _sim(target_names={"gpu021": ["gpu021", "gpu022"]})


def as_admin(sim: SimCluster, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`spurctl ARGS` on sim's inventories, against sim, with an admin credential."""
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    return run_cli(
        *args, "--inventory", str(inventory),
        env={
            "SPUR_CONTROLLER_ADDR": sim.controller_address,
            "SPUR_AUTH_TOKEN": auth.mint(KEY, "root", admin=True, lifetime_s=300),
        },
    )  # fmt: skip


def audit(sim: SimCluster, tmp_path: Path) -> dict[str, dict[tuple[str, int | None], Any]]:
    run = as_admin(sim, tmp_path, "audit", "--format", "json", "--all")
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    return {"findings": {(f["node"], f["job_id"]): f for f in doc["findings"]}}


def test_the_simulated_inventories_carry_the_target_node_and_hostname(
    sim: SimCluster, tmp_path: Path
) -> None:
    path = sim.write_inventories(tmp_path / "inventory.jsonl")
    docs = {d["node"]: d for d in map(json.loads, path.read_text().splitlines())}
    assert docs[FQDN]["target_node"] == "gpu021" and docs[FQDN]["hostname"] == FQDN
    assert docs["gpu003"]["target_node"] == "gpu003"
    # The incident gives no agent start times: its inventories record no agent.
    assert "agent" not in docs["gpu003"]
    assert "target_node" not in docs["gpu009"] or docs["gpu009"]["target_node"] is None


def test_processes_naming_the_controller_node_make_its_holdings_judged_exactly(
    sim: SimCluster, tmp_path: Path
) -> None:
    found = audit(sim, tmp_path)["findings"]
    stale = found[(FQDN, 4980)]
    assert (stale["kind"], stale["action"]) == ("terminal-held", "reclaim")
    assert found[(FQDN, 4960)]["kind"] == "healthy"  # its own run, under the controller's name
    mismatch = found[(FQDN, None)]
    assert mismatch["kind"] == "name-mismatch" and mismatch["action"] == "investigate"
    assert "SPUR_TARGET_NODE 'gpu021'" in mismatch["reason"]
    assert "Spur's own reclaim compares the reported name" in mismatch["reason"]


def test_processes_that_disagree_keep_the_node_a_mismatch_never_reclaimed(
    disagreeing: SimCluster, tmp_path: Path
) -> None:
    found = audit(disagreeing, tmp_path)["findings"]
    assert found[(FQDN, 4980)]["action"] == "investigate"
    assert "name several controller nodes" in found[(FQDN, 4980)]["reason"]
    assert found[(FQDN, None)]["kind"] == "name-mismatch"


@pytest.mark.parametrize("named", ["gpu021", FQDN])
def test_reclaim_selects_the_node_by_either_name_the_inventory_speaks_for(
    sim: SimCluster, tmp_path: Path, named: str
) -> None:
    run = as_admin(
        sim, tmp_path, "reclaim", "--node", named, "--dry-run",
        "--format", "json", "--journal", str(tmp_path / "journal.jsonl"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    planned = [(e["node"], e["job_id"]) for e in json.loads(run.stdout)["plan"]]
    assert planned == [(FQDN, 4980)]  # the stale run only; 4960 is gpu021's own


def test_reclaim_still_refuses_a_name_nothing_speaks_for(sim: SimCluster, tmp_path: Path) -> None:
    run = as_admin(sim, tmp_path, "reclaim", "--node", "gpu999.cluster.local", "--dry-run")
    assert run.returncode == 2 and "unknown node gpu999.cluster.local:" in run.stderr


def test_many_unknown_nodes_are_folded_not_cut_short(sim: SimCluster, tmp_path: Path) -> None:
    run = as_admin(sim, tmp_path, "reclaim", "--node", "gpu[901-908]", "--dry-run")
    assert run.returncode == 2 and "unknown nodes gpu[901-908]:" in run.stderr, run.stderr
