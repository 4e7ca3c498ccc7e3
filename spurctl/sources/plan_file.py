"""A saved reclaim plan (`reclaim --dry-run -o FILE`) read back for `reclaim --plan FILE`."""

from __future__ import annotations

from pathlib import Path

import msgspec

from spurctl.errors import DocumentError
from spurctl.model import PLAN_SCHEMA, PlanDocument


def load_plan(path: Path) -> PlanDocument:
    """The plan document at `path`, decoded and validated in one step (DocumentError)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError(
            f"cannot read plan {path}: {exc.strerror or exc}; give the file "
            "`spurctl reclaim --dry-run -o FILE` wrote"
        ) from exc
    try:
        return msgspec.json.decode(raw, type=PlanDocument)
    except msgspec.ValidationError as exc:
        raise DocumentError(
            f"{path} is not a {PLAN_SCHEMA} document ({exc}); save one with "
            "`spurctl reclaim --dry-run -o FILE`"
        ) from exc
    except msgspec.DecodeError as exc:
        raise DocumentError(
            f"{path} is not valid JSON ({exc}); save a plan with "
            "`spurctl reclaim --dry-run -o FILE`"
        ) from exc
