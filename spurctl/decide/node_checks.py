"""Findings about a node as a whole, rather than one of its holdings.

What one inventory says of its node (agent-unreachable, agent-not-running),
the nodes in scope no inventory speaks for (not-inventoried), and what only the
full job list can tell: the controller's active jobs a node lost
(lost-on-node) and allocations no active job explains (phantom-alloc,
excess-alloc).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from spurctl import hostlist
from spurctl.decide.actions import ACTIONS, node_finding
from spurctl.decide.node_names import given_hostname
from spurctl.decide.reasons import amount, join, repair_remedy, when
from spurctl.errors import SpurctlError
from spurctl.model import (
    Allocation,
    ControllerView,
    Finding,
    Inventory,
    Kind,
    Placement,
    format_time,
)


def unreachable(inv: Inventory, *, unknown: bool = False) -> str:
    """agent-unreachable; `unknown`: the controller does not know the node's name either."""
    if unknown:
        return (
            f"{inv.node} is unknown to the controller (check the --nodes hostlist), and it "
            f"could not be inventoried ({inv.error}); what it holds is unknown"
        )
    return f"{inv.node} could not be inventoried ({inv.error}); what it holds is unknown"


def agent_not_running(inv: Inventory) -> str:
    """agent-not-running: the node answered, but its scan found no spurd process."""
    taken = f" at {format_time(inv.collected_at)}" if inv.collected_at else ""
    ids = [h.job_id for h in inv.held]
    what = (
        f"it holds job{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} and no agent "
        f"is there to cancel {'them' if len(ids) > 1 else 'it'}, so nothing on it is reclaimed"
        if ids
        else "it holds nothing, but it can neither run nor free a job until spurd runs"
    )
    return (
        f"no spurd process was running on {inv.node} when its inventory was taken{taken}"
        f"{given_hostname(inv)}: {what}; start spurd on it and re-collect"
    )


def not_inventoried(
    view: ControllerView,
    scoped: Collection[str],
    spoken_for: Collection[str],
    *,
    collected: bool = False,
) -> list[Finding]:
    """A finding for each node in scope that no inventory speaks for (by exact or loose name).

    What such a node holds is unknown, so the audit cannot call it clean; and a name the
    controller does not know either is most likely a typo in --nodes (gpu[01-24] for
    gpu[001-024]), which must not pass for a clean audit of nothing.

    The controller's nodes come in the controller's order, usually the operator's
    (gpu2 before gpu10): the findings are sorted by node afterwards, and an ordered
    run of ten thousand of them sorts in one pass.
    """
    known = [name for name in view.nodes if name in scoped]
    unknown = (
        [name for name in scoped if name not in view.nodes] if len(known) < len(scoped) else []
    )
    # The remedy names the node: its words before and after the name, joined in one
    # f-string per finding (a large cluster's audit names ~10,000 such nodes).
    if collected:
        fix, fix_end = (
            "this audit's --collect brought no inventory naming it; run `spurctl collect --nodes ",
            "`, with this audit's --command or --topology if it had one, to see what its "
            "command printed",
        )
    else:
        fix, fix_end = "collect it (spurctl collect --nodes ", ") or use --collect"
    kind, action = Kind.NOT_INVENTORIED, ACTIONS[Kind.NOT_INVENTORIED]
    out = [
        Finding(
            name,
            None,
            kind,
            action,
            f"no inventory speaks for {name}, so what its agent holds is unknown and it "
            f"was not audited; {fix}{name}{fix_end}",
        )
        for name in known
        # A loose key is lower case with no domain, so a name found among them is its own
        # key: only the others need theirs (an inventoried cluster's nodes mostly are).
        if name not in spoken_for and hostlist.loose_key(name) not in spoken_for
    ]
    out.extend(
        node_finding(
            name,
            Kind.NOT_INVENTORIED,
            f"the controller has no node {name} and no inventory speaks for it, so "
            "nothing was audited there; check the --nodes hostlist for a typo "
            "(e.g. gpu[01-24] for gpu[001-024])",
        )
        for name in unknown
        if hostlist.loose_key(name) not in spoken_for
    )
    return out


def full_view_findings(
    view: ControllerView,
    wanted: frozenset[str] | None,
    held_by_exact_name: Mapping[str, Inventory],
    ages: Mapping[str, float | None],
) -> tuple[list[Finding], dict[int, str]]:
    """lost-on-node, phantom-alloc and excess-alloc, and the active jobs whose nodelist
    is not read (bad, or naming more nodes than the controller lists); only sound on a
    complete view. Such a job may run on any node, so while one is active no allocation
    is judged phantom or excess.

    They run on the active jobs' placements; only a job a lost-on-node candidate
    names is read whole (for its start time, state and the finding)."""
    allocated = {
        name: alloc
        for name, alloc in view.node_allocations().items()
        if not alloc.empty and (wanted is None or name in wanted)
    }
    relevant = allocated.keys() | held_by_exact_name.keys()
    if not relevant:
        return [], {}
    limit = hostlist.nodelist_limit(len(view.nodes))
    jobs_on, unreadable = _active_jobs_by_node(view.active_by_nodelist(), relevant, limit)
    out: list[Finding] = []
    for name, inv in held_by_exact_name.items():
        out.extend(_lost_on_node(name, inv, jobs_on.get(name, []), view=view, age=ages[name]))
    if unreadable:  # a job that may run on any node may explain any node's allocation
        return out, unreadable
    for name, alloc in allocated.items():
        finding = _explain_allocation(name, alloc, jobs_on.get(name, []), age=ages.get(name))
        if finding is not None:
            out.append(finding)
    return out, unreadable


