"""What is wrong with a text read as an inventory, in spurctl's words: one line that
says where (the file, its line or item, the field's path) and what was expected.

inventory_document.py decodes in one strict msgspec pass; only when that fails is
the text parsed again here to say what is wrong with it.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable
from typing import Any

import msgspec

from spurctl.errors import DocumentError
from spurctl.holdings import HOLDING_TRACES
from spurctl.model import MAX_JOB_ID
from spurctl.sources.documents import INVENTORY_SCHEMA

# -- text that is not JSON ------------------------------------------------------------


def parsed_json(text: str, *, where: str, first_line: int | None = None) -> Any:
    """The JSON value of `text`, for saying what is wrong in it (the error path only)."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeError) as exc:
        raise not_json(exc, text, where=where, first_line=first_line) from None


def not_json(
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


def refusal(
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
