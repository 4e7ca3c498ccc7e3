"""A large busy cluster, for benchmarks and scale tests: tens of thousands of nodes and
hundreds of thousands of jobs, a seeded few of every kind of discrepancy among them.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import msgspec

from spurctl.model import Allocation, Device, Holding, Job, JobState, Node, NodeState
from spurctl.spur_hostlist import compress
from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import (
    CPUS_PER_GPU,
    GPUS_PER_NODE,
    MEM_PER_GPU_MB,
    NODE_TOTAL,
    SPUR_VERSION,
    job_allocation,
    job_pids,
    utc_time,
)

# GPU slices that fill a node with n jobs (n = 0..8); one holding per slice.
_FILLS: dict[int, tuple[tuple[int, ...], ...]] = {
    0: (),
    1: ((0, 1, 2, 3, 4, 5, 6, 7),),
    2: ((0, 1, 2, 3), (4, 5, 6, 7)),
    3: ((0, 1, 2, 3), (4, 5), (6, 7)),
    4: ((0, 1), (2, 3), (4, 5), (6, 7)),
    5: ((0, 1), (2, 3), (4, 5), (6,), (7,)),
    6: ((0, 1), (2, 3), (4,), (5,), (6,), (7,)),
    7: ((0, 1), (2,), (3,), (4,), (5,), (6,), (7,)),
    8: tuple((g,) for g in range(8)),
}
_TERMINAL_MIX = (
    (JobState.COMPLETED, 75),
    (JobState.FAILED, 10),
    (JobState.CANCELLED, 8),
    (JobState.TIMEOUT, 4),
    (JobState.NODE_FAIL, 1),
    (JobState.OUT_OF_MEMORY, 1),
    (JobState.DEADLINE, 1),
)
_JOB_NAMES = ("pretrain", "sft", "eval", "rlhf", "tokenize", "bench", "infer", "sweep")


def large(nodes: int = 20_000, jobs: int = 200_000, held: int = 100_000, seed: int = 0) -> Scenario:
    """A busy cluster of `nodes` nodes, `jobs` tracked jobs and about `held` holdings.

    Ids below the tracked range were issued and aged out; running jobs fill
    nodes with 1-8 GPU slices or span 2-16 whole nodes. Around 0.2% of the
    holdings per kind are discrepancies: terminal jobs still held, stale runs of
    jobs now active elsewhere, aged-out ids, ids above next_job_id, pending jobs
    reserved on a node, running jobs with no nodelist yet, running jobs a node
    lost, phantom allocations and host names that differ in case.
    """
    if nodes < 1 or jobs < 1 or held < 0:
        raise ValueError("large() needs at least one node and one job")
    rng = random.Random(seed)
    width = max(3, len(str(nodes)))
    names = [f"gpu{i:0{width}d}" for i in range(1, nodes + 1)]
    aged = max(jobs // 10, 1)
    first_id = aged + 1
    next_job_id = first_id + jobs + 3  # the last few ids were burned by failed submits
    a = max(held // 500, 1)  # discrepancies per kind

    # Place running work: each slice is a job on one node, each span a job on k whole nodes.
    max_running = int(jobs * 0.6)
    target = max(held - 5 * a - a // 4 + a, 0)
    placements: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # (node indexes, gpus)
    i = placed = 0
    while i < nodes and len(placements) < max_running:
        want = (target - placed) / (nodes - i)
        if want <= 0:
            break
        k = rng.choice((2, 2, 4, 4, 8, 16))
        if rng.random() < 0.02 and i + k <= nodes:
            placements.append((tuple(range(i, i + k)), _FILLS[1][0]))
            placed += k
            i += k
            continue
        if rng.random() < 0.05:  # idle, drained or down
            i += 1
            continue
        whole = int(want)
        count = min(whole + (rng.random() < want - whole), 8)
        fill = _FILLS[count]
        if 0 < count < 8 and rng.random() < 0.2:  # a partly used node
            fill = tuple((g,) for g in range(count)) if count > 1 else ((0, 1, 2, 3),)
        for gpus in fill[: max_running - len(placements)]:
            placements.append(((i,), gpus))
            placed += 1
        i += 1

    # States by id: old ids mostly finished, new ids mostly pending, blurred by noise.
    n_running = len(placements)
    n_rest = jobs - n_running
    n_pending = n_rest * 15 // 100
    n_parked = n_rest // 100  # PREEMPTED / REQUEUED
    n_terminal = n_rest - n_pending - n_parked
    kinds = ["T"] * n_terminal + ["R"] * n_running + ["Q"] * n_parked + ["P"] * n_pending
    noise = jobs * 0.15
    order = sorted(range(jobs), key=lambda p: p + rng.random() * noise)
    terminal_states = [s for s, w in _TERMINAL_MIX for _ in range(w)]

    t0 = utc_time("2026-11-02T00:00:00").timestamp()
    span = 30 * 86_400 / (jobs + aged)
    users = {f"u{n:04d}": 20_000 + n for n in range(1, 301)}
    user_names = list(users)
    alloc_cache: dict[tuple[tuple[int, ...], int], Allocation] = {}

    def resources(gpus: tuple[int, ...], k: int) -> Allocation:
        got = alloc_cache.get((gpus, k))
        if got is None:
            got = alloc_cache[(gpus, k)] = job_allocation(gpus, k)
        return got

    def when(ts: float) -> datetime:
        return datetime.fromtimestamp(int(ts), UTC)

    job_list: list[Job] = []
    holdings: dict[str, list[Holding]] = {}
    node_gpus: list[list[int]] = [[] for _ in range(nodes)]
    running_single: list[int] = []  # index into job_list
    terminal_idx: list[int] = []
    pending_idx: list[int] = []
    run_iter = iter(placements)
    for pos in range(jobs):
        kind = kinds[order[pos]]
        job_id = first_id + pos
        submit = t0 + (job_id - 1) * span
        start = submit + rng.randrange(5, 3_600)
        user = user_names[job_id % len(user_names)]
        partition = "gpu" if job_id % 20 else ("long" if job_id % 40 else "debug")
        name = f"{_JOB_NAMES[job_id % len(_JOB_NAMES)]}-{job_id % 997}"
        if kind == "R":
            node_idx, gpus = next(run_iter)
            k = len(node_idx)
            nodelist = names[node_idx[0]] if k == 1 else compress(names[n] for n in node_idx)
            state = JobState.RUNNING
            roll = rng.random()
            if roll < 0.01:
                state = JobState.SUSPENDED
            elif roll < 0.02:
                state = JobState.COMPLETING
            job = Job(
                job_id,
                state,
                nodelist,
                name,
                user,
                users[user],
                partition,
                "research",
                "",
                when(submit),
                when(start),
                None,
                k,
                k * max(len(gpus), 1),
                resources(gpus, k),
            )
            for n in node_idx:
                node_gpus[n].extend(gpus)
                holdings.setdefault(names[n], []).append(
                    Holding(
                        job_id,
                        len(gpus) * CPUS_PER_GPU,
                        len(gpus) * MEM_PER_GPU_MB,
                        gpus,
                        job_pids(job_id, n, len(gpus)),
                        when(start + 1),
                    )
                )
            if k == 1:
                running_single.append(len(job_list))
        elif kind == "T":
            n = rng.randrange(nodes)
            gpus = _FILLS[rng.choice((1, 2, 4, 8))][0]
            end = start + rng.randrange(60, 86_400)
            state = terminal_states[rng.randrange(len(terminal_states))]
            job = Job(
                job_id,
                state,
                names[n],
                name,
                user,
                users[user],
                partition,
                "research",
                "",
                when(submit),
                when(start),
                when(end),
                1,
                len(gpus),
                resources(gpus, 1),
            )
            terminal_idx.append(len(job_list))
        else:
            state = JobState.PENDING
            reason = "Priority" if job_id % 3 else "Resources"
            if kind == "Q":
                state = JobState.PREEMPTED if job_id % 2 else JobState.REQUEUED
                reason = "preempted" if job_id % 2 else "requeued after node failure"
            gpus = _FILLS[rng.choice((1, 2, 4))][0]
            job = Job(
                job_id,
                state,
                "",
                name,
                user,
                users[user],
                partition,
                "research",
                reason,
                when(submit),
                None,
                None,
                1,
                len(gpus),
                resources(gpus, 1),
            )
            if kind == "P":
                pending_idx.append(len(job_list))
        job_list.append(job)

    def hold_extra(node: int, h: Holding) -> None:
        holdings.setdefault(names[node], []).append(h)

    # Discrepancies, each kind on distinct jobs.
    for idx in rng.sample(terminal_idx, min(a, len(terminal_idx))):
        j = job_list[idx]
        node = int(j.nodelist[3:]) - 1
        hold_extra(
            node,
            Holding(
                j.job_id,
                j.resources.cpus,
                j.resources.memory_mb,
                tuple(d.device_id for d in j.resources.devices.get("gpu", ())),
                (),
                j.start_time,
            ),
        )
    picks = rng.sample(running_single, min(3 * a, len(running_single)))
    elsewhere, mid_commit, lost = picks[:a], picks[a : 2 * a], picks[2 * a :]
    for idx in elsewhere:
        j = job_list[idx]
        home = int(j.nodelist[3:]) - 1
        stale = (home + 1 + rng.randrange(nodes - 1)) % nodes if nodes > 1 else home
        if stale != home:
            gpus = tuple(d.device_id for d in j.resources.devices.get("gpu", ()))
            hold_extra(
                stale,
                Holding(
                    j.job_id,
                    j.resources.cpus,
                    j.resources.memory_mb,
                    gpus,
                    job_pids(j.job_id, stale, len(gpus)),
                    (j.submit_time or when(t0)) + timedelta(seconds=2),
                ),
            )
    for idx in mid_commit:
        j = job_list[idx]
        node_gpus[int(j.nodelist[3:]) - 1][:] = [
            g for g in node_gpus[int(j.nodelist[3:]) - 1] if g not in _gpu_ids(j)
        ]
        job_list[idx] = msgspec.structs.replace(j, nodelist="")
    for idx in lost:
        j = job_list[idx]
        node_held = holdings[j.nodelist]
        node_held[:] = [h for h in node_held if h.job_id != j.job_id]
    for job_id in rng.sample(range(1, first_id), min(a, first_id - 1)):
        hold_extra(
            rng.randrange(nodes),
            Holding(job_id, 32, 262_144, (0, 1), (), when(t0 - rng.randrange(86_400))),
        )
    for k in range(a // 4 + 1):
        node = rng.randrange(nodes)
        hold_extra(
            node,
            Holding(
                next_job_id + 7 + k * 13,
                128,
                1_048_576,
                _FILLS[1][0],
                job_pids(next_job_id + k, node, 8),
                when(t0 + 29 * 86_400),
            ),
        )
    for idx in rng.sample(pending_idx, min(a, len(pending_idx))):
        j = job_list[idx]
        hold_extra(
            rng.randrange(nodes),
            Holding(j.job_id, j.resources.cpus, j.resources.memory_mb, _gpu_ids(j), (), None),
        )

    idle = [n for n in range(nodes) if not node_gpus[n]]
    phantom = set(rng.sample(idle, min(a // 2 + 1, len(idle))))
    out_of_service = set(rng.sample(sorted(set(idle) - phantom), min(nodes // 200, len(idle) // 2)))
    node_alloc_cache: dict[tuple[int, ...], Allocation] = {}
    node_list: list[Node] = []
    boot = utc_time("2026-10-28T06:00:00")
    for n, name in enumerate(names):
        used = tuple(sorted(node_gpus[n])) if n not in phantom else (2, 3)
        alloc = node_alloc_cache.get(used)
        if alloc is None:
            alloc = node_alloc_cache[used] = Allocation(
                cpus=len(used) * CPUS_PER_GPU,
                memory_mb=len(used) * MEM_PER_GPU_MB,
                devices={"gpu": tuple(Device(g, 1) for g in used)} if used else {},
            )
        if n in out_of_service:
            node_state, reason = (
                (NodeState.DRAIN, "hw: xgmi link errors")
                if n % 2
                else (NodeState.DOWN, "Not responding")
            )
        else:
            node_state = (
                NodeState.IDLE
                if not used
                else (NodeState.ALLOCATED if len(used) >= GPUS_PER_NODE else NodeState.MIXED)
            )
            reason = ""
        node_list.append(
            Node(
                name,
                node_state,
                reason,
                ("gpu", "long") if n % 10 else ("gpu", "debug"),
                NODE_TOTAL,
                alloc,
                boot,
                None,
                boot,
                {"rack": f"r{n // 32 + 1:04d}"},
            )
        )
    mismatched = rng.sample(range(nodes), min(a // 4 + 1, nodes))
    return Scenario(
        version=SPUR_VERSION,
        jobs=job_list,
        nodes=node_list,
        holdings=holdings,
        inventory_names={names[n]: names[n].upper() for n in mismatched},
        next_job_id=next_job_id,
        users=users,
        hostname="spurctld-1",
    )


def _gpu_ids(job: Job) -> tuple[int, ...]:
    return tuple(d.device_id for d in job.resources.devices.get("gpu", ()))
