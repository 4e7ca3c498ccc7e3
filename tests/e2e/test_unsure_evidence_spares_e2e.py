"""Evidence spurctl cannot be sure of spares the run, end to end: the real CLI against the
simulated cluster.

A nodelist with spaces and a holding without a start time must never let
`reclaim --yes` cancel a legitimate run; a node nobody inventoried (or a hostlist
typo naming no node at all) must never pass for a clean audit; and every finding
says how old its evidence is.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from spurctl.model import Inventory, utcnow
from spurctl.sources import credentials as auth
from spurctl.sources.documents import dump_json
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl_sim import Scenario, SimCluster, incident, post_wipe
from tests.cli import run_cli
from tests.live import KEY


def secured(scenario: Scenario) -> SimCluster:
    return SimCluster(scenario, auth="required", jwt_key=KEY)


def setup_files(sim: SimCluster, tmp_path: Path) -> dict[str, Any]:
    """The inventory, agent map, key and admin token a reclaim needs; `env` reaches sim."""
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps(sim.agent_map()))
    key = tmp_path / "jwt.key"
    key.write_text(KEY)
    key.chmod(0o600)
    token = auth.mint(KEY, "root", admin=True, lifetime_s=300)
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address, "SPUR_AUTH_TOKEN": token}
    return {"inventory": str(inventory), "agents": str(agents), "key": str(key), "env": env}


def audit_json(f: dict[str, Any], *args: str) -> tuple[int, dict[str, Any]]:
    run = run_cli("audit", "--inventory", f["inventory"], "--format", "json", *args, env=f["env"])
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def by_key(doc: dict[str, Any]) -> dict[tuple[str, int | None], dict[str, Any]]:
    return {(f["node"], f["job_id"]): f for f in doc["findings"]}


def reclaim_yes(f: dict[str, Any], tmp_path: Path, nodes: str) -> Any:
    return run_cli(
        "reclaim", "--node", nodes, "--yes", "--inventory", f["inventory"],
        "--agent-map", f["agents"], "--jwt-key-file", f["key"],
        "--journal", str(tmp_path / "journal.jsonl"), env=f["env"],
    )  # fmt: skip


# -- item 3: a nodelist with spaces ------------------------------------------------


def with_spaced_nodelist() -> Scenario:
    """The incident, with job 4711 (RUNNING on gpu015) reported as "gpu015 "."""
    scenario = incident()
    scenario.jobs = [
        msgspec.structs.replace(j, nodelist="gpu015 ") if j.job_id == 4711 else j
        for j in scenario.jobs
    ]
    return scenario


def test_a_nodelist_with_a_trailing_space_never_gets_its_own_run_cancelled(
    tmp_path: Path,
) -> None:
    with secured(with_spaced_nodelist()) as sim:
        assert sim.job(4711) is not None and sim.job(4711).nodelist == "gpu015 "  # type: ignore[union-attr]
        f = setup_files(sim, tmp_path)
        _, doc = audit_json(f, "--all", "--nodes", "gpu[003,015]")
        found = by_key(doc)
        assert (found[("gpu015", 4711)]["kind"], found[("gpu015", 4711)]["action"]) == (
            "healthy",
            "none",
        )
        # The stale copy on gpu003 is still what it was.
        assert found[("gpu003", 4711)]["kind"] == "active-elsewhere"
        assert found[("gpu003", 4711)]["action"] == "reclaim"

        run = reclaim_yes(f, tmp_path, "gpu[003,015]")
        assert run.returncode in (0, 1), run.stderr
        assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu003", 4711)]
        assert sim.holdings("gpu015") and any(h.job_id == 4711 for h in sim.holdings("gpu015"))


# -- item 4: a holding with no started_at -----------------------------------------


def with_unstamped_pre_wipe_run() -> Scenario:
    """After the wipe, gpu003's pre-wipe run of id 23 (reissued to a new run on gpu010)
    comes from an inventory that recorded no start time."""
    scenario = post_wipe()
    scenario.holdings["gpu003"] = [
        msgspec.structs.replace(h, started_at=None) if h.job_id == 23 else h
        for h in scenario.holdings["gpu003"]
    ]
    return scenario


def test_a_tracked_id_held_without_a_start_time_is_investigated_and_never_cancelled(
    tmp_path: Path,
) -> None:
    with secured(with_unstamped_pre_wipe_run()) as sim:
        f = setup_files(sim, tmp_path)
        status, doc = audit_json(f, "--nodes", "gpu003")
        held = by_key(doc)[("gpu003", 23)]
        assert held["kind"] == "active-elsewhere" and held["action"] == "investigate"
        assert "records no start time" in held["reason"]
        assert "`spurctl node-inventory`, which records start times" in held["reason"]
        assert status == 1

        run = reclaim_yes(f, tmp_path, "gpu003")
        assert run.returncode in (0, 1), run.stderr
        assert sim.cancels == []


def test_with_its_start_time_the_same_run_is_suspected_reuse(tmp_path: Path) -> None:
    # The evidence the reason asks for settles it: the run began before job 23 was submitted.
    with secured(post_wipe()) as sim:
        _, doc = audit_json(setup_files(sim, tmp_path), "--nodes", "gpu003")
        assert by_key(doc)[("gpu003", 23)]["kind"] == "id-reuse-suspected"


# -- item 10: nodes nobody inventoried, hostlist typos, --nodes '' ------------------


def write_inventories(path: Path, inventories: list[Inventory]) -> Path:
    path.write_text(
        "".join(dump_json(inventory_to_dict(i), indent=None) + "\n" for i in inventories)
    )
    return path


def test_a_node_in_scope_without_an_inventory_is_a_finding_and_exit_one(tmp_path: Path) -> None:
    with SimCluster(incident()) as sim:
        # gpu001-002 are healthy: with both inventoried the audit is clean ...
        env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
        one = write_inventories(tmp_path / "one.jsonl", [sim.inventory("gpu001")])
        run = run_cli("audit", "--inventory", str(one), "--nodes", "gpu[001-002]", env=env)
        # ... with gpu002's missing it is not.
        assert run.returncode == 1, run.stdout + run.stderr
        assert "No discrepancies" not in run.stdout
        assert "not-inventoried" in run.stdout
        run = run_cli(
            "audit", "--inventory", str(one), "--nodes", "gpu[001-002]", "--format", "json",
            env=env,
        )  # fmt: skip
        doc = json.loads(run.stdout)
        [finding] = doc["findings"]
        assert (finding["node"], finding["kind"], finding["action"]) == (
            "gpu002",
            "not-inventoried",
            "investigate",
        )
        assert finding["inventory_age_s"] is None
        assert doc["summary"]["nodes"] == 2 and doc["summary"]["nodes_inventoried"] == 1


def test_a_hostlist_typo_naming_no_controller_node_exits_one_with_findings(
    tmp_path: Path,
) -> None:
    with SimCluster(incident()) as sim:
        env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        args = ("audit", "--inventory", str(inventory), "--nodes", "gpu[01-24]")
        run = run_cli(*args, env=env)
        assert run.returncode == 1, run.stdout + run.stderr
        assert "No discrepancies" not in run.stdout
        assert "unknown to the controller" in run.stdout
        doc = json.loads(run_cli(*args, "--format", "json", env=env).stdout)
        assert {f["kind"] for f in doc["findings"]} == {"not-inventoried"}
        assert len(doc["findings"]) == 24
        assert "the controller has no node gpu01 " in doc["findings"][0]["reason"]
        assert doc["summary"]["nodes_inventoried"] == 0


@pytest.mark.parametrize("empty", ["", "  ", ","])
@pytest.mark.parametrize(
    "command",
    [
        ("audit", "--nodes"),
        ("checklist", "post-wipe", "--nodes"),
        ("reclaim", "--dry-run", "--node"),
        ("collect", "--nodes"),
    ],
)
def test_an_empty_hostlist_is_a_usage_error_never_every_node(
    tmp_path: Path, command: tuple[str, ...], empty: str
) -> None:
    # With --collect an empty --nodes used to mean the whole cluster: nothing may run.
    marker = tmp_path / "ran"
    collect = (
        ()
        if command[0] == "collect"
        else ("--collect",)
        if command[0] != "reclaim"
        else ("--inventory", "-")
    )
    run = run_cli(
        *command, empty, *collect, "--command", f"touch {marker}",
        env={"SPUR_CONTROLLER_ADDR": "http://127.0.0.1:9"},
    )  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert "bad hostlist" in run.stderr
    assert not marker.exists()


# -- item 11: inventory age ---------------------------------------------------------


def test_every_finding_carries_its_inventory_age_and_old_inventories_are_noted(
    tmp_path: Path,
) -> None:
    with SimCluster(incident()) as sim:
        env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
        old = utcnow() - timedelta(minutes=5)
        stale = write_inventories(
            tmp_path / "stale.jsonl",
            [replace(sim.inventory(n), collected_at=old) for n in ("gpu003", "gpu012")],
        )
        args = ("audit", "--inventory", str(stale), "--nodes", "gpu[003,012-013]")
        doc = json.loads(run_cli(*args, "--format", "json", env=env).stdout)
        ages = {(f["node"], f["job_id"]): f["inventory_age_s"] for f in doc["findings"]}
        assert all("inventory_age_s" in f for f in doc["findings"])
        for key in [("gpu003", 4711), ("gpu012", 4702)]:
            assert 299 <= ages[key] < 400, ages
        assert ages[("gpu013", None)] is None  # not inventoried: no evidence, no age
        [note] = [n for n in doc["notes"] if "heartbeats" in n]
        assert note.startswith("2 inventories were collected more than 60 s")
        assert "(gpu003, gpu012)" in note

        rows = list(csv.DictReader(io.StringIO(run_cli(*args, "--format", "csv", env=env).stdout)))
        assert "inventory_age_s" in rows[0]
        assert 299 <= float(next(r for r in rows if r["job_id"] == "4711")["inventory_age_s"]) < 400

        fresh = sim.write_inventories(tmp_path / "fresh.jsonl")
        doc = json.loads(
            run_cli("audit", "--inventory", str(fresh), "--format", "json", env=env).stdout
        )
        assert not any("heartbeats" in n for n in doc["notes"])
        assert all(abs(f["inventory_age_s"]) < 60 for f in doc["findings"] if f["job_id"])
