"""Reading GetJobs by job-id range, as every Spur release can filter (sources/id_ranges.py).

A fake controller answers `states` and `job_ids` as spurctld's `get_jobs` does, and
refuses an answer over its limit as tonic does; it records every request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from spurctl.model import JobState
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.controller import Later
from spurctl.sources.id_ranges import (
    MAX_RANGE,
    SETTLED,
    AnswerTooLarge,
    read_by_id,
    read_ranges,
)
from spurctl.sources.job_reads import (
    BudgetSpent,
    JobRead,
    RequestBudget,
    off_the_nodes,
    state_units,
)
from spurctl.sources.wire import JobRecords

R, PD, PR, RQ, CD = (
    JobState.RUNNING,
    JobState.PENDING,
    JobState.PREEMPTED,
    JobState.REQUEUED,
    JobState.COMPLETED,
)


class Controller:
    """Jobs by id, each a record of about `record` bytes; answers over `limit` refused."""

    def __init__(self, jobs: dict[int, JobState], *, limit: int, record: int = 500) -> None:
        self.jobs = jobs
        self.limit = limit
        self.record = record
        self.requests: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        self.cancelled: list[tuple[int, ...]] = []
        self.budget = RequestBudget(10_000)

    def answer(self, states: Sequence[int], job_ids: Sequence[int]) -> list[pb.JobInfo]:
        self.budget.take()
        self.requests.append((tuple(states), tuple(job_ids)))
        wanted = set(states)
        ids = sorted(set(job_ids)) if job_ids else sorted(self.jobs)
        out = [
            pb.JobInfo(job_id=i, state=int(self.jobs[i]), name="x" * self.record)  # type: ignore[arg-type]
            for i in ids
            if i in self.jobs and (not wanted or int(self.jobs[i]) in wanted)
        ]
        size = sum(m.ByteSize() + 3 for m in out)
        if size > self.limit:
            raise AnswerTooLarge(f"Error, encoded message length too large: found {size} bytes")
        return out

    def answer_later(self, states: Sequence[int], job_ids: Sequence[int]) -> Later:
        self.budget.take()  # counted when sent, answered when collected
        self.budget.used -= 1

        def collect() -> JobRecords:  # as ControllerClient collects it: the answer's bytes
            answer = pb.GetJobsResponse(jobs=self.answer(states, job_ids))
            return JobRecords(answer.SerializeToString())

        return Later(collect, lambda: self.cancelled.append(tuple(job_ids)))

    def by_ids(self, ids: Sequence[int], states: Sequence[int] = ()) -> list[pb.JobInfo]:
        try:
            return self.answer(states, ids)
        except AnswerTooLarge:  # halved, as ControllerClient.by_ids does
            half = len(ids) // 2
            return self.by_ids(ids[:half], states) + self.by_ids(ids[half:], states)

    def probe_above(self, highest: int) -> list[pb.JobInfo]:
        found: list[pb.JobInfo] = []
        while True:
            part = self.answer((), range(highest + 1, highest + 65))
            if not part:
                return found
            found += part
            highest = max(m.job_id for m in part)

    def job_counts(self) -> tuple[int, Counter[JobState]]:
        return len(self.jobs), Counter(self.jobs.values())


def counts(ctl: Controller) -> Counter[JobState]:
    return ctl.job_counts()[1]


def ranged(ctl: Controller) -> list[tuple[int, ...]]:
    """The id ranges asked for (not the probes' runs, which are not one range)."""
    return [ids for _, ids in ctl.requests if len(ids) > 64 and ids[-1] - ids[0] < len(ids)]


def test_a_state_too_large_for_one_answer_is_read_by_id_range_from_the_top_down() -> None:
    # Ids 1,001-21,000: running, with a pending job every tenth id and the newest ended.
    jobs = {i: (PD if i % 10 == 0 else R) for i in range(1_001, 21_001)}
    jobs.update({i: CD for i in range(21_001, 21_011)})
    ctl = Controller(jobs, limit=4_000_000)  # ~7,800 records an answer
    read = JobRead()
    assert read_by_id(ctl, (R, PD), counts(ctl), read, requeued_known=True, planned=2_500_000)
    got = read.ids()
    assert got >= {i for i, s in jobs.items() if s in (R, PD)} and max(got) == 21_010
    # Pending fit one answer; the running jobs came by id range, from the top down, each
    # answer under the limit (a refused range was halved), and no range below id 1,001
    # once every running job was in.
    ranges = ranged(ctl)
    # The first range starts at most SETTLED ids above the top the probes bracketed.
    assert ranges and 21_010 <= ranges[0][-1] <= 21_010 + SETTLED and min(ranges[-1]) > 0
    lows = [r[0] for r in ranges]
    assert lows == sorted(lows, reverse=True)
    assert all(len(r) <= MAX_RANGE for r in ranges)
    assert min(lows) >= 1_001 - MAX_RANGE
    assert ((int(PD),), ()) in ctl.requests


def test_ranges_stop_once_the_read_holds_as_many_jobs_as_counted() -> None:
    # Old ids below 5,000 were aged out: nothing there to ask for.
    jobs = {i: R for i in range(5_000, 6_000)}
    ctl = Controller(jobs, limit=10_000_000)
    read = JobRead()
    found = read_ranges(ctl, [int(R)], expected=1_000, top=6_000, into=read, planned=4_000_000)
    assert found == 1_000
    assert min(min(ids) for _, ids in ctl.requests) >= 5_000 - MAX_RANGE


def test_jobs_that_ended_while_read_are_recounted_when_a_range_comes_back_empty() -> None:
    jobs = {i: R for i in range(200_000, 200_100)}
    ctl = Controller(jobs, limit=10_000_000)
    read = JobRead()
    # Counted 120 running: 20 ended since. The first empty range asks JobMetrics again
    # and stops there, rather than asking every id down to 1.
    found = read_ranges(ctl, [int(R)], expected=120, top=200_100, into=read, planned=4_000_000)
    assert found == 100
    assert len(ctl.requests) <= 3


def test_a_refused_range_is_halved_and_no_wider_range_follows() -> None:
    jobs = {i: R for i in range(1, 3_001)}
    ctl = Controller(jobs, limit=60_000)  # ~110 records an answer
    read = JobRead()
    read_ranges(ctl, [int(R)], expected=3_000, top=3_001, into=read, planned=16_000_000)
    assert read.ids() == set(jobs)
    answered = ranged(ctl)[-3:]
    assert all(len(r) <= 128 for r in answered)


def test_requeued_is_never_asked_for_alone_where_the_controller_may_not_know_it() -> None:
    # Release v0.8.0 drops REQUEUED from `states`: asked alone, it answers every job.
    assert state_units((PD, PR, RQ), requeued_known=False) == [(PD,), (PR, RQ)]
    assert state_units((PD, PR, RQ), requeued_known=True) == [(PD,), (PR,), (RQ,)]
    jobs = {i: (PR if i % 2 else PD) for i in range(1, 2_001)}
    ctl = Controller(jobs, limit=600_000)  # the three together do not fit
    read_by_id(ctl, (PD, PR, RQ), counts(ctl), JobRead(), requeued_known=False, planned=1 << 20)
    assert all(set(states) != {int(RQ)} for states, _ in ctl.requests)


def test_where_no_job_id_is_known_the_ids_are_found_by_probing() -> None:
    jobs = {i: R for i in range(70_000, 90_000)}
    ctl = Controller(jobs, limit=4_000_000)
    read = JobRead()
    assert read_by_id(ctl, (R,), counts(ctl), read, requeued_known=True, planned=2_000_000)
    assert read.ids() == set(jobs)


def test_the_budget_stops_a_read_and_keeps_what_came() -> None:
    jobs = {i: R for i in range(1, 40_001)}
    ctl = Controller(jobs, limit=2_000_000)
    ctl.budget = RequestBudget(4)
    read = JobRead()
    with pytest.raises(BudgetSpent):
        read_ranges(ctl, [int(R)], expected=40_000, top=40_001, into=read, planned=1_000_000)
    assert ctl.budget.hit and len(ctl.requests) == 4
    assert 0 < len(read.ids()) < 40_000
    assert "not read to the end" in ctl.budget.note() and "4 GetJobs" in ctl.budget.note()


def test_a_budget_takes_requests_sent_together_all_or_none() -> None:
    budget = RequestBudget(5)
    budget.take(3)
    with pytest.raises(BudgetSpent):
        budget.take(3)
    assert (budget.used, budget.hit) == (3, True)
    budget.take(2)
    assert budget.used == 5


@pytest.mark.parametrize(
    ("nodelist", "off"),
    [
        ("gpu001", False),
        ("gpu[001-004]", False),
        ("gpu[007-009],gpu002", False),
        ("gpu009", True),
        ("gpu[005-009]", True),
        ("", True),  # a node filter never answers a job that is allocated nowhere
    ],
)
def test_a_job_on_none_of_the_nodes_asked_for_shows_the_filter_was_ignored(
    nodelist: str, off: bool
) -> None:
    asked = ["gpu001", "gpu002", "gpu003", "gpu004"]
    jobs = [pb.JobInfo(job_id=1, nodelist="gpu003"), pb.JobInfo(job_id=2, nodelist=nodelist)]
    assert off_the_nodes(jobs, asked) == (2 if off else None)


def test_two_ranges_are_in_flight_and_the_one_not_needed_is_cancelled() -> None:
    jobs = {i: R for i in range(50_000, 60_000)}
    ctl = Controller(jobs, limit=40_000_000)
    read = JobRead()
    found = read_ranges(ctl, [int(R)], expected=10_000, top=60_000, into=read, planned=9_000_000)
    assert found == 10_000
    # The first range held every job; the second, sent beside it, was cancelled unread.
    [(_, first)] = ctl.requests
    assert (first[0], first[-1]) == (60_000 - MAX_RANGE, 59_999)
    assert ctl.cancelled == [tuple(range(60_000 - 2 * MAX_RANGE, 60_000 - MAX_RANGE))]


def test_where_sparse_ids_end_is_found_in_a_few_requests() -> None:
    # A gap of 1 to 7 ids after each job, the ids from 150,000 up (those below aged out),
    # every other one running, no other state. Before, the top was probed 64 ids at a
    # time at each power of two and 16 batches above the highest found (262,144 + 1,024),
    # and the ids above it were never read.
    ids, i = [], 150_000
    for n in range(40_000):
        i += 1 + n * 7919 % 7
        ids.append(i)
    jobs = {j: (R if n % 2 else CD) for n, j in enumerate(ids)}
    ctl = Controller(jobs, limit=4_000_000)
    read = JobRead()
    assert read_by_id(ctl, (R,), counts(ctl), read, requeued_known=True, planned=2_000_000)
    assert {j for j, s in jobs.items() if s is R} <= read.ids()
    probes = [ids for _, ids in ctl.requests if ids and ids not in ranged(ctl)]
    assert len(probes) <= 4
    # The first range starts at most SETTLED ids above the last id.
    assert max(ids) < ranged(ctl)[0][-1] + 1 <= max(ids) + SETTLED + 1


def test_the_states_that_fit_an_answer_are_asked_for_together() -> None:
    jobs = {i: R for i in range(1, 20_001)}
    jobs.update({i: PD for i in range(20_001, 20_101)})
    jobs.update({i: PR for i in range(20_101, 20_111)})
    ctl = Controller(jobs, limit=4_000_000)
    read_by_id(ctl, (R, PD, PR, RQ), counts(ctl), JobRead(), requeued_known=False, planned=1 << 21)
    by_state = [states for states, ids in ctl.requests if not ids]
    assert by_state == [(int(PD), int(PR), int(RQ))]
