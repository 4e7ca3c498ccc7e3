"""How long each finding has lasted across repeated audits (`spurctl audit --watch`).

A Spur agent reports what it holds at every heartbeat (30 s) and the
controller answers with the ids to cancel; a reclaimable holding the controller
can see is gone within a heartbeat or two. One that survives two heartbeats is
*stranded*: the controller is not going to fix it, an operator has to.

The tracker is pure: no clock, no files, no terminal. The caller says when
each round happened and when each node's evidence was collected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from spurctl.hostlist import fold
from spurctl.model import Action, AuditReport, Finding, Kind, NextStep, SinceEvidence

HEARTBEAT = timedelta(seconds=30)
# Two heartbeats, whatever the watch interval: the controller's pace, not ours.
STRANDED_AFTER = 2 * HEARTBEAT
# How much less than the rounds a node's inventories may span and still cover them: a
# round collects some seconds after it starts, not the same seconds every round.
EVIDENCE_SLACK = timedelta(seconds=5)
# The evidence that dates a finding by the controller's own record of its job (the job's
# end, its current run's start elsewhere): read against the controller's clock, it says
# since when the controller has had reason to release the holding. A held run's start
# (RUN_START) or an inventory's time (INVENTORY) dates the holding, not when the
# controller stopped knowing its job: those findings count from the watch's sighting.
CONTROLLER_DATED = frozenset({SinceEvidence.JOB_END, SinceEvidence.JOB_START})

FindingKey = tuple[str, int | None, Kind]


def finding_key(finding: Finding) -> FindingKey:
    """What makes two rounds' findings the same one: node, job id, kind."""
    return (finding.node, finding.job_id, finding.kind)


@dataclass(frozen=True, slots=True)
class TrackedFinding:
    """A finding of the latest round and its history.

    `age` is how long spurctl has seen it (round time minus `first_seen`).
    `lasted` is what the STRANDED verdict counts: its age, or longer when the
    controller's record dates it (the job's end, its move elsewhere, read against the
    controller's own clock at this round's view: `evidence_lasted`).
    `persisted` is how long it is known to have lasted: the shorter of its age
    and the time between the node inventories of its first and latest sighting.
    An inventory file nobody re-collected shows the same holding every round,
    which proves nothing about what the controller did since; a first sighting
    from an old file proves nothing about how long ago the controller agreed.
    `stranded` is set for a reclaim finding that has lasted two heartbeats, shown by
    evidence of this watch. Either it was seen for two heartbeats (its age) and its
    node's inventories span them too, within EVIDENCE_SLACK (seen at rounds 1 to 3
    of a 30 s watch, it is stranded at round 3 even if round 3's collect ran a
    second sooner after its round's start than round 1's did); or the controller's
    record dates it two heartbeats back (`lasted`) and this round's inventory of its
    node was collected during this watch (by the round itself with --collect, or
    re-collected into the file since the watch first read it): a job that ended days
    ago and is still held in a fresh inventory is stranded in the first round.
    `evidence_stale` for one old enough to be stranded (by `lasted`) whose node's
    inventory was not collected during this watch, or not re-collected since it was
    first seen.
    `since` is when the evidence says its state began (the finding's own `since`, the
    earliest any round gave: an inventory collected anew each round must not move it
    later), `since_evidence` which evidence dated it; None when nothing did. Two
    different things: `age` is how long this watch has seen it, `since` how long the
    cluster has had it.
    """

    finding: Finding
    first_seen: datetime
    age: timedelta
    persisted: timedelta
    stranded: bool
    evidence_stale: bool = False
    since: datetime | None = None
    since_evidence: SinceEvidence | None = None
    lasted: timedelta = timedelta(0)


def evidence_lasted(f: Finding, controller_clock: datetime | None) -> timedelta | None:
    """How long before the controller's view the controller's own record says `f`'s
    state began: its `since` read against the controller's clock at that view (Ping's
    server_time), so an admin host whose clock is off by hours changes nothing. None
    when nothing the controller recorded dates it, when there is no controller clock
    to read it against, or when the time is in the controller's future."""
    if controller_clock is None or f.since is None or f.since_evidence not in CONTROLLER_DATED:
        return None
    lasted = controller_clock - f.since
    return lasted if lasted >= timedelta(0) else None


@dataclass(slots=True)
class _Sighting:
    first_seen: datetime
    first_evidence: datetime
    since: datetime | None = None
    since_evidence: SinceEvidence | None = None

    def dated(self, f: Finding) -> None:
        """Keep the earliest time the evidence gave for the finding."""
        if f.since is not None and (self.since is None or f.since < self.since):
            self.since, self.since_evidence = f.since, f.since_evidence


