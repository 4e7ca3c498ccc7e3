"""What one autopilot round makes of its audit, pure: which nodes its drains and resumes
are (the manual commands' planners, decide/drains.py), whether the view may be acted on,
what waits on a cancel already sent (decide/one_cancel.py), the UpdateNode each chosen
drain or resume sends, and what the round's sends spent of its budgets; and the round's
report (RoundReport: the JSON line, the stderr line and the metrics).

usecases/autopilot.py reads and orders the round; act/autopilot_send.py sends what it
chose. Nothing here reads a file, the clock or the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spurctl.decide.autopilot import FLAPPING, Act, Breaker, Candidate, Choice, Sightings, State
from spurctl.decide.autopilot import waits_by_budget as _waits_by_budget
from spurctl.decide.budget import OUT_OF_SERVICE, resumed_at
from spurctl.decide.drains import NodeChange, cancel_states, drain_plan, resume_plan
from spurctl.decide.one_cancel import WAIT as CANCEL_WAIT
from spurctl.decide.one_cancel import AfterCancel, after_cancel
from spurctl.decide.owner import Ownership, Seen, journaled_drains
from spurctl.decide.plan import Entry
from spurctl.decide.repair import Target, repair_progress
from spurctl.hostlist import fold
from spurctl.model import AuditReport, Finding, Inventory, Kind, Node

# What no agent cancel can free now: the autopilot drains these (and only these).
DRAINED_KINDS = frozenset({Kind.AGENT_ORPHAN.value, Kind.LEFTOVER.value})
FLAPPING_PREFIX = f"spurctl: {FLAPPING}:"


@dataclass(frozen=True, slots=True)
class Done:
    """One call the round sent (or, in a dry run, would send), and what came of it."""

    act: str
    node: str
    job_id: int
    kind: str
    result: str  # sent, failed, skipped, would-send
    detail: str


@dataclass(slots=True)
class RoundReport:
    """One round: what the JSON line, the stderr line and the metrics say."""

    round: int
    started_at: datetime
    took_s: float
    state: State
    why: list[str]
    findings: dict[str, int]
    nodes_audited: int = 0
    nodes_needing_action: int = 0
    actions: list[Done] = field(default_factory=list)
    waiting: dict[str, int] = field(default_factory=dict)
    budgets: dict[str, int] = field(default_factory=dict)
    breaker: Breaker = field(default_factory=Breaker)
    settled: int = 0  # open intents of a killed run closed before this round
    # Since the autopilot started: rounds, and calls by (action, result).
    rounds_total: int = 0
    actions_total: dict[tuple[str, str], int] = field(default_factory=dict)
    paused: bool = False
    # Nodes left to a person this round, and why (a phantom charge without --repair, a
    # repair refused, a drain of spurctl's whose reason Spur v0.8.0 replaced).
    to_person: dict[str, str] = field(default_factory=dict)
    # Those in scope DOWN `Not responding` since spurctl's drain (decide/lost_reason.py).
    reason_lost: int = 0


@dataclass(slots=True)
class Plans:
    """What the manual commands' planners would do with a round's audit."""

    candidates: list[Candidate]
    owned: Ownership
    entries: dict[tuple[str, int], Entry]
    drains: dict[str, NodeChange]
    resumes: dict[str, NodeChange]
    notes: list[str]
    repairs: dict[str, Target]
    to_person: dict[str, str]
    # Holdings whose journaled cancel spurd may still be acting on: neither cancelled
    # again nor drained this round (decide/one_cancel.py).
    cancel_sent: int = 0


def would(c: Choice) -> Done:
    """A dry run's line for a chosen call: what it would send."""
    k = c.candidate
    return Done(k.act.value, k.node, k.job_id, k.kind, "would-send", c.why)


def blind(
    report: AuditReport, inventories: Mapping[str, Inventory], now: datetime, max_age_s: float
) -> str | None:
    """Why this round's view cannot be trusted to act on, or None."""
    if not report.view_complete:
        return (
            f"the controller's view is incomplete ({report.jobs_seen} of {report.jobs_total} "
            "jobs): a controller restart?"
        )
    old = sorted(
        name
        for name, inv in inventories.items()
        if inv.collected_at is not None and (now - inv.collected_at).total_seconds() > max_age_s
    )
    if old:
        return (
            f"the inventories of {len(old)} nodes ({fold(old)}) are older than "
            f"--max-inventory-age ({max_age_s:.0f}s): re-collect"
        )
    return None


def after_cancel_of(
    e: Entry,
    inventories: Mapping[str, Inventory],
    cancelled: Mapping[tuple[str, int], datetime],
) -> AfterCancel | None:
    """What the journal's cancel of this holding (if any) leaves for it (one_cancel)."""
    inv = inventories.get(e.node)
    names = (e.node,) if inv is None or inv.node == e.node else (e.node, inv.node)
    sent = max((t for n in names if (t := cancelled.get((n, e.job_id)))), default=None)
    held = [h for h in inv.held if h.job_id == e.job_id] if inv is not None else []
    started = held[0].started_at if len(held) == 1 else None
    return after_cancel(e.node, e.job_id, sent=sent, started=started, collected=e.collected_at)


