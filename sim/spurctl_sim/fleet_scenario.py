"""A quiet fleet: N nodes, each running one whole-node job its agent holds (nothing to
find), and the incident that strands some of them (the autopilot's tests and bench)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from spurctl.model import Allocation, Device, Holding, Job, JobState, Node, NodeState
from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import (
    CPUS_PER_GPU,
    MEM_PER_GPU_MB,
    NODE_TOTAL,
    SPUR_VERSION,
    job_allocation,
    job_pids,
)

if TYPE_CHECKING:
    from spurctl_sim.server import SimCluster

T0 = datetime(2026, 12, 4, 20, 0, tzinfo=UTC)
GPUS = tuple(range(8))


def node_name(i: int) -> str:
    """The fleet's node i (1-based): gpu0001 ... gpu20000."""
    return f"gpu{i:04d}"


def fleet(nodes: int) -> Scenario:
    """`nodes` nodes, node i running job i on its 8 GPUs, held by its agent."""
    per_job = job_allocation(GPUS, 1)
    per_node = Allocation(
        cpus=8 * CPUS_PER_GPU,
        memory_mb=8 * MEM_PER_GPU_MB,
        devices={"gpu": tuple(Device(g, 1) for g in GPUS)},
    )
    boot = T0 - timedelta(days=1)
    jobs: list[Job] = []
    holdings: dict[str, list[Holding]] = {}
    node_list: list[Node] = []
    for i in range(1, nodes + 1):
        name = node_name(i)
        jobs.append(Job(i, JobState.RUNNING, name, "train", "alice", 20001, "gpu", "research",
                        "", T0, T0, None, 1, 8, per_job))  # fmt: skip
        holdings[name] = [Holding(i, 8 * CPUS_PER_GPU, 8 * MEM_PER_GPU_MB, GPUS,
                                  job_pids(i, i, 8), T0 + timedelta(seconds=1))]  # fmt: skip
        node_list.append(Node(name, NodeState.ALLOCATED, "", ("gpu",), NODE_TOTAL, per_node,
                              boot, None, boot, {}))  # fmt: skip
    return Scenario(version=SPUR_VERSION, jobs=jobs, nodes=node_list, holdings=holdings)


def strand(sim: SimCluster, job_id: int) -> None:
    """The controller finished `job_id` (a restart lost the cancel); its agent holds it."""
    job = sim.job(job_id)
    assert job is not None
    sim.set_job(
        msgspec.structs.replace(job, state=JobState.COMPLETED, end_time=T0 + timedelta(hours=1))
    )
