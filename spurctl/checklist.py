"""`spurctl checklist post-wipe` as a library call: sources in, a Checklist out.

The judging and the steps are `decide.post_wipe`; this is the part that asks the
controller (GetJob, through `confirm`) and checks what the operator asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from spurctl.decide.post_wipe import Checklist, assess, build
from spurctl.errors import SpurctlError
from spurctl.model import ControllerView, Inventory, Job, watermark_for


def post_wipe(
    view: ControllerView,
    inventories: Iterable[Inventory],
    *,
    confirm: Callable[[Iterable[int]], Mapping[int, Job | None]] | None,
    scope: Collection[str] | None = None,
    watermark_flag: int | None = None,
    first_job_id: int = 1,
    verify: bool = False,
) -> Checklist:
    """The post-wipe checklist from a controller view and inventories.

    `confirm` (ControllerClient.confirm) is asked about every held id an
    incomplete view lacks; without it those ids stay undetermined. `verify`
    needs `scope`: the nodes the plan said to recycle.
    """
    if verify and not scope:
        raise SpurctlError(
            "--verify needs --nodes: the nodes the first run said to recycle "
            "(its verify command lists them)"
        )
    invs = [inv for inv in inventories if scope is None or inv.node in scope]
    if scope is not None:
        unknown = sorted(set(scope) - set(view.nodes) - {inv.node for inv in invs})
        if unknown:
            raise SpurctlError(
                f"unknown node(s) {', '.join(unknown[:5])}: the controller has no such node "
                "and no inventory names it; check --nodes"
            )
    confirmed: Mapping[int, Job | None] = {}
    if not view.complete and confirm is not None:
        missing = {h.job_id for inv in invs for h in inv.held if h.job_id not in view.jobs}
        if missing:
            confirmed = confirm(missing)
    watermark = watermark_for(view, confirmed, flag=watermark_flag, first_job_id=first_job_id)
    assessment = assess(view, invs, watermark=watermark, confirmed=confirmed, scope=scope)
    return build(assessment, verify_nodes=scope if verify else None)
