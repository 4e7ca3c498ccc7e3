"""Where a reclaim plan's cancels would go, and which cluster its files name: resolved
once, before anything is decided (decide/send_guards.py judges what is found here;
reclaim and explain both ask, so the two never disagree, issue 39.1).

- Addresses: a cancel goes to an address, not to a node. Each node's agent address is
  the agent map's, or its node:port default (`fallback`); every agent-map entry whose
  name loosely matches the node (case, domain) counts as its address too.
- Endpoints: the addresses of the planned nodes, of the nodes where the planned jobs
  legitimately run, and every agent-map address, each resolved to its canonical
  endpoint (sources/agent_endpoints.py); an address spurctl will not dial is said
  instead (`unresolvable`).
- Bindings: the controller or cluster the agent map and each inventory name, and the
  one each inventoried node's spurd says it is in (sources/cluster_binding.py), compared
  with the view's (issues 39.9, 50.4). Repair, drain and resume ask for these alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spurctl.hostlist import loose_key
from spurctl.sources.agent_endpoints import FORM, AddressError, Endpoint, endpoint, endpoints

if TYPE_CHECKING:
    from spurctl.model import Inventory
    from spurctl.sources.settings import Connection

Resolve = Callable[[str], Endpoint]


@dataclass(frozen=True, slots=True)
class Targets:
    """What a plan's sends would reach, as far as it can be known before sending."""

    # Each node that may be planned -> its agent address.
    addresses: Mapping[str, str] = field(default_factory=dict)
    # Those the agent map lacks: their address is the node:port default.
    fallback: frozenset[str] = frozenset()
    # Every node weighed (planned, legitimately running a planned job, in the agent
    # map) -> its endpoint; empty when an address could not be read (`unresolvable`).
    endpoints: Mapping[str, Endpoint] = field(default_factory=dict)
    # Why an address is one spurctl will not dial, and how to fix it.
    unresolvable: str | None = None
    # How the agent map fails to name this cluster (None: it names nothing, or this one).
    agent_map_mismatch: str | None = None
    # The first group of inventories naming another cluster: (their nodes, how).
    inventory_mismatch: tuple[tuple[str, ...], str] | None = None

    def address(self, node: str) -> str:
        return self.addresses[node]

    def lacks(self, node: str) -> bool:
        return node in self.fallback


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


def resolve_targets(
    nodes: Iterable[str],
    legit: Mapping[int, Iterable[str]],
    inventories: Mapping[str, Inventory],
    conn: Connection,
    resolve: Resolve = endpoint,
    resolve_controller: Resolve | None = None,
) -> Targets:
    """Resolve where the cancels on `nodes` would go (`legit`: each planned job's nodes,
    whose agents must not be reached) and which cluster `inventories` and the agent map
    name. Nothing is resolved for an empty plan but the bindings."""
    planned = sorted(set(nodes))
    map_why, inventory_why = bindings(inventories, conn, resolve_controller)
    found: Mapping[str, Endpoint] = {}
    unresolvable = None
    if planned:
        weighed = set(planned) | set(conn.agent_map)
        for names in legit.values():
            weighed |= set(names)
        try:
            found = endpoints(agent_addresses(weighed, conn), resolve)
        except AddressError as exc:
            unresolvable = (
                f"{exc}; fix --agent-map (or --agent-port) so each node names its own agent: {FORM}"
            )
    return Targets(
        addresses={n: conn.agent_address(n) for n in planned},
        fallback=frozenset(n for n in planned if conn.agent_map_lacks(n)),
        endpoints=found,
        unresolvable=unresolvable,
        agent_map_mismatch=map_why,
        inventory_mismatch=inventory_why,
    )


def bindings(
    inventories: Mapping[str, Inventory],
    conn: Connection,
    resolve: Resolve | None = None,
    what: str = "the reclaim",
) -> tuple[str | None, tuple[tuple[str, ...], str] | None]:
    """How the agent map, else the first group of inventories naming one cluster (what
    collect was told, then what their spurd says), fails to name the view's (its
    --controller URLs, compared as endpoints, and spur.conf's cluster_name). `what`
    names the command refused in an unreadable file's error."""
    from spurctl.sources.cluster_binding import Binding, controller_list, mismatch

    cluster = conn.conf.cluster_name
    if conn.agent_map_binding:
        map_why = mismatch(conn.agent_map_binding, conn.controllers, cluster, resolve)
        if map_why is not None:
            return map_why, None
    told: dict[Binding, list[str]] = {}
    said: dict[Binding, list[str]] = {}
    for name, inv in inventories.items():
        where = f"refusing {what}, nothing sent: the inventory of {name!r}"
        if inv.controller is not None or inv.cluster is not None:
            controllers = controller_list(inv.controller, where) if inv.controller else ()
            told.setdefault(Binding(controllers, inv.cluster), []).append(name)
        if inv.agent_controller is not None or inv.agent_cluster is not None:
            own = f"{where}: agent_config"
            controllers = controller_list(inv.agent_controller, own) if inv.agent_controller else ()
            said.setdefault(Binding(controllers, inv.agent_cluster), []).append(name)
    for group, node_word in ((told, False), (said, True)):
        for binding, names in sorted(group.items(), key=lambda item: sorted(item[1])):
            why = mismatch(binding, conn.controllers, cluster, resolve, unnamed_view=node_word)
            if why is not None:
                return None, (tuple(names), f"say their spurd {why}" if node_word else why)
    return None, None
