"""The incident's reclaim as tests run it through the CLI, and what its journal records."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spurctl_sim import SimCluster
from tests.cli import run_cli

# The incident's reclaimable holdings on gpu003-008 (stale runs of requeued jobs),
# gpu012 (a finished job still reserved) and gpu013 (an id aged out below the watermark).
RECLAIM_NODES = "gpu[003-008,012-013]"
PLANNED = {
    ("gpu003", 4711),
    ("gpu004", 4712),
    ("gpu005", 4712),
    ("gpu006", 4715),
    ("gpu006", 4716),
    ("gpu007", 4719),
    ("gpu008", 4720),
    ("gpu012", 4702),
    ("gpu013", 4388),
}


def journal_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def outcomes(path: Path, result: str | None = None) -> set[tuple[str, int]]:
    return {
        (r["node"], r["job_id"])
        for r in journal_records(path)
        if r["event"] == "outcome" and (result is None or r["result"] == result)
    }


def cancelled(sim: SimCluster) -> list[tuple[str, int]]:
    return [(c.node, c.job_id) for c in sim.cancels]


def reclaim_args(
    sim: SimCluster, inventory: Path, agent_map: Path, journal: Path, node: str = RECLAIM_NODES
) -> list[str]:
    return [
        "reclaim",
        "--controller",
        sim.controller_address,
        "--node",
        node,
        "--inventory",
        str(inventory),
        "--agent-map",
        str(agent_map),
        "--journal",
        str(journal),
        "--yes",
    ]


@dataclass(frozen=True, slots=True)
class ReclaimFiles:
    """The files a reclaim against `sim` reads and writes, in one test's tmp_path."""

    inventory: Path
    agent_map: Path
    key: Path  # the cluster key, mode 0600 as spurctl demands
    journal: Path


def reclaim_files(sim: SimCluster, tmp_path: Path, key: str | None = None) -> ReclaimFiles:
    """Write the cluster's inventories, its agent map and (with `key`) the key file."""
    files = ReclaimFiles(
        sim.write_inventories(tmp_path / "inventory.jsonl"),
        tmp_path / "agents.json",
        tmp_path / "jwt.key",
        tmp_path / "journal.jsonl",
    )
    files.agent_map.write_text(json.dumps(sim.agent_map()))
    if key is not None:
        files.key.write_text(key + "\n")
        files.key.chmod(0o600)
    return files


def reclaim_collecting(
    sim: SimCluster, tmp_path: Path, live: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`reclaim --yes --format json` collecting the live inventories `live` through the
    stand-in node command, with the agent map and journal in `tmp_path`."""
    from tests.e2e.test_reclaim_confirm import node_command  # which imports this module

    (tmp_path / "agents.json").write_text(json.dumps(sim.agent_map()))
    return run_cli(
        "reclaim", "--controller", sim.controller_address, "--collect",
        "--command", node_command(tmp_path, live), "--agent-map", str(tmp_path / "agents.json"),
        "--journal", str(tmp_path / "j.jsonl"), "--yes", "--format", "json", *args,
        home=tmp_path / "home",
    )  # fmt: skip
