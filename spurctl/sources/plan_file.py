"""A saved reclaim plan (`reclaim --dry-run -o FILE`) read back for `reclaim --plan FILE`.

The schema alone admits entries spurctl never writes (a `job_id` of null, an
entry that is not a cancel, one cancel twice): each is refused here, with the
entry it is, so that nothing past this point meets a plan it cannot act on.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from spurctl.errors import DocumentError, SpurctlError
from spurctl.hostlist import parse_scope
from spurctl.model import MAX_JOB_ID, PLAN_SCHEMA, Action, PlanDocument
from spurctl.sources import bounded
from spurctl.sources.nesting import too_deep

_SAVE_ONE = "save a fresh one with `spurctl reclaim --dry-run -o FILE`"


def load_plan(path: Path) -> PlanDocument:
    """The plan document at `path`, decoded and validated whole (DocumentError)."""
    try:
        raw = bounded.read_bytes(path, bounded.PLAN, f"--plan {path}")
    except OSError as exc:
        raise DocumentError(
            f"cannot read plan {path}: {exc.strerror or exc}; give the file "
            "`spurctl reclaim --dry-run -o FILE` wrote"
        ) from exc
    deep = too_deep(raw)
    if deep is not None:
        raise DocumentError(f"{path} is not a {PLAN_SCHEMA} document ({deep}); {_SAVE_ONE}")
    try:
        plan = msgspec.json.decode(raw, type=PlanDocument)
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
    check_plan(plan, str(path))
    return plan


def check_plan(plan: PlanDocument, name: str) -> None:
    """Refuse (DocumentError) a plan whose entries are not the cancels spurctl saves:
    each names one node and one job id in Spur's range, is a `reclaim` finding, has an
    agent address, and no cancel appears twice; `nodes` is a hostlist."""
    try:
        parse_scope(plan.nodes)
    except SpurctlError as exc:
        raise DocumentError(f"{name}: its nodes are not a hostlist ({exc}); {_SAVE_ONE}") from None
    first: dict[tuple[str, int], int] = {}
    for number, entry in enumerate(plan.entries, 1):
        finding = entry.finding
        where = f"{name}: entry {number}"
        job_id = finding.job_id
        if job_id is None or not 0 <= job_id <= MAX_JOB_ID:
            raise DocumentError(
                f"{where} ({finding.node or 'no node'}) has job_id {job_id}, not a Spur job "
                f"id (0-{MAX_JOB_ID}); every cancel names its job: {_SAVE_ONE}"
            )
        what = f"{where} (job {job_id} on {finding.node or 'no node'})"
        if not finding.node.strip():
            raise DocumentError(f"{what} names no node; {_SAVE_ONE}")
        if finding.action is not Action.RECLAIM:
            raise DocumentError(
                f"{what} is a {finding.kind.value} finding whose action is "
                f"{finding.action.value}, not a cancel: a plan holds reclaim findings "
                f"only; {_SAVE_ONE}"
            )
        if not entry.address.strip():
            raise DocumentError(f"{what} has no agent address; {_SAVE_ONE}")
        earlier = first.setdefault((finding.node, job_id), number)
        if earlier != number:
            raise DocumentError(
                f"{what} repeats entry {earlier}: a saved plan names each cancel once, "
                f"and this one would be sent twice; {_SAVE_ONE}"
            )