class Tracker:
    """Remembers when each finding was first seen; forgets it the round it disappears."""

    def __init__(self, stranded_after: timedelta = STRANDED_AFTER) -> None:
        self.stranded_after = stranded_after
        self._seen: dict[FindingKey, _Sighting] = {}
        # Each node's first inventory time this watch read (the node's clock): a later
        # one was re-collected during the watch.
        self._first_inventory: dict[str, datetime] = {}

    def update(
        self,
        findings: Iterable[Finding],
        now: datetime,
        *,
        evidence_at: Mapping[str, datetime | None] | None = None,
        collected: bool = False,
        controller_clock: datetime | None = None,
    ) -> list[TrackedFinding]:
        """Record one round's findings, taken at `now`; return them, in order, with history.

        `evidence_at` maps a node name to when its inventory was collected; a node
        missing from it, or mapped to None, counts as observed at `now`. `collected`:
        this round collected its inventories itself (--collect), so each is evidence of
        this watch. `controller_clock`: the controller's clock at this round's view
        (Ping's server_time), which the controller's times for a job are read against.
        A finding absent from this round is forgotten (if it comes back, it starts
        afresh), unless its node had no evidence this round (`blind`): then nothing
        shows it gone, and it keeps its first sighting.
        """
        evidence = evidence_at or {}
        if not collected:
            first = self._first_inventory
            for node in evidence.keys() - first.keys():  # only nodes new to the watch
                when = evidence[node]
                if when is not None:
                    first[node] = when
        seen: dict[FindingKey, _Sighting] = {}
        out: list[TrackedFinding] = []
        for f in findings:
            key = finding_key(f)
            collected_at = evidence.get(f.node)
            observed = collected_at or now
            sighting = seen.get(key) or self._seen.get(key) or _Sighting(now, observed)
            seen[key] = sighting
            sighting.dated(f)
            age = now - sighting.first_seen
            # Evidence times are the node's clock and only ever compared with each
            # other; one that went back (a clock stepped back) proves nothing.
            spanned = max(observed - sighting.first_evidence, timedelta(0))
            persisted = min(age, spanned)
            reclaim = f.action is Action.RECLAIM
            by_record = (
                evidence_lasted(f, controller_clock)
                if f.since_evidence in CONTROLLER_DATED
                else None
            )
            lasted = age if by_record is None else max(age, by_record)
            stranded = reclaim and (
                (age >= self.stranded_after and spanned >= self.stranded_after - EVIDENCE_SLACK)
                or (
                    by_record is not None
                    and by_record >= self.stranded_after
                    and self._of_this_watch(f.node, collected_at, collected)
                )
            )
            out.append(
                TrackedFinding(
                    finding=f,
                    first_seen=sighting.first_seen,
                    age=age,
                    persisted=persisted,
                    stranded=stranded,
                    evidence_stale=reclaim and not stranded and lasted >= self.stranded_after,
                    since=sighting.since,
                    since_evidence=sighting.since_evidence,
                    lasted=lasted,
                )
            )
        dark = blind(t.finding for t in out)
        for key, sighting in self._seen.items():
            if key[0] in dark:
                seen.setdefault(key, sighting)
        self._seen = seen
        return out

    def _of_this_watch(self, node: str, collected_at: datetime | None, collected: bool) -> bool:
        """Whether this round's inventory of `node` was collected during this watch: by
        the round itself, or re-collected since the watch first read the node's (an
        inventory file read as it was when the watch started proves nothing since)."""
        if collected:
            return True
        first = self._first_inventory.get(node)
        return collected_at is not None and first is not None and collected_at > first


# A node that yields one of these has no inventory this round: its holdings were not
# looked at, so their absence from the round proves nothing.
NO_EVIDENCE = frozenset({Kind.AGENT_UNREACHABLE, Kind.NOT_INVENTORIED})


def blind(findings: Iterable[Finding]) -> set[str]:
    """The nodes a round has no evidence for."""
    return {f.node for f in findings if f.kind in NO_EVIDENCE}


@dataclass(frozen=True, slots=True)
class WatchRound:
    """What one round of `audit --watch` has to show.

    When the round's audit failed, `error` says why and `report`/`tracked`
    are still those of round `report_round`, the last one that succeeded.
    `view_flags` are the options that produced the view (holdings and controller,
    never a secret): the reclaim it suggests reads the same view when pasted.
    """

    number: int
    at: datetime
    interval: float
    report: AuditReport
    tracked: Sequence[TrackedFinding]
    report_round: int
    error: str | None = None
    view_flags: tuple[str, ...] = ()

    @property
    def stranded(self) -> list[TrackedFinding]:
        return [t for t in self.tracked if t.stranded]

    @property
    def reclaim_step(self) -> NextStep | None:
        """The reclaim of every stranded holding's node, or None when none is stranded."""
        return reclaim_step(self.stranded, self.view_flags)

    @property
    def exit_status(self) -> int:
        """What a single audit would exit with now: 2 failed, 1 findings need action, else 0."""
        if self.error is not None:
            return 2
        return 1 if self.report.needs_action else 0


def reclaim_step(stranded: Iterable[TrackedFinding], view_flags: Sequence[str]) -> NextStep | None:
    """`spurctl reclaim --node NODES` for the nodes of `stranded`, with the options that
    produced the view; None when there is nothing stranded."""
    nodes = sorted({t.finding.node for t in stranded})
    if not nodes:
        return None
    return NextStep.spurctl(
        "reclaim",
        "--node",
        fold(nodes),
        *view_flags,
        why="the controller is not releasing these holdings: reclaim them",
    )
