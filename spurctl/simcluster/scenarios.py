"""Named scenarios: the production incident, a controller state wipe, and a large cluster.

Nodes are MI300X-class: 8 GPUs, 128 CPUs, 1 TiB; a job gets 16 CPUs and
128 GiB per GPU. Times are fixed so every run of a scenario is the same.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import msgspec
from ClusterShell.NodeSet import NodeSet

from spurctl.model import (
    Allocation,
    Device,
    Gpu,
    Holding,
    Job,
    JobState,
    Node,
    NodeState,
    ResourceSet,
)
from spurctl.simcluster.scenario import Scenario, add_allocations, busy_state, node_share

SPUR_VERSION = "0.8.0"
GPUS_PER_NODE = 8
CPUS_PER_GPU = 16
MEM_PER_GPU_MB = 131_072
NODE_TOTAL = ResourceSet(
    cpus=GPUS_PER_NODE * CPUS_PER_GPU,
    memory_mb=GPUS_PER_NODE * MEM_PER_GPU_MB,
    gpus=tuple(Gpu(i, "mi300x", 196_608) for i in range(GPUS_PER_NODE)),
)


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def hostlist(prefix: str, numbers: Iterable[int], width: int) -> str:
    """A compressed Slurm hostlist, e.g. gpu[004-005,009], without ClusterShell's per-call cost."""
    nums = sorted(set(numbers))
    if len(nums) == 1:
        return f"{prefix}{nums[0]:0{width}d}"
    ranges: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        ranges.append(
            f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}"
        )
        if n is not None:
            start = prev = n
    return f"{prefix}[{','.join(ranges)}]"


