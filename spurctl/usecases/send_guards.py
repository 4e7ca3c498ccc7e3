"""What refuses a whole reclaim plan before anything is sent, for reclaim and explain alike.

`reclaim` raises the refusal (exit 2, nothing sent); `explain` shows it as what
reclaim would do. Both ask here, so the two never disagree (issue 39.1).

- Endpoints: a cancel goes to an address, not to a node. Every planned entry's
  agent address, every agent-map address and the addresses of the nodes where
  the planned jobs legitimately run are resolved to canonical endpoints
  (sources/agent_endpoints.py); two nodes on one endpoint, or an entry whose
  endpoint is that of a node its job legitimately runs on, refuse the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from spurctl.decide.plan import Entry, endpoint_conflicts
from spurctl.errors import SpurctlError
from spurctl.hostlist import loose_key, named_nodes
from spurctl.sources.agent_endpoints import FORM, AddressError, Endpoint, endpoint, endpoints

if TYPE_CHECKING:
    from spurctl.sources.settings import Connection
    from spurctl.usecases.audit import AuditInputs


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
