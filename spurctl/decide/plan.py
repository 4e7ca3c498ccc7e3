"""What a reclaim would send, and whether an entry still qualifies just before its send.

The plan is the audit's `reclaim` findings on the chosen nodes; the re-check
compares a fresh GetJob answer with the arm the entry was planned under. Both
are pure: the caller brings the report, the addresses and the fresh answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from spurctl.decide.classify import controller_decision
from spurctl.model import Action, AuditReport, Finding, Job


class Result(StrEnum):
    SENT = "sent"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Entry:
    """One planned cancel: this job on this node only, for the reason in `finding`."""

    finding: Finding
    address: str

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


@dataclass(slots=True)
class ReclaimRun:
    outcomes: list[Outcome] = field(default_factory=list)
    not_attempted: list[Entry] = field(default_factory=list)
    interrupted: bool = False

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
) -> list[Entry]:
    """The reclaimable findings on these nodes (and jobs), in node then job order."""
    node_set = set(nodes)
    wanted = set(job_ids) if job_ids else None
    return [
        Entry(f, address_of(f.node))
        for f in sorted(report.findings, key=lambda f: (f.node, f.job_id or 0))
        if f.action is Action.RECLAIM
        and f.job_id is not None
        and f.node in node_set
        and (wanted is None or f.job_id in wanted)
    ]


def recheck(entry: Entry, job: Job | None, watermark: int) -> str | None:
    """None when the entry still qualifies for its kind; else why it is skipped.

    The fresh GetJob answer must put the entry in exactly the arm it was
    planned under; any other arm (a requeue, a restart onto this node, an id
    that came back) spares it.
    """
    now = controller_decision(entry.node, job, entry.job_id, watermark)
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
