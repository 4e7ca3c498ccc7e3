"""Reading GetJobs without a node filter: by state, and a state too large by job-id range.

Release v0.8.0 (and anything spurctl cannot tell from it) has no `nodes` filter:
it skips the field and would answer every job of the state, over spurctld's 32 MiB
limit, for every node-split request (docs/spur-facts.md, "Releases differ").
`job_ids` (field 5) exists in every release, so a state too large for one answer
is read by id range: from the top of the id space (the newest ids, the densest)
down, until the read holds as many jobs of those states as JobMetrics counts, or
every id down to 1 was asked for.

Each range costs spurctld a scan of its job map with a slice `contains` of the
requested ids per job, and a scan for array tasks per requested id it does not
hold (cluster.rs `get_jobs`, `get_job_for_display`): a range stays at most
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
# Where no job id is known yet, ids are probed at 1 and at each power of two up to
# uint32 (LOOKUP_BATCH ids each) to find where they lie, then range by range from 1.
_FIRST_PROBES = [1, *(1 << k for k in range(7, 32))]


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
    for unit in state_units(states, requeued_known=requeued_known):
        if not scoped and sum(counts[s] for s in unit) * record > planned:
            large += unit
            continue
        try:
            _add(into, jobs.answer([int(s) for s in unit], ()))
        except AnswerTooLarge:
            large += unit
    if not large:
        return False
    top = _top(jobs, into)
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


def _width(planned: int, largest: int, density: float) -> int:
    """Ids per range: an answer of about `planned` bytes at `density` jobs per id."""
    per_id = max(largest, 256) * max(density, 1 / MAX_RANGE)
    return max(MIN_RANGE, min(MAX_RANGE, int(planned / per_id)))


def _add(into: JobRead, part: list[pb.JobInfo]) -> None:
    into.measure(part)
    into.messages += part


def _top(jobs: Jobs, into: JobRead) -> int:
    """One above the highest job id the controller holds, as far as probing shows: the
    highest read so far, or found by probing where no id is known, then the ids above it
    (the ended jobs above every job read, kept in `into`: they raise the watermark)."""
    highest = into.highest()
    if not highest:
        for start in _FIRST_PROBES:
            found = jobs.by_ids(range(start, min(start + LOOKUP_BATCH, MAX_JOB_ID + 1)))
            highest = max([highest, *(m.job_id for m in found)])
    start = 1
    while not highest and start <= MAX_JOB_ID:  # none there: walk up from the first id
        found = jobs.by_ids(range(start, min(start + MAX_RANGE, MAX_JOB_ID + 1)))
        highest = max([highest, *(m.job_id for m in found)])
        start += MAX_RANGE
    above = jobs.probe_above(highest)
    into.messages += above
    return min(max([highest, *(m.job_id for m in above)]) + 1, MAX_JOB_ID + 1)