def _lost_on_node(
    name: str,
    inv: Inventory,
    on_node: list[OnNode],
    *,
    view: ControllerView,
    age: float | None,
) -> list[Finding]:
    """The active jobs the controller places on `name` that its inventory (of age `age`)
    does not hold."""
    held = {h.job_id for h in inv.held}
    now = view.taken_at
    out: list[Finding] = []
    for placed in (p for group, _ in on_node for p in group):
        if placed.job_id in held:
            continue
        job = view.jobs[placed.job_id]
        started = job.start_time
        # A run that began after the inventory was taken cannot be in it.
        if started and inv.collected_at and started >= inv.collected_at:
            continue
        since = f" since {when(started, now)}" if started else ""
        taken = f" taken at {when(inv.collected_at, now)}" if inv.collected_at else ""
        reason = (
            f"the controller has job {job.job_id} {job.state.name} on {name}{since}, "
            f"but {name}'s inventory{taken} does not hold it"
        ) + _two_names(inv)
        out.append(node_finding(name, Kind.LOST_ON_NODE, reason, job, age=age))
    return out


def _two_names(inv: Inventory) -> str:
    """Why a node may lose jobs: spurd registers under `--hostname` but reports
    completions under the OS name, which the controller rejects (Spur #684)."""
    own, os_name = inv.agent_hostname, inv.hostname
    if own is None or os_name is None or own == os_name:
        return ""
    return (
        f"; its spurd runs with --hostname {own} while the host's name is {os_name}, and "
        "spurd reports completions under the host's name, which the controller rejects "
        "(Spur #684), so jobs that ended there stay active"
    )


# Active jobs of one nodelist, and how many nodes it names (its jobs' share of a node).
OnNode = tuple[Sequence[Placement], int]


def _active_jobs_by_node(
    by_nodelist: Mapping[str, Sequence[Placement]], relevant: set[str], limit: int
) -> tuple[dict[str, list[OnNode]], dict[int, str]]:
    """The active jobs listing each relevant node, a nodelist's jobs at a time, each with
    the width of their nodelist, and the active jobs whose nodelist cannot be read.

    Each nodelist is read once, and a plain one-node list is never expanded.
    """
    out: dict[str, list[OnNode]] = {}
    unreadable: dict[int, str] = {}
    for nodelist, placed in by_nodelist.items():
        if not nodelist:
            continue
        name = hostlist.plain_name(nodelist)
        if name is not None:  # most jobs: one node, no set to build
            if name in relevant:
                on_node = out.get(name)
                if on_node is None:
                    out[name] = [(placed, 1)]
                else:  # another spelling of the same node (a suffix, a one-name range)
                    on_node.append((placed, 1))
            continue
        try:
            nodes = hostlist.expand(nodelist, limit)
        except SpurctlError:
            unreadable.update((p.job_id, nodelist) for p in placed)
            continue
        for name in nodes & relevant:
            out.setdefault(name, []).append((placed, len(nodes)))
    return out, unreadable


def _explain_allocation(
    name: str, alloc: Allocation, on_node: list[OnNode], *, age: float | None
) -> Finding | None:
    """phantom-alloc or excess-alloc: the active jobs on node `name` do not account for its
    allocation `alloc`."""
    have = (alloc.cpus, alloc.memory_mb, alloc.gpus)
    if not on_node:
        what = join(amount(v, dim) for dim, v in enumerate(have) if v) or "devices"
        return node_finding(
            name,
            Kind.PHANTOM_ALLOC,
            f"{name} has {what} allocated but no active job lists it, "
            f"so the scheduler sees it busy and nothing frees it{repair_remedy(name)}",
            age=age,
        )
    # Spur's fallback splits a job evenly over its nodes; each share rounded up reads no excess.
    cpus = memory_mb = gpus = 0
    for group, width in on_node:
        for placed in group:
            r = placed.resources
            if width == 1:
                cpus += r.cpus
                memory_mb += r.memory_mb
                gpus += r.gpus
            else:
                cpus += -(-r.cpus // width)
                memory_mb += -(-r.memory_mb // width)
                gpus += -(-r.gpus // width)
    if have[0] <= cpus and have[1] <= memory_mb and have[2] <= gpus:
        return None  # most nodes: their jobs account for all of it
    explained = (cpus, memory_mb, gpus)
    over = [dim for dim in range(3) if have[dim] > explained[dim]]
    on = sorted(p.job_id for group, _ in on_node for p in group)
    ids = ", ".join(str(i) for i in on)
    jobs = f"active jobs {ids} account" if len(on) > 1 else f"active job {ids} accounts"
    return node_finding(
        name,
        Kind.EXCESS_ALLOC,
        f"{name} has {join(amount(have[d], d) for d in over)} allocated, but its "
        f"{jobs} for {join(amount(explained[d], d) for d in over)}",
        age=age,
    )
