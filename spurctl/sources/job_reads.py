"""What an audit's job reads gather, and the rules they read by (sources/controller.py).

The controller client reads GetJobs in answers under spurctld's 32 MiB limit, by
state, then node by node (`nodes`, 0.9.0 on: sources/node_split.py) or by job-id
range (every release: sources/id_ranges.py). This module holds what those reads
share: the record of what was read (`JobRead`), the request budget of one audit,
the check that tells a controller that ignored a node filter, and the notes a read
leaves behind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from spurctl import hostlist
from spurctl.errors import SpurctlError
from spurctl.heap import gc_paused
from spurctl.model import ACTIVE_STATES, Job, JobGlance, JobState, Placement
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.wire import Encoded, JobRecords, Shapes, job_from_pb, keep_encoded

# Held ids asked for by id per GetJobs: spurctld scans its job map once per
# requested id, so batches stay small.
LOOKUP_BATCH = 64


def gaps(seen: Collection[int], low: int | None = None) -> list[int] | None:
    """The ids from `low` (default: the lowest of `seen`) up to the highest of `seen` that
    it lacks; None when there are more than MAX_GAP_IDS (too many to ask for one by one)."""
    if not seen:
        return []
    high = max(seen)
    low = min(seen) if low is None else low
    if high - low + 1 - sum(1 for i in seen if i >= low) > MAX_GAP_IDS:
        return None
    return [i for i in range(low, high) if i not in seen]


def off_list(
    by_nodelist: Mapping[str, Sequence[Placement]], nodes: Collection[str]
) -> list[tuple[int, str]]:
    """(job id, the nodes GetNodes does not list) for each active job whose nodelist
    names such a node, from the active jobs' placements by nodelist; a nodelist that
    cannot be read is the classifier's to report. Each distinct nodelist is read once:
    most jobs run on one node, so a cluster's ~100,000 jobs name about as many lists as
    it has nodes."""
    unlisted: dict[str, str] = {}
    limit = hostlist.nodelist_limit(len(nodes))
    for nodelist in by_nodelist:
        if not nodelist:
            continue
        name = hostlist.plain_name(nodelist)
        if name is not None:
            if name not in nodes:
                unlisted[nodelist] = name
            continue
        try:
            named = hostlist.expand(nodelist, limit)
        except SpurctlError:
            continue
        missing = [n for n in named if n not in nodes]
        if missing:
            unlisted[nodelist] = hostlist.fold(sorted(missing))
    if not unlisted:
        return []
    return sorted((p.job_id, names) for nl, names in unlisted.items() for p in by_nodelist[nl])


def unread_note(state: JobState, n: int, everything: bool) -> str:
    """What a node split left unread of `state`: a job naming no node GetNodes lists."""
    jobs = f"{n:,} {state.name} job{'' if n == 1 else 's'}"
    were = "was" if n == 1 else "were"
    limit = f"the {state.name} jobs together are over spurctld's 32 MiB answer limit"
    by_id = "" if everything else "; held ids among them were asked for by id"
    if state not in ACTIVE_STATES:  # a job not started yet has no nodelist
        return (
            f"{jobs} without a nodelist {were} not read: {limit}, and only a job with a "
            f"nodelist can be read node by node{by_id}"
        )
    # An active one may also run on nodes GetNodes does not list: which, only its record says.
    return (
        f"{jobs} {were} not read: {limit}, node by node only a job naming a node GetNodes "
        f"lists can be read, and {'it was' if n == 1 else 'they were'} in no node's answer "
        "(no nodelist yet, or only nodes GetNodes does not list: too many ids to tell by "
        f"asking one by one){by_id}"
    )


def off_list_note(off_list: Sequence[tuple[int, str]]) -> str:
    shown = "; ".join(f"job {j} on {n}" for j, n in off_list[:5])
    more = f" and {len(off_list) - 5} more" if len(off_list) > 5 else ""
    return (
        f"{len(off_list):,} active {'job runs' if len(off_list) == 1 else 'jobs run'} "
        f"on nodes GetNodes does not list ({shown}{more}): the controller's node list is "
        "incomplete, so the view is marked incomplete and those nodes are in no audit's scope"
    )


def every_job() -> None:
    """`wanted` when no caller names the jobs it will read: every job is converted."""
    return None


@dataclass(slots=True)
class JobRead:
    """What a view's job reads gathered: records kept for converting on demand, jobs
    converted as their answer arrived, and what could not be read."""

    messages: list[pb.JobInfo] = field(default_factory=list)
    converted: dict[int, Job] = field(default_factory=dict)
    encoded: dict[int, Encoded | bytes] = field(default_factory=dict)
    # `encoded`'s placements by nodelist (wire.keep_encoded); None once an id came twice.
    grouped: dict[str, list[Placement]] | None = field(default_factory=dict)
    glanced: dict[int, JobGlance] = field(default_factory=dict)  # `encoded`'s glances
    shapes: Shapes = field(default_factory=Shapes)
    unread: Counter[JobState] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    # The ids a split read keeps a glance of as its answers arrive (None: convert every
    # job whole), asked for once, when the first answer is kept (`chosen`): an id then
    # lands in the same one of `converted` and `encoded` whichever answer carries it.
    wanted: Callable[[], Collection[int] | None] = every_job
    chosen: list[Collection[int] | None] = field(default_factory=list)
    # The largest JobInfo encoding seen (a sample of each answer): sizes id ranges.
    largest: int = 0

    def keep(self, part: JobRecords) -> set[int]:
        """Keep a split read's answer past its bytes: every job's encoding, with its
        placement and, for the wanted ones, its glance (or, when none are named, every job
        converted); a later record of an id replaces an earlier one. Returns the ids."""
        if not self.chosen:
            self.chosen.append(self.wanted())
        wanted, shapes, converted, kept = self.chosen[0], self.shapes, self.converted, self.encoded
        ids: set[int] = set()
        with gc_paused():
            if wanted is None:
                for m in part.jobs():
                    i = m.job_id
                    ids.add(i)
                    converted[i] = job_from_pb(m, shapes)
                return ids
            before = len(kept)
            grouped = {} if self.grouped is None else self.grouped
            found = keep_encoded(part, shapes, wanted, kept, grouped, self.glanced)
            if len(kept) != before + len(found):  # an id kept twice: grouped twice too
                self.grouped = None
            return set(found)

    def measure(self, part: Sequence[pb.JobInfo] | JobRecords) -> None:
        """Note the largest record among the first of `part`."""
        if isinstance(part, JobRecords):
            sizes = [len(r) for r in part.records()[:64]]
        else:
            sizes = [m.ByteSize() for m in part[:64]]  # ByteSize walks the message
        self.largest = max(self.largest, *sizes, 0)

    def ids(self) -> set[int]:
        return {m.job_id for m in self.messages} | self.converted.keys() | self.encoded.keys()

    def highest(self) -> int:
        return max(
            max((m.job_id for m in self.messages), default=0),
            max(self.converted, default=0),
            max(self.encoded, default=0),
        )


# The states an audit reads, in the order it reads them.
BY_ACTIVITY = (JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED)
NOT_STARTED = (JobState.PENDING, JobState.PREEMPTED, JobState.REQUEUED)
# A full read asks for the ids between those its node-by-node reads returned (jobs
# without a nodelist) only when there are at most this many (256 requests).
MAX_GAP_IDS = 256 * LOOKUP_BATCH


class BudgetSpent(Exception):
    """One audit's request budget is spent: no further GetJobs goes out."""


