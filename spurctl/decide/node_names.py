"""Which controller node an inventory speaks for: its name matched exactly or loosely.

Spur compares node names exactly; an inventory's node may differ by case or as a
short name against an FQDN, or its job processes may carry the controller's own
name (SPUR_TARGET_NODE). `NameMatcher` says which node the holdings are judged
as, and why none of them may be reclaimed when the match is not exact.
"""

from __future__ import annotations

from collections.abc import Iterable

from spurctl import hostlist
from spurctl.model import Inventory


def judged_as(nodes: Iterable[str], inv: Inventory) -> tuple[str, str | None, str | None]:
    """(the controller node `inv`'s holdings are judged as, why none of them may be
    reclaimed or None, why the node is still a name-mismatch or None): the classifier's
    own name matching, for one inventory."""
    return NameMatcher(nodes).controller_name(inv)


class NameMatcher:
    """Maps an inventory's node name onto the controller's, exactly or loosely.

    Spur compares names exactly, so a loose match (case, short name vs FQDN) means
    the controller would misjudge this node's runs: it is reported, never trusted.
    """

    def __init__(self, nodes: Iterable[str]) -> None:
        self._exact = frozenset(nodes)
        # By loose key, built on the first loose match: the one node most keys name, and
        # the sorted nodes of a key several share (a list per node cost ~3x as much).
        self._loose_keys: tuple[dict[str, str], dict[str, list[str]]] | None = None

    def _loosely(self, name: str) -> list[str]:
        """The controller's nodes whose loose key is `name`'s, sorted."""
        if self._loose_keys is None:
            first: dict[str, str] = {}
            several: dict[str, list[str]] = {}
            key_of = hostlist.loose_key
            for node in self._exact:
                key = key_of(node)
                other = first.setdefault(key, node)
                if other is not node:
                    several.setdefault(key, [other]).append(node)
            for names in several.values():
                names.sort()
            self._loose_keys = first, several
        first, several = self._loose_keys
        key = hostlist.loose_key(name)
        found = several.get(key)
        if found is not None:
            return found
        return [first[key]] if key in first else []

    def controller_name(self, inv: Inventory) -> tuple[str, str | None, str | None]:
        """(the controller node to judge `inv`'s holdings as, why no holding there may be
        reclaimed or None, why the node is still a name-mismatch or None).

        SPUR_TARGET_NODE is the controller's own name for the node, carried by every
        job process spurd launches: when they all carry one name the controller has,
        that name is direct evidence, and the holdings are judged under it. Spur's
        heartbeat reclaim compares the name the agent reports (the inventory's node),
        so a differing one is still reported. Processes naming several nodes, or a
        node the controller does not have, leave the node unidentified: never reclaimed.
        """
        canonical, mismatch = self.match(inv.node)
        node = canonical or inv.node
        target = inv.target_node
        if target is None and len(inv.target_nodes) > 1:
            listed = ", ".join(repr(n) for n in inv.target_nodes)
            return (
                node,
                f"the job processes on {inv.node} name several controller nodes in "
                f"SPUR_TARGET_NODE ({listed}), so which node it is cannot be told",
                None,
            )
        if target is None:
            return node, mismatch, None
        if target not in self._exact:
            return (
                node,
                f"the job processes on {inv.node} name node {target!r} in SPUR_TARGET_NODE, "
                "which the controller does not have",
                None,
            )
        if target == inv.node:
            return target, None, None
        if canonical is not None and canonical != target:
            return (
                node,
                f"{inv.node}'s agent reports the name of controller node {canonical!r}, but its "
                f"job processes name {target!r} in SPUR_TARGET_NODE, so which node it is "
                "cannot be told",
                None,
            )
        return (
            target,
            None,
            f"{inv.node}'s job processes carry SPUR_TARGET_NODE {target!r}, the controller's "
            f"own name for it, so its holdings are judged as {target}; Spur's own reclaim "
            "compares the reported name exactly and misjudges this node's runs until they agree",
        )

    def match(self, name: str) -> tuple[str | None, str | None]:
        """(controller name or None, why the match is not exact or None)."""
        if name in self._exact:
            return name, None
        candidates = self._loosely(name)
        if len(candidates) == 1:
            other = candidates[0]
            how = "by  case" if other.lower() == name.lower() else "by short name"
            return other, f"inventory node {name!r} matches controller node {other!r} only {how}"
        if candidates:
            listed = ", ".join(repr(c) for c in candidates)
            return None, f"inventory node {name!r} loosely matches several nodes ({listed})"
        return None, f"inventory node {name!r} matches no controller node"


def mismatch_reason(mismatch: str) -> str:
    return (
        f"{mismatch}; Spur compares node names exactly, so nothing held there is "
        "reclaimed until the names agree"
    )


def renamed_note(renamed: list[Inventory]) -> str:
    """Inventories that speak for a node other than the host they were taken on: each is
    judged as the node it names, so a wrong --hostname moves one node's holdings to another."""
    shown = ", ".join(f"{inv.node} (host {inv.hostname})" for inv in renamed[:3])
    more = f" and {len(renamed) - 3:,} more" if len(renamed) > 3 else ""
    many = len(renamed) > 1
    return (
        f"{len(renamed):,} inventor{'ies were' if many else 'y was'} taken with a "
        f"node-inventory --hostname other than the host's own name: {shown}{more}; "
        f"{'each is' if many else 'it is'} judged as the node named, so check that "
        "--hostname named the right node"
    )


def given_hostname(inv: Inventory) -> str:
    """' (scanned on host X with --hostname Y)' when node-inventory was told a node name
    other than the host's own; '' otherwise."""
    if inv.hostname is None or inv.hostname == inv.node:
        return ""
    return f" (scanned on host {inv.hostname} with --hostname {inv.node})"
