"""decide/release.py: when `spurctl node-release` may stop a job's run, and which processes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spurctl.decide.release import refusal, signalled
from spurctl.model import AgentProcess, Holding, Inventory

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
    ("a process whose parent is the current spurd: spurd tracks it", node(run()), RUN, (81235,),
     "process 81235 of job 4711 on gpu003 is spurd (pid 2201) or its child"),
    ("spurd itself among the job's processes: refused", node(run(pids=(2201, 81234))), RUN, (),
     "process 2201 of job 4711"),
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


def test_never_signals_pid_1_itself_or_spurd() -> None:
    holding = run(pids=(1, 2201, 4242, 81234))
    assert signalled(holding, own_pid=4242, agent_pid=2201) == (81234,)
    assert signalled(holding, own_pid=4242, agent_pid=None) == (2201, 81234)
