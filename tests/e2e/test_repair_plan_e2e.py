"""What `spurctl repair` plans, against the simulated cluster: the plan of a dry run
without spur.conf, a busy node's charge, the --max-unavailable cap and the --cooldown.

gpu009 carries a phantom charge (4 GPUs, no job) and its spurd runs (shown from
AGENT); gpu001 runs job 4690, which accounts for its charge; gpu012 holds agent
orphans (its spurd restarted at 05:00, after its runs began), so `spurctl drain`
takes it out of service. The incident has 24 nodes: the default cap (2%, at least
1) lets spurctl hold one node out of service by its own reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spurctl.model import Allocation
from spurctl_sim import incident
from tests.cli import run_cli, wait_for
from tests.e2e.test_repair_e2e import Phantom, phantom, repair, untouched


@pytest.fixture
def p(tmp_path: Path) -> Iterator[Phantom]:
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with phantom(tmp_path, scenario) as cluster:
        yield cluster


def spurctl(p: Phantom, verb: str, node: str, *extra: str) -> Any:
    return run_cli(
        verb, "--node", node, "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--journal", str(p.journal), *extra, home=p.home,
    )  # fmt: skip


def test_a_dry_run_without_spur_conf_shows_its_plan_and_what_sending_will_need(
    p: Phantom,
) -> None:
    before = p.sim.node("gpu009")
    proc = repair(p, "--dry-run", conf=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Repair plan: 1 node of gpu009 ")
    assert lines[1].startswith(
        "Rejoin: NOT CHECKED (sending will need --conf or --rejoin-checked): no spur.conf was read"
    )
    assert lines[2].startswith("  gpu009  phantom allocation 64 CPUs")
    assert "DRY RUN: nothing sent" in proc.stdout
    untouched(p, before)
    # A real run still refuses whole, as before.
    proc = repair(p, "--yes", conf=False)
    assert proc.returncode == 2
    assert "refusing to repair, nothing sent: no spur.conf was read" in proc.stderr
    untouched(p, before)


def test_a_node_whose_jobs_account_for_its_charge_has_no_phantom_charge(p: Phantom) -> None:
    proc = repair(p, "--dry-run", node="gpu001")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  no phantom charge, nothing to repair: gpu001" in proc.stdout
    assert "REFUSED" not in proc.stdout


def test_a_repair_past_the_cap_is_refused_whole_counting_spurctls_other_drains(
    p: Phantom,
) -> None:
    assert spurctl(p, "drain", "gpu012", "--yes").returncode == 0
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "spurctl: error: refusing to repair, nothing sent: it would take 1 more node out of "
        "service (gpu009) beside the 1 already out of service by spurctl's reason (gpu012): "
        "2, above --max-unavailable 2% (1 of the controller's 24 nodes); name fewer nodes, "
        "or pass a larger --max-unavailable"
    ]
    untouched(p, before)
    proc = repair(p, "--dry-run", "--max-unavailable", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Repair plan: 1 node of gpu009" in proc.stdout


def test_a_node_spurctl_resumed_is_not_repaired_within_the_cooldown_unless_named_alone(
    p: Phantom,
) -> None:
    assert spurctl(p, "drain", "gpu012", "--yes").returncode == 0
    p.sim.state.cancel_job(4950)
    for job_id in (4702, 4950):  # freed on the node (node-release)
        p.sim.release("gpu012", job_id)
    wait_for(lambda: '"job_id": 4950' not in p.live.read_text())
    resumed = spurctl(p, "resume", "gpu012", "--yes")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with p.sim.state.lock:  # and then a charge no job owns lands on it
        node = p.sim.state.nodes["gpu012"]
        p.sim.state.nodes["gpu012"] = dataclasses.replace(node, alloc=Allocation(cpus=8))
        p.sim.state.generation += 1

    proc = repair(p, "--dry-run", node="gpu[009,012]")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Repair plan: 1 node of gpu[009,012]" in proc.stdout
    assert "  gpu012  REFUSED: spurctl resumed gpu012 at " in proc.stdout
    assert "(--cooldown), unless named alone (`spurctl repair -w gpu012`)" in proc.stdout
    proc = repair(p, "--dry-run", node="gpu012")  # named alone: the operator's call
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Repair plan: 1 node of gpu012" in proc.stdout
