"""Reading GetJobs without a node filter: by state, and a state too large by job-id range.

Release v0.8.0 (and anything spurctl cannot tell from it) has no `nodes` filter:
it skips the field and would answer every job of the state, over spurctld's 32 MiB
limit, for every node-split request (docs/spur-facts.md, "Releases differ").
`job_ids` (field 5) exists in every release, so a state too large for one answer
is read by id range: from the top of the id space (the newest ids, the densest)
down, until the read holds as many jobs of those states as JobMetrics counts, or
every id down to 1 was asked for. Where the ids end is found first, in a few
requests of short runs of ids (`locate_top`), not 64 ids at a time: ids need not be
dense, and a top found too low leaves the jobs above it unread.

Each range costs spurctld a scan of its job map with a slice `contains` of the
requested ids per job, and a scan of the whole map for array tasks per requested id
it does not hold (cluster.rs `get_jobs`, `get_job_for_display`): a range stays at most
MAX_RANGE ids, so that no one request holds the controller long, and is sized
from the largest record seen so that, even at one job per id, its answer stays
under half the limit.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from typing import Protocol

from spurctl.errors import SpurctlError
from spurctl.model import MAX_JOB_ID, JobState
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.job_reads import LOOKUP_BATCH, BudgetSpent, JobRead, state_units
from spurctl.sources.wire import JobRecords

# Bytes per JobInfo assumed before any record is seen (real ones are 400-700 bytes).
DEFAULT_RECORD = 1024
MAX_RANGE = 16_384
MIN_RANGE = LOOKUP_BATCH
# Ranges in flight at once.
AHEAD = 2
# Where the ids end is found by runs of PROBE_RUN ids (locate_top), PROBE_RUNS at a
# time, until the top lies in a span of at most SETTLED ids: at v0.8.0 an id asked for
# that the controller does not hold costs it a scan of its job map (array parents), so
# the probes and the first range ask for few of those.
PROBE_RUN = 8
PROBE_RUNS = 32
SETTLED = 512


class AnswerTooLarge(SpurctlError):
    """The controller refused to send an answer for its size."""


class Pending(Protocol):
    """A GetJobs answer on its way: call for its jobs (as a split read keeps them), or
    cancel it."""

    def __call__(self) -> JobRecords: ...

    def cancel(self) -> object: ...


class Jobs(Protocol):
    """The controller reads a by-id read needs (ControllerClient's, budgeted)."""

    def answer(self, states: Sequence[int], job_ids: Sequence[int]) -> list[pb.JobInfo]: ...

    def answer_later(self, states: Sequence[int], job_ids: Sequence[int]) -> Pending: ...

    def by_ids(self, ids: Sequence[int], states: Sequence[int] = ()) -> list[pb.JobInfo]: ...

    def probe_above(self, highest: int) -> list[pb.JobInfo]: ...

    def job_counts(self) -> tuple[int, Counter[JobState]]: ...


def read_by_id(
    jobs: Jobs,
    states: Sequence[JobState],
    counts: Counter[JobState],
    into: JobRead,
    *,
    requeued_known: bool,
    planned: int,
    scoped: bool = False,
) -> bool:
    """The jobs in `states`, every answer under the limit, none through a node filter.

    All in one answer when `counts` say they fit, else one state a time (REQUEUED
    only beside PREEMPTED where the controller may not know it), and the states too
    large for that by id range, all of them in one pass, after the ended jobs above
    every job read (the watermark's) are added. Whether that probe above was made.
    A `scoped` answer (a credential's user's jobs) is asked for whatever the
    unscoped `counts` say: it is usually a small part of them. BudgetSpent passes
    through, with what was read until then kept in `into`.
    """
    record = into.largest or DEFAULT_RECORD
    wanted = [int(s) for s in states]
    alone_requeued = wanted == [int(JobState.REQUEUED)] and not requeued_known
    if not alone_requeued and (scoped or sum(counts[s] for s in states) * record <= planned):
        try:
            _add(into, jobs.answer(wanted, ()))
            return False
        except AnswerTooLarge:
            pass
    large: list[JobState] = []
    fitting: list[tuple[JobState, ...]] = []
    for unit in state_units(states, requeued_known=requeued_known):
        if not scoped and sum(counts[s] for s in unit) * record > planned:
            large += unit
        else:
            fitting.append(unit)
    # The states that fit, together in as few answers as their counts allow (a scoped
    # read, whose counts say nothing of its answers, one state at a time).
    for group in _packed(fitting, counts, record, 0 if scoped else planned):
        try:
            _add(into, jobs.answer([int(s) for unit in group for s in unit], ()))
            continue
        except AnswerTooLarge:
            if len(group) == 1:
                large += group[0]
                continue
        for unit in group:
            try:
                _add(into, jobs.answer([int(s) for s in unit], ()))
            except AnswerTooLarge:
                large += unit
    if not large:
        return False
    top = _top(jobs, into, wanted)
    expected = sum(counts[s] for s in large)
    read_ranges(jobs, [int(s) for s in large], expected, top, into, planned=planned)
    return True


def read_ranges(
    jobs: Jobs, states: Sequence[int], expected: int, top: int, into: JobRead, *, planned: int
) -> int:
    """Read `states` by id range from `top` (exclusive) down; the number of jobs found.

    AHEAD ranges are in flight at once, so that the controller builds the next answer
    while this process keeps the last; a range refused for its size is asked for again
    half as wide (and no later range is wider), the ranges sent after it cancelled and
    sent anew. Ranges still in flight when the count is in are cancelled. BudgetSpent
    stops the sending; what was sent is kept, then it raises.
    """
    high, found = top, 0
    cap, width = MAX_RANGE, _width(planned, into.largest, 1.0)
    sent: deque[tuple[range, Pending]] = deque()
    spent = False
    while True:
        while not spent and len(sent) < AHEAD and found < expected and high > 1:
            ids = range(high - min(width, cap, high - 1), high)
            try:
                sent.append((ids, jobs.answer_later(states, ids)))
            except BudgetSpent:
                spent = True
            else:
                high = ids.start
        if not sent:
            break
        ids, pending = sent.popleft()
        try:
            part = pending()
        except AnswerTooLarge:
            if len(ids) == 1:
                raise
            # No range this wide again: the ones sent after it are asked for anew.
            cap, high = len(ids) // 2, ids.stop
            for _, left in sent:
                left.cancel()
            sent.clear()
            continue
        into.measure(part)
        found += len(into.keep(part))
        width = min(_width(planned, into.largest, len(part) / len(ids)), 4 * len(ids))
        if not part and found < expected:
            # Jobs leave these states while they are read: stop once none is missing now.
            _, now = jobs.job_counts()
            expected = min(expected, sum(now[JobState(s)] for s in states))
        if found >= expected:
            for _, left in sent:
                left.cancel()
            break
    if spent:
        raise BudgetSpent
    return found


def _packed(
    units: Sequence[tuple[JobState, ...]], counts: Counter[JobState], record: int, planned: int
) -> list[list[tuple[JobState, ...]]]:
    """`units` in order, grouped so that each group's jobs, as counted, fill at most
    `planned` bytes (0: one unit a group)."""
    groups: list[list[tuple[JobState, ...]]] = []
    size = 0
    for unit in units:
        n = sum(counts[s] for s in unit) * record
        if not groups or size + n > planned:
            groups.append([])
            size = 0
        groups[-1].append(unit)
        size += n
    return groups


def _width(planned: int, largest: int, density: float) -> int:
    """Ids per range: an answer of about `planned` bytes at `density` jobs per id."""
    per_id = max(largest, 256) * max(density, 1 / MAX_RANGE)
    return max(MIN_RANGE, min(MAX_RANGE, int(planned / per_id)))


def _add(into: JobRead, part: list[pb.JobInfo]) -> None:
    into.measure(part)
    into.messages += part


def _top(jobs: Jobs, into: JobRead, read: Sequence[int]) -> int:
    """An id above every job id the controller holds, as far as probing shows, at most
    SETTLED above the highest (`locate_top`, from the highest read so far). The probes'
    jobs in states the read does not ask for (the ended ones above every job read: they
    raise the watermark) are kept in `into`; the others come with the read. Ended jobs
    between the runs are not read: the watermark may then lie below the highest id,
    which only spares more."""
    found, end = locate_top(jobs, into.highest())
    asked = set(read)
    into.messages += [m for m in found if m.state not in asked]
    return end


def locate_top(jobs: Jobs, highest: int) -> tuple[list[pb.JobInfo], int]:
    """Where the controller's ids end above `highest`: the jobs the probes found, and an
    id the top lies below, in a few requests: runs of PROBE_RUN ids at doubling distances
    up to the last uint32 id, then PROBE_RUNS runs spread evenly between the highest id
    found and the next run above it, again, until that span is at most SETTLED ids.

    Ids need not be dense (array parents, failed submits and aged-out jobs leave gaps):
    a run shows ids near it whatever lies between the runs, and a run far above finds
    ids far above. Where no id is known and no run holds one, the ids lie between two
    runs: they are looked for range by range up from the first id."""
    found: list[pb.JobInfo] = []
    end = MAX_JOB_ID + 1
    starts = _doubling(highest)
    while True:
        starts = [s for s in starts if s < end]
        if not starts:
            return found, end
        answer = jobs.by_ids([i for s in starts for i in range(s, min(s + PROBE_RUN, end))])
        if not answer and not highest:
            start = 1
            while not answer and start <= MAX_JOB_ID:
                answer = jobs.by_ids(range(start, min(start + MAX_RANGE, end)))
                start += MAX_RANGE
            if not answer:
                return found, 1
            highest = max(m.job_id for m in answer)
            found, starts = answer, _doubling(highest)
            continue
        found += answer
        highest = max([highest, *(m.job_id for m in answer)])
        # Every run above the highest id found came back empty: the next one bounds it.
        end = min([end, *(s for s in starts if s > highest)])
        span = end - highest - 1
        if span <= SETTLED:
            return found, end
        starts = list(range(highest + 1, end, max(span // PROBE_RUNS, PROBE_RUN)))


def _doubling(highest: int) -> list[int]:
    """The starts of runs above `highest`: next to it, then at doubling distances."""
    return [highest + 1 + PROBE_RUN * ((1 << k) - 1) for k in range(32)]
