"""Whether a set of inventories can belong to the controller being read at all.

Inventories are files: nothing in an older one says which cluster it was taken
on. Read against another cluster's controller with the same node names and job
ids, every verdict would be about the wrong runs (issue 39.9). Most mistakes
show in the inventories themselves, and these two are proof enough to stop a
reclaim (the caller refuses with the sentence returned):

- **The nodes are not this controller's.** More of the inventoried nodes are
  unknown to the controller (not even loosely, nor through the node their job
  processes name) than known.
- **The job ids were never issued here.** On most nodes that hold anything, a
  held id is far above the watermark: at least `far_above(watermark)`, farther
  than the jobs submitted while an audit collects could take it. Ids this
  controller never issued mean these agents take their jobs from another
  controller (or from this one before a wipe: the post-wipe checklist's case),
  and every other verdict about those nodes is then in doubt.

Agent start times prove nothing here: the controller's `slurmd_start_time` is
when it first saw a node name, which an agent's start may precede or follow
(docs/spur-facts.md), so no start time can contradict a node's membership.
Pure: the caller brings the view's node names and the watermark.
"""

from __future__ import annotations

from collections.abc import Iterable

from spurctl.hostlist import fold, is_node_name, loose_key
from spurctl.model import Inventory


def far_above(watermark: int) -> int:
    """The lowest id held "far above" the watermark: a thousand ids, or a tenth more, past it."""
    return watermark + max(1000, watermark // 10)


def foreign_inventories(
    inventories: Iterable[Inventory], node_names: Iterable[str], watermark: int
) -> str | None:
    """Why these inventories cannot be this controller's cluster's, or None."""
    known_names = {loose_key(n) for n in node_names}
    known, unknown, holding, far = 0, [], 0, []
    line = far_above(watermark)
    for inv in inventories:
        if inv.error is not None:
            continue
        names = (inv.node, inv.target_node) if inv.target_node else (inv.node,)
        if any(loose_key(n) in known_names for n in names):
            known += 1
        else:
            unknown.append(inv.node)
        if inv.held:
            holding += 1
            if any(h.job_id >= line for h in inv.held):
                far.append(inv.node)
    if len(unknown) > known:
        return (
            f"{len(unknown)} of the {known + len(unknown)} inventoried nodes "
            f"({shown_nodes(unknown)}) are nodes this controller does not know: the inventories "
            "are another cluster's"
        )
    if 2 * len(far) > holding:
        return (
            f"{len(far)} of the {holding} inventoried nodes that hold jobs "
            f"({shown_nodes(far)}) hold ids far above this controller's watermark {watermark} "
            f"(at or above {line}), which it never issued: their agents take their jobs from "
            "another controller"
        )
    return None


def shown_nodes(nodes: list[str]) -> str:
    """The nodes as one hostlist (a name a hostlist cannot hold, quoted); 50 at most."""
    some = sorted(nodes)[:50]
    plain = [n for n in some if is_node_name(n)]
    shown = ",".join([fold(plain)] * bool(plain) + [repr(n) for n in some if not is_node_name(n)])
    return shown if len(nodes) <= 50 else f"{shown} and {len(nodes) - 50} more"