def _resources(gpus: Sequence[int], num_nodes: int, cpus: int | None = None) -> Allocation:
    """A job's TOTAL allocation: `gpus` (or, for a CPU-only job, `cpus`) on each of its nodes."""
    per_node_cpus = cpus if cpus is not None else len(gpus) * CPUS_PER_GPU
    per_node_mem = per_node_cpus * (MEM_PER_GPU_MB // CPUS_PER_GPU)
    devices = {"gpu": tuple(Device(g, num_nodes) for g in gpus)} if gpus else {}
    return Allocation(
        cpus=per_node_cpus * num_nodes, memory_mb=per_node_mem * num_nodes, devices=devices
    )


def _pids(job_id: int, node: int, ranks: int) -> tuple[int, ...]:
    """A launcher and one worker per rank, at a pid derived from the job and node."""
    base = 20_000 + (job_id * 7_919 + node * 104_729) % 3_000_000
    return tuple(base + i for i in range(ranks + 1))


# -- the hand-written scenarios, as tables ------------------------------------------
#
# Jobs:     id user account partition state nodes gpus cpus submitted started name
# Holdings: node id gpus cpus started live|idle
# nodes and gpus are ranges ("004-005", "0-3", "0,1") or "-" for none; cpus "-" means
# 16 per GPU; times are 2026 UTC, "-" when unset; end times of finished jobs are kept
# beside the table. A RUNNING job with nodes "-" is one whose allocation is not
# committed yet (one node).


def _numbers(token: str) -> list[int]:
    if token == "-":
        return []
    out: list[int] = []
    for part in token.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _when(token: str) -> datetime | None:
    return None if token == "-" else _t(f"2026-{token}")


def _rows(table: str, columns: int) -> list[list[str]]:
    rows = []
    for line in table.strip().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            row = line.split()
            if len(row) != columns:
                raise ValueError(f"scenario table row has {len(row)} columns: {line!r}")
            rows.append(row)
    return rows


def _jobs(
    table: str, users: dict[str, int], reasons: dict[int, str], ended: dict[int, str]
) -> list[Job]:
    jobs = []
    for row in _rows(table, 11):
        job_id, user, account, partition, state, nodes, gpus, cpus = row[:8]
        submitted, started, name = row[8:]
        on, devices = _numbers(nodes), tuple(_numbers(gpus))
        num_nodes = max(len(on), 1)
        jobs.append(
            Job(
                job_id=int(job_id),
                state=JobState[state],
                nodelist=hostlist("gpu", on, 3) if on else "",
                name=name,
                user=user,
                uid=users[user],
                partition=partition,
                account=account,
                state_reason=reasons.get(int(job_id), ""),
                submit_time=_when(submitted),
                start_time=_when(started),
                end_time=_when(ended.get(int(job_id), "-")),
                num_nodes=num_nodes,
                num_tasks=num_nodes * max(len(devices), 1),
                resources=_resources(devices, num_nodes, None if cpus == "-" else int(cpus)),
            )
        )
    return sorted(jobs, key=lambda j: j.job_id)


def _holdings(table: str) -> dict[str, list[Holding]]:
    held: dict[str, list[Holding]] = {}
    for node, job_id, gpus, cpus, started, live in _rows(table, 6):
        devices = tuple(_numbers(gpus))
        share = _resources(devices, 1, None if cpus == "-" else int(cpus))
        held.setdefault(f"gpu{node}", []).append(
            Holding(
                job_id=int(job_id),
                cpus=share.cpus,
                memory_mb=share.memory_mb,
                gpus=devices,
                pids=_pids(int(job_id), int(node), max(len(devices), 1)) if live == "live" else (),
                started_at=_when(started),
            )
        )
    return held


def _nodes(
    count: int,
    jobs: Sequence[Job],
    *,
    out_of_service: dict[int, tuple[NodeState, str]],
    phantom: dict[int, Allocation],
    agent_start: dict[int, str],
    default_agent_start: str,
    partitions: dict[int, tuple[str, ...]],
) -> list[Node]:
    """Nodes allocated what the controller's active jobs put there, plus `phantom`."""
    names = [f"gpu{i:03d}" for i in range(1, count + 1)]
    alloc = {name: Allocation() for name in names}
    for j in jobs:
        if j.state.active and j.nodelist:
            share = node_share(j)
            for name in NodeSet(j.nodelist):
                alloc[name] = add_allocations(alloc[name], share)
    out = []
    for i, name in enumerate(names, 1):
        a = add_allocations(alloc[name], phantom.get(i, Allocation()))
        state, reason = out_of_service.get(i, (NodeState.IDLE, ""))
        node = Node(
            name=name,
            state=state,
            state_reason=reason,
            partitions=partitions.get(i, ("gpu",)),
            total=NODE_TOTAL,
            alloc=a,
            boot_time=_t("2026-11-18T07:30:00"),
            last_busy=None if a.empty else _t("2026-12-02T09:58:00"),
            agent_start_time=_when(agent_start.get(i, default_agent_start)),
            labels={"rack": f"r{(i - 1) // 8 + 1:02d}", "gpu": "mi300x"},
        )
        out.append(dataclasses.replace(node, state=busy_state(node, a)))
    return out


# -- the production incident -------------------------------------------------------

_INCIDENT_USERS = {
    "alice": 1001,
    "bob": 1002,
    "carol": 1003,
    "dmitri": 1004,
    "erin": 1005,
    "frank": 1006,
    "grace": 1007,
    "henry": 1008,
}

# The requeued jobs (4711-4720) show their NEW run: started after the 22:14 restart.
_INCIDENT_JOBS = """
4690 frank  llm      gpu   RUNNING   001-002 0-7 -  11-30T08:12:40 11-30T08:15:02 gpt-13b-pretrain
4702 henry  infra    gpu   COMPLETED 012     0-3 -  12-01T23:02:19 12-01T23:02:30 nccl-bench
4711 alice  llm      gpu   RUNNING   015     0-7 -  12-01T13:40:12 12-01T22:16:05 llama-70b-sft
4712 bob    llm      gpu   RUNNING   016-017 0-7 -  12-01T16:21:55 12-01T22:16:31 moe-pretrain
4715 carol  research gpu   RUNNING   018     0-3 -  12-01T19:05:00 12-01T22:17:12 eval-sweep-a
4716 carol  research gpu   RUNNING   018     4-7 -  12-01T19:05:01 12-01T22:17:12 eval-sweep-b
4719 dmitri llm      gpu   RUNNING   019     0-7 -  12-01T20:44:31 12-01T22:18:40 rlhf-ppo
4720 erin   research gpu   RUNNING   020     0-7 -  12-01T21:10:07 12-01T22:19:03 vit-finetune
4950 alice  research gpu   RUNNING   012     4-7 -  12-02T01:15:00 12-02T01:15:08 tokenize-shard
4960 grace  research gpu   RUNNING   021     0-7 -  12-02T02:40:00 12-02T02:41:26 diffusion-xl
4980 dmitri llm      gpu   COMPLETED 022     4-7 -  12-02T03:00:00 12-02T03:00:05 rm-eval
5001 bob    llm      gpu   RUNNING   022     0-3 -  12-02T04:05:10 12-02T04:05:16 moe-ablation-3
5040 frank  llm      gpu   RUNNING   023     -   32 12-02T05:00:00 12-02T05:00:03 data-dedup
5077 henry  infra    debug SUSPENDED 024     4-7 -  12-02T06:30:00 12-02T06:30:05 protein-fold
5090 erin   research gpu   FAILED    020     0   -  12-02T08:00:00 12-02T08:00:04 vit-ft-1
5100 frank  llm      gpu   CANCELLED 023     -   4  12-02T08:40:00 12-02T08:40:02 dedup-old
5105 alice  research gpu   TIMEOUT   022     4,5 -  12-02T08:50:00 12-02T08:50:09 q-eval
5113 alice  llm      gpu   PENDING   -       0-7 -  12-02T07:12:00 -              llama-70b-dpo
5114 bob    llm      gpu   PENDING   -       0-7 -  12-02T09:10:00 -              moe-ablation-4
5118 grace  research gpu   PENDING   -       0,1 -  12-02T09:59:41 -              sd-eval
5119 erin   research gpu   RUNNING   -       0-7 -  12-02T09:59:30 12-02T09:59:58 vit-finetune-2
5120 carol  research gpu   PENDING   -       0-3 -  12-02T09:59:59 -              eval-sweep-c
"""
_INCIDENT_ENDED = {
    4702: "12-01T23:40:51",
    4980: "12-02T03:48:12",
    5090: "12-02T08:00:31",
    5100: "12-02T08:59:10",
    5105: "12-02T09:50:09",
}
_INCIDENT_REASONS = {
    5077: "suspended by admin",
    5090: "NonZeroExitCode",
    5105: "TimeLimit",
    5113: "launch failed on gpu006: controller-allocated GPUs unavailable on this node",
    5114: "Priority",
    5120: "Resources",
}
# Stale runs on gpu003-008 started before the restart and are still alive.
_INCIDENT_HOLDINGS = """
001 4690 0-7 -  11-30T08:15:04 live
002 4690 0-7 -  11-30T08:15:04 live
003 4711 0-7 -  12-01T14:02:11 live
004 4712 0-7 -  12-01T16:30:40 live
005 4712 0-7 -  12-01T16:30:40 live
006 4715 0-3 -  12-01T19:05:09 live
006 4716 4-7 -  12-01T19:05:10 live
007 4719 0-7 -  12-01T20:47:02 live
008 4720 0-7 -  12-01T21:10:15 live
010 5118 0,1 -  12-02T09:59:50 idle
011 5119 0-7 -  12-02T09:59:58 live
012 4702 0-3 -  12-01T23:02:31 idle
012 4950 4-7 -  12-02T01:15:09 live
013 4388 0-3 -  11-29T11:20:44 idle
014 5187 0-7 -  12-02T08:31:17 live
015 4711 0-7 -  12-01T22:16:06 live
016 4712 0-7 -  12-01T22:16:32 live
017 4712 0-7 -  12-01T22:16:32 live
018 4715 0-3 -  12-01T22:17:13 live
018 4716 4-7 -  12-01T22:17:13 live
019 4719 0-7 -  12-01T22:18:41 live
020 4720 0-7 -  12-01T22:19:04 live
021 4960 0-7 -  12-02T02:41:27 live
022 5001 0-3 -  12-02T04:05:17 live
023 5040 -   32 12-02T05:00:04 live
024 5077 4-7 -  12-02T06:30:06 live
"""


def incident() -> Scenario:
    """The incident of PR #623: a controller restart marked healthy nodes DOWN.

    At 22:14 a new leader marked gpu003-gpu008 DOWN on stale heartbeats and
    requeued their jobs, which now RUN on gpu015-gpu020; the old nodes never
    died and still run them (live pids, GPUs held). gpu003-005 are still DOWN;
    an operator resumed gpu006-008, which now reject every GPU dispatch (5113).
    Around them, one of each other case a reconciler must tell apart:

    - gpu001-002: 4690, a healthy two-node job.
    - gpu009: a phantom allocation (alloc_resources set, no job lists the node).
    - gpu010: 5118 PENDING and reserved here: may be mid-dispatch.
    - gpu011: 5119 RUNNING with an empty nodelist: state committed, allocation not yet.
    - gpu012: 4702 COMPLETED but still reserved, next to a healthy 4950.
    - gpu013: 4388, aged out of the job map, below the watermark.
    - gpu014: 5187, at/above next_job_id 5121: from another controller.
    - gpu021: healthy 4960, but its agent reports gpu021.cluster.local.
    - gpu024: 5077 SUSPENDED (active, healthy).
    """
    jobs = _jobs(_INCIDENT_JOBS, _INCIDENT_USERS, _INCIDENT_REASONS, _INCIDENT_ENDED)
    down = (NodeState.DOWN, "Not responding")
    return Scenario(
        version=SPUR_VERSION,
        jobs=jobs,
        nodes=_nodes(
            24,
            jobs,
            out_of_service={3: down, 4: down, 5: down},
            phantom={9: _resources((0, 1, 2, 3), 1)},
            agent_start={},
            default_agent_start="11-18T07:31:10",
            partitions={i: ("gpu", "debug") for i in range(21, 25)},
        ),
        holdings=_holdings(_INCIDENT_HOLDINGS),
        inventory_names={"gpu021": "gpu021.cluster.local"},
        next_job_id=5121,
        users=dict(_INCIDENT_USERS),
        hostname="spurctld-1",
    )


# -- a controller state wipe ---------------------------------------------------------

# Since the 06:00 wipe: ids 1-40. 12 completed and 35 is pending, 23 runs on gpu010;
# all three ids are also held by pre-wipe runs on gpu003-005.
_POST_WIPE_JOBS = """
1  alice  research gpu RUNNING   009     0-3 - 12-02T06:31:10 12-02T06:31:30 smoke-test
12 alice  research gpu COMPLETED 013     0-7 - 12-02T07:30:05 12-02T07:30:20 nccl-check
23 dmitri research gpu RUNNING   010     0-7 - 12-02T08:25:40 12-02T08:25:51 train-small
31 dmitri research gpu RUNNING   011-012 0-7 - 12-02T09:05:12 12-02T09:05:30 train-multi
35 dmitri research gpu PENDING   -       0-3 - 12-02T09:25:03 -              eval
36 alice  research gpu RUNNING   014     0-3 - 12-02T09:30:44 12-02T09:30:51 preprocess
38 carol  research gpu RUNNING   013     0-7 - 12-02T09:40:09 12-02T09:40:15 train-small
39 dmitri research gpu RUNNING   009     4-7 - 12-02T09:45:30 12-02T09:45:41 eval
40 alice  research gpu PENDING   -       0-3 - 12-02T09:50:17 -              train-small
"""
_POST_WIPE_ENDED = {12: "12-02T07:42:00"}
# gpu001-008 still run what the old controller started; gpu009-016 were recycled.
_POST_WIPE_HOLDINGS = """
001 44 0-7 - 12-01T21:30:00 live
002 57 0-3 - 12-02T01:12:45 live
002 63 4-7 - 12-02T03:55:10 live
003 23 0-7 - 12-01T18:59:30 live
004 12 0-7 - 12-01T16:04:00 live
005 35 0-3 - 12-01T20:15:20 live
006 61 0-7 - 12-02T02:20:00 live
007 61 0-7 - 12-02T02:20:00 live
009 1  0-3 - 12-02T06:31:31 live
009 39 4-7 - 12-02T09:45:42 live
010 23 0-7 - 12-02T08:25:52 live
011 31 0-7 - 12-02T09:05:31 live
012 31 0-7 - 12-02T09:05:31 live
013 38 0-7 - 12-02T09:40:16 live
014 36 0-3 - 12-02T09:30:52 live
"""
_POST_WIPE_USERS = {"alice": 1001, "bob": 1002, "carol": 1003, "dmitri": 1004}


def _post_wipe_short_jobs() -> tuple[str, dict[int, str]]:
    """The other ids issued since the wipe: short jobs that finished on the recycled nodes."""
    rows, ended = [], {}
    users = list(_POST_WIPE_USERS)
    for job_id in range(2, 41):
        if job_id in (12, 23, 31, 35, 36, 38, 39, 40):
            continue
        submit = _t("2026-12-02T06:30:00") + timedelta(minutes=5 * job_id, seconds=job_id % 50)
        start = submit + timedelta(seconds=8)
        end = start + timedelta(minutes=3 + job_id % 11)
        state = "FAILED" if job_id % 9 == 0 else "COMPLETED"
        submitted, started, ended[job_id] = (
            t.strftime("%m-%dT%H:%M:%S") for t in (submit, start, end)
        )
        rows.append(
            f"{job_id} {users[job_id % 4]} research gpu {state} {9 + job_id % 8:03d} 0,1 - "
            f"{submitted} {started} hello-gpu"
        )
    return "\n".join(rows), ended


def post_wipe() -> Scenario:
    """Controller state wiped at 06:00 and submissions resumed before the agents were recycled.

    next_job_id restarted at 1 and is now 41. gpu001-008 still hold pre-wipe
    runs (their agents started before the wipe): 44, 57, 61 (two nodes) and 63
    are above the watermark and will be cancelled once the counter reaches
    them; 23 was reissued to a new run on gpu010, 12 to a run that has
    completed, 35 to one still pending. Each reissued id's held run started
    before the new job was submitted. gpu009-016 were recycled after the wipe.
    """
    short_jobs, short_ended = _post_wipe_short_jobs()
    jobs = _jobs(
        _POST_WIPE_JOBS + short_jobs,
        _POST_WIPE_USERS,
        {35: "Resources", 40: "Priority"},
        {**_POST_WIPE_ENDED, **short_ended},
    )
    nodes = _nodes(
        16,
        jobs,
        out_of_service={},
        phantom={},
        agent_start={i: f"12-02T06:{10 + i:02d}:00" for i in range(9, 17)},
        default_agent_start="11-25T12:00:00",
        partitions={},
    )
    return Scenario(
        version=SPUR_VERSION,
        jobs=jobs,
        nodes=nodes,
        holdings=_holdings(_POST_WIPE_HOLDINGS),
        next_job_id=41,
        users=dict(_POST_WIPE_USERS),
        hostname="spurctld-1",
        # Each node's spurd, as /proc shows it, started when the node registered (no
        # restart since); tests that make slurmd_start_time lie change the node, not this.
        agent_started_at={n.name: n.agent_start_time for n in nodes if n.agent_start_time},
    )


# -- a large cluster, for benchmarks -------------------------------------------------

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

    t0 = _t("2026-11-02T00:00:00").timestamp()
    span = 30 * 86_400 / (jobs + aged)
    users = {f"u{n:04d}": 20_000 + n for n in range(1, 301)}
    user_names = list(users)
    alloc_cache: dict[tuple[tuple[int, ...], int], Allocation] = {}

    def resources(gpus: tuple[int, ...], k: int) -> Allocation:
        got = alloc_cache.get((gpus, k))
        if got is None:
            got = alloc_cache[(gpus, k)] = _resources(gpus, k)
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
            nodelist = (
                names[node_idx[0]]
                if k == 1
                else f"gpu[{node_idx[0] + 1:0{width}d}-{node_idx[-1] + 1:0{width}d}]"
            )
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
                        _pids(job_id, n, len(gpus)),
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
                    _pids(j.job_id, stale, len(gpus)),
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
                _pids(next_job_id + k, node, 8),
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
    boot = _t("2026-10-28T06:00:00")
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
