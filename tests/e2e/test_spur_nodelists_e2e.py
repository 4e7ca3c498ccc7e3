"""Nodelists as spurctld writes them, through the real CLI against the simulated cluster.

A 120-node cluster named gpu01..gpu120 runs one 100-node job on gpu01..gpu100; every
one of its nodes is charged its share and every agent holds it. spurctld writes the
job's nodelist with spur-core's `compress`: `gpu[01-100]`, which ClusterShell refuses
("mixes paddings") and Spur's `expand` reads back as the hundred nodes (issue 49).
A controller's list past the node table (`gpu[1-90000000]`), or one Spur cannot read
(`gpu[1 -90000000]`), is noted and never expanded (issue 48). An operator's malformed
range is one clear error, and nothing is sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from spurctl.model import Allocation, Device, Holding, Job, JobState, Node, NodeState, utcnow
from spurctl.spur_hostlist import compress
from spurctl_sim import SimCluster
from spurctl_sim.scenario import Scenario, node_share
from spurctl_sim.scenario_parts import NODE_TOTAL
from tests.cli import run_cli
from tests.e2e.test_reclaim_confirm import kept_fresh

NAMES = [f"gpu{i:02d}" for i in range(1, 100)] + [f"gpu{i}" for i in range(100, 121)]
WIDE = 4800  # the 100-node job
CONF = "[controller]\nhosts = []\n"


def cluster(*extra_jobs: Job, phantom: str | None = None) -> Scenario:
    """gpu01..gpu120, job 4800 RUNNING on gpu01..gpu100 as spurctld lists it, every node
    of it charged and holding it; `extra_jobs` beside it; `phantom` charged by no job."""
    now = utcnow()
    on = NAMES[:100]
    wide = Job(
        job_id=WIDE,
        state=JobState.RUNNING,
        nodelist=compress(on),
        user="alice",
        uid=20001,
        partition="gpu",
        submit_time=now - timedelta(hours=2),
        start_time=now - timedelta(hours=1),
        num_nodes=100,
        num_tasks=800,
        resources=Allocation(
            cpus=64 * 100,
            memory_mb=262_144 * 100,
            devices={"gpu": tuple(Device(d, 100) for d in range(4))},
        ),
    )
    share = node_share(wide)
    nodes = [
        Node(
            name=name,
            state=NodeState.MIXED if name in on or name == phantom else NodeState.IDLE,
            total=NODE_TOTAL,
            alloc=share if name in on or name == phantom else Allocation(),
        )
        for name in NAMES
    ]
    holdings = {
        name: [
            Holding(
                job_id=WIDE,
                cpus=64,
                memory_mb=262_144,
                gpus=(0, 1, 2, 3),
                pids=(40_000 + i,),
                started_at=now - timedelta(minutes=59),
            )
        ]
        for i, name in enumerate(on)
    }
    return Scenario(
        version="0.8.0",
        jobs=[wide, *extra_jobs],
        nodes=nodes,
        holdings=holdings,
        agent_started_at={name: now - timedelta(days=1) for name in NAMES},
    )


@dataclass
class Cluster:
    sim: SimCluster
    live: Path
    tmp: Path


@pytest.fixture
def c(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    scenario = getattr(request, "param", None) or cluster()
    with SimCluster(scenario, heartbeat_interval=0.1) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        with kept_fresh(sim, live):
            yield Cluster(sim, live, tmp_path)


def audit(c: Cluster, *extra: str) -> tuple[Any, dict[str, Any]]:
    proc = run_cli(
        "audit", "--controller", c.sim.controller_address, "--inventory", str(c.live),
        "--format", "json", *extra, home=c.tmp / "home",
    )  # fmt: skip
    return proc, json.loads(proc.stdout)


def test_the_simulated_controller_writes_the_list_spurctld_writes(c: Cluster) -> None:
    job = c.sim.job(WIDE)
    assert job is not None and job.nodelist == "gpu[01-100]"


def test_a_hundred_node_job_spur_lists_as_gpu01_100_is_healthy_on_every_node(c: Cluster) -> None:
    proc, report = audit(c, "--all")
    assert proc.returncode == 0, proc.stderr
    kinds = {(f["node"], f["kind"]) for f in report["findings"]}
    assert {(name, "healthy") for name in NAMES[:100]} <= kinds
    assert not [f for f in report["findings"] if f["action"] != "none"]
    assert not any("not a valid hostlist" in n for n in report.get("notes", []))
    assert not report["summary"]["by_kind"].get("phantom-alloc")


def test_repair_leaves_a_node_the_job_lists(c: Cluster) -> None:
    """gpu50's charge is the hundred-node job's, read from `gpu[01-100]`: no phantom charge,
    nothing sent (before, the list was unreadable and the charge looked phantom)."""
    before = c.sim.node("gpu50")
    conf = c.tmp / "spur.conf"
    conf.write_text(CONF)
    proc = run_cli(
        "repair", "--node", "gpu50", "--controller", c.sim.controller_address,
        "--inventory", str(c.live), "--conf", str(conf), "--journal", str(c.tmp / "j.jsonl"),
        "--tick", "0", "--wait", "5", "--yes", home=c.tmp / "home",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no phantom charge, nothing to repair: gpu50" in proc.stdout, proc.stdout
    assert "Nothing to repair: nothing sent" in proc.stdout
    assert not (c.tmp / "j.jsonl").exists()
    assert c.sim.node("gpu50") == before


HUGE = Job(
    job_id=4801,
    state=JobState.RUNNING,
    nodelist="gpu[1-90000000]",
    user="bob",
    uid=20002,
    num_nodes=1,
    resources=Allocation(cpus=16),
)
UNREAD = Job(
    job_id=4802,
    state=JobState.RUNNING,
    nodelist="gpu[1 -90000000]",
    user="bob",
    uid=20002,
    num_nodes=1,
    resources=Allocation(cpus=16),
)


@pytest.mark.parametrize("c", [cluster(HUGE, UNREAD, phantom="gpu110")], indirect=True)
def test_a_nodelist_past_the_node_table_is_noted_and_never_expanded(c: Cluster) -> None:
    began = time.monotonic()
    proc, report = audit(c)
    assert time.monotonic() - began < 30
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    notes = report.get("notes", [])
    assert any(
        "job 4801's nodelist 'gpu[1-90000000]' names 90,000,000 nodes" in n for n in notes
    ), notes
    assert any("job 4802's nodelist 'gpu[1 -90000000]' is not a valid hostlist" in n for n in notes)
    assert [sum(f"job {j}'s nodelist" in n for n in notes) for j in (4801, 4802)] == [1, 1]
    # Either job may run on any node: gpu110's charge is not called phantom while they run.
    assert not [f for f in report["findings"] if f["kind"] in ("phantom-alloc", "excess-alloc")]
    assert not [f for f in report["findings"] if f["action"] == "reclaim"]


@pytest.mark.parametrize(
    "hostlist", ["gpu[8-9-10]", "gpu[10-8]", "gpu[]", "gpu[1-]", "gpu[1-3", "gpu[-3]"]
)
def test_drain_of_a_malformed_range_is_one_clear_error_and_sends_nothing(
    c: Cluster, hostlist: str
) -> None:
    before = {name: c.sim.node(name) for name in NAMES}
    journal = c.tmp / "journal.jsonl"
    proc = run_cli(
        "drain", "--node", hostlist, "--controller", c.sim.controller_address,
        "--inventory", str(c.live), "--journal", str(journal), "--yes", home=c.tmp / "home",
    )  # fmt: skip
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"spurctl: error: -w/--nodes: bad hostlist {hostlist!r}: "), line
    assert {name: c.sim.node(name) for name in NAMES} == before
    assert not journal.exists()
