"""What a reclaim would send, and whether an entry still qualifies just before its send.

The plan is the audit's `reclaim` findings on the chosen nodes; the re-check
compares a fresh GetJob answer with the arm the entry was planned under. Both
are pure: the caller brings the report, the addresses and the fresh answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from spurctl.decide.classify import controller_decision
from spurctl.decide.freshness import CLOCK_AHEAD_S
from spurctl.decide.health import refused_send
from spurctl.hostlist import names_token
from spurctl.model import Action, AuditReport, Finding, Job, Kind


class Result(StrEnum):
    SENT = "sent"
    SKIPPED = "skipped"
    FAILED = "failed"
    # Sent, but the re-collect that should have shown the node free failed.
    UNCONFIRMED = "unconfirmed"


def confirmed(result: Result, verified: bool) -> bool | None:
    """Whether a node showed this outcome's job gone (`verified`: the touched nodes were
    re-collected); None when nothing was sent, or the node still holds it (failed)."""
    if result is Result.SENT:
        return verified
    if result is Result.UNCONFIRMED:
        return False
    return None


@dataclass(frozen=True, slots=True)
class Entry:
    """One planned cancel: this job on this node only, for the reason in `finding`."""

    finding: Finding
    address: str
    # When the node's inventory behind the finding was collected (None: unknown).
    collected_at: datetime | None = None
    # True when `address` is the guess node:port: no agent map, or one without the node.
    fallback: bool = False

    @property
    def node(self) -> str:
        return self.finding.node

    @property
    def job_id(self) -> int:
        assert self.finding.job_id is not None  # reclaim findings always name a job
        return self.finding.job_id


@dataclass(slots=True)
class Outcome:
    entry: Entry
    result: Result
    detail: str
    # How long after the sends a re-collect last looked at the node (None: it did not).
    waited_s: float | None = None


@dataclass(slots=True)
class ReclaimRun:
    outcomes: list[Outcome] = field(default_factory=list)
    not_attempted: list[Entry] = field(default_factory=list)
    interrupted: bool = False
    # The signal that stopped the run ("SIGINT", "SIGTERM", "SIGHUP"), when one did.
    stopped_by: str | None = None
    # How long the re-collect after the sends waited in all (None: there was none).
    waited_s: float | None = None

    @property
    def ok(self) -> bool:
        return (
            not self.interrupted
            and not self.not_attempted
            and all(o.result is Result.SENT for o in self.outcomes)
        )


def plan(
    report: AuditReport,
    nodes: Iterable[str],
    job_ids: Iterable[int] | None,
    address_of: Callable[[str], str],
    *,
    collected_at: Mapping[str, datetime | None] | None = None,
    fallback: Callable[[str], bool] | None = None,
) -> list[Entry]:
    """The reclaimable findings on these nodes (and jobs), in node then job order."""
    when = collected_at or {}
    return [
        Entry(
            f,
            address_of(f.node),
            when.get(f.node),
            fallback(f.node) if fallback is not None else False,
        )
        for f in reclaimable(report, nodes, job_ids)
    ]


def reclaimable(
    report: AuditReport, nodes: Iterable[str], job_ids: Iterable[int] | None
) -> list[Finding]:
    """The findings a plan of these nodes (and jobs) cancels, in node then job order:
    what the plan's addresses are resolved for before it is made."""
    node_set = set(nodes)
    wanted = set(job_ids) if job_ids else None
    return [
        f
        for f in sorted(report.findings, key=lambda f: (f.node, f.job_id or 0))
        if f.action is Action.RECLAIM
        and f.job_id is not None
        and f.node in node_set
        and (wanted is None or f.job_id in wanted)
    ]


def recheck(
    entry: Entry, job: Job | None, watermark: int, not_found_doubt: str | None = None
) -> str | None:
    """None when the entry still qualifies for its kind; else why it is skipped.

    The fresh GetJob answer must put the entry in exactly the arm it was
    planned under; any other arm (a requeue, a restart onto this node, an id
    that came back) spares it. Under `not_found_doubt` (a credential that may
    not see other users' jobs), a NOT_FOUND proves nothing and spares it too.
    """
    if job is None and not_found_doubt is not None:
        return (
            f"not sent: GetJob answered NOT_FOUND for job {entry.job_id}, which is not proof "
            f"here: {not_found_doubt}"
        )
    health_check = refused_send(job)  # a health check is never cancelled, however it reads
    if health_check is not None:
        return health_check
    now = controller_decision(entry.node, job, entry.job_id, watermark)
    if now is Kind.ACTIVE_ELSEWHERE and job is not None and names_token(job.nodelist, entry.node):
        # The classifier's backstop, again at the last moment before the send.
        return (
            f"not sent: job {entry.job_id}'s nodelist {job.nodelist!r} names {entry.node}; "
            "its run there may be the legitimate one"
        )
    if now is entry.finding.kind:
        return None
    if job is None:
        state = "untracked (NOT_FOUND)"
    else:
        where = f" on {job.nodelist}" if job.nodelist else " with no nodelist yet"
        state = f"{job.state.name}{where}"
    return (
        f"no longer {entry.finding.kind.value}: job {entry.job_id} is now {state}, "
        f"which reads as {now.value} for {entry.node}"
    )


