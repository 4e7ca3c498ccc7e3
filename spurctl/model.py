"""The plain data spurctl reasons about: the controller's view, and what spurctl
concludes from it (findings, reports, plans, next steps).

What agents hold (a node's inventory and its holdings) is the other half, in
holdings.py; Holding, Inventory and AgentProcess, which most of spurctl imports
from here, are importable from here too. So is NextStep (next_step.py), which
sits below errors.py since a SpurctlError may carry one.

Sources (gRPC, snapshot files, inventories) convert into these types once, at
the edge; nothing past the edge sees a protobuf message or a raw dict. All times
are timezone-aware UTC datetimes or None when unknown.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Literal

import msgspec

from spurctl.errors import SpurctlError
from spurctl.holdings import MAX_JOB_ID as MAX_JOB_ID
from spurctl.holdings import AgentProcess as AgentProcess
from spurctl.holdings import Holding as Holding
from spurctl.holdings import Inventory as Inventory
from spurctl.next_step import NextStep as NextStep


class JobState(enum.IntEnum):
    """Spur's JobState, numbered as on the wire (proto names carry a JOB_ prefix)."""

    PENDING = 0
    RUNNING = 1
    COMPLETING = 2
    COMPLETED = 3
    FAILED = 4
    CANCELLED = 5
    TIMEOUT = 6
    NODE_FAIL = 7
    PREEMPTED = 8
    SUSPENDED = 9
    DEADLINE = 10
    OUT_OF_MEMORY = 11
    REQUEUED = 12

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def active(self) -> bool:
        return self in ACTIVE_STATES


# spur-core job.rs: PREEMPTED and REQUEUED are deliberately not terminal (the
# job may run again under the same id).
TERMINAL_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.DEADLINE,
        JobState.OUT_OF_MEMORY,
    }
)
ACTIVE_STATES = frozenset({JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED})
NOT_STARTED_STATES = frozenset({JobState.PENDING, JobState.PREEMPTED, JobState.REQUEUED})


class NodeState(enum.IntEnum):
    """Spur's NodeState, numbered as on the wire (proto names carry a NODE_ prefix)."""

    IDLE = 0
    ALLOCATED = 1
    MIXED = 2
    DOWN = 3
    DRAIN = 4
    DRAINING = 5
    ERROR = 6
    UNKNOWN = 7
    SUSPENDED = 8


# The plain value records are msgspec Structs too: every command defines them at import,
# and a Struct class is made in ~10 us where a dataclass's generated methods take ~0.4 ms.
class Device(msgspec.Struct, frozen=True):
    """One allocated device of a gres (e.g. GPU 3), with its count."""

    device_id: int
    count: int = 1


@dataclass(frozen=True, slots=True)
class Allocation:
    """Spur's ResourceAllocations: cpus, memory and devices keyed by gres name."""

    cpus: int = 0
    memory_mb: int = 0
    devices: dict[str, tuple[Device, ...]] = field(default_factory=dict)
    # How many GPUs this allocation holds (the sum of the "gpu" gres counts): counted
    # once, since the audit asks per job per node.
    gpus: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", sum(d.count for d in self.devices.get("gpu", ())))

    @property
    def empty(self) -> bool:
        return self.cpus == 0 and self.memory_mb == 0 and not any(self.devices.values())


class Gpu(msgspec.Struct, frozen=True):
    device_id: int
    gpu_type: str = ""
    memory_mb: int = 0


class ResourceSet(msgspec.Struct, frozen=True):
    """Spur's ResourceSet: what a node has in total."""

    cpus: int = 0
    memory_mb: int = 0
    gpus: tuple[Gpu, ...] = ()
    generic: dict[str, int] = msgspec.field(default_factory=dict)


# A msgspec Struct, built in C: an audit converts one per held job (~50,000 at 20,000
# nodes) as the controller's answers arrive.
class Job(msgspec.Struct, gc=False):
    """One job as the controller reports it (JobInfo). Treat as read-only: views share
    their jobs (and an Allocation with every job of the same shape)."""

    job_id: int
    state: JobState
    nodelist: str = ""
    name: str = ""
    user: str = ""
    uid: int = 0
    partition: str = ""
    account: str = ""
    state_reason: str = ""
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    num_nodes: int = 0
    num_tasks: int = 0
    resources: Allocation = msgspec.field(default_factory=Allocation)
    array_job_id: int = 0
    array_task_id: int = 0


