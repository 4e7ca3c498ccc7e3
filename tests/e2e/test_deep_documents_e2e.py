"""Every document spurctl loads is held to a nesting depth no spurctl document comes near
(sources/nesting.py): one nested past it is one line and exit 2, naming the file, never
a RecursionError (issue 48.6: a deeply nested repair plan was an internal error). One
test per loader: reclaim and repair plans, snapshots, agent maps, inventories found in a
directory, config.toml and spur.conf."""

from __future__ import annotations

import json
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli
from tests.e2e.test_config_defaults import write_config
from tests.e2e.test_repair_e2e import Phantom, p, untouched

__all__ = ["p"]  # the repair test's fixture

DEEP = 100_000  # far past Python's recursion limit
NESTED = "[" * DEEP + "]" * DEEP
TOO_DEEP = "nested more than 64 levels deep"


def deep_json(path: Path, schema: str, **fields: object) -> Path:
    """A document with its schema and `fields`, and one more field nested DEEP levels."""
    head = json.dumps({"schema": schema, **fields})[:-1]
    path.write_text(f'{head}, "extra": {NESTED}}}')
    return path


def test_a_deep_reclaim_plan_is_one_line(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agents = incident_cluster
    plan = deep_json(tmp_path / "plan.json", "spurctl.plan/v1")
    run = run_cli(
        "reclaim", "--plan", str(plan), "--controller", sim.controller_address,
        "--inventory", str(inventory), "--agent-map", str(agents), "--journal",
        str(tmp_path / "journal.jsonl"), "--yes", home=tmp_path,
    )  # fmt: skip
    one_line_error(run, str(plan), TOO_DEEP)
    assert sim.cancels == []


def test_a_deep_repair_plan_is_one_line_and_sends_nothing(p: Phantom, tmp_path: Path) -> None:
    before = p.sim.node("gpu009")
    plan = deep_json(
        tmp_path / "plan.json", "spurctl.repair-plan/v1",
        controller={"address": p.sim.controller_address, "version": "0.8.0"},
        taken_at="2026-12-05T00:00:00Z", nodes="gpu009", targets=[],
    )  # fmt: skip
    run = run_cli(
        "repair", "--plan", str(plan), "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--yes", home=p.home,
    )  # fmt: skip
    one_line_error(run, str(plan), "spurctl.repair-plan/v1", TOO_DEEP)
    untouched(p, before)


def test_a_deep_snapshot_is_one_line(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    _, inventory, _ = incident_cluster
    snapshot = deep_json(tmp_path / "snapshot.json", "spurctl.snapshot/v1")
    run = run_cli("audit", "--snapshot", str(snapshot), "--inventory", str(inventory))
    one_line_error(run, str(snapshot), TOO_DEEP)


def test_a_deep_agent_map_is_one_line(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    agents = tmp_path / "agents.json"
    agents.write_text(f'{{"gpu003": {NESTED}}}')
    run = run_cli(
        "reclaim", "--node", "gpu003", "--dry-run", "--controller", sim.controller_address,
        "--inventory", str(inventory), "--agent-map", str(agents), home=tmp_path,
    )  # fmt: skip
    one_line_error(run, f"--agent-map {agents}", TOO_DEEP)


def test_a_deep_file_among_a_directorys_inventories_is_refused_by_name(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    found = tmp_path / "inventories"
    found.mkdir()
    (found / "all.jsonl").write_text(inventory.read_text())
    (found / "deep.json").write_text(f'{{"schema": "spurctl.inventory/v1", "x": {NESTED}}}')
    run = run_cli("audit", "--controller", sim.controller_address, "--inventory", str(found))
    one_line_error(run, str(found / "deep.json"))


def test_a_deep_config_file_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = write_config(home, f"timeout = {NESTED}\n")
    one_line_error(run_cli("audit", home=home), str(config), "not valid TOML", "too deep")


def test_a_deep_spur_conf_is_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "spur.conf"
    conf.write_text(f"[controller]\nhosts = {NESTED}\n")
    run = run_cli("audit", "--conf", str(conf), home=tmp_path)
    one_line_error(run, str(conf), "not valid TOML", "too deep")
