"""What spurd does with a cancel, through the real CLI on the simulated cluster.

spurd's CancelJob acts only on jobs in its running map: a holding with no process
(an empty `job_<id>` cgroup) gets one cancel, which may free an allocation entry,
and then it is a `leftover` for node-release, never cancelled again. A run that
ignores SIGTERM is freed only after spurd's SIGKILL grace and its monitor's tick,
so reclaim's re-collect waits for it up to --settle and says how long it waited.
The nodes are "collected" by a stand-in for ssh reading a file the simulated
agents keep fresh (tests/e2e/test_reclaim_confirm.py).
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from spurctl.model import parse_time, utcnow
from spurctl_sim import SimCluster
from spurctl_sim.state import CancelTiming
from tests.cli import run_cli
from tests.e2e.test_reclaim_confirm import kept_fresh, node_command
from tests.reclaim import cancelled, journal_records, reclaim_collecting


def _reclaim(sim: SimCluster, tmp_path: Path, live: Path, *args: str) -> tuple[int, Any]:
    proc = reclaim_collecting(sim, tmp_path, live, *args)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _setup(sim: SimCluster, tmp_path: Path) -> Path:
    return sim.write_inventories(tmp_path / "live.jsonl")


def test_an_empty_cgroup_gets_one_agent_cancel_then_is_a_leftover_for_node_release(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    # gpu012 still shows finished job 4702 as an empty cgroup spurd could not remove.
    [trace] = [h for h in sim.state.inventory("gpu012").held if h.job_id == 4702]
    sim.state.hold("gpu012", msgspec.structs.replace(trace, pids=(), traces=("cgroup",)))
    live = _setup(sim, tmp_path)
    with kept_fresh(sim, live):
        code, first = _reclaim(sim, tmp_path, live, "--node", "gpu012", "--settle", "0")
        assert code == 1
        [sent] = first["outcomes"]
        assert (sent["node"], sent["job_id"], sent["result"]) == ("gpu012", 4702, "failed")
        assert (
            "no process of it runs: a leftover no further agent cancel removes" in (sent["detail"])
        )
        assert cancelled(sim) == [("gpu012", 4702)]

        # The next reclaim plans nothing for it: the journal remembers the one cancel.
        code, second = _reclaim(sim, tmp_path, live, "--node", "gpu012")
        assert second["plan"] == [] and second["outcomes"] == []
        assert cancelled(sim) == [("gpu012", 4702)]

        # A collect from here on is a look at the node after the cancel (the journal
        # keeps its time to the second).
        [at] = [r["at"] for r in journal_records(tmp_path / "j.jsonl") if r.get("result") == "sent"]
        after = parse_time(at) + timedelta(seconds=1)  # type: ignore[operator]
        while utcnow() < after:
            time.sleep(0.05)
        sim.write_inventories(live)
        audit = run_cli(
            "audit", "--controller", sim.controller_address, "--nodes", "gpu012", "--collect",
            "--command", node_command(tmp_path, live), "--journal", str(tmp_path / "j.jsonl"),
            "--format", "json",
            home=tmp_path / "home",
        )  # fmt: skip
    assert audit.returncode == 1, audit.stderr
    [leftover] = [f for f in json.loads(audit.stdout)["findings"] if f["job_id"] == 4702]
    assert (leftover["kind"], leftover["action"]) == ("leftover", "investigate")
    assert "still shows job 4702 (cgroup, no process) after an agent cancel" in leftover["reason"]
    assert "`spurctl node-release --job 4702 --started-at " in leftover["reason"]
    # Without the journal the same audit would plan the cancel again, for ever.
    forgetful = run_cli(
        "audit", "--controller", sim.controller_address, "--nodes", "gpu012",
        "--inventory", str(live), "--journal", str(tmp_path / "none.jsonl"), "--format", "json",
        home=tmp_path / "home",
    )  # fmt: skip
    [again] = [f for f in json.loads(forgetful.stdout)["findings"] if f["job_id"] == 4702]
    assert (again["kind"], again["action"]) == ("terminal-held", "reclaim")


def _stubborn_run(sim: SimCluster) -> None:
    # spurd's timing at a fifth: SIGKILL 1 s after the SIGTERM, released at the next
    # 0.4 s monitor tick; gpu003's stale run of 4711 ignores SIGTERM.
    sim.state.cancel_timing = CancelTiming().scaled(0.2)
    sim.state.ignores_sigterm.add(("gpu003", 4711))


def test_a_run_that_ignores_sigterm_is_confirmed_once_spurd_frees_it_after_the_grace(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    _stubborn_run(sim)
    live = _setup(sim, tmp_path)
    with kept_fresh(sim, live):
        code, doc = _reclaim(sim, tmp_path, live, "--node", "gpu003", "--settle", "8")
    assert code == 0, doc
    [o] = doc["outcomes"]
    assert (o["job_id"], o["result"], o["confirmed"]) == (4711, "sent", True)
    assert o["waited_s"] >= 1.4  # not before spurd's grace and tick
    assert o["detail"].endswith(f"no longer holds it {o['waited_s']:g} s later")
    assert 1.4 <= doc["confirmation"]["waited_s"] < 8
    assert doc["confirmation"]["settle_s"] == 8


def test_a_run_not_freed_by_the_deadline_fails_with_the_time_waited(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    _stubborn_run(sim)
    live = _setup(sim, tmp_path)
    with kept_fresh(sim, live):
        code, doc = _reclaim(sim, tmp_path, live, "--node", "gpu003", "--settle", "0.5")
    assert code == 1
    [o] = doc["outcomes"]
    assert (o["result"], o["waited_s"]) == ("failed", 0.5)
    assert "still holds job 4711 0.5 s later" in o["detail"]
    assert doc["confirmation"]["waited_s"] >= 0.5
    failed = [r for r in journal_records(tmp_path / "j.jsonl") if r.get("result") == "failed"]
    assert [(r["node"], r["job_id"]) for r in failed] == [("gpu003", 4711)]


def test_a_run_whose_processes_are_not_spurds_children_is_an_orphan_and_gets_no_cancel(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    # gpu003's stale run of 4711 began after its spurd started, but node-inventory
    # traced its processes to pid 1 and none passes through spurd (reparented away).
    lines = []
    for line in inventory.read_text().splitlines():
        doc = json.loads(line)
        if doc["node"] == "gpu003":
            doc["agent"] = {"pid": 2201, "started_at": "2026-11-01T00:00:00Z"}
            doc["ancestry_read"] = True
        lines.append(json.dumps(doc))
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    proc = run_cli(
        "reclaim", "--controller", sim.controller_address, "--node", "gpu003",
        "--inventory", str(edited), "--agent-map", str(agent_map),
        "--journal", str(tmp_path / "j.jsonl"), "--yes", "--format", "json",
        home=tmp_path / "home",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["plan"] == [] and cancelled(sim) == []
    audit = run_cli(
        "audit", "--controller", sim.controller_address, "--nodes", "gpu003",
        "--inventory", str(edited), "--format", "json",
        home=tmp_path / "home",
    )  # fmt: skip
    [finding] = [f for f in json.loads(audit.stdout)["findings"] if f["job_id"] == 4711]
    assert (finding["kind"], finding["action"]) == ("agent-orphan", "investigate")
    assert "descends from gpu003's spurd (pid 2201)" in finding["reason"]