def duration(seconds: float) -> str:
    """90 -> '90s', 600 -> '10m', 3600 -> '1h', 5400 -> '90m': short, exact where it can be."""
    s = int(seconds)
    if s >= 3600 and s % 3600 == 0:
        return f"{s // 3600}h"
    if s >= 60 and s % 60 == 0:
        return f"{s // 60}m"
    if s >= 3600:
        return f"{s / 3600:.1f}h"
    if s >= 600:
        return f"{s // 60}m"
    return f"{s}s"


def inventory_age_s(entry: Entry, now: datetime) -> float | None:
    """How old the entry's inventory is at `now`, in seconds; None when unknown."""
    if entry.collected_at is None:
        return None
    return (now - entry.collected_at).total_seconds()


def stale_reason(entry: Entry, now: datetime, max_age_s: float) -> str | None:
    """Why the entry's inventory is too old to act on at `now`, or None when it is fresh enough.

    A holding seen long ago may have ended, or its id been reissued, since: the
    cancel would act on evidence nobody has looked at lately. An inventory with
    no collection time is as old as can be.
    """
    age = inventory_age_s(entry, now)
    limit = duration(max_age_s)
    if age is None:
        return (
            f"not sent: {entry.node}'s inventory has no collected_at, so it may be older than "
            f"--max-inventory-age {limit}; re-collect it (--collect)"
        )
    if age < -CLOCK_AHEAD_S:
        return (
            f"not sent: {entry.node}'s inventory is dated {duration(-age)} ahead of this "
            f"host's clock (more than the {duration(CLOCK_AHEAD_S)} allowed), so its age "
            "proves nothing: the node's clock is ahead; fix it and re-collect (--collect)"
        )
    if age > max_age_s:
        return (
            f"not sent: {entry.node}'s inventory was collected {duration(age)} ago, older "
            f"than --max-inventory-age {limit}; re-collect it (--collect)"
        )
    return None


# One agent endpoint: every (address, port) its "host:port" resolves to, and the
# host as written. Two endpoints are the same agent when they share any member.
Endpoint = frozenset[tuple[str, int]]


def endpoint_conflicts(
    entries: Iterable[Entry],
    endpoint_of: Mapping[str, Endpoint],
    legit_nodes: Mapping[int, Iterable[str]],
) -> list[str]:
    """Why the plan must be refused as a whole (empty: it may go ahead).

    A cancel goes to an address, not to a node: when two nodes resolve to one
    agent endpoint (a wrong agent map), a cancel meant for one reaches the
    other; when an entry's endpoint is that of a node its job legitimately runs
    on, the cancel kills the live run. `endpoint_of` maps every node to weigh
    (the planned ones, their jobs' nodes, the agent map's) to its endpoint;
    `legit_nodes` maps a planned job to the nodes it legitimately runs on.
    """
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    names = sorted(endpoint_of)
    by_member: dict[tuple[str, int], list[str]] = {}
    for name in names:
        for member in endpoint_of[name]:
            by_member.setdefault(member, []).append(name)
    for e in entries:
        mine = endpoint_of.get(e.node, frozenset())
        for job_node in sorted(set(legit_nodes.get(e.job_id, ()))):
            if job_node == e.node:
                continue
            if mine & endpoint_of.get(job_node, frozenset()):
                pair = tuple(sorted((e.node, job_node)))
                seen.add((pair[0], pair[1]))
                problems.append(
                    f"the cancel of job {e.job_id} on {e.node} would go to {e.address}, which "
                    f"is the agent of {job_node}, where job {e.job_id} legitimately runs"
                )
        for member in sorted(mine):
            for other in by_member.get(member, ()):
                pair = tuple(sorted((e.node, other)))
                if other == e.node or pair in seen:
                    continue
                seen.add((pair[0], pair[1]))
                problems.append(
                    f"{e.node} and {other} resolve to one agent endpoint "
                    f"({member[0]}:{member[1]}); a cancel for one would reach the other"
                )
    return problems


def unmatched_jobs(entries: Iterable[Entry], job_ids: Iterable[int] | None) -> list[int]:
    """The --job ids no planned entry names, in order."""
    if not job_ids:
        return []
    planned = {e.job_id for e in entries}
    return sorted({j for j in job_ids if j not in planned})
