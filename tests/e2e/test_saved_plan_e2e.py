"""`reclaim --dry-run -o plan.json`, then `reclaim --plan plan.json`: exactly the saved
entries are sent, each re-checked afresh; a stale, foreign or malformed plan sends nothing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spurctl import __version__
from spurctl_sim import SimCluster
from tests.cli import answer_on_a_terminal
from tests.e2e import test_reclaim_e2e as base
from tests.e2e.test_reclaim_e2e import files, journal, reclaim_cli

make_sim = base.make_sim  # the `sim` fixture builds the incident cluster, auth required


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


def _entry_edits() -> dict[str, tuple[str, object]]:
    # Each a schema-valid edit of the first entry that spurctl itself never writes.
    return {
        "null job id": ("job_id", None),
        "negative job id": ("job_id", -1),
        "job id past uint32": ("job_id", 2**32),
        "no node": ("node", ""),
        "not a cancel": ("action", "spare"),
    }


@pytest.mark.parametrize("edit", sorted(_entry_edits()))
def test_a_saved_entry_spurctl_never_writes_is_one_line_exit_2_and_nothing_sent(
    sim: SimCluster, tmp_path: Path, edit: str
) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu[003,007]")
    doc = json.loads(plan.read_text())
    field, value = _entry_edits()[edit]
    doc["entries"][0]["finding"][field] = value
    plan.write_text(json.dumps(doc))
    run = reclaim_cli(sim, f, "--plan", str(plan), "--yes")
    line = refused(run)
    assert "internal error" not in line and "entry 1" in line and str(plan) in line, line
    assert sim.cancels == [] and journal(f) == []


def test_a_saved_plan_without_an_agent_address_or_a_hostlist_is_refused(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu003")
    doc = json.loads(plan.read_text())
    doc["entries"][0]["address"] = " "
    plan.write_text(json.dumps(doc))
    assert "no agent address" in refused(reclaim_cli(sim, f, "--plan", str(plan), "--yes"))
    doc["entries"][0]["address"] = "127.0.0.1:1"
    plan.write_text(json.dumps({**doc, "nodes": "gpu[1-"}))
    assert "not a hostlist" in refused(reclaim_cli(sim, f, "--plan", str(plan), "--yes"))
    assert sim.cancels == [] and journal(f) == []


def test_a_cancel_repeated_in_a_saved_plan_is_refused_never_sent_twice(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu[003,007]")
    doc = json.loads(plan.read_text())
    first, second = doc["entries"]
    plan.write_text(json.dumps({**doc, "entries": [first, second, first, first]}))
    line = refused(reclaim_cli(sim, f, "--plan", str(plan), "--yes"))
    assert "entry 3" in line and "repeats entry 1" in line and "job 4711 on gpu003" in line
    assert sim.cancels == [] and journal(f) == []


def test_a_plan_dated_ahead_of_this_hosts_clock_is_refused_whatever_its_age_limit(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    plan = edited(save_plan(sim, f, tmp_path, "--node", "gpu003"), taken_at="2099-01-01T00:00:00Z")
    run = reclaim_cli(sim, f, "--plan", str(plan), "--yes", "--max-inventory-age", "3650d")
    line = refused(run)
    assert "ahead of this host's clock" in line and "nothing sent" in line, line
    assert sim.cancels == [] and journal(f) == []
    # A plan saved a moment ago on a controller whose clock is a little ahead still applies.
    soon = (datetime.now(UTC) + timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plan = edited(plan, taken_at=soon)
    assert reclaim_cli(sim, f, "--plan", str(plan), "--yes").returncode == 1  # sent, unconfirmed
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu003", 4711)]


def test_after_a_requeue_the_screen_before_the_prompt_shows_the_fresh_verdict(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu[003,007]")
    sim.requeue(4711, "gpu003")  # the fresh audit no longer plans gpu003's 4711
    args = [
        "reclaim", "--plan", str(plan), "--inventory", f["inventory"],
        "--agent-map", f["agents"], "--journal", f["journal"], "--jwt-key-file", f["key"],
        "--controller", sim.controller_address, "--token", f["token"],
    ]  # fmt: skip
    status, seen = answer_on_a_terminal(args, tmp_path / "home", b"n\r")
    screen = re.sub(r"\x1b\[[0-9;]*m", "", seen.decode(errors="replace"))  # colours
    assert status == 1 and "nothing sent" in screen, screen
    flat = " ".join(screen.split())
    assert (
        "WILL SKIP: job 4711 on gpu003: not sent: no longer reclaimable, job 4711 is now "
        "RUNNING on gpu003"
    ) in flat, flat
    assert "nothing: will skip" in flat
    # Two saved cancels, one of which the fresh audit spares: one live run, not two.
    assert "2 cancels (1 will skip) on 2 nodes; 1 live run will be stopped" in flat, flat
    assert "Send 1 cancel to 1 node (1 more will skip), killing 1 live run?" in flat, flat
    assert sim.cancels == []


def test_a_saved_entry_left_out_by_x_is_skipped_saying_x_left_it_out(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    plan = save_plan(sim, f, tmp_path, "--node", "gpu[003,007]")
    run = reclaim_cli(sim, f, "--plan", str(plan), "-x", "gpu003", "--yes", "--format", "json")
    assert run.returncode == 1, run.stderr
    outcomes = {(o["node"], o["job_id"]): o for o in json.loads(run.stdout)["outcomes"]}
    detail = outcomes[("gpu003", 4711)]["detail"]
    assert outcomes[("gpu003", 4711)]["result"] == "skipped"
    assert "-x leaves gpu003 out of this run" in detail and "finds no holding" not in detail
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu007", 4719)]
