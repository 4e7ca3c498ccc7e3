"""spurctl's JSON documents: inventory, snapshot, and the job/node records in them.

Each document carries "schema". Readers validate at the edge and raise
DocumentError naming what is wrong; writers emit RFC 3339 UTC times and state
names ("RUNNING", "DRAIN"). Job and node records keep Spur's proto field names.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

import msgspec

from spurctl.errors import DocumentError, redact
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
from spurctl.sources import inventory_extras as extras
from spurctl.sources.inventory_extras import holding_extras_to_dict, inventory_extras_to_dict

_InventorySchema = Literal["spurctl.inventory/v1"]
INVENTORY_SCHEMA: Final[str] = get_args(_InventorySchema)[0]
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
        **holding_extras_to_dict(h),
    }


def inventory_to_dict(inv: Inventory) -> dict[str, Any]:
    return {
        "schema": INVENTORY_SCHEMA,
        "node": inv.node,
        "collected_at": format_time(inv.collected_at),
        "source": inv.source,
        "error": inv.error,
        "held": [holding_to_dict(h) for h in inv.held],
        **inventory_extras_to_dict(inv),
    }


# The inventory document, declared once: msgspec checks every type and bound in one strict
# pass (unknown fields ignored); `_inventory` checks the rest, `_refusal` words errors.

_Count = Annotated[int, msgspec.Meta(ge=0)]
_JobId = Annotated[int, msgspec.Meta(ge=0, le=MAX_JOB_ID)]
_Name = Annotated[str, msgspec.Meta(min_length=1)]


class _HoldingDoc(msgspec.Struct, gc=False):
    job_id: _JobId
    cpus: _Count | None = None
    memory_mb: _Count | None = None
    gpus: tuple[_Count, ...] | None = None
    pids: tuple[_Count, ...] | None = None
    started_at: datetime | None = None
    attempt: _Count | None = None
    # Any non-empty names (HOLDING_TRACES today), so a newer scan's trace still reads.
    traces: tuple[_Name, ...] | None = None
    tracked_pids: tuple[_Count, ...] | None = None
    supervisors: tuple[_Count, ...] | None = None
    sessions: tuple[extras.SessionDoc, ...] | None = None


class _AgentDoc(msgspec.Struct, gc=False):
    pid: _Count
    started_at: datetime | None = None


class _InventoryDoc(msgspec.Struct, gc=False):
    schema: _InventorySchema
    node: _Name | None = None
    collected_at: datetime | None = None
    source: str | None = None
    error: str | None = None
    held: list[_HoldingDoc] | None = None
    agent: _AgentDoc | msgspec.UnsetType | None = msgspec.UNSET
    hostname: _Name | None = None
    target_node: _Name | None = None
    target_nodes: tuple[_Name, ...] | None = None
    agents: tuple[_AgentDoc, ...] | None = None
    agent_hostname: _Name | None = None
    ancestry_read: bool | None = None
    session_refusals: tuple[extras.RefusalDoc, ...] | None = None


_ONE = msgspec.json.Decoder(_InventoryDoc, strict=True)
_MANY = msgspec.json.Decoder(list[_InventoryDoc], strict=True)


def _utc(value: datetime | None) -> datetime | None:
    """As model.parse_time: a naive time is UTC, any other offset converted to UTC."""
    if value is None or value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _inventory(doc: _InventoryDoc, *, where: str) -> Inventory:
    """The model's Inventory from a decoded (so already type-checked) document."""
    if doc.node is None:
        raise DocumentError(f"{where}: inventory without a node name")
    agent = doc.agent
    utc = UTC
    return Inventory(
        node=doc.node,
        collected_at=_utc(doc.collected_at),
        source=doc.source or "",
        error=doc.error,
        held=tuple(
            [
                Holding(
                    h.job_id,
                    h.cpus,
                    h.memory_mb,
                    h.gpus or (),
                    h.pids or (),
                    h.started_at
                    if h.started_at is None or h.started_at.tzinfo is utc
                    else _utc(h.started_at),
                    h.attempt,
                    h.traces or (),
                    h.tracked_pids or (),
                    h.supervisors or (),
                    extras.sessions(h.sessions) if h.sessions else (),
                )
                for h in doc.held
            ]
            if doc.held
            else ()
        ),
        agent=AgentProcess(agent.pid, _utc(agent.started_at))
        if isinstance(agent, _AgentDoc)
        else None,
        hostname=doc.hostname,
        target_node=doc.target_node,
        target_nodes=doc.target_nodes or (),
        agent_checked=agent is not msgspec.UNSET,
        agents=tuple(AgentProcess(a.pid, _utc(a.started_at)) for a in doc.agents or ()),
        agent_hostname=doc.agent_hostname,
        ancestry_read=bool(doc.ancestry_read) and isinstance(agent, _AgentDoc),
        session_refusals=extras.refusals(doc.session_refusals),
    )


def inventory_from_dict(d: Any, *, where: str) -> Inventory:
    """An inventory from an already parsed JSON value (a scenario's holdings, tests)."""
    try:
        doc = msgspec.convert(d, _InventoryDoc, strict=True)
    except msgspec.ValidationError as exc:
        raise _refusal(exc, d, where=where) from None
    return _inventory(doc, where=where)


