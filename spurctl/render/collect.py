"""What `spurctl collect` reports on stderr: which nodes answered, and why the others did not."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spurctl.decide.reasons import plural
from spurctl.errors import warn
from spurctl.hostlist import fold, is_node_name
from spurctl.model import Inventory


def summarize(results: Sequence[Inventory]) -> str:
    """Ok and failed nodes folded as hostlists, then each failure reason with its nodes."""
    ok = [inv.node for inv in results if inv.error is None]
    alike: dict[str, list[Inventory]] = {}
    for inv in results:
        if inv.error is not None:
            # ssh names the host in its message; with the name taken out, 24 nodes that
            # failed alike are one line (as `clush -b` folds them).
            why = inv.error.replace(inv.node, "%h") if len(inv.node) > 1 else inv.error
            alike.setdefault(why, []).append(inv)
    bad: dict[str, list[str]] = {
        (why if len(invs) > 1 else str(invs[0].error)): [inv.node for inv in invs]
        for why, invs in alike.items()
    }
    lines = [f"collected {len(ok)} of {plural(len(results), 'node')}"]
    if ok:
        lines.append(f"ok ({len(ok)}): {_fold(ok)}")
    if bad:
        failed_nodes = [n for names in bad.values() for n in names]
        lines.append(f"failed ({len(failed_nodes)}): {_fold(failed_nodes)}")
        for error, names in bad.items():
            lines.append(f"  {_fold(names)}: {error}")
        if any(len(invs) > 1 and why != invs[0].error for why, invs in alike.items()):
            lines.append("  (%h: each node's own name)")
    return "\n".join(lines)


def _fold(names: list[str]) -> str:
    foldable = [n for n in names if is_node_name(n)]
    # Names with hostlist syntax characters would fold into something else; list them as is.
    folded = [fold(foldable)] if foldable else []
    return ",".join(folded + [repr(n) for n in names if not is_node_name(n)])


def unreadable_environments(count: int, *, as_root: bool) -> str:
    """node-inventory's warning when processes' environments could not be read: run as
    root, unless it already was (then something beyond root's rights stopped it)."""
    remedy = (
        "something beyond root's rights stopped it (a security module, or /proc mounted "
        "with hidepid); check how /proc is mounted"
        if as_root
        else "run it as root"
    )
    return (
        f"the environment of {count} process{'es' if count != 1 else ''} "
        f"could not be read (permission denied), so jobs only they belong to are missing: "
        f"{remedy}."
    )


def no_agent_running(inv: Inventory, proc_root: str) -> str:
    """node-inventory's warning when the scan found no spurd: the document says so too
    (`agent: null`), and an audit reports the node agent-not-running."""
    host = (
        f" (host {inv.hostname}, --hostname {inv.node})"
        if inv.hostname is not None and inv.hostname != inv.node
        else ""
    )
    return (
        f"no spurd process is running on {inv.node}{host} (none in "
        f"{proc_root}): the inventory records agent: null, and an audit reports this node "
        "agent-not-running."
    )


def tell_scan(inventory: Inventory, denied: int, *, proc_root: str, as_root: bool) -> None:
    """node-inventory's stderr: the processes it could not read, and a missing spurd."""
    if denied:
        warn(unreadable_environments(denied, as_root=as_root))
    if inventory.agent_checked and inventory.agent is None:
        warn(no_agent_running(inventory, proc_root))


def show_collected(lines: str, results: Sequence[Inventory], output: Path | None) -> None:
    """collect's JSON Lines (`lines`) to `output` (stdout when None), whole, then on
    stderr which nodes answered and why the others did not."""
    import sys

    from spurctl.render.common import write_told

    print(summarize(results), file=sys.stderr)
    write_told(lines, output, f"{plural(len(results), 'inventory', 'inventories')} (JSON Lines)")