class Placement(msgspec.Struct, frozen=True, order=True, gc=False):
    """Where an active job runs and what it holds there: all the node checks ask of it.

    A 20,000-node cluster runs ~100,000 jobs; the few the checks name are read whole
    (`ControllerView.jobs`), the rest never need to be.
    """

    job_id: int
    nodelist: str
    resources: Allocation


class JobGlance(msgspec.Struct, frozen=True, gc=False):
    """The four fields of a job that tell a plainly healthy holding of it (the job active,
    its nodelist naming the node, submitted before the run began), read from its record
    without converting the rest. A Job answers the same four questions."""

    job_id: int
    state: JobState
    nodelist: str
    submit_time: datetime | None


def group_by_nodelist(placements: Iterable[Placement]) -> dict[str, list[Placement]]:
    """The placements by their nodelist, each group in the order given."""
    groups: dict[str, list[Placement]] = {}
    for placed in placements:
        group = groups.get(placed.nodelist)
        if group is None:
            groups[placed.nodelist] = [placed]
        else:
            group.append(placed)
    return groups


class JobTable(Mapping[int, Job]):
    """A read-only job map that can place its active jobs without producing any job.

    A controller answer (`wire.JobsFromPb`) converts jobs on demand; the
    classifier's node checks need only the active ones' placements, and most
    holdings only a glance at their job.
    """

    __slots__ = ()

    def glance(self, job_id: int) -> Job | JobGlance | None:
        """`job_id`'s state, nodelist and submit time (None: no such job here)."""
        return self.get(job_id)

    def kept_glances(self) -> Mapping[int, JobGlance]:
        """Glances `glance` would give, read ahead, by id (any subset of the ids)."""
        return {}

    def placements(self) -> Sequence[Placement]:
        return [
            Placement(j.job_id, j.nodelist, j.resources) for j in self.values() if j.state.active
        ]

    def by_nodelist(self) -> Mapping[str, Sequence[Placement]]:
        """`placements` grouped by nodelist (most jobs run on one node: about one group a
        node), for checks that read each nodelist once."""
        return group_by_nodelist(self.placements())

    def lacking(self, job_ids: Iterable[int]) -> set[int]:
        """The ids of `job_ids` this table holds no job for."""
        return {i for i in job_ids if i not in self}


@dataclass(slots=True)  # not frozen, as Job: a view builds one per node of the cluster
class Node:
    """One node as the controller reports it (NodeInfo). Treat as read-only."""

    name: str
    state: NodeState
    state_reason: str = ""
    partitions: tuple[str, ...] = ()
    total: ResourceSet = field(default_factory=ResourceSet)
    alloc: Allocation = field(default_factory=Allocation)
    boot_time: datetime | None = None
    last_busy: datetime | None = None
    agent_start_time: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # Who set state_reason (Spur #860's NodeInfo.reason_uid); None where the controller
    # does not say (a release before #860, no reason, a drain set before the upgrade).
    reason_uid: int | None = None


class NodeTable(Mapping[str, Node]):
    """A read-only node map that can give every node's allocation without producing the
    nodes (`wire.NodesFromPb` converts a node when it is read)."""

    __slots__ = ()

    def allocations(self) -> Mapping[str, Allocation]:
        return {name: node.alloc for name, node in self.items()}


class WatermarkSource(enum.StrEnum):
    FLAG = "flag"
    ESTIMATED = "estimated"
    SNAPSHOT = "snapshot"


class Watermark(msgspec.Struct, frozen=True):
    """The lowest job id the controller has not issued (or a lower bound of it).

    Spur does not expose next_job_id; max(tracked id) + 1 is a lower bound, and a
    lower watermark only ever spares more ids.
    """

    value: int
    source: WatermarkSource


