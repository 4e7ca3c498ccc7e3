"""Through the real CLI: "sent" is not "freed".

spurd's CancelJob answers Ok for an id it does not track and does nothing. So a
reclaim that does not look at the nodes again reports each cancel sent *and
unconfirmed*, prints the command that confirms it, and exits 1; with
`--verify-inventory` (or `--collect`) it re-collects the touched nodes and
confirms from what they hold.

The nodes are "collected" by a stand-in for ssh that prints a node's line of an
inventory file: kept fresh from the simulated agents (what a node shows after a
real cancel), or left stale (a node whose agent answered Ok and freed nothing).
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from spurctl_sim import SimCluster, node_line
from tests.cli import run_cli
from tests.reclaim import cancelled, journal_records

NODES = "gpu[003-004,012]"
SENT = {("gpu003", 4711), ("gpu004", 4712), ("gpu012", 4702)}


def node_command(tmp_path: Path, inventory: Path) -> str:
    """A --command template printing `%h`'s line of `inventory`, as ssh + node-inventory would."""
    return node_line.command(inventory)


@contextmanager
def kept_fresh(sim: SimCluster, path: Path) -> Iterator[None]:
    """Rewrite `path` whenever what the agents hold changes, as the nodes would show it."""
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


def reclaim(
    sim: SimCluster, tmp_path: Path, plan_from: Path, live: Path, *extra: str
) -> tuple[int, str, str]:
    proc = run_cli(
        "reclaim", "--controller", sim.controller_address, "--node", NODES,
        "--inventory", str(plan_from), "--command", node_command(tmp_path, live),
        "--agent-map", str(tmp_path / "agents.json"), "--journal", str(tmp_path / "j.jsonl"),
        "--yes", *extra,
        home=tmp_path / "home",
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


def files(sim: SimCluster, tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "agents.json").write_text(json.dumps(sim.agent_map()))
    plan_from = sim.write_inventories(tmp_path / "planned.jsonl")
    live = sim.write_inventories(tmp_path / "live.jsonl")
    return plan_from, live


def test_without_a_re_collect_every_cancel_is_sent_and_unconfirmed_with_the_command_that_confirms(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    plan_from, live = files(sim, tmp_path)
    with kept_fresh(sim, live):
        code, out, err = reclaim(sim, tmp_path, plan_from, live)
        assert code == 1, out + err
        assert sorted(cancelled(sim)) == sorted(SENT)
        rows = [line for line in out.splitlines() if "sent, unconfirmed" in line]
        assert len(rows) == 3
        assert "3 planned: 3 sent (3 unconfirmed), 0 skipped, 0 failed." in out
        assert "UNCONFIRMED: 3 sent cancels not shown freed" in out
        assert "sent is not freed" in out and "--verify-inventory" in out
        (command,) = [line.strip() for line in out.splitlines() if "spurctl audit" in line]
        words = shlex.split(command)
        assert words[:6] == ["spurctl", "audit", "--nodes", NODES, "--collect", "--command"]
        assert ["--controller", sim.controller_address] == words[-2:]

        # The printed command, run as printed, is what confirms: the nodes are free.
        audit = run_cli(*words[1:], "--format", "json", home=tmp_path / "home")
    assert audit.returncode in (0, 1), audit.stderr
    findings = json.loads(audit.stdout)["findings"]
    assert {(f["node"], f["job_id"]) for f in findings if f["action"] == "reclaim"} == set()
    # The journal records what happened on the wire: sent.
    records = journal_records(tmp_path / "j.jsonl")
    assert {(r["node"], r["job_id"]) for r in records if r.get("result") == "sent"} == SENT


def test_the_json_document_says_sent_unconfirmed_and_carries_the_command(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    plan_from, live = files(sim, tmp_path)
    code, out, err = reclaim(sim, tmp_path, plan_from, live, "--format", "json")
    assert code == 1, out + err
    doc = json.loads(out)
    assert {(o["node"], o["job_id"], o["result"], o["confirmed"]) for o in doc["outcomes"]} == {
        (node, job, "sent", False) for node, job in SENT
    }
    confirmation = doc["confirmation"]
    assert confirmation["verified"] is False
    assert (confirmation["confirmed"], confirmation["unconfirmed"]) == (0, 3)
    assert confirmation["command"].startswith(f"spurctl audit --nodes '{NODES}' --collect")
    assert doc["summary"]["sent"] == 3  # the summary still counts what went out


def test_verify_inventory_confirms_from_the_nodes_even_when_the_plan_came_from_files(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    plan_from, live = files(sim, tmp_path)
    with kept_fresh(sim, live):
        code, out, err = reclaim(
            sim, tmp_path, plan_from, live, "--verify-inventory", "--settle", "0.5"
        )
    assert code == 0, out + err
    assert "unconfirmed" not in out.lower()
    assert "Confirmed: a re-collect of 3 nodes no longer shows 3 jobs." in out
    assert out.count("no longer holds it 0.5 s later") == 3

    assert sorted(cancelled(sim)) == sorted(SENT)
    # The confirmation is journaled, so the journal alone tells it from a bare send.
    confirmed = {(r["node"], r["job_id"]) for r in journal_records(tmp_path / "j.jsonl")
                 if r.get("confirmed") is True}  # fmt: skip
    assert confirmed == SENT
    shown = run_cli("journal", "--journal", str(tmp_path / "j.jsonl"), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    (run,) = json.loads(shown.stdout)["runs"]
    assert run["unconfirmed"] == 0, run


def test_verify_inventory_fails_a_cancel_the_node_still_shows(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    # The agent answered Ok but the node still shows the job (spurd no longer tracks it):
    # the stale file is what such a node reports after the cancel.
    sim = incident_cluster[0]
    plan_from, live = files(sim, tmp_path)
    code, out, err = reclaim(
        sim, tmp_path, plan_from, live, "--verify-inventory", "--settle", "0", "--format", "json"
    )
    assert code == 1, out + err
    doc = json.loads(out)
    for o in doc["outcomes"]:
        assert o["result"] == "failed" and o["confirmed"] is None
        assert "still holds job" in o["detail"]
    assert doc["confirmation"]["verified"] is True and doc["confirmation"]["command"] is None
    failed = {(r["node"], r["job_id"]) for r in journal_records(tmp_path / "j.jsonl")
              if r.get("result") == "failed"}  # fmt: skip
    assert failed == SENT
