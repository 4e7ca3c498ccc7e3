"""`reclaim --dry-run -o plan.json`, then `reclaim --plan plan.json`: exactly the saved
entries are sent, each re-checked afresh; a stale, foreign or malformed plan sends nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spurctl import __version__
from spurctl.simcluster import SimCluster
from tests.e2e import test_reclaim_e2e as base
from tests.e2e.test_reclaim_e2e import files, journal, reclaim_cli

sim = base.sim  # the same fixture: the incident cluster, auth required


def save_plan(sim: SimCluster, f: dict[str, str], tmp_path: Path, *args: str) -> Path:
    plan = tmp_path / "plan.json"
    run = reclaim_cli(sim, f, "--dry-run", "-o", str(plan), *args)
    assert run.returncode == 0, run.stderr
    assert sim.cancels == []
    return plan


def edited(plan: Path, **changes: object) -> Path:
    doc = json.loads(plan.read_text())
    doc.update(changes)
    plan.write_text(json.dumps(doc))
    return plan


def refused(run) -> str:  # type: ignore[no-untyped-def]
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_the_saved_plan_holds_the_view_controller_and_each_entrys_evidence(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    doc = json.loads(save_plan(sim, f, tmp_path, "--node", "gpu[003,007]").read_text())
    assert doc["schema"] == "spurctl.plan/v1" and doc["spurctl_version"] == __version__
    assert doc["controller"]["address"] == sim.controller_address
    assert doc["taken_at"].endswith("Z") and doc["nodes"] == "gpu[003,007]"
    got = [(e["finding"]["node"], e["finding"]["job_id"]) for e in doc["entries"]]
    assert got == [("gpu003", 4711), ("gpu007", 4719)]
    for e in doc["entries"]:
        assert e["finding"]["action"] == "reclaim" and e["finding"]["reason"]
        assert e["address"] == sim.agent_map()[e["finding"]["node"]]


def test_applying_a_saved_plan_sends_exactly_its_entries(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    # Planned for 4711 only, though gpu007's 4719 is reclaimable too.
    plan = save_plan(sim, f, tmp_path, "--node", "gpu[003,007]", "--job", "4711")
    run = reclaim_cli(sim, f, "--plan", str(plan), "--yes", "--format", "json")
    assert run.returncode == 1, run.stderr  # sent, unconfirmed: nothing re-collected
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu003", 4711)]
    assert [(r["node"], r["job_id"]) for r in journal(f) if r["event"] == "intent"] == [
        ("gpu003", 4711)
    ]


def test_a_saved_entry_made_legitimate_since_is_spared_with_its_reason(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu[003,007]")
    sim.requeue(4711, "gpu003")  # the controller now runs 4711 on gpu003 itself
    run = reclaim_cli(sim, f, "--plan", str(plan), "--yes", "--format", "json")
    assert run.returncode == 1, run.stderr
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu007", 4719)]
    outcomes = {(o["node"], o["job_id"]): o for o in json.loads(run.stdout)["outcomes"]}
    assert outcomes[("gpu003", 4711)]["result"] == "skipped"
    assert "no longer" in outcomes[("gpu003", 4711)]["detail"]
    assert outcomes[("gpu007", 4719)]["result"] == "sent"


def test_a_plan_older_than_max_inventory_age_is_refused(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plan = edited(save_plan(sim, f, tmp_path, "--node", "gpu003"), taken_at=hour_ago)
    line = refused(reclaim_cli(sim, f, "--plan", str(plan), "--yes"))
    assert "--max-inventory-age" in line and "nothing sent" in line
    assert sim.cancels == [] and journal(f) == []


def test_a_plan_from_another_controller_is_refused(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    other = {"address": "http://other-ctl:6817", "version": "0.1.0"}
    plan = edited(save_plan(sim, f, tmp_path, "--node", "gpu003"), controller=other)
    line = refused(reclaim_cli(sim, f, "--plan", str(plan), "--yes"))
    assert "http://other-ctl:6817" in line and "nothing sent" in line
    assert sim.cancels == [] and journal(f) == []


def test_a_malformed_or_foreign_plan_file_is_refused(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "spurctl.plan/v1", ')
    assert "not valid JSON" in refused(reclaim_cli(sim, f, "--plan", str(broken), "--yes"))
    # An inventory is a JSON document too, but not a plan.
    foreign = tmp_path / "foreign.json"
    foreign.write_text(Path(f["inventory"]).read_text().splitlines()[0])
    assert "spurctl.plan/v1" in refused(reclaim_cli(sim, f, "--plan", str(foreign), "--yes"))
    assert sim.cancels == [] and journal(f) == []


def test_plan_options_given_wrongly_are_one_usage_line(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu003")
    assert "name the nodes" in refused(reclaim_cli(sim, f, "--yes"))
    assert "--dry-run" in refused(reclaim_cli(sim, f, "--node", "gpu003", "-o", str(plan)))
    line = refused(reclaim_cli(sim, f, "--plan", str(plan), "--node", "gpu003", "--yes"))
    assert "--plan names its own nodes" in line
    assert sim.cancels == [] and journal(f) == []