def watermark_for(
    view: ControllerView,
    confirmed: Mapping[int, Job | None],
    *,
    flag: int | None,
    first_job_id: int = 1,
) -> Watermark:
    """--watermark, else max(tracked id) + 1, never below spur.conf's first_job_id.

    The counter restarts at first_job_id after a wipe and only climbs, so both
    are lower bounds of the controller's next id; the higher one is the tighter.
    """
    if flag is not None:
        if not 1 <= flag <= MAX_JOB_ID:
            raise SpurctlError(f"--watermark must be a job id from 1 to {MAX_JOB_ID}")
        return Watermark(flag, WatermarkSource.FLAG)
    seen = max(view.jobs, default=0)
    found = max((i for i, j in confirmed.items() if j is not None), default=0)
    # Ids are uint32: with the last id tracked, the estimate stays at it (a lower
    # watermark only spares more), so it still fits a uint32 field wherever it goes.
    value = min(max(seen + 1, found + 1, first_job_id), MAX_JOB_ID)
    return Watermark(value, WatermarkSource.ESTIMATED)


@dataclass(slots=True)
class ControllerView:
    """What the controller said, at one moment.

    `jobs_total` is JobMetrics.total, which counts every job regardless of the
    caller. `jobs` and `nodes` are read-only; from a live controller they convert
    each job and node on first access.

    Two ways of reading. A full read (`bounded` False: a snapshot, the checklist)
    holds every job the caller may see; when that is fewer than `jobs_total` (a
    credential-scoped answer) the view is incomplete and an absent id proves
    nothing. A bounded read (an audit) asks only for the jobs in the states that
    can hold a node now or soon, checks the active ones against JobMetrics.by_state
    (`active_read` of `active_expected`), and asks for every other held id by id:
    `asked_ids` are the ids asked without a credential (so unscoped), and one asked
    and not returned is untracked.
    """

    address: str
    version: str
    taken_at: datetime
    jobs: Mapping[int, Job]
    nodes: Mapping[str, Node]
    jobs_total: int
    bounded: bool = False
    active_read: int = 0
    active_expected: int = 0
    asked_ids: frozenset[int] = frozenset()
    # What a read under spurctld's answer limit could not fetch, one sentence each.
    read_notes: tuple[str, ...] = ()
    # The request budget stopped the reads (a note says so): incomplete, whatever the counts.
    cut_short: bool = False
    # The controller's own clock as the view was read (Ping's server_time), which its
    # times for jobs are read against; None when the answer had none (a snapshot).
    clock: datetime | None = None

    @property
    def complete(self) -> bool:
        """Every job that can hold a node now is in `jobs` (so node checks are sound)."""
        if self.bounded:
            return not self.cut_short and self.active_read >= self.active_expected
        return len(self.jobs) >= self.jobs_total

    def proves_untracked(self, job_id: int) -> bool:
        """The controller's answers prove it does not track `job_id` (when absent from jobs)."""
        if self.bounded:
            return job_id in self.asked_ids
        return self.complete

    def coverage(self) -> str:
        """What the read covered, for notes: "700 of 812 jobs"."""
        if self.bounded:
            return (
                f"{self.active_read:,} of {self.active_expected:,} running, completing or "
                "suspended jobs"
            )
        return (
            f"{len(self.jobs):,} of {self.jobs_total:,} {'job' if self.jobs_total == 1 else 'jobs'}"
        )

    def estimated_watermark(self) -> int:
        return min(max(self.jobs, default=0) + 1, MAX_JOB_ID)  # uint32, as watermark_for

    def node_allocations(self) -> Mapping[str, Allocation]:
        """Each node's allocation, without converting the nodes of a live view."""
        if isinstance(self.nodes, NodeTable):
            return self.nodes.allocations()
        return {name: node.alloc for name, node in self.nodes.items()}

    def lacking(self, job_ids: Iterable[int]) -> set[int]:
        """The ids of `job_ids` the view holds no job for (a live view: at set speed, not
        one lookup through Python per id)."""
        if isinstance(self.jobs, JobTable):
            return self.jobs.lacking(job_ids)
        return {i for i in job_ids if i not in self.jobs}

    def glance(self, job_id: int) -> Job | JobGlance | None:
        """`job_id`'s state, nodelist and submit time, from the same record `jobs` holds
        (None: not in `jobs`); a live view reads them without converting the job."""
        # Not isinstance: JobTable is an ABC, whose check costs a Python call, and the
        # classifier asks once per holding. Only a JobTable has `glance`.
        glance = getattr(self.jobs, "glance", None)
        return self.jobs.get(job_id) if glance is None else glance(job_id)

    def kept_glances(self) -> Mapping[int, JobGlance]:
        """Some ids' `glance`, read ahead as the view was read: a dict look-up each (the
        classifier's first look for each holding's job), the rest through `glance`."""
        if isinstance(self.jobs, JobTable):
            return self.jobs.kept_glances()
        return {}

    def active_by_nodelist(self) -> Mapping[str, Sequence[Placement]]:
        """`active_placements` grouped by nodelist (a live view groups them as it reads)."""
        if isinstance(self.jobs, JobTable):
            return self.jobs.by_nodelist()
        return group_by_nodelist(self.active_placements())

    def active_placements(self) -> Sequence[Placement]:
        """Where each RUNNING, COMPLETING and SUSPENDED job runs, without converting any
        job whole (a live view reads three fields of each record)."""
        if isinstance(self.jobs, JobTable):
            return self.jobs.placements()
        return [
            Placement(j.job_id, j.nodelist, j.resources)
            for j in self.jobs.values()
            if j.state.active
        ]


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_time(value: datetime | None) -> str | None:
    """RFC 3339 UTC with a Z suffix, seconds precision unless sub-second is set."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    text = value.isoformat(timespec="microseconds" if value.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def parse_time(text: str | None) -> datetime | None:
    """Parse an RFC 3339 time; a naive one is taken as UTC. Raises ValueError."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"expected an RFC 3339 time string, got {text!r}")
    value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if value.tzinfo is UTC:
        return value  # already UTC (the common case): skip the conversion
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first UTC date there is
        raise ValueError(f"{text!r} is outside the dates UTC can hold") from None