def node_plans(
    names: Iterable[str],
    nodes: Mapping[str, Node],
    findings: list[Finding],
    inventories: Mapping[str, Inventory],
    found: list[dict[str, Any]],
    owned: Ownership,
    sightings: Sightings,
    *,
    lingering: set[str],
    now: datetime,
    cooldown_s: float,
    max_age_s: float,
    lost_release: str | None,
) -> tuple[dict[str, NodeChange], dict[str, NodeChange], list[Candidate]]:
    """The drains and resumes drain's and resume's planners would make of the nodes in
    scope (`names`), as the autopilot sends them, and their candidates. `lingering`: nodes
    still holding what their one cancel did not free, drained as what no cancel frees."""
    in_scope = set(names)
    cands: list[Candidate] = []
    # Only a node whose own name holds a finding can be drained (drain_plan sets a drain
    # on nothing else), so only those are planned: not 20,000 nodes a round. The autopilot
    # never names a node alone: the cooldown always holds.
    held = sorted({f.node for f in findings if f.job_id is not None} & in_scope)
    changes, _left = drain_plan(
        held, nodes, findings, cancel_states(found), owned,
        resumed=resumed_at(found), now=now, cooldown_s=cooldown_s, alone=False,
        lost_release=lost_release,
    )  # fmt: skip
    # What no cancel frees: agent orphans, leftovers, and a holding its one cancel did not.
    drains = {c.node: c for c in changes if c.kind in DRAINED_KINDS or c.node in lingering}
    for c in drains.values():
        key = (c.node, "finding", c.job_id, c.kind)
        cands.append(Candidate(Act.DRAIN, c.node, c.job_id, c.kind, sightings.since(key, now),
                               c.reason))  # fmt: skip
    # Only a drain the journal records spurctl setting can be spurctl's (decide/owner.py).
    drained = sorted(set(journaled_drains(found)) & in_scope)
    lifts, _left = resume_plan(
        drained, nodes, findings, inventories, now=now,
        max_age_s=max_age_s, owned=owned, repairing=repair_progress(found),
    )  # fmt: skip
    resumes = {c.node: c for c in lifts}
    sightings.seen([(c.node, "clean", 0, "resume") for c in lifts], now, family="clean")
    for c in lifts:
        since = sightings.since((c.node, "clean", 0, "resume"), now)
        cands.append(Candidate(Act.RESUME, c.node, 0, c.kind, since, c.reason))
    return drains, resumes, cands


def flapping(journaled: Iterable[Node]) -> frozenset[str]:
    """The nodes spurctl drained as flapping, still out: left to a person."""
    return frozenset(
        n.name for n in journaled
        if n.state in OUT_OF_SERVICE and n.state_reason.startswith(FLAPPING_PREFIX)
    )  # fmt: skip


def round_state(*, breaker_open: bool, paused: bool, dry_run: bool) -> State:
    return (
        State.BREAKER_OPEN if breaker_open
        else State.PAUSED if paused
        else State.DRY_RUN if dry_run
        else State.ACTING
    )  # fmt: skip


def waits(choices: list[Choice], plans: Plans) -> dict[str, int]:
    """What waits this round, by the rule or budget holding it (a cancel already sent too)."""
    held = _waits_by_budget(choices)
    if plans.cancel_sent:
        held[CANCEL_WAIT] = plans.cancel_sent
    return held


def spent_by(actions: list[Done], going: list[Choice], acting: bool) -> tuple[int, int]:
    """The mutating calls a round's sends spent (of --max-actions) and the nodes they took
    out of service (of --max-unavailable); a repair counted as decide/autopilot counts it."""
    sent = sum(1 for d in actions if d.result not in ("would-send", "skipped")
               and d.act != Act.REPAIR.value)  # fmt: skip
    # A repair's calls, as decide/autopilot counts them (its journal, next round).
    sent += sum(c.candidate.calls for c in going
                if acting and c.candidate.act is Act.REPAIR)  # fmt: skip
    drained = sum(1 for d in actions if d.act == Act.DRAIN.value and d.result == "sent")
    drained += sum(1 for c in going if acting and c.candidate.act is Act.REPAIR
                   and not c.candidate.removed)  # fmt: skip
    return sent, drained


def change_of(k: Candidate, plans: Plans, nodes: Mapping[str, Node]) -> NodeChange | str:
    """The UpdateNode the manual command's plan would send for `k`, or why none goes out."""
    if k.act is Act.RESUME:
        return plans.resumes[k.node]
    if FLAPPING not in k.reason:
        return plans.drains[k.node]
    node = nodes.get(k.node)
    if node is None:
        return f"{k.node} is not a node the controller has"
    if node.state in OUT_OF_SERVICE:
        return (
            f"{k.node} is flapping but already {node.state.name} ({node.state_reason!r}): "
            "left as it is, to a person"
        )
    return NodeChange(k.node, k.reason, k.kind, k.job_id, Seen.of(node))
