"""What every spurctl JSON document shares: the schema names, dump_json, the strict
field readers, and the records of the controller's view.

Each document carries "schema". Readers validate at the edge and raise
DocumentError naming what is wrong; writers emit RFC 3339 UTC times and state
names ("RUNNING", "DRAIN"). Job and node records keep Spur's proto field names;
a snapshot (snapshot_document.py) and a scenario (spurctl_sim/scenario.py) carry
them. The inventory document is inventory_document.py.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal, get_args

from spurctl.errors import DocumentError
from spurctl.model import (
    MAX_JOB_ID,
    Allocation,
    Device,
    Gpu,
    Job,
    JobState,
    Node,
    NodeState,
    ResourceSet,
    format_time,
    parse_time,
)

InventorySchema = Literal["spurctl.inventory/v1"]
INVENTORY_SCHEMA: Final[str] = get_args(InventorySchema)[0]
SNAPSHOT_SCHEMA = "spurctl.snapshot/v1"


# -- strict field readers: a bad field is a DocumentError that names it ------------


def int_field(d: dict[str, Any], key: str, *, where: str, default: int | None = 0) -> int:
    value = d.get(key, default)
    if value is None and default is None:
        raise DocumentError(f"{where}: missing integer field {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DocumentError(f"{where}: field {key!r} must be a non-negative integer, got {value!r}")
    return value


def job_id_field(d: dict[str, Any], *, where: str) -> int:
    value = int_field(d, "job_id", where=where, default=None)
    if value > MAX_JOB_ID:
        raise DocumentError(f"{where}: job_id {value} is out of range (Spur job ids are 32-bit)")
    return value


def u32_field(d: dict[str, Any], key: str, *, where: str, default: int | None = 0) -> int:
    """A field Spur keeps as a uint32 (job ids, the watermark, job counts)."""
    value = int_field(d, key, where=where, default=default)
    if value > MAX_JOB_ID:
        raise DocumentError(f"{where}: field {key!r} is {value}, beyond uint32 ({MAX_JOB_ID})")
    return value


def str_field(d: dict[str, Any], key: str, *, where: str, default: str = "") -> str:
    value = d.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise DocumentError(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def time_field(d: dict[str, Any], key: str, *, where: str) -> Any:
    try:
        return parse_time(d.get(key))
    except ValueError as exc:
        raise DocumentError(f"{where}: field {key!r} is not an RFC 3339 time ({exc})") from None


def json_object(value: Any, *, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DocumentError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def enum_field(value: Any, enum_cls: type[JobState] | type[NodeState], *, where: str) -> Any:
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
    d = json_object(d, where=where)
    devices: dict[str, tuple[Device, ...]] = {}
    for name, entry in json_object(d.get("devices") or {}, where=where).items():
        entry = json_object(entry, where=f"{where}: devices[{name}]")
        items = entry.get("devices") or []
        if not isinstance(items, list):
            raise DocumentError(f"{where}: devices[{name}].devices must be a list")
        devices[name] = tuple(
            Device(
                int_field(json_object(x, where=where), "device_id", where=where),
                int_field(x, "count", where=where, default=1),
            )
            for x in items
        )
    return Allocation(
        cpus=int_field(d, "cpus", where=where),
        memory_mb=int_field(d, "memory_mb", where=where),
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
    d = json_object(d, where=where)
    gpus = d.get("gpus") or []
    if not isinstance(gpus, list):
        raise DocumentError(f"{where}: gpus must be a list")
    generic = json_object(d.get("generic") or {}, where=where)
    return ResourceSet(
        cpus=int_field(d, "cpus", where=where),
        memory_mb=int_field(d, "memory_mb", where=where),
        gpus=tuple(
            Gpu(
                int_field(json_object(g, where=where), "device_id", where=where),
                str_field(g, "gpu_type", where=where),
                int_field(g, "memory_mb", where=where),
            )
            for g in gpus
        ),
        generic={str(k): int_field(generic, k, where=where) for k in generic},
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
    d = json_object(d, where=where)
    return Job(
        job_id=job_id_field(d, where=where),
        state=enum_field(d.get("state"), JobState, where=where),
        nodelist=str_field(d, "nodelist", where=where),
        name=str_field(d, "name", where=where),
        user=str_field(d, "user", where=where),
        uid=int_field(d, "uid", where=where),
        partition=str_field(d, "partition", where=where),
        account=str_field(d, "account", where=where),
        state_reason=str_field(d, "state_reason", where=where),
        submit_time=time_field(d, "submit_time", where=where),
        start_time=time_field(d, "start_time", where=where),
        end_time=time_field(d, "end_time", where=where),
        num_nodes=int_field(d, "num_nodes", where=where),
        num_tasks=int_field(d, "num_tasks", where=where),
        resources=allocation_from_dict(d.get("resources"), where=where),
        array_job_id=u32_field(d, "array_job_id", where=where),
        array_task_id=u32_field(d, "array_task_id", where=where),
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
        **({"reason_uid": n.reason_uid} if n.reason_uid is not None else {}),
    }


def node_from_dict(d: Any, *, where: str) -> Node:
    d = json_object(d, where=where)
    name = str_field(d, "name", where=where)
    if not name:
        raise DocumentError(f"{where}: node record without a name")
    partitions = d.get("partitions") or []
    if not isinstance(partitions, list):
        raise DocumentError(f"{where}: partitions must be a list")
    labels = json_object(d.get("labels") or {}, where=where)
    return Node(
        name=name,
        state=enum_field(d.get("state"), NodeState, where=where),
        state_reason=str_field(d, "state_reason", where=where),
        partitions=tuple(str(p) for p in partitions),
        total=resource_set_from_dict(d.get("total_resources"), where=where),
        alloc=allocation_from_dict(d.get("alloc_resources"), where=where),
        boot_time=time_field(d, "boot_time", where=where),
        last_busy=time_field(d, "last_busy", where=where),
        agent_start_time=time_field(d, "slurmd_start_time", where=where),
        labels={str(k): str(v) for k, v in labels.items()},
        reason_uid=(
            None if d.get("reason_uid") is None else u32_field(d, "reason_uid", where=where)
        ),
    )


# -- writing -----------------------------------------------------------------


def dump_json(doc: Any, *, indent: int | None = 2) -> str:
    return json.dumps(doc, indent=indent, sort_keys=False, ensure_ascii=False)
