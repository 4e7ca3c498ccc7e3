"""spurctl's JSON documents: inventory, snapshot, and the job/node records in them.

Each document carries "schema". Readers validate at the edge and raise
DocumentError naming what is wrong; writers emit RFC 3339 UTC times and state
names ("RUNNING", "DRAIN"). Job and node records keep Spur's proto field names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spurctl.errors import DocumentError
from spurctl.model import (
    HOLDING_TRACES,
    MAX_JOB_ID,
    AgentProcess,
    Allocation,
    ControllerView,
    Device,
    Gpu,
    Holding,
    Inventory,
    Job,
    JobState,
    Node,
    NodeState,
    ResourceSet,
    Watermark,
    WatermarkSource,
    format_time,
    parse_time,
)

INVENTORY_SCHEMA = "spurctl.inventory/v1"
SNAPSHOT_SCHEMA = "spurctl.snapshot/v1"


# -- small typed accessors -------------------------------------------------


def _int(d: dict[str, Any], key: str, *, where: str, default: int | None = 0) -> int:
    value = d.get(key, default)
    if value is None and default is None:
        raise DocumentError(f"{where}: missing integer field {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DocumentError(f"{where}: field {key!r} must be a non-negative integer, got {value!r}")
    return value


def _job_id(d: dict[str, Any], *, where: str) -> int:
    value = _int(d, "job_id", where=where, default=None)
    if value > MAX_JOB_ID:
        raise DocumentError(f"{where}: job_id {value} is out of range (Spur job ids are 32-bit)")
    return value


def _u32(d: dict[str, Any], key: str, *, where: str, default: int | None = 0) -> int:
    """A field Spur keeps as a uint32 (job ids, the watermark, job counts)."""
    value = _int(d, key, where=where, default=default)
    if value > MAX_JOB_ID:
        raise DocumentError(f"{where}: field {key!r} is {value}, beyond uint32 ({MAX_JOB_ID})")
    return value


def _opt_int(d: dict[str, Any], key: str, *, where: str) -> int | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DocumentError(f"{where}: field {key!r} must be a non-negative integer or null")
    return value


def _str(d: dict[str, Any], key: str, *, where: str, default: str = "") -> str:
    value = d.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise DocumentError(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def _time(d: dict[str, Any], key: str, *, where: str) -> Any:
    try:
        return parse_time(d.get(key))
    except ValueError as exc:
        raise DocumentError(f"{where}: field {key!r} is not an RFC 3339 time ({exc})") from None


def _int_list(d: dict[str, Any], key: str, *, where: str) -> tuple[int, ...]:
    value = d.get(key) or []
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        raise DocumentError(f"{where}: field {key!r} must be a list of non-negative integers")
    return tuple(value)


def _obj(value: Any, *, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DocumentError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _enum_name(value: Any, enum_cls: type[JobState] | type[NodeState], *, where: str) -> Any:
    if isinstance(value, str):
        name = value.upper()
        # Proto names carry the enum's own prefix (JOB_NODE_FAIL); NODE_FAIL is a JobState.
        prefix = "JOB_" if enum_cls is JobState else "NODE_"
        for candidate in (name, name.removeprefix(prefix)):
            if candidate in enum_cls.__members__:
                return enum_cls[candidate]
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    raise DocumentError(f"{where}: unknown {enum_cls.__name__} {value!r}")


# -- resources -------------------------------------------------------------


def allocation_to_dict(a: Allocation) -> dict[str, Any]:
    return {
        "cpus": a.cpus,
        "memory_mb": a.memory_mb,
        "devices": {
            name: {"devices": [{"device_id": d.device_id, "count": d.count} for d in devs]}
            for name, devs in a.devices.items()
        },
    }


def allocation_from_dict(d: Any, *, where: str) -> Allocation:
    if d is None:
        return Allocation()
    d = _obj(d, where=where)
    devices: dict[str, tuple[Device, ...]] = {}
    for name, entry in _obj(d.get("devices") or {}, where=where).items():
        entry = _obj(entry, where=f"{where}: devices[{name}]")
        items = entry.get("devices") or []
        if not isinstance(items, list):
            raise DocumentError(f"{where}: devices[{name}].devices must be a list")
        devices[name] = tuple(
            Device(
                _int(_obj(x, where=where), "device_id", where=where),
                _int(x, "count", where=where, default=1),
            )
            for x in items
        )
    return Allocation(
        cpus=_int(d, "cpus", where=where),
        memory_mb=_int(d, "memory_mb", where=where),
        devices=devices,
    )


def resource_set_to_dict(r: ResourceSet) -> dict[str, Any]:
    return {
        "cpus": r.cpus,
        "memory_mb": r.memory_mb,
        "gpus": [
            {"device_id": g.device_id, "gpu_type": g.gpu_type, "memory_mb": g.memory_mb}
            for g in r.gpus
        ],
        "generic": dict(r.generic),
    }


def resource_set_from_dict(d: Any, *, where: str) -> ResourceSet:
    if d is None:
        return ResourceSet()
    d = _obj(d, where=where)
    gpus = d.get("gpus") or []
    if not isinstance(gpus, list):
        raise DocumentError(f"{where}: gpus must be a list")
    generic = _obj(d.get("generic") or {}, where=where)
    return ResourceSet(
        cpus=_int(d, "cpus", where=where),
        memory_mb=_int(d, "memory_mb", where=where),
        gpus=tuple(
            Gpu(
                _int(_obj(g, where=where), "device_id", where=where),
                _str(g, "gpu_type", where=where),
                _int(g, "memory_mb", where=where),
            )
            for g in gpus
        ),
        generic={str(k): _int(generic, k, where=where) for k in generic},
    )


# -- jobs and nodes ----------------------------------------------------------


def job_to_dict(j: Job) -> dict[str, Any]:
    return {
        "job_id": j.job_id,
        "name": j.name,
        "user": j.user,
        "uid": j.uid,
        "partition": j.partition,
        "account": j.account,
        "state": j.state.name,
        "state_reason": j.state_reason,
        "submit_time": format_time(j.submit_time),
        "start_time": format_time(j.start_time),
        "end_time": format_time(j.end_time),
        "num_nodes": j.num_nodes,
        "num_tasks": j.num_tasks,
        "nodelist": j.nodelist,
        "resources": allocation_to_dict(j.resources),
        "array_job_id": j.array_job_id,
        "array_task_id": j.array_task_id,
    }


def job_from_dict(d: Any, *, where: str) -> Job:
    d = _obj(d, where=where)
    return Job(
        job_id=_job_id(d, where=where),
        state=_enum_name(d.get("state"), JobState, where=where),
        nodelist=_str(d, "nodelist", where=where),
        name=_str(d, "name", where=where),
        user=_str(d, "user", where=where),
        uid=_int(d, "uid", where=where),
        partition=_str(d, "partition", where=where),
        account=_str(d, "account", where=where),
        state_reason=_str(d, "state_reason", where=where),
        submit_time=_time(d, "submit_time", where=where),
        start_time=_time(d, "start_time", where=where),
        end_time=_time(d, "end_time", where=where),
        num_nodes=_int(d, "num_nodes", where=where),
        num_tasks=_int(d, "num_tasks", where=where),
        resources=allocation_from_dict(d.get("resources"), where=where),
        array_job_id=_u32(d, "array_job_id", where=where),
        array_task_id=_u32(d, "array_task_id", where=where),
    )


def node_to_dict(n: Node) -> dict[str, Any]:
    return {
        "name": n.name,
        "state": n.state.name,
        "state_reason": n.state_reason,
        "partitions": list(n.partitions),
        "total_resources": resource_set_to_dict(n.total),
        "alloc_resources": allocation_to_dict(n.alloc),
        "boot_time": format_time(n.boot_time),
        "last_busy": format_time(n.last_busy),
        "slurmd_start_time": format_time(n.agent_start_time),
        "labels": dict(n.labels),
    }


def node_from_dict(d: Any, *, where: str) -> Node:
    d = _obj(d, where=where)
    name = _str(d, "name", where=where)
    if not name:
        raise DocumentError(f"{where}: node record without a name")
    partitions = d.get("partitions") or []
    if not isinstance(partitions, list):
        raise DocumentError(f"{where}: partitions must be a list")
    labels = _obj(d.get("labels") or {}, where=where)
    return Node(
        name=name,
        state=_enum_name(d.get("state"), NodeState, where=where),
        state_reason=_str(d, "state_reason", where=where),
        partitions=tuple(str(p) for p in partitions),
        total=resource_set_from_dict(d.get("total_resources"), where=where),
        alloc=allocation_from_dict(d.get("alloc_resources"), where=where),
        boot_time=_time(d, "boot_time", where=where),
        last_busy=_time(d, "last_busy", where=where),
        agent_start_time=_time(d, "slurmd_start_time", where=where),
        labels={str(k): str(v) for k, v in labels.items()},
    )


# -- inventory -----------------------------------------------------------------


def holding_to_dict(h: Holding) -> dict[str, Any]:
    return {
        "job_id": h.job_id,
        "cpus": h.cpus,
        "memory_mb": h.memory_mb,
        "gpus": list(h.gpus),
        "pids": list(h.pids),
        "started_at": format_time(h.started_at),
        **_holding_extras_to_dict(h),
    }


def _holding_extras_to_dict(h: Holding) -> dict[str, Any]:
    """`attempt` and `traces`: written when known, so older documents read back unchanged."""
    out: dict[str, Any] = {}
    if h.attempt is not None:
        out["attempt"] = h.attempt
    if h.traces:
        out["traces"] = list(h.traces)
    return out


def _traces(d: dict[str, Any], *, where: str) -> tuple[str, ...]:
    value = d.get("traces") or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DocumentError(
            f"{where}: field 'traces' must be a list of names "
            f"(e.g. {', '.join(repr(t) for t in HOLDING_TRACES)})"
        )
    return tuple(value)


def _holding_from_dict(h: Any, *, where: str) -> Holding:
    h = _obj(h, where=where)
    return Holding(
        job_id=_job_id(h, where=where),
        cpus=_opt_int(h, "cpus", where=where),
        memory_mb=_opt_int(h, "memory_mb", where=where),
        gpus=_int_list(h, "gpus", where=where),
        pids=_int_list(h, "pids", where=where),
        started_at=_time(h, "started_at", where=where),
        attempt=_opt_int(h, "attempt", where=where),
        traces=_traces(h, where=where),
    )


def _holding_fast(h: Any) -> Holding | None:
    """A well-formed holding, or None to let `_holding_from_dict` say what is wrong.

    The same checks as `_holding_from_dict`, made cheap for the common case: an
    audit of a large cluster reads 100,000 of these. `type(x) is int` keeps
    bools out, as `_int` does.
    """
    if type(h) is not dict:
        return None
    job_id = h.get("job_id")
    cpus = h.get("cpus")
    memory_mb = h.get("memory_mb")
    gpus = h.get("gpus") or []
    pids = h.get("pids") or []
    started_at = h.get("started_at")
    if not (
        type(job_id) is int
        and 0 <= job_id <= MAX_JOB_ID
        and (cpus is None or (type(cpus) is int and cpus >= 0))
        and (memory_mb is None or (type(memory_mb) is int and memory_mb >= 0))
        and type(gpus) is list
        and type(pids) is list
        and (not gpus or (_only_ints(gpus) and min(gpus) >= 0))
        and (not pids or (_only_ints(pids) and min(pids) >= 0))
    ):
        return None
    if started_at is not None:
        try:
            started_at = parse_time(started_at)
        except ValueError:
            return None
    attempt = h.get("attempt")
    traces = h.get("traces") or ()
    if not (
        (attempt is None or (type(attempt) is int and attempt >= 0))
        and (not traces or (type(traces) is list and _only_names(traces)))
    ):
        return None
    return Holding(
        job_id, cpus, memory_mb, tuple(gpus), tuple(pids), started_at, attempt, tuple(traces)
    )


def _only_names(values: list[Any]) -> bool:
    return all(type(v) is str and v for v in values)


def _only_ints(values: list[Any]) -> bool:
    return _INT_TYPE.issuperset(map(type, values))


_INT_TYPE = frozenset({int})


def inventory_to_dict(inv: Inventory) -> dict[str, Any]:
    return {
        "schema": INVENTORY_SCHEMA,
        "node": inv.node,
        "collected_at": format_time(inv.collected_at),
        "source": inv.source,
        "error": inv.error,
        "held": [holding_to_dict(h) for h in inv.held],
        **_inventory_extras_to_dict(inv),
    }


def _inventory_extras_to_dict(inv: Inventory) -> dict[str, Any]:
    """`agent`, `hostname`, `target_node(s)`: what `spurctl node-inventory` adds.

    `agent` is written (null when no spurd runs) only when the scan looked for
    it, so "none runs" stays apart from "an older document that does not say".
    """
    out: dict[str, Any] = {}
    if inv.agent_checked:
        out["agent"] = (
            None
            if inv.agent is None
            else {"pid": inv.agent.pid, "started_at": format_time(inv.agent.started_at)}
        )
    if inv.hostname is not None:
        out["hostname"] = inv.hostname
    if inv.agent_checked or inv.target_node is not None:
        out["target_node"] = inv.target_node
    if inv.target_nodes:
        out["target_nodes"] = list(inv.target_nodes)
    return out


def _agent_from_dict(value: Any, *, where: str) -> AgentProcess | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DocumentError(f"{where}: field 'agent' must be an object with 'pid' or null")
    pid = _int(value, "pid", where=f"{where}: agent", default=None)
    return AgentProcess(pid=pid, started_at=_time(value, "started_at", where=f"{where}: agent"))


def _opt_name(d: dict[str, Any], key: str, *, where: str) -> str | None:
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise DocumentError(f"{where}: field {key!r} must be a non-empty string or null")
    return value


def _names(d: dict[str, Any], key: str, *, where: str) -> tuple[str, ...]:
    value = d.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DocumentError(f"{where}: field {key!r} must be a list of node names")
    return tuple(value)


def inventory_from_dict(d: Any, *, where: str) -> Inventory:
    d = _obj(d, where=where)
    schema = d.get("schema")
    if schema != INVENTORY_SCHEMA:
        raise DocumentError(
            f"{where}: schema is {schema!r}, expected {INVENTORY_SCHEMA!r} "
            "(produce it with `spurctl node-inventory`)"
        )
    node = _str(d, "node", where=where)
    if not node:
        raise DocumentError(f"{where}: inventory without a node name")
    error = d.get("error")
    if error is not None and not isinstance(error, str):
        raise DocumentError(f"{where}: field 'error' must be a string or null")
    held_raw = d.get("held") or []
    if not isinstance(held_raw, list):
        raise DocumentError(f"{where}: field 'held' must be a list")
    held = [
        _holding_fast(h) or _holding_from_dict(h, where=f"{where}: held[{i}]")
        for i, h in enumerate(held_raw)
    ]
    return Inventory(
        node=node,
        collected_at=_time(d, "collected_at", where=where),
        source=_str(d, "source", where=where),
        error=error,
        held=tuple(held),
        agent=_agent_from_dict(d.get("agent"), where=where),
        hostname=_opt_name(d, "hostname", where=where),
        target_node=_opt_name(d, "target_node", where=where),
        target_nodes=_names(d, "target_nodes", where=where),
        agent_checked="agent" in d,
    )


def parse_inventory_text(text: str, *, name: str) -> Iterator[Inventory]:
    """Inventories from a JSON document, a JSON array of them, or JSON Lines."""
    for _, inv in parse_inventory_records(text, name=name):
        yield inv


def _loads(text: str, *, where: str) -> Any:
    """json.loads, with a document nested too deeply for the parser as a DocumentError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise DocumentError(
            f"{where}: nested too deeply to be an inventory (not spurctl node-inventory output)"
        ) from None


