"""decide/release.py: when `spurctl node-release` may stop a job's run, and which processes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from spurctl.decide.release import refusal, select
from spurctl.holdings import AgentProcess, Holding, Inventory, JobProcess

RUN = datetime(2026, 12, 1, 14, 2, 11, 250_000, tzinfo=UTC)
RESTART = RUN + timedelta(hours=8)


def node(*held: Holding, agent: AgentProcess | None = AgentProcess(2201, RESTART)) -> Inventory:
    return Inventory(
        node="gpu003", collected_at=RESTART, source="test", held=held, agent=agent,
        agent_checked=True,
    )  # fmt: skip


def run(started: datetime | None = RUN, pids: tuple[int, ...] = (81234, 81235)) -> Holding:
    return Holding(job_id=4711, pids=pids, started_at=started)


CASES = [
    ("GATE: an orphan named by its id and start time may be released", node(run()), RUN, (), None),
    ("the start time copied to the second still matches", node(run()),
     RUN.replace(microsecond=0), (), None),
    ("a job not held is refused", node(), RUN, (), "is not held on gpu003"),
    ("another run of the id (a different start) is refused", node(run()),
     RUN + timedelta(hours=1), (), "another run holds the id now"),
    ("a run with no readable start time is refused", node(run(started=None)), RUN, (),
     "cannot be read"),
    ("no spurd on the node: refused, start one first", node(run(), agent=None), RUN, (),
     "no spurd process runs on gpu003"),
    ("spurd's start time unreadable: refused", node(run(), agent=AgentProcess(2201)), RUN, (),
     "the start time of spurd (pid 2201)"),
    ("a run begun after spurd started is spurd's own: use reclaim",
     node(run(), agent=AgentProcess(2201, RUN - timedelta(seconds=1))), RUN, (),
     "it is not an agent orphan; use spurctl reclaim --node gpu003 --job 4711"),
    ("a run begun the instant spurd did is spurd's own", node(run(), agent=AgentProcess(2201, RUN)),
     RUN, (), "not an agent orphan"),
    # Beside a process that predates spurd (a graceful restart's orphan sharing the
    # cgroup), spurd's child does not refuse the release; `select` leaves the child
    # alone. Only spurd's processes alone refuse it.
    ("a process of spurd's beside a pre-restart one: the release goes on", node(run()), RUN,
     (81235,), None),
    ("every process is spurd's child: spurd tracks it", node(run()), RUN, (81234, 81235),
     "process 81234 of job 4711 on gpu003 is spurd (pid 2201) or its child"),
    ("two top-level spurds: refused, naming both",
     replace(node(run(), agent=None), agents=(AgentProcess(2201, RESTART), AgentProcess(3300))),
     RUN, (), "2 top-level spurd processes run on gpu003 (pids 2201, 3300)"),
    ("a run under a spurstepd supervisor is adopted, never an orphan",
     node(Holding(job_id=4711, pids=(81234,), started_at=RUN, supervisors=(900,))), RUN, (),
     "runs under spurstepd supervisor 900"),
    ("spurd itself among the job's processes: refused", node(run(pids=(2201, 81234))), RUN, (),
     "process 2201 of job 4711"),
    ("a leftover (no process) begun after spurd may be released: nothing is signalled",
     node(run(pids=()), agent=AgentProcess(2201, RUN - timedelta(hours=1))), RUN, (), None),
    ("a leftover needs no spurd: nothing runs to be tracked",
     node(run(pids=()), agent=None), RUN, (), None),
    ("a leftover of another start time is still refused", node(run(pids=())),
     RUN + timedelta(hours=1), (), "another run holds the id now"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inventory", "started_at", "children", "expected"),
    [pytest.param(i, s, c, e, id=name) for name, i, s, c, e in CASES],
)
def test_refusal(
    inventory: Inventory, started_at: datetime, children: tuple[int, ...], expected: str | None
) -> None:
    why = refusal(inventory, 4711, started_at, children_of_agent=children)
    if expected is None:
        assert why is None
    else:
        assert why is not None and expected in why, why
        assert "\n" not in why


def proc(
    pid: int, started: datetime | None, *lineage: int, cgroup: int | None = 4711
) -> JobProcess:
    return JobProcess(pid, 1, started, lineage, env_job=4711, cgroup_job=cgroup)


def test_only_the_run_that_predates_spurd_is_signalled() -> None:
    agent = AgentProcess(2201, RESTART)
    after = RESTART + timedelta(minutes=5)
    procs = {
        81234: proc(81234, RUN, 1),  # the pre-restart run, reparented to init
        81240: proc(81240, after, 81234, 1),  # forked by it after the restart
        90000: proc(90000, after, 2201, 1),  # the requeued run, spurd's child
        90001: proc(90001, after, 90000, 2201, 1),  # and its child
        95000: proc(95000, RUN, 1, cgroup=200),  # SPUR_JOB_ID=4711, in job_200's cgroup
        96000: proc(96000, after, 1),  # younger than spurd, no known parent
        97000: proc(97000, None, 1),
    }
    chosen = select(4711, procs, agent, own_pid=4242)
    assert chosen.signalled == [81234, 81240]
    assert set(chosen.spared) == {90000, 90001, 95000, 96000, 97000}
    assert "cgroup membership wins: it is job 200's" in chosen.spared[95000]
    assert "descends from the current spurd (pid 2201)" in chosen.spared[90001]
    assert "whose it is cannot be told" in chosen.spared[96000]
    assert "cannot be read" in chosen.spared[97000]


def test_never_signals_pid_1_itself_or_spurd() -> None:
    procs = {pid: proc(pid, RUN, 1) for pid in (1, 2201, 4242, 81234)}
    chosen = select(4711, procs, AgentProcess(2201, RESTART), own_pid=4242)
    assert chosen.signalled == [81234]
    assert set(chosen.spared) == {1, 2201, 4242}