def parse_inventory_text(text: str, *, name: str) -> Iterator[Inventory]:
    """Inventories from a JSON document, a JSON array of them, or JSON Lines."""
    for _, inv in parse_inventory_records(text, name=name):
        yield inv


def parse_inventory_records(text: str, *, name: str) -> Iterator[tuple[str, Inventory]]:
    """Each inventory with where it came from ("FILE: line N", "FILE: item N" or "FILE")."""
    # Secrets redacted before the text is read: one sits inside a JSON string, and
    # `<redacted>` keeps that string valid (redact returns clean text untouched).
    text = redact(text)
    stripped = text.strip()
    if not stripped:
        return
    if stripped.startswith("["):
        first_line = text[: text.index("[")].count("\n") + 1
        try:
            docs = _MANY.decode(stripped)
        except msgspec.ValidationError as exc:
            items = _parsed(stripped, where=name, first_line=first_line)
            raise _refusal(exc, items, where=name, items=True) from None
        except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
            raise _not_json(exc, stripped, where=name, first_line=first_line) from None
        for i, doc in enumerate(docs):
            where = f"{name}: item {i + 1}"
            yield where, _inventory(doc, where=where)
        return
    try:
        one = _ONE.decode(stripped)
    except msgspec.ValidationError as exc:
        # One document that is not an inventory, or JSON Lines whose first line is not.
        try:
            whole = msgspec.json.decode(stripped)
        except msgspec.DecodeError:
            pass  # more than one document: JSON Lines, read below line by line
        except (RecursionError, UnicodeError) as exc2:
            raise _not_json(exc2, stripped, where=name) from None
        else:
            raise _refusal(exc, whole, where=name) from None
    except (msgspec.DecodeError, UnicodeError):
        pass  # not one document: JSON Lines
    except RecursionError as exc:
        raise _not_json(exc, stripped, where=name) from None
    else:
        yield name, _inventory(one, where=name)
        return
    # Lines end at "\n" only (JSON Lines): a name written raw with U+2028 in it, as
    # dump_json(ensure_ascii=False) does, stays inside its line.
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{name}: line {lineno}"
        try:
            doc = _ONE.decode(line)
        except msgspec.ValidationError as exc:
            raise _refusal(exc, _parsed(line, where=where), where=where) from None
        except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
            raise _not_json(exc, line, where=where) from None
        yield where, _inventory(doc, where=where)


