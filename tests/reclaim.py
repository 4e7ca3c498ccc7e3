"""The incident's reclaim as tests run it through the CLI, and what its journal records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spurctl.simcluster import SimCluster

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