def parse_inventory_records(text: str, *, name: str) -> Iterator[tuple[str, Inventory]]:
    """Each inventory with where it came from ("FILE: line N", "FILE: item N" or "FILE")."""
    stripped = text.strip()
    if not stripped:
        return
    if stripped.startswith("["):
        try:
            docs = _loads(stripped, where=name)
        except json.JSONDecodeError as exc:
            raise DocumentError(f"{name}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(docs, list):
            raise DocumentError(f"{name}: expected a JSON array of inventories")
        for i, doc in enumerate(docs):
            where = f"{name}: item {i + 1}"
            yield where, inventory_from_dict(doc, where=where)
        return
    try:
        yield name, inventory_from_dict(_loads(stripped, where=name), where=name)
        return
    except json.JSONDecodeError:
        pass  # not one document: JSON Lines
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}: line {lineno}"
        try:
            doc = _loads(line, where=where)
        except json.JSONDecodeError as exc:
            raise DocumentError(f"{where}: not valid JSON ({exc.msg})") from None
        yield where, inventory_from_dict(doc, where=where)


def dump_json(doc: Any, *, indent: int | None = 2) -> str:
    return json.dumps(doc, indent=indent, sort_keys=False, ensure_ascii=False)


# -- snapshot ------------------------------------------------------------------