class Kind(enum.StrEnum):
    """What a finding is (docs/contract.md, "Findings")."""

    TERMINAL_HELD = "terminal-held"
    ACTIVE_ELSEWHERE = "active-elsewhere"
    BELOW_WATERMARK_UNKNOWN = "below-watermark-unknown"
    ABOVE_WATERMARK_UNKNOWN = "above-watermark-unknown"
    UNVERIFIABLE = "unverifiable"
    MID_COMMIT = "mid-commit"
    NOT_STARTED = "not-started"
    HEALTHY = "healthy"
    LOST_ON_NODE = "lost-on-node"
    PHANTOM_ALLOC = "phantom-alloc"
    EXCESS_ALLOC = "excess-alloc"
    NAME_MISMATCH = "name-mismatch"
    ID_REUSE_SUSPECTED = "id-reuse-suspected"
    AGENT_UNREACHABLE = "agent-unreachable"
    AGENT_NOT_RUNNING = "agent-not-running"
    NOT_INVENTORIED = "not-inventoried"
    AGENT_ORPHAN = "agent-orphan"
    CLOCK_AHEAD = "clock-ahead"
    LEFTOVER = "leftover"


class Action(enum.StrEnum):
    RECLAIM = "reclaim"
    INVESTIGATE = "investigate"
    SPARE = "spare"
    NONE = "none"


class SinceEvidence(enum.StrEnum):
    """What dates a finding's `since` (decide/onset.py)."""

    JOB_END = "job-end"  # the controller's end time of the job: terminal-held
    JOB_START = "job-start"  # its current run's start, on other nodes: active-elsewhere
    RUN_START = "run-start"  # the held run's start on the node, from its inventory
    INVENTORY = "inventory"  # when the inventory that shows it was collected


