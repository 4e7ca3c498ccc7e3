"""`spurctl checklist post-wipe` as a library call: sources in, a Checklist out.

The judging and the steps are `decide.post_wipe`; this is the part that asks the
controller (GetJob, through `confirm`) and checks what the operator asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spurctl.audit_view import confirm_missing
from spurctl.decide.post_wipe import Checklist, assess
from spurctl.decide.recycle_steps import build
from spurctl.errors import SpurctlError
from spurctl.holdings import Inventory, held_ids
from spurctl.hostlist import fold
from spurctl.model import ControllerView, Job, watermark_for
from spurctl.releases import spur_version_line, spur_version_note
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources, gather_holdings

if TYPE_CHECKING:
    from spurctl.sources.settings import Connection


VERIFY_NEEDS_NODES = (
    "--verify needs --nodes: the nodes the first run said to recycle "
    "(its verify command lists them)"
)


@dataclass(frozen=True, slots=True)
class ChecklistRequest:
    """One `checklist post-wipe` as asked: options only, as reclaim's request; a mix that
    cannot mean anything refused when it is built (SpurctlError), before anything is read
    or any connection made. The run is given its Sources and Connection beside it."""

    scope: Scope
    watermark: int | None = None
    verify: bool = False
    # What the printed commands repeat, so that they collect and read as this run did.
    collect_flags: tuple[str, ...] = ()
    read_flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.verify and self.scope.everything:  # nothing to verify against
            raise SpurctlError(VERIFY_NEEDS_NODES)


def post_wipe(
    view: ControllerView,
    inventories: Iterable[Inventory],
    *,
    confirm: Callable[[Iterable[int]], Mapping[int, Job | None]] | None,
    scope: Collection[str] | None = None,
    watermark_flag: int | None = None,
    first_job_id: int = 1,
    verify: bool = False,
    collect_flags: Sequence[str] = (),
    read_flags: Sequence[str] = (),
) -> Checklist:
    """The post-wipe checklist from a controller view and inventories.

    `confirm` (ControllerClient.confirm) is asked about every held id an
    incomplete view lacks; without it those ids stay undetermined. `verify`
    needs `scope`: the nodes the plan said to recycle. The printed commands
    carry `collect_flags` and `read_flags` (decide.post_wipe.Checklist).
    """
    if verify and not scope:
        raise SpurctlError(VERIFY_NEEDS_NODES)
    invs = [inv for inv in inventories if scope is None or inv.node in scope]
    if scope is not None:
        unknown = sorted(set(scope) - set(view.nodes) - {inv.node for inv in invs})
        if unknown:
            raise SpurctlError(
                f"unknown node{'s' if len(unknown) > 1 else ''} {fold(unknown)}: the controller "
                "has no such node and no inventory names it; check --nodes"
            )
    confirmed = (
        # No doubt filter, unlike the audit's: a NOT_FOUND that hides a live job
        # only adds a node to recycle, never spares one.
        confirm_missing(view, held_ids(invs), confirm, not_found_doubt=None)
        if confirm is not None
        else {}
    )
    watermark = watermark_for(view, confirmed, flag=watermark_flag, first_job_id=first_job_id)
    assessment = assess(view, invs, watermark=watermark, confirmed=confirmed, scope=scope)
    old_spur = spur_version_note(view.version)
    if old_spur is not None:
        assessment.notes.append(old_spur)
        assessment.version_note = old_spur
        assessment.version_line = spur_version_line(view.version)
    return build(
        assessment,
        verify_nodes=scope if verify else None,
        collect_flags=collect_flags,
        read_flags=read_flags,
    )


def run_post_wipe(request: ChecklistRequest, src: Sources, conn: Connection) -> Checklist:
    """`spurctl checklist post-wipe`: the live controller and the nodes' inventories (`src`,
    its scope the request's), judged; its printed commands carry the request's flags."""
    from spurctl.sources.controller import ControllerClient

    scope = src.scope.named
    with ControllerClient(conn) as client:
        view = client.view(everything=True)  # the wipe's time is the earliest submission
        holdings = gather_holdings(src, view.nodes)
        if src.scope.excluded:
            kept = src.scope.exclude_from(view.nodes, holdings, scope)
            holdings, scope = kept.inventories, kept.scope
        checklist = post_wipe(
            view,
            holdings,
            confirm=client.confirm,
            scope=scope,
            watermark_flag=request.watermark,
            first_job_id=conn.conf.first_job_id,
            verify=request.verify,
            collect_flags=request.collect_flags,
            read_flags=request.read_flags,
        )
    checklist.assessment.cluster = conn.cluster
    return checklist
