"""agent-orphan: a held run that began before the node's current spurd started.

spurd's running map does not survive a restart while the run's processes and
cgroup do (Spur #803), and its CancelJob answers Ok for an id it does not track,
doing nothing. So such a run is never planned for an agent cancel (it would be
"sent" and free nothing): it takes precedence over every reclaim verdict, and over
healthy (a legitimate run the agent lost), and the reason gives the node-side
command. Every other verdict stands.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import msgspec
import pytest

from spurctl.decide import classify as classify_module
from spurctl.model import Action, AgentProcess, Holding, Inventory, Job, JobState, Kind
from tests.unit.test_classify import RUN_START, T0, WM, held, inv, invs, job, view

BEFORE = RUN_START + timedelta(minutes=5)  # spurd restarted after the run began
AFTER = RUN_START - timedelta(minutes=5)  # spurd started before the run (it launched it)
STARTED = "2026-12-02T10:10:00Z"  # RUN_START, as the command the reason gives writes it


def on_node(*holdings: object, agent_started: datetime | None, pid: int = 2201) -> Inventory:
    base = inv("gpu017", *holdings)  # type: ignore[arg-type]
    agent = AgentProcess(pid=pid, started_at=agent_started)
    return replace(base, agent=agent, agent_checked=True)


def supervised(h: Holding) -> Holding:
    return msgspec.structs.replace(h, supervisors=(6100,))


@dataclass
class Case:
    jobs: tuple[Job, ...]
    inventory: Inventory
    expected: tuple[Kind, Action] | None
    confirmed: dict[int, Job | None] | None = None
    jobs_total: int | None = None
    include_healthy: bool = False


CASES: dict[str, Case] = {
    "GATE: a terminal job held since before the restart is an orphan, not a reclaim": Case(
        (job(40, JobState.COMPLETED, "gpu017", end=T0),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.INVESTIGATE),
    ),
    "a run restarted elsewhere, held since before the restart, is an orphan": Case(
        (job(40, JobState.RUNNING, "gpu020"),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.INVESTIGATE),
    ),
    "an untracked id below the watermark, held since before the restart, is an orphan": Case(
        (),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.INVESTIGATE),
    ),
    "a healthy run the restarted agent lost is investigated even without --all": Case(
        (job(40, JobState.RUNNING, "gpu[016-018]"),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.INVESTIGATE),
    ),
    "a run the current spurd launched stays a reclaim": Case(
        (job(40, JobState.COMPLETED, "gpu017", end=T0),),
        on_node(held(40, pids=(7,)), agent_started=AFTER),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
    ),
    "a run started the very instant spurd did is not before it": Case(
        (job(40, JobState.COMPLETED, "gpu017", end=T0),),
        on_node(held(40, pids=(7,)), agent_started=RUN_START),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
    ),
    "no spurd start time: the verdict stands": Case(
        (job(40, JobState.COMPLETED, "gpu017", end=T0),),
        on_node(held(40, pids=(7,)), agent_started=None),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
    ),
    "no run start time: never an orphan, never a reclaim of a tracked id": Case(
        (job(40, JobState.COMPLETED, "gpu017", end=T0),),
        on_node(held(40, pids=(7,), started=None), agent_started=BEFORE),
        (Kind.TERMINAL_HELD, Action.INVESTIGATE),
    ),
    "a pending job stays spared": Case(
        (job(40, JobState.PENDING),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.NOT_STARTED, Action.SPARE),
    ),
    "mid-commit stays spared": Case(
        (job(40, JobState.RUNNING, ""),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.MID_COMMIT, Action.SPARE),
    ),
    "an id above the watermark stays above-watermark-unknown": Case(
        (),
        on_node(held(WM + 1, pids=(7,)), agent_started=BEFORE),
        (Kind.ABOVE_WATERMARK_UNKNOWN, Action.INVESTIGATE),
    ),
    "an id missing from a partial view stays unverifiable": Case(
        (job(1, JobState.RUNNING, "gpu020"),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.UNVERIFIABLE, Action.SPARE),
        jobs_total=5,
    ),
    "NOT_FOUND from GetJob on a partial view: an orphan below the watermark": Case(
        (job(1, JobState.RUNNING, "gpu020"),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.INVESTIGATE),
        confirmed={40: None},
        jobs_total=5,
    ),
    "a suspected id reuse stays id-reuse-suspected": Case(
        (job(40, JobState.COMPLETED, "gpu017", submit=RUN_START + timedelta(minutes=1)),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.ID_REUSE_SUSPECTED, Action.INVESTIGATE),
    ),
    "a terminal run under a live spurstepd is investigated, never called an orphan": Case(
        (job(40, JobState.COMPLETED, "gpu017", end=T0),),
        on_node(supervised(held(40, pids=(7,))), agent_started=BEFORE),
        (Kind.TERMINAL_HELD, Action.INVESTIGATE),
    ),
    "an untracked id under a live spurstepd is investigated, never called an orphan": Case(
        (),
        on_node(supervised(held(40, pids=(7,))), agent_started=BEFORE),
        (Kind.BELOW_WATERMARK_UNKNOWN, Action.INVESTIGATE),
    ),
    "a healthy run under a live spurstepd is healthy: spurd adopts it": Case(
        (job(40, JobState.RUNNING, "gpu[016-018]"),),
        on_node(supervised(held(40, pids=(7,))), agent_started=BEFORE),
        None,
    ),
    "a nodelist whose text names the node stays unverifiable": Case(
        (job(40, JobState.RUNNING, "gpu017 ,gpu020[", start=T0),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.UNVERIFIABLE, Action.INVESTIGATE),
    ),
}


def classify(case: Case) -> classify_module.Classification:
    v = view(*case.jobs, jobs_total=case.jobs_total)
    return classify_module.classify(
        v,
        invs(case.inventory),
        watermark=WM,
        confirmed=case.confirmed or {},
        scope=["gpu017"],
        include_healthy=case.include_healthy,
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_agent_orphan(case: Case) -> None:
    got = [(f.kind, f.action) for f in classify(case).findings if f.job_id is not None]
    assert got == ([case.expected] if case.expected else [])


def test_an_orphans_reason_says_why_no_cancel_and_gives_the_node_side_command() -> None:
    (finding,) = classify(CASES[next(iter(CASES))]).findings
    assert finding.node == "gpu017" and finding.job_id == 40 and finding.live
    assert "spurd (pid 2201)" in finding.reason and "Spur #803" in finding.reason
    assert "answer Ok and free nothing" in finding.reason
    assert "no agent cancel is planned" in finding.reason
    assert f"`spurctl node-release --job 40 --started-at {STARTED}` on gpu017" in finding.reason
    assert finding.controller_state == "COMPLETED"


def test_a_legitimate_orphan_is_never_to_be_released_while_it_runs() -> None:
    (finding,) = [
        f
        for f in classify(
            CASES["a healthy run the restarted agent lost is investigated even without --all"]
        ).findings
        if f.job_id == 40
    ]
    assert "the run is legitimate, so do not release it" in finding.reason
    assert "once the job has ended" in finding.reason
    assert "no agent cancel is planned" not in finding.reason


def test_the_command_carries_the_inventorys_exact_start_time() -> None:
    started = RUN_START + timedelta(microseconds=250_000)
    case = Case((), on_node(held(40, pids=(7,), started=started), agent_started=BEFORE), None)
    (finding,) = classify(case).findings
    assert "--started-at 2026-12-02T10:10:00.250000Z" in finding.reason


def test_a_supervised_runs_reason_names_the_supervisor_and_plans_nothing() -> None:
    name = "a terminal run under a live spurstepd is investigated, never called an orphan"
    (finding,) = classify(CASES[name]).findings
    assert "spurstepd supervisor 6100" in finding.reason and "Spur #754" in finding.reason
    assert "not called an agent orphan" in finding.reason
    assert "node-release" not in finding.reason


def test_a_lost_job_on_a_node_whose_spurd_has_another_name_names_spur_684() -> None:
    base = inv("gpu017")
    node = replace(base, hostname="gpu017.cluster", agent_hostname="gpu017")
    v = view(job(40, JobState.RUNNING, "gpu017", start=T0 - timedelta(hours=1)))
    got = classify_module.classify(v, invs(node), watermark=WM, confirmed={}, scope=["gpu017"])
    (lost,) = [f for f in got.findings if f.kind is Kind.LOST_ON_NODE]
    assert "--hostname gpu017 while the host's name is gpu017.cluster" in lost.reason
    assert "Spur #684" in lost.reason
    same = replace(base, hostname="gpu017", agent_hostname="gpu017")
    got = classify_module.classify(v, invs(same), watermark=WM, confirmed={}, scope=["gpu017"])
    (lost,) = [f for f in got.findings if f.kind is Kind.LOST_ON_NODE]
    assert "#684" not in lost.reason


@pytest.mark.parametrize(
    "controller",
    [
        job(40, JobState.RUNNING, "gpu017", start=T0),  # requeued here after the restart
        job(40, JobState.NODE_FAIL, "gpu017", end=T0),
        job(40, JobState.RUNNING, "gpu020", start=T0),
    ],
    ids=["requeued-here", "node-fail", "running-elsewhere"],
)
def test_a_cgroup_shared_with_spurds_own_run_is_never_cancelled_and_says_whose_is_which(
    controller: Job,
) -> None:
    # After a graceful restart a requeued run joins the old job_40 cgroup: 7 is the
    # pre-restart orphan, 9 descends from the current spurd.
    shared = msgspec.structs.replace(held(40, pids=(7, 9)), tracked_pids=(9,))
    case = Case((controller,), on_node(shared, agent_started=BEFORE), None)
    (finding,) = [f for f in classify(case).findings if f.job_id == 40]
    assert (finding.kind, finding.action) == (Kind.AGENT_ORPHAN, Action.INVESTIGATE)
    assert "holds processes 7, begun at" in finding.reason
    assert "beside processes 9 of the current spurd's own run of the job" in finding.reason
    assert "no agent cancel is planned" in finding.reason and "Spur #592" in finding.reason


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, (Kind.AGENT_ORPHAN, Action.INVESTIGATE)),
        ({"tracked_pids": (7,)}, (Kind.TERMINAL_HELD, Action.RECLAIM)),
        ({"supervisors": (6100,)}, (Kind.TERMINAL_HELD, Action.RECLAIM)),
        ({"pids": ()}, (Kind.TERMINAL_HELD, Action.RECLAIM)),
    ],
    ids=["none-is-spurds", "spurds-child", "supervised", "no-process"],
)
def test_a_run_no_process_of_which_descends_from_spurd_gets_no_agent_cancel(
    change: dict[str, tuple[int, ...]], expected: tuple[Kind, Action]
) -> None:
    # The run began after spurd started (not an orphan by age), but the scan traced its
    # processes to pid 1 and none passes through spurd: spurd's map lacks it.
    run = msgspec.structs.replace(held(40, pids=(7,)), **change)
    node = replace(on_node(run, agent_started=AFTER), ancestry_read=True)
    case = Case((job(40, JobState.COMPLETED, "gpu017", end=T0),), node, expected)
    (finding,) = [f for f in classify(case).findings if f.job_id == 40]
    assert (finding.kind, finding.action) == expected
    if finding.kind is Kind.AGENT_ORPHAN:
        assert "none of its processes (7) descends from gpu017's spurd (pid 2201)" in (
            finding.reason
        )
        assert "no agent cancel is planned" in finding.reason
    # Without the scan's word on ancestry, an empty tracked_pids proves nothing.
    unread = Case(case.jobs, replace(node, ancestry_read=False), None)
    (plain,) = [f for f in classify(unread).findings if f.job_id == 40]
    assert (plain.kind, plain.action) == (Kind.TERMINAL_HELD, Action.RECLAIM)
