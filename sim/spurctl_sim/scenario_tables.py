"""The hand-written scenarios as tables: one row per job or per holding, read into the
model's Jobs and Holdings, and the nodes those jobs charge (incident_scenario.py,
post_wipe_scenario.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from spurctl import spur_hostlist
from spurctl.model import Allocation, Holding, Job, JobState, Node, NodeState
from spurctl_sim.scenario import add_allocations, busy_state, node_share
from spurctl_sim.scenario_parts import (
    NODE_TOTAL,
    hostlist,
    job_allocation,
    job_pids,
    utc_time,
)

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
    return None if token == "-" else utc_time(f"2026-{token}")


def _rows(table: str, columns: int) -> list[list[str]]:
    rows = []
    for line in table.strip().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            row = line.split()
            if len(row) != columns:
                raise ValueError(f"scenario table row has {len(row)} columns: {line!r}")
            rows.append(row)
    return rows


def jobs_from_table(
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
                resources=job_allocation(devices, num_nodes, None if cpus == "-" else int(cpus)),
            )
        )
    return sorted(jobs, key=lambda j: j.job_id)


def holdings_from_table(table: str) -> dict[str, list[Holding]]:
    held: dict[str, list[Holding]] = {}
    for node, job_id, gpus, cpus, started, live in _rows(table, 6):
        devices = tuple(_numbers(gpus))
        share = job_allocation(devices, 1, None if cpus == "-" else int(cpus))
        held.setdefault(f"gpu{node}", []).append(
            Holding(
                job_id=int(job_id),
                cpus=share.cpus,
                memory_mb=share.memory_mb,
                gpus=devices,
                pids=job_pids(int(job_id), int(node), max(len(devices), 1))
                if live == "live"
                else (),
                started_at=_when(started),
            )
        )
    return held


def nodes_for_jobs(
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
            for name in spur_hostlist.expand(j.nodelist):
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
            boot_time=utc_time("2026-11-18T07:30:00"),
            last_busy=None if a.empty else utc_time("2026-12-02T09:58:00"),
            agent_start_time=_when(agent_start.get(i, default_agent_start)),
            labels={"rack": f"r{(i - 1) // 8 + 1:02d}", "gpu": "mi300x"},
        )
        out.append(dataclasses.replace(node, state=busy_state(node, a)))
    return out
