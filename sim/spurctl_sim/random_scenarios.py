"""Scenarios from generated data, for property tests: plain specs in, a Scenario out.

A `ClusterSpec` is everything a generator chooses (jobs with their nodelist text
verbatim, spaces and case included; what each node holds; how the agent map,
the credential and spur.conf are written; how the controller shows other users'
jobs) as plain data with a readable `describe()`, so a shrunk failing case
reads as a cluster. `scenario_of` turns it into a Scenario, `agent_map_of` into
the map an operator would have written, and `spur_nodes` is Spur's own reading
of a nodelist (each comma-separated part trimmed, then exact names): the ground
truth a test judges spurctl by, written without spurctl's hostlist module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from spurctl import spur_hostlist
from spurctl.model import Allocation, Device, Holding, Job, JobState, Node, NodeState
from spurctl_sim.controller_service import Visibility
from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import NODE_TOTAL, SPUR_VERSION

# When a holding's run began, relative to its job: the job's current run, an
# earlier attempt of it (a stale copy after a requeue), before the job was even
# submitted (a pre-wipe run of an id the controller issued again), or unknown.
Started = Literal["current", "earlier", "pre_wipe", "none"]
USERS = {"alice": 1001, "bob": 1002}
# Hours before "now" (the moment the scenario is built).
SUBMITTED_H, EARLIER_H, STARTED_H, PRE_WIPE_H = 10, 8, 5, 30


@dataclass(frozen=True, slots=True)
class JobSpec:
    job_id: int
    state: JobState
    user: str
    nodelist: str  # verbatim, as the controller stores it

    def __str__(self) -> str:
        return f"job {self.job_id} {self.state.name} user={self.user} nodelist={self.nodelist!r}"


@dataclass(frozen=True, slots=True)
class HoldSpec:
    node: str
    job_id: int
    live: bool
    started: Started

    def __str__(self) -> str:
        return (
            f"{self.node} holds {self.job_id} "
            f"({'live' if self.live else 'idle'}, started {self.started})"
        )


@dataclass(frozen=True, slots=True)
class MapEntry:
    """`node`'s line in the agent map: whose agent it names, and how the host is written."""

    node: str
    agent_of: str
    host: str = "127.0.0.1"

    def __str__(self) -> str:
        where = "its own agent" if self.agent_of == self.node else f"{self.agent_of}'s agent"
        return f"{self.node} -> {where} via {self.host}"


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    nodes: tuple[str, ...]
    jobs: tuple[JobSpec, ...]
    holds: tuple[HoldSpec, ...]
    agent_map: tuple[MapEntry, ...]  # a node without an entry is left out of the map
    credential: str  # "none", or the token's subject ("root", "ops" admin, "alice" not)
    visibility: Visibility  # what the controller does
    conf: Literal["absent", "no_key", "stated"]  # the spur.conf spurctl is given
    inventory_names: tuple[tuple[str, str], ...] = ()
    next_job_id: int = 0
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        lines = [
            f"nodes: {','.join(self.nodes)}",
            f"credential: {self.credential}; controller job_info_visibility={self.visibility}; "
            f"spur.conf given to spurctl: {self.conf}",
            *(f"  {j}" for j in self.jobs),
            *(f"  {h}" for h in self.holds),
            "  agent map: " + "; ".join(str(e) for e in self.agent_map),
        ]
        if self.inventory_names:
            lines.append(
                "  inventories name: " + ", ".join(f"{n} as {r!r}" for n, r in self.inventory_names)
            )
        if self.next_job_id:
            lines.append(f"  next_job_id: {self.next_job_id}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def spur_nodes(nodelist: str) -> frozenset[str]:
    """The nodes Spur reads in a nodelist (spur-core `expand`: split at top-level commas,
    each part trimmed, every range zero-filled to its first token's width); a part Spur
    cannot read counts as the node its text names, so that no reading is narrower."""
    names: set[str] = set()
    for part in spur_hostlist.parts(nodelist):
        try:
            names.update(spur_hostlist.expand(part))
        except spur_hostlist.BadNodelist:
            names.add(part)
    return frozenset(names)


def legitimately_on(job: Job | None, node: str) -> bool:
    """Whether `job` legitimately runs on `node` as Spur sees it: active and listed there."""
    return job is not None and job.state.active and node in spur_nodes(job.nodelist)


def _started_at(started: Started, now: datetime) -> datetime | None:
    hours = {"current": STARTED_H, "earlier": EARLIER_H, "pre_wipe": PRE_WIPE_H}
    return None if started == "none" else now - timedelta(hours=hours[started])


def scenario_of(spec: ClusterSpec, now: datetime) -> Scenario:
    """The Scenario a spec describes; times are hours before `now`."""
    jobs = []
    for j in spec.jobs:
        width = max(len(spur_nodes(j.nodelist)), 1)
        ran = j.state.active or j.state.terminal
        jobs.append(
            Job(
                job_id=j.job_id,
                state=j.state,
                nodelist=j.nodelist,
                name=f"train-{j.job_id}",
                user=j.user,
                uid=USERS.get(j.user, 0),
                partition="gpu",
                account="ml",
                submit_time=now - timedelta(hours=SUBMITTED_H),
                start_time=now - timedelta(hours=STARTED_H) if ran else None,
                end_time=now - timedelta(hours=1) if j.state.terminal else None,
                num_nodes=width,
                num_tasks=width,
                resources=Allocation(
                    cpus=16 * width, memory_mb=131_072 * width, devices={"gpu": (Device(0, width),)}
                ),
            )
        )
    holdings: dict[str, list[Holding]] = {}
    for h in spec.holds:
        holdings.setdefault(h.node, []).append(
            Holding(
                job_id=h.job_id,
                cpus=16,
                memory_mb=131_072,
                gpus=(0,),
                pids=(40_000 + h.job_id % 10_000,) if h.live else (),
                started_at=_started_at(h.started, now),
            )
        )
    return Scenario(
        version=SPUR_VERSION,
        jobs=jobs,
        nodes=[
            Node(name=n, state=NodeState.IDLE, partitions=("gpu",), total=NODE_TOTAL)
            for n in spec.nodes
        ],
        holdings=holdings,
        inventory_names=dict(spec.inventory_names),
        next_job_id=spec.next_job_id,
        users=dict(USERS),
    )


def agent_map_of(spec: ClusterSpec, serving: dict[str, str]) -> dict[str, str]:
    """The agent map the spec's operator wrote, from the addresses agents really serve on."""
    out = {}
    for e in spec.agent_map:
        _, _, port = serving[e.agent_of].rpartition(":")
        out[e.node] = f"{e.host}:{port}"
    return out


def spur_conf_text(spec: ClusterSpec) -> str | None:
    """The spur.conf spurctl is given: none, one without the visibility key, or the truth."""
    if spec.conf == "absent":
        return None
    lines = ["[controller]", 'hosts = ["127.0.0.1"]']
    if spec.conf == "stated":
        lines.append(f'job_info_visibility = "{spec.visibility}"')
    return "\n".join(lines) + "\n"


def hold_specs(holds: Iterable[HoldSpec]) -> tuple[HoldSpec, ...]:
    """One holding per (node, job id), the first given winning; in node order."""
    seen: dict[tuple[str, int], HoldSpec] = {}
    for h in holds:
        seen.setdefault((h.node, h.job_id), h)
    return tuple(sorted(seen.values(), key=lambda h: (h.node, h.job_id)))
