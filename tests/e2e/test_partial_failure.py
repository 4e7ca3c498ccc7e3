"""Partial failure, met through the real CLI against a simulated cluster.

What an operator can rely on: a dead controller endpoint is passed over, and one
bad node never hides or stops the others. (Ctrl-C and crashes:
test_reclaim_interrupt.py; secrets: test_secrets.py; operator errors, one line
each: test_errors.py.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spurctl.sources.journal_records import unresolved
from spurctl_sim import SimCluster, incident, node_line
from tests.cli import dead_url, run_cli, stderr_lines
from tests.reclaim import PLANNED, cancelled, outcomes, reclaim_args

# -- HA through the CLI -------------------------------------------------------------------------


def test_audit_fails_over_past_dead_endpoints_without_a_word(tmp_path: Path) -> None:
    with SimCluster(incident(), agents=False) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        live = sim.controller_address
        controllers = f"{dead_url()},{dead_url()},{live}"
        proc = run_cli(
            "audit",
            "--controller",
            controllers,
            "--inventory",
            str(inventory),
            "--format",
            "json",
            home=tmp_path,
        )
    assert proc.returncode == 1, proc.stderr
    assert stderr_lines(proc) == []
    assert json.loads(proc.stdout)["controller"]["address"] == live


# -- partial failure: one bad node never hides or stops the others --------------------------------


def test_a_stopped_agent_fails_its_entry_and_every_other_node_is_still_reclaimed(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    sim.stop_agent("gpu006")  # two planned cancels on it
    journal = tmp_path / "journal.jsonl"

    proc = run_cli(
        *reclaim_args(sim, inventory, agent_map, journal), "--format", "json", home=tmp_path
    )

    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    by_entry = {(o["node"], o["job_id"]): o for o in doc["outcomes"]}
    assert set(by_entry) == PLANNED
    failed = {e for e, o in by_entry.items() if o["result"] == "failed"}
    assert failed == {("gpu006", 4715), ("gpu006", 4716)}
    for entry in failed:
        assert "unreachable" in by_entry[entry]["detail"]
    assert doc["summary"] == {
        "planned": 9,
        "sent": 7,
        "skipped": 0,
        "failed": 2,
        "interrupted": False,
    }
    # What the agents received is exactly what was reported sent, and the journal agrees.
    assert sorted(cancelled(sim)) == sorted(PLANNED - failed)
    assert outcomes(journal, "sent") == PLANNED - failed
    assert outcomes(journal, "failed") == failed
    assert unresolved(journal) == []


def test_the_table_summary_names_the_node_that_failed(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    sim.stop_agent("gpu013")
    proc = run_cli(*reclaim_args(sim, inventory, agent_map, tmp_path / "j.jsonl"), home=tmp_path)
    assert proc.returncode == 1, proc.stderr
    failed_rows = [line for line in proc.stdout.splitlines() if " failed " in line]
    assert len(failed_rows) == 1 and "gpu013" in failed_rows[0] and "4388" in failed_rows[0]
    assert "9 planned: 8 sent (8 unconfirmed), 0 skipped, 1 failed." in proc.stdout


def test_an_agent_that_answers_too_late_is_failed_with_a_warning_to_check_it(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=2.0) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        args = reclaim_args(sim, inventory, agent_map, tmp_path / "j.jsonl", node="gpu013")
        proc = run_cli(*args, "--timeout", "0.3", "--format", "json", home=tmp_path)
    assert proc.returncode == 1, proc.stderr
    (outcome,) = json.loads(proc.stdout)["outcomes"]
    assert outcome["result"] == "failed"
    # A deadline is not proof that nothing happened: the operator is told to look.
    assert "no answer within 0.3 s" in outcome["detail"]
    assert "may still have been applied: check the node" in outcome["detail"]


def fake_ssh(tmp_path: Path, inventory: Path, broken: str) -> str:
    """ssh + node-inventory for each node of `inventory`; `broken` refuses connections."""
    return node_line.command(inventory, [broken])


def test_audit_collect_reports_an_unreachable_node_and_audits_all_the_others(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    proc = run_cli(
        "audit",
        "--controller",
        sim.controller_address,
        "--collect",
        "--nodes",
        "gpu[003-008]",
        "--command",
        fake_ssh(tmp_path, inventory, "gpu005"),
        "--format",
        "json",
        home=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    by_node: dict[str, list[dict[str, Any]]] = {}
    for f in doc["findings"]:
        by_node.setdefault(f["node"], []).append(f)
    (unreachable_finding,) = by_node.pop("gpu005")
    assert unreachable_finding["kind"] == "agent-unreachable"
    assert "Connection refused" in unreachable_finding["reason"]
    assert sorted(by_node) == ["gpu003", "gpu004", "gpu006", "gpu007", "gpu008"]
    assert all(f["kind"] == "active-elsewhere" for fs in by_node.values() for f in fs)
    assert doc["summary"]["nodes_inventoried"] == 5


@contextmanager
def inventory_kept_fresh(sim: SimCluster, path: Path) -> Iterator[None]:
    """Rewrite the inventory file whenever what the agents hold changes, as the nodes would."""
    done = threading.Event()

    def watch() -> None:
        seen = sim.state.generation
        while not done.wait(0.02):
            if sim.state.generation != seen:
                seen = sim.state.generation
                sim.write_inventories(path)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join(timeout=10)


def test_reclaim_collect_spares_an_unreachable_node_and_reclaims_the_others(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    with inventory_kept_fresh(sim, inventory):
        proc = run_cli(
            "reclaim",
            "--controller",
            sim.controller_address,
            "--node",
            "gpu[003-008]",
            "--collect",
            "--settle",
            "0.3",  # the watcher rewrites the file within 20 ms of a change
            "--command",
            fake_ssh(tmp_path, inventory, "gpu005"),
            "--agent-map",
            str(agent_map),
            "--journal",
            str(journal),
            "--yes",
            "--format",
            "json",
            home=tmp_path,
        )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    sent = {(o["node"], o["job_id"]) for o in doc["outcomes"] if o["result"] == "sent"}
    expected = {e for e in PLANNED if e[0] in {"gpu003", "gpu004", "gpu006", "gpu007", "gpu008"}}
    assert sent == expected
    assert sorted(cancelled(sim)) == sorted(expected)
    assert sim.holdings("gpu005")  # never touched: it could not be inventoried


# -- interrupt: Ctrl-C stops before the next send and loses no outcome -------------------------


# -- secrets never leave ----------------------------------------------------------------------
