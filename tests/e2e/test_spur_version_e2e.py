"""Every report header names the Spur version the controller reports (PingResponse.version),
and a version that may predate Spur's own heartbeat reclaim adds a note saying what that means."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident
from spurctl_sim import post_wipe as post_wipe_scenario
from tests.cli import run_cli

OLD_NOTE = "need spurctl"
SCREEN_NOTE = (
    "Spur 0.8.0 may free by itself only terminal-held holdings of jobs that ended in the "
    "last hour; the other reclaim findings wait for spurctl reclaim. Hide this note with "
    "--ack-version 0.8.0 (or ack_version in the config file)."
)


@pytest.fixture(params=["0.8.0", "0.9.1"])
def sim(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    with SimCluster(dataclasses.replace(incident(), version=request.param)) as s:
        yield s


def test_audit_headers_name_the_version_and_an_old_one_gets_the_note(
    sim: SimCluster, tmp_path: Path
) -> None:
    version = sim.state.version
    inventory = str(sim.write_inventories(tmp_path / "inventory.jsonl"))
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    outputs = {}
    for fmt in ("table", "markdown", "json"):
        run = run_cli("audit", "--inventory", inventory, "--format", fmt, env=env)
        assert run.returncode == 1, run.stderr
        outputs[fmt] = run.stdout
    assert f"Spur {version}" in outputs["table"]
    assert f"Spur {version}" in outputs["markdown"]
    doc = json.loads(outputs["json"])
    assert doc["controller"]["version"] == version
    old = version == "0.8.0"
    assert any(OLD_NOTE in n for n in doc["notes"]) is old
    # A screen gives the note's short form; the Markdown document and JSON keep it whole.
    assert OLD_NOTE not in " ".join(outputs["table"].split())
    assert (f"NOTE: {SCREEN_NOTE}" in " ".join(outputs["table"].split())) is old
    assert (OLD_NOTE in outputs["markdown"]) is old
    if old:
        note = next(n for n in doc["notes"] if OLD_NOTE in n)
        assert "a main build from 2026-08-16 to 08-24, which has #623" in note
        assert "cannot tell them apart" in note
        assert "release v0.8.0 clears terminal-held by itself" in note
        assert "an older terminal holding is never reclaimed by v0.8.0 itself" in note


def test_reclaim_plan_carries_the_note(sim: SimCluster, tmp_path: Path) -> None:
    inventory = str(sim.write_inventories(tmp_path / "inventory.jsonl"))
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps(sim.agent_map()))
    run = run_cli(
        "reclaim", "--inventory", inventory, "--agent-map", str(agents), "--node", "gpu012",
        "--dry-run", "--journal", str(tmp_path / "journal.jsonl"),
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    assert f"(Spur {sim.state.version})" in run.stdout  # the plan's header line
    assert OLD_NOTE not in " ".join(run.stdout.split())  # the short form on the screen
    shown = f"NOTE: {SCREEN_NOTE}" in " ".join(run.stdout.split())
    assert shown is (sim.state.version == "0.8.0")


@pytest.mark.parametrize("version", ["0.8.0", "0.9.1"])
def test_checklist_headers_name_the_version(version: str, tmp_path: Path) -> None:
    with SimCluster(dataclasses.replace(post_wipe_scenario(), version=version)) as sim:
        inventory = str(sim.write_inventories(tmp_path / "inventory.jsonl"))
        base = ("checklist", "post-wipe", "--controller", sim.controller_address)
        md = run_cli(*base, "--inventory", inventory)
        js = run_cli(*base, "--inventory", inventory, "--format", "json")
    assert md.returncode == 1 and js.returncode == 1, md.stderr + js.stderr
    assert f"(Spur {version})" in md.stdout
    doc = json.loads(js.stdout)
    assert doc["controller"]["version"] == version
    old = version == "0.8.0"
    assert (OLD_NOTE in md.stdout) is old
    assert any(OLD_NOTE in n for n in doc["notes"]) is old
