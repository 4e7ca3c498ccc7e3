"""The inventory document (`spurctl.inventory/v1`): what one node holds, as `spurctl
node-inventory` prints it and collect gathers it.

Written from the model's Inventory (with inventory_extras.py's optional parts) and
read back in one strict msgspec pass from a document, a JSON array of them or JSON
Lines; what is wrong with a text that is no inventory is worded by
inventory_refusals.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from spurctl.errors import DocumentError, redact
from spurctl.model import MAX_JOB_ID, AgentProcess, Holding, Inventory, format_time
from spurctl.sources import inventory_extras as extras
from spurctl.sources.documents import INVENTORY_SCHEMA, InventorySchema, dump_json
from spurctl.sources.inventory_extras import holding_extras_to_dict, inventory_extras_to_dict
from spurctl.sources.inventory_refusals import not_json, parsed_json, refusal

# -- writing -------------------------------------------------------------------


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


def inventory_lines(inventories: Iterable[Inventory]) -> str:
    """The inventories as JSON Lines, one document per node (what collect writes)."""
    return "".join(dump_json(inventory_to_dict(inv), indent=None) + "\n" for inv in inventories)


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


# -- reading -------------------------------------------------------------------

# The inventory document, declared once: msgspec checks every type and bound in one strict
# pass (unknown fields ignored); `_inventory` checks the rest, `refusal` words errors.

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


class _AgentConfigDoc(msgspec.Struct, gc=False):
    controller: _Name | None = None
    cluster: _Name | None = None


class _InventoryDoc(msgspec.Struct, gc=False):
    schema: InventorySchema
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
    controller: str | None = None
    cluster: str | None = None
    agent_config: _AgentConfigDoc | None = None


class _HeldDoc(_InventoryDoc, gc=False):
    """The same document with its holdings decoded straight into the model's Holding,
    whose fields carry _HoldingDoc's bounds: no second record per holding (a large
    cluster's inventory file holds ~50,000). A document this does not read as
    `_inventory` would (a null list, a session, a time not in UTC) is read as
    `_InventoryDoc` (`_held`)."""

    held: tuple[Holding, ...] | None = None  # type: ignore[assignment]  # read so here


_ONE = msgspec.json.Decoder(_InventoryDoc, strict=True)
_MANY = msgspec.json.Decoder(list[_InventoryDoc], strict=True)
_ONE_HELD = msgspec.json.Decoder(_HeldDoc, strict=True)


def _utc(value: datetime | None) -> datetime | None:
    """As model.parse_time: a naive time is UTC, any other offset converted to UTC."""
    if value is None or value.tzinfo is UTC:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _held(line: str | bytes) -> _InventoryDoc | None:
    """One JSON Lines document with its holdings as the model's, when it reads so and
    they are as `_inventory` would build them; None: read it as `_InventoryDoc`."""
    try:
        doc = _ONE_HELD.decode(line)
    except (msgspec.DecodeError, RecursionError, UnicodeError):  # ValidationError too
        return None
    utc = UTC
    for h in doc.held or ():
        started = h.started_at
        if h.sessions or (started is not None and started.tzinfo is not utc):
            return None  # sessions are read from SessionDoc; a time is made UTC
    return doc


def _inventory(doc: _InventoryDoc, *, where: str) -> Inventory:
    """The model's Inventory from a decoded (so already type-checked) document."""
    if doc.node is None:
        raise DocumentError(f"{where}: inventory without a node name")
    agent = doc.agent
    utc = UTC
    collected = doc.collected_at
    # Positional, in Inventory's field order, and each optional part only when present:
    # an inventory file of a large cluster holds 10,000 documents.
    return Inventory(
        doc.node,
        collected if collected is None or collected.tzinfo is utc else _utc(collected),
        doc.source or "",
        doc.error,
        (doc.held or ())
        if isinstance(doc, _HeldDoc)
        else tuple(
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
        )
        if doc.held
        else (),
        AgentProcess(agent.pid, _utc(agent.started_at)) if isinstance(agent, _AgentDoc) else None,
        doc.hostname,
        doc.target_node,
        doc.target_nodes or (),
        agent is not msgspec.UNSET,
        tuple([AgentProcess(a.pid, _utc(a.started_at)) for a in doc.agents]) if doc.agents else (),
        doc.agent_hostname,
        bool(doc.ancestry_read) and isinstance(agent, _AgentDoc),
        extras.refusals(doc.session_refusals) if doc.session_refusals else (),
        doc.controller,
        doc.cluster,
        *((doc.agent_config.controller, doc.agent_config.cluster) if doc.agent_config else ()),
    )


def inventory_from_dict(d: Any, *, where: str) -> Inventory:
    """An inventory from an already parsed JSON value (a scenario's holdings, tests)."""
    try:
        doc = msgspec.convert(d, _InventoryDoc, strict=True)
    except msgspec.ValidationError as exc:
        raise refusal(exc, d, where=where) from None
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
    # Leading blanks only: a file ends in a newline, and stripping it would copy the text
    # whole (a large cluster's JSON Lines: ~9 MB, ~6 ms), where only a refusal needs it.
    head = text.lstrip()
    if not head:
        return
    if head.startswith("["):
        stripped = text.strip()
        first_line = text[: text.index("[")].count("\n") + 1
        try:
            docs = _MANY.decode(stripped)
        except msgspec.ValidationError as exc:
            items = parsed_json(stripped, where=name, first_line=first_line)
            raise refusal(exc, items, where=name, items=True) from None
        except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
            raise not_json(exc, stripped, where=name, first_line=first_line) from None
        for i, doc in enumerate(docs):
            where = f"{name}: item {i + 1}"
            yield where, _inventory(doc, where=where)
        return
    end = len(head)
    while head[end - 1].isspace():  # what strip() would take off its end
        end -= 1
    # JSON's own blanks after the document read as if stripped; any other (a no-break
    # space, which strip() also takes) is stripped as before.
    whole_text = head if not head[end:].strip(" \t\n\r") else text.strip()
    try:
        one = _ONE.decode(whole_text)
    except msgspec.ValidationError as exc:
        # One document that is not an inventory, or JSON Lines whose first line is not.
        stripped = text.strip()
        try:
            whole = msgspec.json.decode(stripped)
        except msgspec.DecodeError:
            pass  # more than one document: JSON Lines, read below line by line
        except (RecursionError, UnicodeError) as exc2:
            raise not_json(exc2, stripped, where=name) from None
        else:
            raise refusal(exc, whole, where=name) from None
    except (msgspec.DecodeError, UnicodeError):
        pass  # not one document: JSON Lines
    except RecursionError as exc:
        raise not_json(exc, text.strip(), where=name) from None
    else:
        yield name, _inventory(one, where=name)
        return
    # Lines end at "\n" only (JSON Lines): a name written raw with U+2028 in it, as
    # dump_json(ensure_ascii=False) does, stays inside its line.
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{name}: line {lineno}"
        held = _held(line)
        if held is not None:
            yield where, _inventory(held, where=where)
            continue
        try:
            doc = _ONE.decode(line)
        except msgspec.ValidationError as exc:
            raise refusal(exc, parsed_json(line, where=where), where=where) from None
        except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
            raise not_json(exc, line, where=where) from None
        yield where, _inventory(doc, where=where)
