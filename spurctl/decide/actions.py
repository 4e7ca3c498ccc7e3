"""What each kind of finding asks of the operator, and a node's finding built with it.

`ACTIONS` is the table of docs/contract.md "Findings"; a holding's finding may
ask less than its kind's action (decide/held.py), never more.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from spurctl.model import Action, Finding, Job, Kind

# docs/contract.md "Findings": each kind's action. What cannot be sure (a loose name, no
# start time on a tracked id, an unreadable nodelist) turns reclaim into investigate.
ACTIONS: Mapping[Kind, Action] = MappingProxyType(
    {
        Kind.TERMINAL_HELD: Action.RECLAIM,
        Kind.ACTIVE_ELSEWHERE: Action.RECLAIM,
        Kind.BELOW_WATERMARK_UNKNOWN: Action.RECLAIM,
        Kind.ABOVE_WATERMARK_UNKNOWN: Action.INVESTIGATE,
        Kind.UNVERIFIABLE: Action.SPARE,
        Kind.MID_COMMIT: Action.SPARE,
        Kind.NOT_STARTED: Action.SPARE,
        Kind.HEALTHY: Action.NONE,
        Kind.LOST_ON_NODE: Action.INVESTIGATE,
        Kind.PHANTOM_ALLOC: Action.INVESTIGATE,
        Kind.EXCESS_ALLOC: Action.INVESTIGATE,
        Kind.NAME_MISMATCH: Action.INVESTIGATE,
        Kind.ID_REUSE_SUSPECTED: Action.INVESTIGATE,
        Kind.AGENT_UNREACHABLE: Action.INVESTIGATE,
        Kind.AGENT_NOT_RUNNING: Action.INVESTIGATE,
        Kind.NOT_INVENTORIED: Action.INVESTIGATE,
        Kind.AGENT_ORPHAN: Action.INVESTIGATE,
        Kind.CLOCK_AHEAD: Action.INVESTIGATE,
        Kind.LEFTOVER: Action.INVESTIGATE,
    }
)


def node_finding(
    node: str, kind: Kind, reason: str, job: Job | None = None, *, age: float | None = None
) -> Finding:
    return Finding(
        node=node,
        job_id=None if job is None else job.job_id,
        kind=kind,
        action=ACTIONS[kind],
        reason=reason,
        controller_state=None if job is None else job.state.name,
        allocated_nodes=None if job is None else job.nodelist,
        inventory_age_s=age,
    )
