"""Conversion between Spur's protobuf messages and spurctl's model.

This is the edge: past it, nothing sees a protobuf message. The reverse
direction (model -> message) serves only the simulated cluster and the benchmarks:
it lives with the simulator (spurctl_sim/encoders.py).

A 200,000-job GetJobs answer is the hot path. `JobsFromPb` keeps the decoded
answer and converts a job only when it is asked for (the node checks read only
three fields of each active job: `placements`), and `Shapes` lets one answer's
jobs and nodes share the few distinct resource records they carry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import chain

import msgspec
from google.protobuf.timestamp_pb2 import Timestamp

from spurctl.model import (
    ACTIVE_STATES,
    Allocation,
    Device,
    Gpu,
    Job,
    JobGlance,
    JobState,
    JobTable,
    Node,
    NodeState,
    NodeTable,
    Placement,
    ResourceSet,
    group_by_nodelist,
)
from spurctl.proto import slurm_pb2 as pb

_ACTIVE_VALUES = frozenset(int(s) for s in ACTIVE_STATES)


def time_from_pb(ts: Timestamp) -> datetime | None:
    """An unset (zero) Timestamp is None; nanoseconds are truncated to microseconds."""
    seconds, nanos = ts.seconds, ts.nanos
    if not seconds and not nanos:
        return None
    # Integer arithmetic: a float of seconds + nanos would round away microseconds.
    value = _from_timestamp(seconds, UTC)
    if not nanos:
        return value
    if not 0 < nanos < 1_000_000_000:  # not a Timestamp (google/protobuf/timestamp.proto)
        raise ValueError(f"Timestamp nanos {nanos} out of range")
    # Added, not replace(microsecond=): keywords cost ~0.8 us, and an audit reads the
    # submit time of every held job (~50,000), most with nanos from a real clock.
    return value + _timedelta(0, 0, nanos // 1000)


_from_timestamp = datetime.fromtimestamp
_timedelta = timedelta


def _job_state(value: int) -> JobState:
    try:
        return JobState(value)
    except ValueError:
        # A state this spurctl does not know: treat as not started, which every
        # decision spares (an unknown state must never turn into a reclaim).
        return JobState.PENDING


def _node_state(value: int) -> NodeState:
    # A state this spurctl does not know reads as UNKNOWN.
    return _NODE_STATES.get(value, NodeState.UNKNOWN)


_NODE_STATES = {int(s): s for s in NodeState}


def allocation_from_pb(msg: pb.ResourceAllocations) -> Allocation:
    return Allocation(
        cpus=msg.cpus,
        memory_mb=msg.memory_mb,
        devices={
            name: tuple(Device(d.device_id, d.count) for d in alloc.devices)
            for name, alloc in msg.devices.items()
        },
    )


class Shapes:
    """The resource records of one answer, converted once per distinct encoding.

    Jobs and nodes repeat a handful of shapes (8 GPUs, 128 CPUs, 1 TiB), and
    equal encodings decode to equal records, so they share one frozen record.
    Scoped to one answer: it grows with that answer and goes away with it.
    """

    __slots__ = ("_allocations", "_resource_sets")

    def __init__(self) -> None:
        self._allocations: dict[bytes, Allocation] = {}
        self._resource_sets: dict[bytes, ResourceSet] = {}

    def allocation(self, msg: pb.ResourceAllocations) -> Allocation:
        key = msg.SerializeToString()
        found = self._allocations.get(key)
        if found is None:
            found = self._allocations[key] = allocation_from_pb(msg)
        return found

    @property
    def allocations(self) -> Mapping[bytes, Allocation]:
        """The allocations converted so far, by encoding (`allocation_of`'s, read-only)."""
        return self._allocations

    def allocation_of(self, encoding: bytes) -> Allocation:
        """`allocation` of a ResourceAllocations still encoded (a glimpse's `resources`)."""
        found = self._allocations.get(encoding)
        if found is None:
            msg = pb.ResourceAllocations.FromString(encoding)
            found = self._allocations[encoding] = allocation_from_pb(msg)
        return found

    def resource_set(self, msg: pb.ResourceSet) -> ResourceSet:
        key = msg.SerializeToString()
        found = self._resource_sets.get(key)
        if found is None:
            found = self._resource_sets[key] = resource_set_from_pb(msg)
        return found


def resource_set_from_pb(msg: pb.ResourceSet) -> ResourceSet:
    return ResourceSet(
        cpus=msg.cpus,
        memory_mb=msg.memory_mb,
        gpus=tuple(Gpu(g.device_id, g.gpu_type, g.memory_mb) for g in msg.gpus),
        generic=dict(msg.generic),
    )


def job_from_pb(msg: pb.JobInfo, shapes: Shapes | None = None) -> Job:
    """The Job a JobInfo describes; `shapes` shares resource records across one answer."""
    state = _JOB_STATES.get(msg.state)
    # Positional, in Job's field order: an audit converts ~100,000 of these.
    return Job(
        msg.job_id,
        _job_state(msg.state) if state is None else state,
        msg.nodelist,
        msg.name,
        msg.user,
        msg.uid,
        msg.partition,
        msg.account,
        msg.state_reason,
        time_from_pb(msg.submit_time),
        time_from_pb(msg.start_time),
        time_from_pb(msg.end_time),
        msg.num_nodes,
        msg.num_tasks,
        (shapes or Shapes()).allocation(msg.resources),
        msg.array_job_id,
        msg.array_task_id,
    )


_JOB_STATES = {int(s): s for s in JobState}


def counts_from_pb(msg: pb.JobMetrics) -> tuple[int, Counter[JobState]]:
    """JobMetrics' `total` and its count per state (a state this spurctl does not know,
    or one a release's enum lacks, is not counted)."""
    counts: Counter[JobState] = Counter()
    for c in msg.by_state:
        state = _JOB_STATES.get(c.state)
        if state is not None:
            counts[state] += int(c.count)
    return int(msg.total), counts


def glance_from_pb(msg: pb.JobInfo) -> JobGlance:
    """What the healthy check reads of a job, from its record: a fifth of converting it."""
    state = _JOB_STATES.get(msg.state)
    return JobGlance(
        msg.job_id,
        _job_state(msg.state) if state is None else state,
        msg.nodelist,
        time_from_pb(msg.submit_time),
    )


class JobRecords:
    """One GetJobs answer as it came, read as a split read keeps it.

    Its bytes are decoded, in C, as each job's encoding (`records`) and as a glimpse
    of each (`glimpses`: the fields kept beside the encoding), both readings of the
    same JobInfo list (slurm.proto, GetJobsRecords and GetJobsGlimpses): no job is
    converted and none is encoded again, where decoding the answer whole and keeping
    each job took a conversion of four fields and an encoding per job. `jobs` decodes
    it whole, for a read that converts every job. Two answers' bytes joined are one
    answer holding both's jobs, as protobuf concatenates a repeated field.
    """

    __slots__ = ("_glimpses", "_records", "answer")

    def __init__(self, answer: bytes = b"") -> None:
        self.answer = answer
        self._records: list[bytes] | None = None
        self._glimpses: Sequence[pb.JobGlimpse] | None = None

    def records(self) -> list[bytes]:
        """Each job's encoding, in the answer's order."""
        if self._records is None:
            self._records = list(pb.GetJobsRecords.FromString(self.answer).jobs)
        return self._records

    def glimpses(self) -> Sequence[pb.JobGlimpse]:
        """Each job's id, state, nodelist, submit time and resources' encoding, in order."""
        if self._glimpses is None:
            self._glimpses = pb.GetJobsGlimpses.FromString(self.answer).jobs
        return self._glimpses

    def jobs(self) -> Sequence[pb.JobInfo]:
        return pb.GetJobsResponse.FromString(self.answer).jobs

    def __len__(self) -> int:
        return len(self.glimpses())

    def __add__(self, other: JobRecords) -> JobRecords:
        return JobRecords(self.answer + other.answer)


class Encoded(msgspec.Struct, frozen=True, gc=False):
    """A job kept as its wire encoding until something reads it, with its placement
    when it is active (the node checks read every active job's placement, and only
    a few of those jobs whole) and, for a job a holding names, its glance (most
    holdings are plainly healthy, which the glance tells). A job with neither is kept
    as its encoding alone (`bytes`)."""

    data: bytes
    placement: Placement | None
    glance: JobGlance | None = None


def keep_encoded(
    part: JobRecords,
    shapes: Shapes,
    wanted: Collection[int],
    into: dict[int, Encoded | bytes],
    grouped: dict[str, list[Placement]],
    glanced: dict[int, JobGlance],
) -> list[int]:
    """Every job of `part` kept compact, stored in `into` by id (a later record wins): its
    encoding, its placement when it is active and, for an id in `wanted`, its glance, read
    from its glimpse (a job with neither, such as a waiting one, is kept as its bytes
    alone: no Encoded); each placement also added to `grouped`, under its nodelist, and
    each glance to `glanced`, by id. Returns the ids, in order (when one was in `into`
    already, `grouped` holds both its records' placements: the caller tells by `into`'s
    length).

    One loop with no call per job: a lean 20,000-node audit keeps ~113,000 jobs, and a
    function call per job cost a fifth of it. Grouping them here spares the node checks
    and the off-list check a pass each over every active job."""
    ids: list[int] = []
    active, states = _ACTIVE_VALUES, _JOB_STATES
    allocations, allocation_of = shapes.allocations, shapes.allocation_of
    placement: Placement | None
    for record, glimpse in zip(part.records(), part.glimpses(), strict=True):
        job_id, state, nodelist = glimpse.job_id, glimpse.state, glimpse.nodelist
        ids.append(job_id)
        if state in active:
            resources = glimpse.resources
            allocation = allocations.get(resources)
            placed = Placement(
                job_id,
                nodelist,
                allocation_of(resources) if allocation is None else allocation,
            )
            group = grouped.get(nodelist)
            if group is None:
                grouped[nodelist] = [placed]
            else:
                group.append(placed)
            placement = placed
        else:
            placement = None
        if job_id in wanted:
            known = states.get(state)
            seen = JobGlance(
                job_id,
                _job_state(state) if known is None else known,
                nodelist,
                time_from_pb(glimpse.submit_time),
            )
            into[job_id] = Encoded(record, placement, seen)
            glanced[job_id] = seen
        elif placement is None:
            into[job_id] = record  # neither placed nor glanced: its encoding alone
        else:
            into[job_id] = Encoded(record, placement)
    return ids


class JobsFromPb(JobTable):
    """GetJobs' answers as a read-only Mapping[int, Job], converted one job at a time.

    Converting every JobInfo up front costs more than receiving them; an audit
    only looks at the jobs its holdings name and the active ones' placements.
    Each job is converted on first access and cached; iteration yields ids
    without converting; `placements()` reads three fields of each active job and
    converts none. When an id repeats, the last record wins, as it would in a
    dict built from the answer. Jobs whose answer was let go as it arrived come
    as `converted` (already Jobs) or `encoded` (kept compact until read; an id is
    in at most one of the two); a record of the same id in `messages` wins over
    either. Safe to read from several threads (at worst a job is converted twice).
    """

    __slots__ = (
        "_by_nodelist",
        "_converted_only",
        "_encoded",
        "_glanced",
        "_grouped",
        "_jobs",
        "_messages",
        "_placements",
        "_position",
        "_shapes",
    )

    def __init__(
        self,
        messages: Sequence[pb.JobInfo],
        converted: Mapping[int, Job] | None = None,
        shapes: Shapes | None = None,
        encoded: Mapping[int, Encoded | bytes] | None = None,
        grouped: Mapping[str, list[Placement]] | None = None,
        glanced: Mapping[int, JobGlance] | None = None,
    ) -> None:
        """`grouped`, when given, is every placement of `encoded` by nodelist, and nothing
        else (keep_encoded's, with no id kept twice); `glanced` the glances kept with them."""
        # Positions, not the messages themselves: a wrapper per job would cost more
        # memory than the job it stands for until that job is read.
        self._messages = messages
        position = self._position = {m.job_id: i for i, m in enumerate(messages)}
        # The ids a message (or a conversion) replaces taken out of a copy; the kept jobs,
        # most of an audit's view, are copied only when a record replaces one of them
        # (each intersection walks the smaller side: the messages and conversions).
        jobs: dict[int, Job] = dict(converted or {})
        for job_id in position.keys() & jobs.keys():
            del jobs[job_id]
        kept: Mapping[int, Encoded | bytes] = encoded or {}
        dropped = (position.keys() & kept.keys()) | (jobs.keys() & kept.keys())
        if dropped:
            kept = {i: e for i, e in kept.items() if i not in dropped}
        # Grouped as kept, unless a record that wins over a kept one took its place.
        self._grouped = None if dropped else grouped
        self._glanced = _without(glanced or {}, dropped)
        self._by_nodelist: Mapping[str, Sequence[Placement]] | None = None
        self._jobs = jobs
        # The ids no message carries: converted only, or kept encoded (never both).
        self._converted_only = frozenset(jobs)
        self._encoded = kept
        self._shapes = shapes or Shapes()
        self._placements: list[Placement] | None = None

    def __getitem__(self, job_id: int) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            at = self._position.get(job_id)
            if at is not None:
                msg = self._messages[at]
            else:
                kept = self._encoded[job_id]
                msg = pb.JobInfo.FromString(kept if isinstance(kept, bytes) else kept.data)
            job = self._jobs[job_id] = job_from_pb(msg, self._shapes)
        return job

    def get(self, job_id: int, default: Job | None = None) -> Job | None:  # type: ignore[override]
        # Mapping.get goes through a raised KeyError for every miss; audits miss often.
        job = self._jobs.get(job_id)  # most reads: a job already converted
        if job is not None:
            return job
        if job_id in self._position or job_id in self._encoded or job_id in self._converted_only:
            return self[job_id]
        return default

    def glance(self, job_id: int) -> Job | JobGlance | None:
        """The job if converted, else a glance at its record (its message, or the glance
        kept with its encoding), else the job converted now (None: no such job)."""
        job = self._jobs.get(job_id)
        if job is not None:
            return job
        at = self._position.get(job_id)
        if at is not None:
            return glance_from_pb(self._messages[at])
        kept = self._encoded.get(job_id)
        if isinstance(kept, Encoded) and kept.glance is not None:
            return kept.glance
        return self.get(job_id)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._position or job_id in self._encoded or job_id in self._converted_only

    def __iter__(self) -> Iterator[int]:
        # chain, not a generator: the watermark takes the max of ~100,000 ids.
        return chain(self._position, self._converted_only, self._encoded)

    def lacking(self, job_ids: Iterable[int]) -> set[int]:
        return (
            set(job_ids)
            .difference(self._position)
            .difference(self._encoded)
            .difference(self._converted_only)
        )

    def __len__(self) -> int:
        return len(self._position) + len(self._converted_only) + len(self._encoded)

    def placements(self) -> list[Placement]:
        """The active jobs' placements, read from their records without converting a job
        (three fields each, and a resource record shared by equal encodings); once."""
        if self._placements is None:
            found = self._unkept_placements()
            found += [
                p
                for e in self._encoded.values()
                if not isinstance(e, bytes) and (p := e.placement) is not None
            ]
            self._placements = found
        return self._placements

    def _unkept_placements(self) -> list[Placement]:
        """The placements of the active jobs not kept encoded: the messages' and the
        converted ones'."""
        found = self._message_placements(self._messages)
        jobs = self._jobs
        for i in self._converted_only:
            job = jobs[i]
            if job.state in ACTIVE_STATES:
                found.append(Placement(i, job.nodelist, job.resources))
        return found

    def _message_placements(self, messages: Sequence[pb.JobInfo]) -> list[Placement]:
        """The placements of the active jobs of `messages`, the last of this table's
        messages (a repeated id: only its last record counts)."""
        start = len(self._messages) - len(messages)
        position, allocation = self._position, self._shapes.allocation
        return [
            Placement(m.job_id, m.nodelist, allocation(m.resources))
            for k, m in enumerate(messages)
            if m.state in _ACTIVE_VALUES and position[m.job_id] == start + k
        ]

    def kept_glances(self) -> Mapping[int, JobGlance]:
        """The glances the read kept with the jobs it kept encoded, by id: what `glance`
        answers for those ids (from the same records), in one dict look-up."""
        return self._glanced

    def by_nodelist(self) -> Mapping[str, Sequence[Placement]]:
        """`placements` grouped by nodelist, once: from the groups the read kept when it
        gave them, else grouped now."""
        if self._by_nodelist is None:
            if self._grouped is None:
                self._by_nodelist = group_by_nodelist(self.placements())
            else:  # an audit's live view: most or all of its active jobs kept as grouped
                self._by_nodelist = _grown(self._grouped, self._unkept_placements())
        return self._by_nodelist

    def with_more(self, messages: Sequence[pb.JobInfo]) -> JobsFromPb:
        """These jobs and `messages` (a later record of an id wins), sharing what was
        already converted. Costs what `messages` add, not what this map holds."""
        more = JobsFromPb((), shapes=self._shapes)
        start = len(self._messages)
        more._messages = [*self._messages, *messages]
        more._position = dict(self._position)
        more._position.update((m.job_id, start + k) for k, m in enumerate(messages))
        replaced = {m.job_id for m in messages}
        more._jobs = dict(self._jobs)
        for job_id in replaced:  # a later record wins over a converted or encoded one
            more._jobs.pop(job_id, None)
        more._converted_only = self._converted_only - replaced
        gone = {i for i in replaced if i in self._encoded}
        more._encoded = (
            {i: e for i, e in self._encoded.items() if i not in gone} if gone else self._encoded
        )
        # The read's groups hold the kept jobs only: still true unless a kept one is replaced.
        more._grouped = None if gone else self._grouped
        more._glanced = _without(self._glanced, gone)
        if self._placements is None and self._by_nodelist is None:
            return more
        # Read once: carried over with what `messages` add, not read again.
        added = more._message_placements(messages)
        known = any(job_id in self for job_id in replaced)
        if self._placements is not None:
            kept = self._placements
            if known:
                kept = [p for p in kept if p.job_id not in replaced]
            more._placements = kept + added
        if self._by_nodelist is not None and not known:  # else grouped again when asked
            more._by_nodelist = _grown(self._by_nodelist, added)
        return more

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self)} jobs, {len(self._jobs)} converted>"


