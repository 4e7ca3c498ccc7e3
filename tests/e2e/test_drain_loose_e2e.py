"""`spurctl drain` and findings under a name that matches the node only loosely (issue 48,
item 4), against the simulated cluster: loose matching may only spare. gpu012's agent
orphans (4950 live, 4702 a leftover) are reported under gpu012.site-b, and none of its
job processes carries SPUR_TARGET_NODE, so nothing ties them to gpu012 by its own name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident
from tests.e2e.test_drain_resume_e2e import Cluster, command
from tests.e2e.test_reclaim_confirm import kept_fresh


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    scenario.inventory_names["gpu012"] = "gpu012.site-b"
    scenario.target_names["gpu012"] = []
    with SimCluster(scenario) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        with kept_fresh(sim, live):
            yield Cluster(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map)


def test_orphans_held_only_under_a_loose_name_do_not_drain_the_node(c: Cluster) -> None:
    assert '"node": "gpu012.site-b"' in c.live.read_text()
    proc = command(c, "drain", "gpu012", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "gpu012  gpu012 is not drained: gpu012.site-b, a name that matches it only loosely, "
        "holds agent-orphan job 4950 (and 1 more), which cannot vouch for draining gpu012; "
        "collect gpu012 under its own name"
    ) in proc.stdout
    assert c.sim.node("gpu012").state_reason == ""
    assert not c.journal.exists()  # no drain intent, nothing sent