@dataclass(slots=True)
class RequestBudget:
    """The GetJobs requests one audit (one view and its look-ups) may send, so that a
    controller that filters less than asked is never read without end
    (docs/spur-facts.md, "Releases differ")."""

    limit: int
    used: int = 0
    hit: bool = False

    def take(self, requests: int = 1) -> None:
        """Count `requests` about to go out together: all of them, or none (BudgetSpent)."""
        if self.used + requests > self.limit:
            self.hit = True
            raise BudgetSpent
        self.used += requests

    def note(self) -> str:
        return (
            f"the controller was not read to the end: this audit sent the {self.limit:,} "
            "GetJobs requests one audit may send, so the view is incomplete and nothing "
            "it could not verify is reclaimed"
        )


class FilterIgnored(Exception):
    """The controller answered a node-filtered GetJobs as if unfiltered."""


def off_the_nodes(
    jobs: Sequence[pb.JobInfo] | Sequence[pb.JobGlimpse], nodes: Collection[str]
) -> int | None:
    """The id of a job in `jobs` (a node-filtered answer) allocated on none of `nodes`, or
    None. spurctld's `nodes` filter keeps a job only when one of its allocated nodes is
    asked for (so never one without a nodelist): such a job means the filter was
    ignored. A sample is enough: an ignored filter answers every job of the state."""
    asked = frozenset(nodes)
    for m in jobs[:_OFF_NODE_SAMPLE]:
        nodelist = m.nodelist.strip()
        if not nodelist:
            return m.job_id
        if "[" not in nodelist and "," not in nodelist:
            if nodelist not in asked:
                return m.job_id
            continue
        try:
            named = hostlist.expand(nodelist)
        except SpurctlError:
            continue  # the classifier reports an unreadable nodelist
        if asked.isdisjoint(named):
            return m.job_id
    return None


_OFF_NODE_SAMPLE = 32


# A node name no node has ('/' is in no host name): a filter that answers anything for
# it filtered nothing.
NO_SUCH_NODE = "spurctl/no-such-node"


def filter_ignored_note(version: str, job_id: int | None) -> str:
    which = (
        f"with job {job_id}, which runs on none of the nodes asked for"
        if job_id is not None
        else "for a node no node is named as if it were every node"
    )
    return (
        f"the controller (Spur {version or 'of unknown version'}) answered a node-filtered "
        f"GetJobs {which}: it ignores GetJobsRequest.nodes (0.9.0 added it), so its jobs "
        "were read by job-id range"
    )


def state_units(states: Sequence[JobState], *, requeued_known: bool) -> list[tuple[JobState, ...]]:
    """`states` as the requests that ask for them one state at a time. Where the controller
    may not know REQUEUED it drops it from `states`, and `states=[REQUEUED]` alone would
    answer every job: there REQUEUED is asked for beside PREEMPTED (which every release
    knows; at v0.8.0 no job is REQUEUED)."""
    if requeued_known or JobState.REQUEUED not in states:
        return [(s,) for s in states]
    units = [(s,) for s in states if s not in (JobState.REQUEUED, JobState.PREEMPTED)]
    return [*units, (JobState.PREEMPTED, JobState.REQUEUED)]
