"""A cluster whose finished and running jobs alternate id by id: issue 49's v0.8.0 shape.

Every other job has ended (COMPLETED, kept in the controller's memory for its
retention) and every other one runs on one node, so the running jobs are spread
over the whole id space and each node holds a few of them. Each node's inventory
shows its running jobs; one node in `stale_every` also still holds a finished job
(a terminal-held finding). `stride` > 1 leaves gaps between the ids (a random gap
of 1 to 2*stride-1 ids after each job, as ids burned by failed submits, array parents
and jobs aged out leave them), so the ids are not dense and the highest lies far
above the job count. The last `phantom` nodes run nothing and hold nothing, yet carry
an allocation (a phantom charge: what `repair` clears).
"""

from __future__ import annotations

import random
from datetime import timedelta

from spurctl.model import Allocation, Device, Holding, Job, JobState, Node, NodeState
from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import (
    CPUS_PER_GPU,
    MEM_PER_GPU_MB,
    NODE_TOTAL,
    SPUR_VERSION,
    job_allocation,
    job_pids,
    utc_time,
)

_ONE_GPU = job_allocation((0,), 1)


def striped(
    nodes: int = 20_000,
    jobs: int = 200_000,
    *,
    stride: int = 1,
    stale_every: int = 20,
    phantom: int = 0,
    seed: int = 0,
) -> Scenario:
    """`jobs` jobs on `nodes` nodes, the first one COMPLETED, the next RUNNING, and so on,
    each running one on one GPU of the next node in turn (see the module)."""
    if nodes <= phantom or jobs < 2 or stride < 1 or phantom < 0:
        raise ValueError("striped() needs a node that is not phantom, two jobs, stride >= 1")
    busy = nodes - phantom
    rng = random.Random(seed)
    width = max(3, len(str(nodes)))
    names = [f"gpu{i:0{width}d}" for i in range(1, nodes + 1)]
    t0 = utc_time("2026-11-20T00:00:00")
    job_list: list[Job] = []
    holdings: dict[str, list[Holding]] = {n: [] for n in names}
    gpus_used = [0] * nodes
    finished: list[Job] = []
    job_id = 0
    for i in range(jobs):
        job_id += 1 if stride == 1 else rng.randrange(1, 2 * stride)
        submit = t0 + timedelta(seconds=job_id // 4)
        name, user = f"train-{job_id % 997}", f"u{job_id % 300 + 1:04d}"
        if i % 2 == 0:
            job = Job(
                job_id,
                JobState.COMPLETED,
                names[(i // 2) % busy],
                name,
                user,
                20_001 + job_id % 300,
                "gpu",
                "research",
                "",
                submit,
                submit + timedelta(seconds=5),
                submit + timedelta(hours=1),
                1,
                1,
                _ONE_GPU,
            )
            finished.append(job)
        else:
            n = (i // 2) % busy
            gpu = gpus_used[n] % 8
            gpus_used[n] += 1
            job = Job(
                job_id,
                JobState.RUNNING,
                names[n],
                name,
                user,
                20_001 + job_id % 300,
                "gpu",
                "research",
                "",
                submit,
                submit + timedelta(seconds=5),
                None,
                1,
                1,
                job_allocation((gpu,), 1),
            )
            holdings[names[n]].append(
                Holding(
                    job_id,
                    CPUS_PER_GPU,
                    MEM_PER_GPU_MB,
                    (gpu,),
                    job_pids(job_id, n, 1),
                    submit + timedelta(seconds=6),
                )
            )
        job_list.append(job)
    for n in range(0, busy, stale_every):
        ended = finished[rng.randrange(len(finished))]
        holdings[names[n]].append(
            Holding(ended.job_id, CPUS_PER_GPU, MEM_PER_GPU_MB, (7,), (), ended.start_time)
        )
    node_list = []
    for n, node in enumerate(names):
        gpus = tuple(range(min(gpus_used[n], 8))) if n < busy else (2, 3)
        alloc = Allocation(
            cpus=len(gpus) * CPUS_PER_GPU,
            memory_mb=len(gpus) * MEM_PER_GPU_MB,
            devices={"gpu": tuple(Device(g, 1) for g in gpus)} if gpus else {},
        )
        state = NodeState.IDLE if not gpus else NodeState.MIXED
        node_list.append(Node(node, state, total=NODE_TOTAL, alloc=alloc))
    return Scenario(
        version=SPUR_VERSION,
        jobs=job_list,
        nodes=node_list,
        holdings=holdings,
        next_job_id=job_id + 1,
        hostname="spurctld-1",
    )