def _grown(
    groups: Mapping[str, Sequence[Placement]], added: list[Placement]
) -> Mapping[str, Sequence[Placement]]:
    """`groups` with `added` joined to their nodelists' groups, in copies: `groups` and
    its lists stay as they are (itself when nothing is added)."""
    if not added:
        return groups
    grown: dict[str, Sequence[Placement]] = dict(groups)
    for p in added:
        grown[p.nodelist] = [*grown.get(p.nodelist, ()), p]
    return grown


def _without(kept: Mapping[int, JobGlance], ids: set[int]) -> Mapping[int, JobGlance]:
    """`kept` less `ids`: itself when none of them is in it."""
    if not ids & kept.keys():
        return kept
    return {i: g for i, g in kept.items() if i not in ids}


def node_from_pb(msg: pb.NodeInfo, shapes: Shapes | None = None) -> Node:
    """The Node a NodeInfo describes; `shapes` shares resource records across one answer."""
    shapes = shapes or Shapes()
    # Positional, in Node's field order: a view converts one per node of the cluster.
    return Node(
        msg.name,
        _node_state(msg.state),
        msg.state_reason,
        tuple(msg.partitions),
        shapes.resource_set(msg.total_resources),
        shapes.allocation(msg.alloc_resources),
        time_from_pb(msg.boot_time),
        time_from_pb(msg.last_busy),
        time_from_pb(msg.slurmd_start_time),
        dict(msg.labels) if msg.labels else {},
        msg.reason_uid if msg.HasField("reason_uid") else None,
    )