# A frozen msgspec Struct rather than a frozen dataclass: as immutable and hashable, but
# built in C; an audit of 20,000 nodes makes ~11,000 (callgrind: ~216 M instructions
# fewer per audit). gc=False: it holds no container a cycle could run through.
class Finding(msgspec.Struct, frozen=True, gc=False):
    """One discrepancy (or, with --all, one healthy holding) and what to do about it.

    `reason` is one sentence an operator can read aloud: the job, the node and
    the evidence. `live` is set for holdings: whether a process still runs.
    `inventory_age_s` is how long before the controller view the node's inventory
    was collected (the view's taken_at minus the inventory's collected_at, negative
    when collected after it); None when no inventory, or no collection time, stands
    behind the finding. `since` is when the evidence says the state it describes began,
    `since_evidence` which evidence that is (decide/onset.py); None when nothing dates it.
    """

    node: str
    job_id: int | None
    kind: Kind
    action: Action
    reason: str
    live: bool | None = None
    controller_state: str | None = None
    allocated_nodes: str | None = None
    gpus: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    inventory_age_s: float | None = None
    since: datetime | None = None
    since_evidence: SinceEvidence | None = None

    @property
    def needs_action(self) -> bool:
        return self.action in (Action.RECLAIM, Action.INVESTIGATE)

    def dated(self, since: datetime, evidence: SinceEvidence) -> Finding:
        return msgspec.structs.replace(self, since=since, since_evidence=evidence)


class NodeAdminMetrics(msgspec.Struct, frozen=True):
    """spurctl's repairs, drains and resumes as its journal records them (counts that only
    grow), and the nodes in the view spurctl's drains still hold, each with when the
    journal says spurctl drained it (None: not in this journal)."""

    repairs: dict[str, int] = msgspec.field(default_factory=dict)  # by result
    drains: dict[str, int] = msgspec.field(default_factory=dict)  # by command (drain, repair)
    resumes: int = 0
    drained: dict[str, datetime | None] = msgspec.field(default_factory=dict)
    # Those of `drained` that are DOWN: their heartbeat was lost since spurctl drained them.
    down: tuple[str, ...] = ()
    # Those it drained now DOWN `Not responding`, the drain's reason replaced by a heartbeat
    # timeout (Spur v0.8.0 and older: decide/lost_reason.py), with the drain's time.
    lost: dict[str, datetime] = msgspec.field(default_factory=dict)


@dataclass(slots=True)
class AuditReport:
    """Everything `spurctl audit` concluded, ready for any renderer.

    `notes` are sentences the operator must see before the findings (an
    incomplete controller view, findings withheld, a snapshot's limits).
    """

    controller_address: str
    controller_version: str
    taken_at: datetime
    watermark: Watermark
    view_complete: bool
    jobs_seen: int
    jobs_total: int
    findings: list[Finding]
    nodes_in_scope: int
    nodes_inventoried: int
    notes: list[str] = field(default_factory=list)
    # The controller-version note, also among `notes` (JSON, explain); screens show
    # `version_line` in its place, once, unless the operator acknowledged the version.
    version_note: str | None = None
    version_line: str | None = None
    # What spurctl's own node administration left (from its journal and this view);
    # None when no journal was read.
    node_admin: NodeAdminMetrics | None = None
    # The cluster's name (spur.conf's cluster_name, else the config file's), for headers.
    cluster: str | None = None

    @property
    def by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.kind.value] = counts.get(f.kind.value, 0) + 1
        return counts

    @property
    def needs_action(self) -> int:
        return sum(1 for f in self.findings if f.needs_action)


# -- a saved reclaim plan (`reclaim --dry-run -o`, applied by `reclaim --plan`) ---------

PLAN_SCHEMA: Literal["spurctl.plan/v1"] = "spurctl.plan/v1"
AwareTime = Annotated[datetime, msgspec.Meta(tz=True)]


class PlannedCancel(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One entry of a saved plan: the finding (its evidence) and the agent it goes to."""

    finding: Finding
    address: str
    collected_at: AwareTime | None = None


class PlanController(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    address: str
    version: str


class PlanDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What `reclaim --plan` may send: these entries only, from this controller's view."""

    schema: Literal["spurctl.plan/v1"]
    spurctl_version: str
    controller: PlanController
    taken_at: AwareTime
    nodes: str
    entries: tuple[PlannedCancel, ...]
