"""-x/--exclude: the nodes an operator leaves out, taken out of a use case's inputs once.

An excluded node is matched by either of its names (case and domain aside, as
the classifier's loose match, and by the SPUR_TARGET_NODE its job processes
carry), so leaving out `gpu021` also leaves out the inventory that reports
`gpu021.cluster.local`: nothing of it is audited, planned or reclaimed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from spurctl.hostlist import fold, loose_key
from spurctl.model import Inventory


@dataclass(frozen=True, slots=True)
class Excluded:
    """What is left once -x is applied: the inventories, the scope, and who was left out."""

    inventories: list[Inventory]
    scope: frozenset[str]
    # The left-out nodes that were in scope, one name each (the controller's when it has it).
    left_out: tuple[str, ...]


def _keys(inv: Inventory) -> set[str]:
    return {loose_key(n) for n in (inv.node, inv.target_node, *inv.target_nodes) if n}


def excluding(
    exclude: Collection[str],
    view_nodes: Collection[str],
    inventories: Iterable[Inventory],
    scope: Collection[str] | None,
) -> Excluded:
    """`inventories` and `scope` (None: every controller node and every inventory) with
    every node of `exclude` taken out."""
    keys = {loose_key(n) for n in exclude}
    invs = list(inventories)
    kept = [inv for inv in invs if not (_keys(inv) & keys)]
    whole = set(scope) if scope is not None else set(view_nodes) | {i.node for i in invs}
    out = {n for n in whole if loose_key(n) in keys}
    # One name per node: the controller's where it has the node.
    names: dict[str, str] = {}
    for name in sorted(out, key=lambda n: (n not in view_nodes, n)):
        names.setdefault(loose_key(name), name)
    return Excluded(kept, frozenset(whole - out), tuple(sorted(names.values())))


def excluded_note(left_out: Collection[str]) -> str:
    """The audit's note naming how many nodes -x left out."""
    count = len(left_out)
    return (
        f"{count:,} node{'s' if count != 1 else ''} excluded by -x and not audited: "
        f"{fold(left_out)}."
    )
