"""After a controller wipe: which held ids are hazards, which agents to recycle, and how.

A wipe restarts Spur's job counter at `first_job_id`, and every agent still
holding a pre-wipe run carries an id the new controller either never issued
(it is cancelled once the counter reaches it) or has issued again to another
run (it is cancelled at the next heartbeat, or on a controller older than
PR #623 silently shares the id). The operational rule is to recycle those
agents before submissions resume. This module judges every held id, derives
the nodes to recycle and the ordered steps, and in a verify pass ticks the
steps whose outcome the controller and the inventories now show. Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spurctl import hostlist
from spurctl.decide import supervision
from spurctl.decide.classify import controller_decision
from spurctl.decide.reasons import plural, when
from spurctl.errors import SpurctlError
from spurctl.holdings import AgentProcess, Holding, Inventory, inventories_by_node
from spurctl.model import (
    ControllerView,
    Job,
    Kind,
    NextStep,
    Node,
    NodeState,
    Watermark,
    WatermarkSource,
)

DRAIN_REASON = "post-wipe agent recycle"
AFTER_FILE = "after.jsonl"
# What the controller shows for a node no new work lands on.
OUT_OF_SERVICE = frozenset({NodeState.DRAIN, NodeState.DRAINING, NodeState.DOWN})
# A run's start comes from the node's clock, a job's submission from the controller's.
# A post-wipe run starts seconds after its submission, so a node clock a little
# behind could date it "before": only a run older than this margin counts as reissued.
CLOCK_SKEW = timedelta(seconds=60)


class Hazard(enum.StrEnum):
    """What a held id means after a wipe."""

    # Named as the audit names the same finding (model.Kind), so one word means one
    # thing in every report.
    ABOVE_WATERMARK = "above-watermark-unknown"
    REISSUED = "id-reuse-suspected"
    UNTRACKED_BELOW_WATERMARK = "below-watermark-unknown"
    # Not a hazard as far as anyone can tell, but not provably safe either: the
    # inventory lacks the run's start time, or the controller could not be asked.
    UNDETERMINED = "unverifiable"
    HEALTHY = "healthy"

    @property
    def recycle(self) -> bool:
        return self in RECYCLE_HAZARDS


RECYCLE_HAZARDS = frozenset(
    {Hazard.ABOVE_WATERMARK, Hazard.REISSUED, Hazard.UNTRACKED_BELOW_WATERMARK}
)


@dataclass(frozen=True, slots=True)
class HeldId:
    """One id a node holds, judged: its hazard and the sentence that explains it.

    `submissions_until` (above-watermark): how many more submissions at most
    until the controller issues this id. `new_run_nodes` (reissued): where the
    controller's run under this id is, "" when it has none or cannot be seen.
    """

    job_id: int
    hazard: Hazard
    reason: str
    started_at: datetime | None
    live: bool
    controller_state: str | None = None
    new_run_nodes: str | None = None
    submissions_until: int | None = None
    adopted: str | None = None  # why spurd adopts the run across restarts (supervision)


@dataclass(frozen=True, slots=True)
class NodeAssessment:
    """One node in scope: what it holds, judged, or why it could not be inventoried."""

    node: str
    held: tuple[HeldId, ...]
    error: str | None = None
    controller_node: Node | None = None
    # The node's spurd as its inventory recorded it (None: not recorded, or none runs
    # when `agent_checked`): the only proof of a restart, since the controller's
    # slurmd_start_time is set when a node record is made, which a crash does not redo.
    agent: AgentProcess | None = None
    agent_checked: bool = False

    @property
    def inventoried(self) -> bool:
        return self.error is None

    @property
    def hazards(self) -> tuple[HeldId, ...]:
        return tuple(h for h in self.held if h.hazard.recycle)

    @property
    def undetermined(self) -> tuple[HeldId, ...]:
        return tuple(h for h in self.held if h.hazard is Hazard.UNDETERMINED)

    @property
    def partitions(self) -> tuple[str, ...]:
        return self.controller_node.partitions if self.controller_node else ()


@dataclass(slots=True)
class Assessment:
    """Every node in scope, judged against one controller view and watermark."""

    controller_address: str
    controller_version: str
    taken_at: datetime
    view_complete: bool
    jobs_seen: int
    jobs_total: int
    watermark: Watermark
    nodes: dict[str, NodeAssessment]
    partitions: tuple[str, ...]
    notes: list[str] = field(default_factory=list)
    # The controller-version note among `notes` (the JSON keeps it whole) and the one
    # line the Markdown shows in its place.
    version_note: str | None = None
    version_line: str | None = None
    # The earliest submission the controller tracks: every tracked job was submitted
    # after the wipe, so a spurd started after it started after the wipe (None: no
    # tracked job dates the wipe).
    wiped_by: datetime | None = None
    # The cluster's name (spur.conf's cluster_name, else the config file's), for headers.
    cluster: str | None = None

    @property
    def nodes_to_recycle(self) -> list[str]:
        return sorted(n for n, a in self.nodes.items() if a.hazards)

    @property
    def nodes_not_inventoried(self) -> list[str]:
        return sorted(n for n, a in self.nodes.items() if not a.inventoried)

    @property
    def nodes_undetermined(self) -> list[str]:
        return sorted(n for n, a in self.nodes.items() if a.undetermined)


class StepId(enum.StrEnum):
    """Stable step ids: scripts key on these, so they never change meaning."""

    STOP_SUBMISSIONS = "stop-submissions"
    DRAIN_NODES = "drain-nodes"
    STOP_RUNS = "stop-pre-wipe-runs"
    RESTART_AGENTS = "restart-agents"
    VERIFY_INVENTORIES = "verify-inventories"
    RESUME_NODES = "resume-nodes"
    RESUME_SUBMISSIONS = "resume-submissions"


@dataclass(frozen=True, slots=True)
class Step:
    """One box of the checklist. `checkable` False: no RPC spurctl has can observe it."""

    id: StepId
    title: str
    nodes: tuple[str, ...]
    commands: tuple[NextStep, ...]
    done: bool
    checkable: bool
    detail: str


@dataclass(slots=True)
class Checklist:
    """The assessment, the ordered steps, and which nodes they concern.

    `verify` False: the plan (no box ticked). True: each checkable step is ticked
    when what it asks for now holds for every node of `nodes`.
    """

    assessment: Assessment
    nodes: tuple[str, ...]
    steps: list[Step]
    verify: bool
    # What the printed spurctl commands carry so they read as this run did: the collect
    # options (--command, --topology, ...) and the controller's (and --watermark).
    collect_flags: tuple[str, ...] = ()
    read_flags: tuple[str, ...] = ()

    @property
    def recollect(self) -> NextStep | None:
        """The collect that would inventory the nodes no inventory speaks for."""
        missing = self.assessment.nodes_not_inventoried
        if not missing:
            return None
        return NextStep.spurctl("collect", "--nodes", _fold(missing), *self.collect_flags)

    @property
    def ok(self) -> bool:
        """Exit 0: nothing needs recycling (plan), or every checkable step is done (verify)."""
        if self.verify:
            return all(s.done for s in self.steps if s.checkable)
        a = self.assessment
        return not (a.nodes_to_recycle or a.nodes_not_inventoried or a.nodes_undetermined)


# -- judging one held id --------------------------------------------------------------


def _decision(node: str, job: Job, watermark: int) -> Kind | None:
    """spurctld's own decision for this holding; None when the job's nodelist is unreadable."""
    try:
        return controller_decision(node, job, job.job_id, watermark)
    except SpurctlError:
        return None


def _reissue_consequence(kind: Kind | None, job: Job, node: str, redacted: bool) -> str:
    """What spurctld does next with the held run, by its own decision for this node."""
    j, state = job.job_id, job.state.name
    if kind is Kind.TERMINAL_HELD:
        return (
            f"the new job {j} has ended {state}, so a post-#623 controller cancels this run at "
            "the next heartbeat"
        )
    if kind is Kind.ACTIVE_ELSEWHERE:
        return (
            f"the new job {j} is {state} on {job.nodelist}, so a post-#623 controller cancels "
            "this run at the next heartbeat"
        )
    if kind is Kind.HEALTHY:
        return (
            f"the new job {j} is {state} on this very node, so the controller takes the old "
            "run for the new one and neither can be told apart by id"
        )
    if kind is Kind.MID_COMMIT and redacted:
        return (
            f"the new job {j} is {state} but its nodelist is hidden from this credential; if it "
            "runs on another node, a post-#623 controller cancels this run at the next heartbeat"
        )
    if kind is Kind.MID_COMMIT:
        return (
            f"the new job {j} is {state} but its nodelist is not recorded yet; once it is, on "
            "another node, a post-#623 controller cancels this run at the next heartbeat"
        )
    if kind is None:
        return (
            f"the new job {j} is {state} on {job.nodelist!r}, which is not a readable hostlist, "
            f"so what the controller does with this run is unknown"
        )
    return (
        f"the new job {j} is {state}; once it starts on another node a post-#623 controller "
        f"cancels this run at the next heartbeat, and if it is dispatched to {node} it collides "
        "with this run"
    )


def assess_holding(
    node: str,
    holding: Holding,
    job: Job | None,
    *,
    untracked: bool,
    asked: bool,
    watermark: Watermark,
    now: datetime,
) -> HeldId:
    """Judge one id `node` holds.

    `job` is the controller's record (from GetJobs, or GetJob when `asked`);
    None with `untracked` True means the controller does not track the id (a
    complete view, or GetJob said NOT_FOUND); None with `untracked` False means
    nobody could say, and the id is never called untracked on absence alone.
    """
    j = holding.job_id
    started = holding.started_at
    live = holding.live

    def held(
        hazard: Hazard,
        reason: str,
        *,
        controller_state: str | None = None,
        new_run_nodes: str | None = None,
        submissions_until: int | None = None,
    ) -> HeldId:
        return HeldId(
            j, hazard, reason, started, live, controller_state, new_run_nodes, submissions_until,
            supervision.adopted(holding),
        )  # fmt: skip

    if job is None and not untracked:
        return held(
            Hazard.UNDETERMINED,
            f"job {j} is missing from the controller's incomplete view and GetJob could not "
            "confirm whether it is tracked; check it by hand before trusting this node",
        )
    if job is None:
        w = watermark.value
        if j >= w:
            until = j - w + 1
            bound = "at most " if watermark.source is WatermarkSource.ESTIMATED else ""
            plural = "s" if until != 1 else ""
            return held(
                Hazard.ABOVE_WATERMARK,
                f"job {j} was never issued by this controller (watermark {w}): a post-#623 "
                f"controller cancels this run once it issues id {j}, {bound}{until} more "
                f"submission{plural} from now; an older one lets a new job {j} share the id",
                submissions_until=until,
            )
        proof = "GetJob answered NOT_FOUND" if asked else "the controller's complete view"
        return held(
            Hazard.UNTRACKED_BELOW_WATERMARK,
            f"job {j} is untracked ({proof}) and below watermark {w}: a post-#623 controller "
            "cancels this run at the next heartbeat; an older one never does, and it holds "
            "its resources until the agent is recycled",
        )

    state = job.state.name
    redacted = asked and not job.nodelist
    if started is None or job.submit_time is None:
        if started is None:
            missing = "the inventory has no start time for it"
        else:
            missing = f"the controller's job {j} has no submit time"
        return held(
            Hazard.UNDETERMINED,
            f"whether {node}'s run of job {j} predates the controller's job {j} ({state}) is "
            f"unknown: {missing}; check the run's start by hand",
            controller_state=state,
        )
    if job.submit_time - CLOCK_SKEW <= started < job.submit_time:
        return held(
            Hazard.UNDETERMINED,
            f"{node}'s run of job {j} started {when(started, now)}, less than "
            f"{CLOCK_SKEW.seconds} s before the controller's job {j} ({state}) was submitted "
            f"{when(job.submit_time, now)}: too close to tell a reissued id from node clock "
            "skew; check the run by hand",
            controller_state=state,
            new_run_nodes=job.nodelist,
        )
    if started < job.submit_time:
        kind = _decision(node, job, watermark.value)
        where = job.nodelist or ("hidden from this credential" if redacted else "none yet")
        return held(
            Hazard.REISSUED,
            f"{node}'s run of job {j} started {when(started, now)}, before the controller's "
            f"job {j} was submitted {when(job.submit_time, now)}: the id was reissued after "
            f"the wipe (new run's nodes: {where}); "
            f"{_reissue_consequence(kind, job, node, redacted)}; an older controller leaves it "
            f"silently sharing id {j} with a different run",
            controller_state=state,
            new_run_nodes=job.nodelist,
        )
    kind = _decision(node, job, watermark.value)
    reason = (
        f"{node}'s run of job {j} started {when(started, now)}, after the controller's job "
        f"{j} ({state}) was submitted {when(job.submit_time, now)}: a post-wipe run"
    )
    if kind in (Kind.TERMINAL_HELD, Kind.ACTIVE_ELSEWHERE):
        reason += f"; not a wipe hazard, but `spurctl audit` reports it as {kind.value}"
    return held(Hazard.HEALTHY, reason, controller_state=state, new_run_nodes=job.nodelist)


# -- judging the nodes ------------------------------------------------------------------


def assess(
    view: ControllerView,
    inventories: Iterable[Inventory],
    *,
    watermark: Watermark,
    confirmed: Mapping[int, Job | None],
    scope: Collection[str] | None,
) -> Assessment:
    """Judge every held id of every node in scope.

    `scope` None: every controller node and every inventoried node. A node in
    scope without an inventory, or whose inventory failed, is not inventoried:
    what it holds is unknown, and the checklist says so rather than vouch for it.
    """
    by_node = inventories_by_node(inv for inv in inventories if scope is None or inv.node in scope)
    names = (set(view.nodes) | set(by_node)) if scope is None else set(scope)
    notes: list[str] = []
    nodes: dict[str, NodeAssessment] = {}
    for name in sorted(names):
        ctl = view.nodes.get(name)
        inv = by_node.get(name)
        if inv is None:
            nodes[name] = NodeAssessment(name, (), "no inventory of this node", ctl)
            continue
        if inv.error is not None:
            nodes[name] = NodeAssessment(name, (), inv.error, ctl)
            continue
        if ctl is None:
            notes.append(
                f"inventory node {name!r} is not a node the controller knows: its scontrol "
                "commands use the inventory's name, which may not be the controller's"
            )
        judged = []
        for h in sorted(inv.held, key=lambda h: h.job_id):
            job = view.jobs.get(h.job_id)
            asked = job is None and h.job_id in confirmed
            if asked:
                job = confirmed[h.job_id]
            untracked = job is None and (asked or view.proves_untracked(h.job_id))
            judged.append(
                assess_holding(
                    name,
                    h,
                    job,
                    untracked=untracked,
                    asked=asked,
                    watermark=watermark,
                    now=view.taken_at,
                )
            )
        nodes[name] = NodeAssessment(
            name, tuple(judged), None, ctl, agent=inv.agent, agent_checked=inv.agent_checked
        )
    if not view.complete:
        unasked = sum(
            1
            for a in nodes.values()
            for h in a.held
            if h.job_id not in view.jobs and h.job_id not in confirmed
        )
        how = (
            "every held id it lacks was asked about with GetJob, and only NOT_FOUND counts as "
            "untracked"
            if not unasked
            else f"{plural(unasked, 'held id')} it lacks could not be confirmed with GetJob "
            "and are undetermined"
        )
        notes.insert(
            0,
            f"controller view is INCOMPLETE: GetJobs returned {view.coverage()} (Spur "
            f"scopes GetJobs to the credential's user); {how}",
        )
    notes.extend(view.read_notes)
    partitions = sorted({p for n in view.nodes.values() for p in n.partitions})
    submitted = [j.submit_time for j in view.jobs.values() if j.submit_time is not None]
    return Assessment(
        controller_address=view.address,
        controller_version=view.version,
        taken_at=view.taken_at,
        view_complete=view.complete,
        jobs_seen=len(view.jobs),
        jobs_total=view.jobs_total,
        watermark=watermark,
        nodes=nodes,
        partitions=tuple(partitions),
        notes=notes,
        wiped_by=min(submitted, default=None),
    )


def _fold(names: Iterable[str]) -> str:
    return hostlist.fold(sorted(names))
