"""How much `spurctl drain` may take out of service, and how soon it drains again.

The incident has 24 nodes, so the default --max-unavailable (2%, at least 1) lets
spurctl hold one node out of service by its own reason. gpu006 and gpu012 both hold
agent orphans here (their spurd restarted at 05:00, after their runs began), so both
need a drain. The cap counts spurctl's drains of any run over every node the
controller lists; a run that would pass it is refused whole (exit 2, nothing sent).
A node spurctl resumed is not drained again before --cooldown unless named alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.model import NodeState
from spurctl_sim import SimCluster, incident
from tests.cli import wait_for
from tests.e2e.test_drain_resume_e2e import Cluster, command
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records

RESTART = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    scenario = incident()
    for node in ("gpu006", "gpu012"):
        scenario.agent_started_at[node] = RESTART
    with SimCluster(scenario) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        with kept_fresh(sim, live):
            yield Cluster(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", tmp_path)


def _drained(c: Cluster, node: str) -> bool:
    return c.sim.node(node).state_reason.startswith("spurctl:")


def test_a_drain_past_the_cap_is_refused_whole_saying_what_it_would_take_and_the_flag(
    c: Cluster,
) -> None:
    proc = command(c, "drain", "gpu[006,012]", "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "spurctl: error: refusing to drain, nothing sent: it would take 2 more nodes out of "
        "service (gpu[006,012]) with none out of service by spurctl's reason yet: 2, above "
        "--max-unavailable 2% (1 of the controller's 24 nodes); name fewer nodes, or pass a "
        "larger --max-unavailable"
    ]
    assert not _drained(c, "gpu006") and not _drained(c, "gpu012")
    assert not c.journal.exists() or journal_records(c.journal) == []

    proc = command(c, "drain", "gpu[006,012]", "--yes", "--max-unavailable", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _drained(c, "gpu006") and _drained(c, "gpu012")


def test_the_cap_counts_spurctls_drains_of_earlier_runs_outside_the_scope(c: Cluster) -> None:
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    proc = command(c, "drain", "gpu006", "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "it would take 1 more node out of service (gpu006) beside the 1 already out of "
        "service by spurctl's reason (gpu012): 2, above --max-unavailable 2%" in proc.stderr
    )
    assert not _drained(c, "gpu006")
    proc = command(c, "drain", "gpu006", "--yes", "--max-unavailable", "10%")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _drained(c, "gpu006")


def test_a_node_spurctl_resumed_is_not_drained_again_within_the_cooldown_unless_named_alone(
    c: Cluster,
) -> None:
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    orphans = c.sim.holdings("gpu012")
    for h in orphans:
        c.sim.release("gpu012", h.job_id)
    c.sim.state.cancel_job(4950)
    wait_for(lambda: '"job_id": 4950' not in c.live.read_text())
    assert command(c, "resume", "gpu012", "--yes").returncode == 0
    assert c.sim.node("gpu012").state is not NodeState.DRAIN
    for h in orphans:  # the orphans show again (say, a scan that missed them)
        c.sim.hold("gpu012", h)
    wait_for(lambda: '"job_id": 4702' in c.live.read_text())

    proc = command(c, "drain", "gpu[006,012]", "--yes")  # one node: within the cap
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu012  spurctl resumed gpu012 at " in proc.stdout
    assert "not drained again by spurctl before " in proc.stdout
    assert "(--cooldown), unless named alone (`spurctl drain -w gpu012`)" in proc.stdout
    assert _drained(c, "gpu006") and not _drained(c, "gpu012")

    # Named alone: the operator's call (the cap still holds).
    proc = command(c, "drain", "gpu012", "--yes", "--max-unavailable", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _drained(c, "gpu012")
