"""What the named scenarios are built of: the node, a job's share of it, its pids, times.

Nodes are MI300X-class: 8 GPUs, 128 CPUs, 1 TiB; a job gets 16 CPUs and
128 GiB per GPU. Times are fixed so every run of a scenario is the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from spurctl.model import Allocation, Device, Gpu, ResourceSet
from spurctl.spur_hostlist import compress

SPUR_VERSION = "0.8.0"
GPUS_PER_NODE = 8
CPUS_PER_GPU = 16
MEM_PER_GPU_MB = 131_072
NODE_TOTAL = ResourceSet(
    cpus=GPUS_PER_NODE * CPUS_PER_GPU,
    memory_mb=GPUS_PER_NODE * MEM_PER_GPU_MB,
    gpus=tuple(Gpu(i, "mi300x", 196_608) for i in range(GPUS_PER_NODE)),
)


def utc_time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def hostlist(prefix: str, numbers: Iterable[int], width: int) -> str:
    """The nodelist spurctld writes for the nodes `prefix` + each number `width` wide,
    with Spur's own `compress` (gpu[004-005,009])."""
    return compress(f"{prefix}{n:0{width}d}" for n in numbers)


def job_allocation(gpus: Sequence[int], num_nodes: int, cpus: int | None = None) -> Allocation:
    """A job's TOTAL allocation: `gpus` (or, for a CPU-only job, `cpus`) on each of its nodes."""
    per_node_cpus = cpus if cpus is not None else len(gpus) * CPUS_PER_GPU
    per_node_mem = per_node_cpus * (MEM_PER_GPU_MB // CPUS_PER_GPU)
    devices = {"gpu": tuple(Device(g, num_nodes) for g in gpus)} if gpus else {}
    return Allocation(
        cpus=per_node_cpus * num_nodes, memory_mb=per_node_mem * num_nodes, devices=devices
    )


def job_pids(job_id: int, node: int, ranks: int) -> tuple[int, ...]:
    """A launcher and one worker per rank, at a pid derived from the job and node."""
    base = 20_000 + (job_id * 7_919 + node * 104_729) % 3_000_000
    return tuple(base + i for i in range(ranks + 1))
