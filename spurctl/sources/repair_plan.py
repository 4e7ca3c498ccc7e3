"""A saved repair plan (`repair --dry-run -o FILE`) read back for `repair --plan FILE`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from spurctl.errors import DocumentError
from spurctl.model import parse_time
from spurctl.sources.nesting import too_deep

REPAIR_PLAN_SCHEMA = "spurctl.repair-plan/v1"
# A plan names a few nodes; one larger than this is not one.
PLAN_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class SavedTarget:
    node: str
    # The charge as `decide.repair.charge_record` wrote it: compared whole with the fresh one.
    charge: dict[str, Any]
    charge_text: str


@dataclass(frozen=True, slots=True)
class SavedRepairPlan:
    controller: str
    taken_at: datetime
    nodes: str
    targets: tuple[SavedTarget, ...]


def _fail(path: Path, why: str) -> DocumentError:
    return DocumentError(
        f"{path} is not a {REPAIR_PLAN_SCHEMA} document ({why}); save one with "
        "`spurctl repair --node HOSTLIST --dry-run -o FILE`"
    )


def load_repair_plan(path: Path) -> SavedRepairPlan:
    """The plan at `path`, validated (DocumentError naming what is wrong)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(PLAN_LIMIT + 1)
    except OSError as exc:
        raise DocumentError(
            f"cannot read plan {path}: {exc.strerror or exc}; give the file "
            "`spurctl repair --dry-run -o FILE` wrote"
        ) from exc
    if len(raw) > PLAN_LIMIT:
        raise _fail(path, f"larger than {PLAN_LIMIT} bytes")
    deep = too_deep(raw)
    if deep is not None:
        raise _fail(path, deep)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(path, f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != REPAIR_PLAN_SCHEMA:
        raise _fail(path, "no schema " + REPAIR_PLAN_SCHEMA)
    controller = doc.get("controller")
    address = controller.get("address") if isinstance(controller, dict) else None
    nodes = doc.get("nodes")
    try:
        taken_at = parse_time(doc.get("taken_at"))
    except (TypeError, ValueError):
        taken_at = None
    targets = doc.get("targets")
    if not isinstance(address, str) or not isinstance(nodes, str) or taken_at is None:
        raise _fail(path, "controller.address, nodes and taken_at are required")
    if not isinstance(targets, list):
        raise _fail(path, "targets must be a list")
    saved = []
    for t in targets:
        if (
            not isinstance(t, dict)
            or not isinstance(t.get("node"), str)
            or not isinstance(t.get("charge"), dict)
        ):
            raise _fail(path, "each target needs a node and its charge")
        saved.append(SavedTarget(t["node"], t["charge"], str(t.get("charge_text") or "")))
    return SavedRepairPlan(address, taken_at, nodes, tuple(saved))
