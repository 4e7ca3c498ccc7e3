"""What a simulated Spur cluster holds: the controller's jobs and nodes, and what each agent holds.

A scenario is plain data and round-trips through JSON (`spurctl.scenario/v1`)
with the same job, node and holding records as spurctl's other documents.
It also carries what Spur does not expose over RPC: the controller's true
`next_job_id`, and the host name each node's agent reports (which may differ
from the controller's node name).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from spurctl.errors import DocumentError
from spurctl.model import (
    Allocation,
    Device,
    Holding,
    Job,
    JobState,
    Node,
    NodeState,
    format_time,
    parse_time,
)
from spurctl.sources import bounded
from spurctl.sources.documents import (
    INVENTORY_SCHEMA,
    job_from_dict,
    job_to_dict,
    node_from_dict,
    node_to_dict,
)
from spurctl.sources.inventory_document import holding_to_dict, inventory_from_dict

SCENARIO_SCHEMA = "spurctl.scenario/v1"


@dataclass(slots=True)
class Scenario:
    """A cluster at one moment.

    `holdings` is keyed by the controller's node name; `inventory_names` maps a
    node to the host name its agent and inventory report when that differs.
    `target_names` is the SPUR_TARGET_NODE a node's job processes carry where it
    is not the controller's own name for the node (spurd sets it from the launch,
    so by default every process carries the node's name; [] none, two or more:
    they disagree). `agent_started_at` is when each node's current spurd started,
    as /proc shows it (the inventory's `agent`); a node absent there reports no
    agent, as an inventory written before `spurctl node-inventory` recorded it.
    `next_job_id` 0 means max(job id) + 1. `admins` are user names the
    controller treats as admin whatever their token says (accounting admins).
    `check()` validates; SimCluster and the JSON reader call it.
    """

    version: str
    jobs: list[Job]
    nodes: list[Node]
    holdings: dict[str, list[Holding]] = field(default_factory=dict)
    inventory_names: dict[str, str] = field(default_factory=dict)
    next_job_id: int = 0
    users: dict[str, int] = field(default_factory=dict)
    admins: list[str] = field(default_factory=list)
    hostname: str = "spurctld"
    target_names: dict[str, list[str]] = field(default_factory=dict)
    # When each node's current spurd started (the inventory's `agent`); a node absent
    # here reports no agent. A run held since before it is an orphan the agent lost.
    agent_started_at: dict[str, datetime] = field(default_factory=dict)
    # spur.conf's partitions with a label selector (partition -> labels it requires) and
    # its default partition: a node registering afresh, or relabelled, is assigned its
    # partitions from them as spurctld does (spurctl_sim/registration.py). Empty: each
    # node keeps its listed partitions.
    partition_selectors: dict[str, dict[str, str]] = field(default_factory=dict)
    default_partition: str = ""
    # PENDING jobs waiting for any node: the scheduler places each that fits on a node
    # the moment it registers afresh (spurctl_sim/registration.py).
    waiting: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.next_job_id == 0:
            self.next_job_id = max((j.job_id for j in self.jobs), default=0) + 1
        if not self.users:
            self.users = {j.user: j.uid for j in self.jobs if j.user}

    def check(self, where: str = "scenario") -> None:
        """Raise DocumentError when the parts contradict each other."""
        names = Counter(n.name for n in self.nodes)
        dup, times = names.most_common(1)[0] if names else ("", 0)
        if times > 1:
            raise DocumentError(f"{where}: node {dup!r} is listed twice")
        ids = Counter(j.job_id for j in self.jobs)
        dup_id, times = ids.most_common(1)[0] if ids else (0, 0)
        if times > 1:
            raise DocumentError(f"{where}: job {dup_id} is listed twice")
        top = max(ids, default=0)
        if self.next_job_id <= top:
            raise DocumentError(
                f"{where}: next_job_id {self.next_job_id} is not above the highest job id {top}; "
                "the controller never tracks an id it has not issued"
            )
        known = set(names)
        for label, keys in (
            ("holdings", self.holdings),
            ("inventory_names", self.inventory_names),
            ("target_names", self.target_names),
            ("agent_started_at", self.agent_started_at),
        ):
            unknown = sorted(set(keys) - known)
            if unknown:
                raise DocumentError(
                    f"{where}: {label} names node {unknown[0]!r}, which is not in 'nodes'"
                )
        for node, held in self.holdings.items():
            held_ids = [h.job_id for h in held]
            if len(set(held_ids)) != len(held_ids):
                raise DocumentError(f"{where}: node {node!r} holds the same job id twice")
        states = {j.job_id: j.state for j in self.jobs}
        for job_id in self.waiting:
            if states.get(job_id) is not JobState.PENDING:
                raise DocumentError(f"{where}: waiting names job {job_id}, which is not PENDING")


# -- per-node shares of a job's allocation ---------------------------------------


def node_share(job: Job) -> Allocation:
    """What one node of `job` holds: JobInfo.resources is the total over all its nodes."""
    n = max(job.num_nodes, 1)
    return Allocation(
        cpus=job.resources.cpus // n,
        memory_mb=job.resources.memory_mb // n,
        devices={
            name: tuple(Device(d.device_id, max(d.count // n, 1)) for d in devs)
            for name, devs in job.resources.devices.items()
        },
    )


def add_allocations(a: Allocation, b: Allocation, *, sign: int = 1) -> Allocation:
    """a + b (or a - b with sign=-1), never below zero."""
    devices: dict[str, dict[int, int]] = {}
    for name, devs in a.devices.items():
        slot = devices.setdefault(name, {})
        for d in devs:
            slot[d.device_id] = slot.get(d.device_id, 0) + d.count
    for name, devs in b.devices.items():
        slot = devices.setdefault(name, {})
        for d in devs:
            slot[d.device_id] = slot.get(d.device_id, 0) + sign * d.count
    return Allocation(
        cpus=max(a.cpus + sign * b.cpus, 0),
        memory_mb=max(a.memory_mb + sign * b.memory_mb, 0),
        devices={
            name: tuple(Device(i, c) for i, c in sorted(slot.items()) if c > 0)
            for name, slot in devices.items()
            if any(c > 0 for c in slot.values())
        },
    )


def charged(alloc: Allocation) -> bool:
    """Whether Spur counts a node as charged: CPUs or devices allocated (memory alone is not;
    `update_node_state`, `deallocate_job_slices`)."""
    return alloc.cpus > 0 or any(d.count for devs in alloc.devices.values() for d in devs)


def busy_state(node: Node, alloc: Allocation) -> NodeState:
    """IDLE/MIXED/ALLOCATED from an allocation; a node out of service keeps its state."""
    if node.state not in (NodeState.IDLE, NodeState.MIXED, NodeState.ALLOCATED):
        return node.state
    if alloc.empty:
        return NodeState.IDLE
    full_gpus = bool(node.total.gpus) and alloc.gpus >= len(node.total.gpus)
    full_cpus = node.total.cpus > 0 and alloc.cpus >= node.total.cpus
    return NodeState.ALLOCATED if full_gpus or full_cpus else NodeState.MIXED


# -- JSON ------------------------------------------------------------------------


def scenario_to_dict(s: Scenario) -> dict[str, Any]:
    return {
        "schema": SCENARIO_SCHEMA,
        "version": s.version,
        "hostname": s.hostname,
        "next_job_id": s.next_job_id,
        "users": dict(s.users),
        "admins": list(s.admins),
        "inventory_names": dict(s.inventory_names),
        "target_names": {n: list(v) for n, v in s.target_names.items()},
        "nodes": [node_to_dict(n) for n in s.nodes],
        "jobs": [job_to_dict(j) for j in s.jobs],
        "holdings": {node: [holding_to_dict(h) for h in held] for node, held in s.holdings.items()},
        "agent_started_at": {n: format_time(t) for n, t in s.agent_started_at.items()},
        "partition_selectors": {p: dict(sel) for p, sel in s.partition_selectors.items()},
        "default_partition": s.default_partition,
        "waiting": list(s.waiting),
    }


def _holdings_from(value: Any, *, node: str, where: str) -> list[Holding]:
    if not isinstance(value, list):
        raise DocumentError(f"{where}: holdings[{node!r}] must be a list")
    # Held records are an inventory's "held" list; parse them the one way.
    doc = {"schema": INVENTORY_SCHEMA, "node": node, "held": value}
    return list(inventory_from_dict(doc, where=f"{where}: holdings[{node!r}]").held)


def _object(value: Any, *, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DocumentError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def scenario_from_dict(d: Any, *, where: str) -> Scenario:
    """A checked Scenario from its JSON form; DocumentError names `where` and the problem."""
    if not isinstance(d, dict):
        raise DocumentError(f"{where}: expected a JSON object, got {type(d).__name__}")
    if d.get("schema") != SCENARIO_SCHEMA:
        raise DocumentError(
            f"{where}: schema is {d.get('schema')!r}, expected {SCENARIO_SCHEMA!r} "
            "(write one with spurctl_sim.write_scenario)"
        )
    version = d.get("version")
    if not isinstance(version, str) or not version:
        raise DocumentError(f"{where}: 'version' must be a non-empty string")
    jobs_raw, nodes_raw = d.get("jobs"), d.get("nodes")
    if not isinstance(jobs_raw, list) or not isinstance(nodes_raw, list):
        raise DocumentError(f"{where}: 'jobs' and 'nodes' must be lists")
    holdings_raw = _object(d.get("holdings"), where=f"{where}: holdings")
    names_raw = _object(d.get("inventory_names"), where=f"{where}: inventory_names")
    users_raw = _object(d.get("users"), where=f"{where}: users")
    admins_raw = d.get("admins") or []
    if not isinstance(admins_raw, list) or not all(isinstance(a, str) for a in admins_raw):
        raise DocumentError(f"{where}: 'admins' must be a list of user names")
    if not all(isinstance(v, str) and v for v in names_raw.values()):
        raise DocumentError(f"{where}: inventory_names values must be non-empty host names")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in users_raw.values()):
        raise DocumentError(f"{where}: users must map user names to integer uids")
    next_job_id = d.get("next_job_id", 0)
    if isinstance(next_job_id, bool) or not isinstance(next_job_id, int) or next_job_id < 0:
        raise DocumentError(f"{where}: 'next_job_id' must be a positive integer")
    targets_raw = _object(d.get("target_names"), where=f"{where}: target_names")
    if not all(
        isinstance(v, list) and all(isinstance(n, str) and n for n in v)
        for v in targets_raw.values()
    ):
        raise DocumentError(f"{where}: target_names values must be lists of node names")
    hostname = d.get("hostname") or "spurctld"
    if not isinstance(hostname, str):
        raise DocumentError(f"{where}: 'hostname' must be a string")
    agents_raw = _object(d.get("agent_started_at"), where=f"{where}: agent_started_at")
    try:
        agent_started_at = {str(k): parse_time(v) for k, v in agents_raw.items()}
    except ValueError as exc:
        raise DocumentError(f"{where}: agent_started_at: {exc}") from None
    selectors_raw = _object(d.get("partition_selectors"), where=f"{where}: partition_selectors")
    if not all(
        isinstance(v, dict) and all(isinstance(x, str) for x in (*v, *v.values()))
        for v in selectors_raw.values()
    ):
        raise DocumentError(f"{where}: partition_selectors must map partitions to label objects")
    default_partition = d.get("default_partition") or ""
    waiting = d.get("waiting") or []
    if not isinstance(default_partition, str):
        raise DocumentError(f"{where}: 'default_partition' must be a string")
    if not isinstance(waiting, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in waiting
    ):
        raise DocumentError(f"{where}: 'waiting' must be a list of job ids")
    scenario = Scenario(
        version=version,
        jobs=[job_from_dict(j, where=f"{where}: jobs[{i}]") for i, j in enumerate(jobs_raw)],
        nodes=[node_from_dict(n, where=f"{where}: nodes[{i}]") for i, n in enumerate(nodes_raw)],
        holdings={
            str(node): _holdings_from(v, node=str(node), where=where)
            for node, v in holdings_raw.items()
        },
        inventory_names={str(k): v for k, v in names_raw.items()},
        next_job_id=next_job_id,
        users={str(k): v for k, v in users_raw.items()},
        admins=list(admins_raw),
        hostname=hostname,
        target_names={str(k): list(v) for k, v in targets_raw.items()},
        agent_started_at={k: v for k, v in agent_started_at.items() if v is not None},
        partition_selectors={str(k): dict(v) for k, v in selectors_raw.items()},
        default_partition=default_partition,
        waiting=list(waiting),
    )
    scenario.check(where)
    return scenario


def read_scenario(path: Path) -> Scenario:
    """Load a scenario file; DocumentError names the file and what is wrong."""
    try:
        text = bounded.read_text(path, bounded.SCENARIO)
    except OSError as exc:
        raise DocumentError(f"cannot read scenario {path}: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    return scenario_from_dict(doc, where=str(path))


def write_scenario(scenario: Scenario, path: Path) -> None:
    path.write_text(json.dumps(scenario_to_dict(scenario), indent=1) + "\n")
