"""The repair window's cluster: the incident with spur.conf partitions taken from labels
(`reserved` for nodes labelled pool=reserved, `batch` the default) and job 5121 PENDING in
`batch`, waiting for any node: the scheduler places it on a node the moment one registers
afresh (spurctl_sim/registration.py). gpu009 is listed in no partition of its own, so its
labels alone decide where it belongs."""

from __future__ import annotations

import dataclasses

from spurctl.model import Job, JobState
from spurctl_sim import incident
from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import job_allocation, utc_time

WAITING = 5121
WAITING_SHARE = "32 CPUs, 262144 MB of memory, GPUs 0-1"


def window() -> Scenario:
    s = incident()
    s.partition_selectors = {"reserved": {"pool": "reserved"}}
    s.default_partition = "batch"
    s.nodes = [dataclasses.replace(n, partitions=()) if n.name == "gpu009" else n for n in s.nodes]
    s.jobs.append(
        Job(
            job_id=WAITING, state=JobState.PENDING, name="sweep", user="grace", uid=1007,
            partition="batch", account="research", submit_time=utc_time("2026-12-02T10:00:00"),
            num_nodes=1, num_tasks=2, resources=job_allocation((0, 1), 1),
        )
    )  # fmt: skip
    s.next_job_id = WAITING + 1
    s.waiting = [WAITING]
    return s