class NodesFromPb(NodeTable):
    """GetNodes' answer as a read-only Mapping[str, Node], converted one node at a time.

    An audit reads every node's allocation (`allocations()`, one field each) and
    whole only the few nodes something reports on. When a name repeats, the last
    record wins. Safe to read from several threads (at worst a node is converted
    twice).
    """

    __slots__ = (
        "_allocations",
        "_glimpses",
        "_messages",
        "_names",
        "_nodes",
        "_position",
        "_shapes",
    )

    def __init__(
        self,
        messages: Sequence[pb.NodeInfo] | Sequence[bytes],
        shapes: Shapes | None = None,
        glimpses: Sequence[pb.NodeGlimpse] | None = None,
    ) -> None:
        # Decoded messages, or (with `glimpses`) each node's encoding, decoded when read.
        self._messages = messages
        named = messages if glimpses is None else glimpses
        # Each name read once (a record's field is a new string at every read): the
        # allocations below are keyed by the same strings.
        self._names = [m.name for m in named]  # type: ignore[union-attr]
        self._position = {name: i for i, name in enumerate(self._names)}
        self._nodes: dict[str, Node] = {}
        self._shapes = shapes or Shapes()
        self._allocations: dict[str, Allocation] | None = None
        # The same answer's nodes, each its name and its allocation's encoding.
        self._glimpses = glimpses

    @classmethod
    def decode(cls, answer: bytes) -> NodesFromPb:
        """A GetNodes answer's bytes, read in C as each node's encoding and as its glimpse:
        a node is decoded whole only when it is read (decoding every NodeInfo, with its
        GPUs and maps, cost a 20,000-node audit ~50 ms)."""
        records = pb.GetNodesRecords.FromString(answer).nodes
        return cls(records, glimpses=pb.GetNodesGlimpses.FromString(answer).nodes)

    def __getitem__(self, name: str) -> Node:
        node = self._nodes.get(name)
        if node is None:
            msg = self._messages[self._position[name]]
            if isinstance(msg, bytes):
                msg = pb.NodeInfo.FromString(msg)
            node = self._nodes[name] = node_from_pb(msg, self._shapes)
        return node

    def get(self, name: str, default: Node | None = None) -> Node | None:  # type: ignore[override]
        return self[name] if name in self._position else default

    def __contains__(self, name: object) -> bool:
        return name in self._position

    def __iter__(self) -> Iterator[str]:
        return iter(self._position)

    def __len__(self) -> int:
        return len(self._position)

    def allocations(self) -> Mapping[str, Allocation]:
        """Each node's allocation, read from its record alone; once."""
        if self._allocations is None:
            if self._glimpses is not None:  # a name that repeats: its last record wins
                allocation_of = self._shapes.allocation_of
                self._allocations = {
                    name: allocation_of(g.alloc_resources)
                    for name, g in zip(self._names, self._glimpses, strict=True)
                }
            else:
                allocation, messages = self._shapes.allocation, self._messages
                self._allocations = {
                    name: allocation(messages[i].alloc_resources)  # type: ignore[union-attr]
                    for name, i in self._position.items()
                }
        return self._allocations

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self)} nodes, {len(self._nodes)} converted>"