def _parsed(text: str, *, where: str, first_line: int | None = None) -> Any:
    """The JSON value of `text`, for saying what is wrong in it (the error path only)."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
        raise _not_json(exc, text, where=where, first_line=first_line) from None


def _not_json(
    exc: Exception, text: str, *, where: str, first_line: int | None = None
) -> DocumentError:
    """Text that is not JSON (or nests deeper than any inventory), as one line.

    `first_line`: `text` is a many-line document starting on that line of the
    file, so the message says which line the JSON breaks on.
    """
    if isinstance(exc, RecursionError):
        return DocumentError(
            f"{where}: nested too deeply to be an inventory (not spurctl node-inventory output)"
        )
    if isinstance(exc, UnicodeError):
        return DocumentError(f"{where}: not valid JSON (not UTF-8 text)")
    detail = str(exc).removeprefix("JSON is malformed: ")
    if first_line is not None:
        at = re.search(r"\(byte (\d+)\)", detail)
        offset = int(at.group(1)) if at else len(text.encode())
        lineno = first_line + text.encode()[:offset].count(b"\n")
        where = f"{where}: line {lineno}"
    return DocumentError(f"{where}: not valid JSON ({detail})")


# -- what an inventory's refusal says ------------------------------------------------

_AT = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.S)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_MISSING_FIELD = re.compile(r"Object missing required field `([^`]+)`")
_ABSENT = object()


def _refusal(
    exc: msgspec.ValidationError, doc: Any, *, where: str, items: bool = False
) -> DocumentError:
    """msgspec's complaint about `doc` (its parsed JSON), in spurctl's words.

    The path becomes the prefix ("held[3]: ", "agent: "), the field is named, and
    the message says what was expected and, where it is short, what was there.
    `items`: `doc` is a JSON array of inventories, the path's first step its index.
    """
    match = _AT.fullmatch(str(exc))
    what = match.group("what") if match else str(exc)
    path = (match.group("path") if match else None) or ""
    steps: list[str | int] = [name if name else int(index) for name, index in _STEP.findall(path)]
    missing = _MISSING_FIELD.fullmatch(what)
    if missing:
        steps.append(missing.group(1))
    if items and steps and isinstance(steps[0], int) and isinstance(doc, list):
        where = f"{where}: item {steps[0] + 1}"
        doc = doc[steps[0]] if steps[0] < len(doc) else None
        steps = steps[1:]
    return DocumentError(f"{where}: {_explain(doc, steps, what)}")


def _explain(doc: Any, steps: list[str | int], what: str) -> str:
    if not isinstance(doc, dict):
        return f"expected a JSON object, got {type(doc).__name__}"
    schema = doc.get("schema", _ABSENT)
    if schema != INVENTORY_SCHEMA:  # said first: it is likely not an inventory at all
        return (
            f"schema is {_shown(schema)}, expected {INVENTORY_SCHEMA!r} "
            "(produce it with `spurctl node-inventory`)"
        )
    prefix, obj, fields, rest = "", doc, _INVENTORY_FIELDS, steps
    if len(steps) >= 2 and steps[0] == "held" and isinstance(steps[1], int):
        prefix, obj, fields, rest = f"held[{steps[1]}]: ", _at(doc, steps[:2]), _HOLDING, steps[2:]
    elif len(steps) >= 2 and steps[0] == "agent":
        prefix, obj, fields, rest = "agent: ", _at(doc, steps[:1]), _AGENT, steps[1:]
    if not rest:
        return f"{prefix}expected a JSON object, got {type(obj).__name__}"
    field = rest[0]
    say = fields.get(field) if isinstance(field, str) else None
    if say is None:  # not a field spurctl declares: msgspec's own words, with the path
        return f"{_dotted(steps)}: {what[:1].lower()}{what[1:]}"
    value = obj.get(field, _ABSENT) if isinstance(obj, dict) else _ABSENT
    message = f"{prefix}{say(str(field), value)}"
    if len(rest) >= 2 and isinstance(rest[1], int) and isinstance(value, list):
        message += f" ({field}[{rest[1]}] is {_shown(_at(value, rest[1:2]))})"
    return message


def _at(value: Any, steps: list[str | int]) -> Any:
    for step in steps:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return value


def _dotted(steps: list[str | int]) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps).lstrip(".")


def _shown(value: Any) -> str:
    """A value as the message shows it: its repr, bounded in length and depth."""
    return "absent" if value is _ABSENT else _REPR.repr(value)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 2, 4, 4
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = 40


def _count(name: str, value: Any) -> str:
    if value is None or value is _ABSENT:
        return f"missing integer field {name!r}"
    return f"field {name!r} must be a non-negative integer, got {_shown(value)}"


def _job_id_said(name: str, value: Any) -> str:
    if type(value) is int and value > MAX_JOB_ID:
        return f"{name} {_shown(value)} is out of range (Spur job ids are 32-bit)"
    return _count(name, value)


def _count_or_null(name: str, value: Any) -> str:
    return f"field {name!r} must be a non-negative integer or null, got {_shown(value)}"


def _counts(name: str, value: Any) -> str:
    said = f"field {name!r} must be a list of non-negative integers"
    return said if isinstance(value, list) else f"{said}, got {_shown(value)}"


def _time_said(name: str, value: Any) -> str:
    return f"field {name!r} is not an RFC 3339 time (got {_shown(value)})"


def _fixed(text: str) -> Callable[[str, Any], str]:
    return lambda name, value: text.format(name=name)


def _node_said(name: str, value: Any) -> str:
    if value in (None, "", _ABSENT):
        return "inventory without a node name"
    return f"field {name!r} must be a string, got {_shown(value)}"


_TRACES = ", ".join(repr(t) for t in HOLDING_TRACES)
_INVENTORY_FIELDS: dict[str, Callable[[str, Any], str]] = {
    "node": _node_said,
    "collected_at": _time_said,
    "source": lambda name, value: f"field {name!r} must be a string, got {_shown(value)}",
    "error": _fixed("field {name!r} must be a string or null"),
    "held": _fixed("field {name!r} must be a list"),
    "agent": _fixed("field {name!r} must be an object with 'pid' or null"),
    "hostname": _fixed("field {name!r} must be a non-empty string or null"),
    "target_node": _fixed("field {name!r} must be a non-empty string or null"),
    "target_nodes": _fixed("field {name!r} must be a list of node names"),
    "agents": _fixed("field {name!r} must be a list of objects with 'pid'"),
    "agent_hostname": _fixed("field {name!r} must be a non-empty string or null"),
    "ancestry_read": _fixed("field {name!r} must be true, false or null"),
    "session_refusals": _fixed("field {name!r} must be a list of objects with 'path' and 'why'"),
}
_HOLDING: dict[str, Callable[[str, Any], str]] = {
    "job_id": _job_id_said,
    "cpus": _count_or_null,
    "memory_mb": _count_or_null,
    "gpus": _counts,
    "pids": _counts,
    "started_at": _time_said,
    "attempt": _count_or_null,
    "traces": _fixed("field {name!r} must be a list of names (e.g. " + _TRACES + ")"),
    "tracked_pids": _counts,
    "supervisors": _counts,
    "sessions": _fixed("field {name!r} must be a list of spurstepd sessions (attempt, step, ...)"),
}
_AGENT: dict[str, Callable[[str, Any], str]] = {"pid": _count, "started_at": _time_said}


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
        doc = json.loads(redact(text))
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}); "
            "save a fresh one with `spurctl snapshot -o FILE`"
        ) from None
    return snapshot_from_dict(doc, where=str(path))
