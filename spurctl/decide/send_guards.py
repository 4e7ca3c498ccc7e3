"""What refuses a whole reclaim plan before anything is sent, for reclaim and explain alike.

`reclaim` raises the refusal (exit 2, nothing sent); `explain` shows it as what
reclaim would do. Both judge what sources/send_targets.py resolved, here, so the
two never disagree (issue 39.1). Pure: the caller brings the resolved targets, the
view's jobs and the inventories.

- Endpoints: two nodes on one agent endpoint, or an entry whose endpoint is that of
  a node its job legitimately runs on, refuse the plan; so does an address spurctl
  will not dial.
- One cluster: an agent map or inventories that name another controller or cluster
  than the view's, and inventories that cannot belong to this controller at all
  (decide/cluster_check.py), stop the reclaim (issue 39.9).
- The credential: with `[auth] mode = required` and no cluster key, every agent would
  refuse every cancel, so a real run stops before its prompt and a dry run says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from spurctl.decide.cluster_check import foreign_inventories, shown_nodes
from spurctl.decide.plan import Endpoint, Entry, endpoint_conflicts
from spurctl.hostlist import named_nodes
from spurctl.model import Inventory, Job

_KEY_SOURCES = "pass --jwt-key-file, set SPUR_JWT_KEY_FILE, or set [auth] jwt_key"


class Reach(Protocol):
    """Where the plan's cancels would go, as sources/send_targets.Targets resolved it."""

    @property
    def endpoints(self) -> Mapping[str, Endpoint]: ...
    @property
    def unresolvable(self) -> str | None: ...
    @property
    def agent_map_mismatch(self) -> str | None: ...
    @property
    def inventory_mismatch(self) -> tuple[tuple[str, ...], str] | None: ...


def legit_nodes(job_ids: Iterable[int], job_of: Callable[[int], Job | None]) -> dict[int, set[str]]:
    """For each planned job, the nodes the controller says it legitimately runs on now."""
    out: dict[int, set[str]] = {}
    for job_id in job_ids:
        job = job_of(job_id)
        if job is not None and job.state.active and job.nodelist:
            out[job_id] = named_nodes(job.nodelist)
    return out


def endpoint_refusal(
    entries: Sequence[Entry], reach: Reach, legit: Mapping[int, Iterable[str]]
) -> str | None:
    """Why the plan must be refused because a cancel could reach the wrong agent, or None."""
    if not entries:
        return None
    if reach.unresolvable is not None:
        return f"refusing the whole plan, nothing sent: {reach.unresolvable}"
    problems = endpoint_conflicts(entries, reach.endpoints, legit)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"refusing the whole plan, nothing sent: {problems[0]}{more}; "
        "fix --agent-map (or --agent-port) so each node names its own agent"
    )


def binding_refusal(reach: Reach, what: str = "the reclaim") -> str | None:
    """Why `what` must stop because the agent map or inventories name another cluster than
    the view's (what collect was told, or what the nodes' own spurd says), or None."""
    if reach.agent_map_mismatch is not None:
        return (
            f"refusing {what}, nothing sent: --agent-map {reach.agent_map_mismatch}; use "
            "this cluster's agent map, or --controller of the cluster it names"
        )
    if reach.inventory_mismatch is not None:
        nodes, why = reach.inventory_mismatch
        return (
            f"refusing {what}, nothing sent: the inventories of {shown_nodes(list(nodes))} "
            f"{why}; collect this cluster's nodes again (--collect), or point --controller "
            "at the controller they name"
        )
    return None


def cluster_refusal(
    reach: Reach, inventories: Iterable[Inventory], node_names: Iterable[str], watermark: int
) -> str | None:
    """Why the reclaim must stop because what it read is not all this cluster's, or None."""
    bound = binding_refusal(reach)
    if bound is not None:
        return bound
    foreign = foreign_inventories(inventories, node_names, watermark)
    if foreign is not None:
        return (
            f"refusing the reclaim, nothing sent: {foreign}; check --controller against the "
            "inventories (after a controller wipe: spurctl checklist post-wipe)"
        )
    return None


def key_refusal(has_key: bool, auth_mode: str | None) -> str | None:
    """Why a send must stop before its prompt: every agent would reject it for want of a
    key; None when it may go ahead."""
    if has_key or (auth_mode or "").lower() != "required":
        return None
    return f"spur.conf says [auth] mode = required but no cluster key is configured: {_KEY_SOURCES}"


def key_warning(has_key: bool, auth_mode: str | None) -> str | None:
    """What a dry run must say about the real run's credential: None when a key is set."""
    if has_key:
        return None
    if (auth_mode or "").lower() == "required":
        return (
            "the real run would stop after this plan: spur.conf says [auth] mode = required "
            f"but no cluster key is configured ({_KEY_SOURCES})"
        )
    return (
        "no cluster key is configured: the real run sends its cancels without a credential, "
        f"which an agent with authentication on refuses ({_KEY_SOURCES})"
    )


def refusal(
    entries: Sequence[Entry],
    reach: Reach,
    legit: Mapping[int, Iterable[str]],
    inventories: Iterable[Inventory],
    node_names: Iterable[str],
    watermark: int,
) -> str | None:
    """Why the whole plan is refused before anything is sent (the cluster first, then the
    endpoints), or None when it may go ahead."""
    return cluster_refusal(reach, inventories, node_names, watermark) or endpoint_refusal(
        entries, reach, legit
    )
