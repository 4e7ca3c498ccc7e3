"""What refuses a whole reclaim plan before anything is sent, for reclaim and explain alike.

`reclaim` raises the refusal (exit 2, nothing sent); `explain` shows it as what
reclaim would do. Both ask here, so the two never disagree (issue 39.1).

- Endpoints: a cancel goes to an address, not to a node. Every planned entry's
  agent address, every agent-map address and the addresses of the nodes where
  the planned jobs legitimately run are resolved to canonical endpoints
  (sources/agent_endpoints.py); two nodes on one endpoint, or an entry whose
  endpoint is that of a node its job legitimately runs on, refuse the plan.
- One cluster: an agent map or inventories that name a controller or cluster
  (sources/cluster_binding.py) must name the view's, and inventories that cannot
  belong to this controller at all (decide/cluster_check.py) stop the reclaim
  (issue 39.9).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from spurctl.decide.plan import Entry, endpoint_conflicts
from spurctl.errors import SpurctlError
from spurctl.hostlist import loose_key, named_nodes
from spurctl.sources.agent_endpoints import FORM, AddressError, Endpoint, endpoint, endpoints

if TYPE_CHECKING:
    from spurctl.audit_view import AuditInputs
    from spurctl.sources.settings import Connection


def legit_nodes(entries: Iterable[Entry], inputs: AuditInputs) -> dict[int, set[str]]:
    """For each planned job, the nodes the controller says it legitimately runs on now."""
    out: dict[int, set[str]] = {}
    for e in entries:
        job = inputs.view.jobs.get(e.job_id) or inputs.confirmed.get(e.job_id)
        if job is not None and job.state.active and job.nodelist:
            out[e.job_id] = named_nodes(job.nodelist)
    return out


def agent_addresses(nodes: Iterable[str], conn: Connection) -> dict[str, set[str]]:
    """Each node's agent addresses: the agent map's (or its node:port default), and every
    agent-map entry whose name loosely matches it (case, domain): the map may spell it
    differently."""
    loose: dict[str, list[str]] = {}
    for name, address in conn.agent_map.items():
        loose.setdefault(loose_key(name), []).append(address)
    return {
        node: {conn.agent_address(node), *loose.get(loose_key(node), ())} for node in set(nodes)
    }


def endpoint_refusal(
    entries: Sequence[Entry],
    inputs: AuditInputs,
    conn: Connection,
    resolve: Callable[[str], Endpoint] = endpoint,
) -> str | None:
    """Why the plan must be refused because a cancel could reach the wrong agent, or None."""
    if not entries:
        return None
    legit = legit_nodes(entries, inputs)
    weighed = {e.node for e in entries} | set(conn.agent_map)
    for names in legit.values():
        weighed |= names
    try:
        found = endpoints(agent_addresses(weighed, conn), resolve)
    except AddressError as exc:
        return (
            f"refusing the whole plan, nothing sent: {exc}; fix --agent-map (or --agent-port) "
            f"so each node names its own agent: {FORM}"
        )
    problems = endpoint_conflicts(entries, found, legit)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"refusing the whole plan, nothing sent: {problems[0]}{more}; "
        "fix --agent-map (or --agent-port) so each node names its own agent"
    )


def check_endpoints(entries: Sequence[Entry], inputs: AuditInputs, conn: Connection) -> None:
    """Refuse the plan (SpurctlError) when any cancel could reach the wrong agent."""
    why = endpoint_refusal(entries, inputs, conn)
    if why is not None:
        raise SpurctlError(why)


def cluster_refusal(
    inputs: AuditInputs,
    conn: Connection,
    resolve: Callable[[str], Endpoint] | None = None,
) -> str | None:
    """Why the reclaim must stop because what it read is not all this cluster's, or None."""
    from spurctl.decide.cluster_check import foreign_inventories, shown_nodes
    from spurctl.sources.cluster_binding import Binding, controller_list, mismatch

    cluster = conn.conf.cluster_name
    if conn.agent_map_binding:
        why = mismatch(conn.agent_map_binding, conn.controllers, cluster, resolve)
        if why is not None:
            return (
                f"refusing the reclaim, nothing sent: --agent-map {why}; use this cluster's "
                "agent map, or --controller of the cluster it names"
            )
    bound: dict[Binding, list[str]] = {}
    for name, inv in inputs.inventories.items():
        if inv.controller is None and inv.cluster is None:
            continue
        where = f"refusing the reclaim, nothing sent: the inventory of {name!r}"
        controllers = controller_list(inv.controller, where) if inv.controller else ()
        bound.setdefault(Binding(controllers, inv.cluster), []).append(name)
    for binding, nodes in sorted(bound.items(), key=lambda item: sorted(item[1])):
        why = mismatch(binding, conn.controllers, cluster, resolve)
        if why is not None:
            return (
                f"refusing the reclaim, nothing sent: the inventories of {shown_nodes(nodes)} "
                f"{why}; collect this cluster's nodes again (--collect), or point --controller "
                "at the controller they name"
            )
    foreign = foreign_inventories(
        inputs.inventories.values(), inputs.view.nodes, inputs.watermark.value
    )
    if foreign is not None:
        return (
            f"refusing the reclaim, nothing sent: {foreign}; check --controller against the "
            "inventories (after a controller wipe: spurctl checklist post-wipe)"
        )
    return None


def check_cluster(inputs: AuditInputs, conn: Connection) -> None:
    """Stop the reclaim (SpurctlError) when what it read is not all this cluster's."""
    why = cluster_refusal(inputs, conn)
    if why is not None:
        raise SpurctlError(why)