def snapshot_to_dict(view: ControllerView, watermark: Watermark) -> dict[str, Any]:
    return {
        "schema": SNAPSHOT_SCHEMA,
        "controller": {
            "address": view.address,
            "version": view.version,
            "taken_at": format_time(view.taken_at),
        },
        "taken_at": format_time(view.taken_at),
        "watermark": {"value": watermark.value, "source": str(watermark.source)},
        "view": {
            "complete": view.complete,
            "jobs_seen": len(view.jobs),
            "jobs_total": view.jobs_total,
        },
        "jobs": [job_to_dict(j) for j in view.jobs.values()],
        "nodes": [node_to_dict(n) for n in view.nodes.values()],
    }


def snapshot_from_dict(d: Any, *, where: str) -> tuple[ControllerView, Watermark]:
    """A saved controller view. Its completeness is read, never inferred from absence.

    `view.jobs_total` is required (a snapshot without it would make every id it
    lacks look untracked); `view.jobs_seen` and `view.complete`, when present,
    must agree with the jobs the file holds, so a truncated or edited file is
    refused. Job ids, the watermark and the counts are uint32, as in Spur.
    """
    d = _obj(d, where=where)
    if d.get("schema") != SNAPSHOT_SCHEMA:
        raise DocumentError(
            f"{where}: schema is {d.get('schema')!r}, expected {SNAPSHOT_SCHEMA!r} "
            "(save one with `spurctl snapshot -o FILE`)"
        )
    fix = "save a fresh one with `spurctl snapshot -o FILE`"
    ctl = _obj(d.get("controller") or {}, where=f"{where}: controller")
    if "view" not in d or "jobs_total" not in _obj(d["view"], where=f"{where}: view"):
        raise DocumentError(
            f"{where}: missing 'view.jobs_total', so nothing says whether the snapshot "
            f"holds every job; {fix}"
        )
    view_meta = _obj(d["view"], where=f"{where}: view")
    wm = _obj(d.get("watermark") or {}, where=f"{where}: watermark")
    if "value" not in wm:
        raise DocumentError(f"{where}: missing 'watermark.value'; {fix}")
    jobs_raw, nodes_raw = d.get("jobs"), d.get("nodes")
    if not isinstance(jobs_raw, list) or not isinstance(nodes_raw, list):
        raise DocumentError(f"{where}: 'jobs' and 'nodes' must be lists")
    jobs: dict[int, Job] = {}
    for i, j in enumerate(jobs_raw):
        job = job_from_dict(j, where=f"{where}: jobs[{i}]")
        if job.job_id in jobs:
            raise DocumentError(f"{where}: jobs[{i}]: job_id {job.job_id} appears twice; {fix}")
        jobs[job.job_id] = job
    nodes: dict[str, Node] = {}
    for i, n in enumerate(nodes_raw):
        node = node_from_dict(n, where=f"{where}: nodes[{i}]")
        nodes[node.name] = node
    taken_at = _time(d, "taken_at", where=where)
    if taken_at is None:
        raise DocumentError(f"{where}: missing 'taken_at'")
    jobs_total = _u32(view_meta, "jobs_total", where=f"{where}: view", default=None)
    if "jobs_seen" in view_meta:
        seen = _u32(view_meta, "jobs_seen", where=f"{where}: view", default=None)
        if seen != len(jobs):
            raise DocumentError(
                f"{where}: field 'view.jobs_seen' says {seen} jobs but the file holds "
                f"{len(jobs)}: truncated or edited; {fix}"
            )
    if "complete" in view_meta:
        said = view_meta["complete"]
        if not isinstance(said, bool):
            raise DocumentError(f"{where}: field 'view.complete' must be true or false")
        if said != (len(jobs) >= jobs_total):
            raise DocumentError(
                f"{where}: field 'view.complete' is {str(said).lower()} but the file holds "
                f"{len(jobs)} of 'view.jobs_total' {jobs_total} jobs; {fix}"
            )
    view = ControllerView(
        address=_str(ctl, "address", where=where),
        version=_str(ctl, "version", where=where),
        taken_at=taken_at,
        jobs=jobs,
        nodes=nodes,
        jobs_total=jobs_total,
    )
    watermark = Watermark(
        _u32(wm, "value", where=f"{where}: watermark", default=None), WatermarkSource.SNAPSHOT
    )
    return view, watermark


def read_snapshot(path: Path) -> tuple[ControllerView, Watermark]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise DocumentError(f"cannot read snapshot {path}: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}); "
            "save a fresh one with `spurctl snapshot -o FILE`"
        ) from None
    return snapshot_from_dict(doc, where=str(path))
