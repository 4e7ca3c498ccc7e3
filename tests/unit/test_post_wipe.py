"""The post-wipe hazards judged without a cluster: one held id at a time, and the steps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spurctl.decide.post_wipe import (
    Assessment,
    Hazard,
    HeldId,
    NodeAssessment,
    Step,
    StepId,
    assess_holding,
)
from spurctl.decide.recycle_steps import build_steps
from spurctl.model import (
    AgentProcess,
    Holding,
    Job,
    JobState,
    Node,
    NodeState,
    Watermark,
    WatermarkSource,
)
from spurctl.render.common import command_line

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
WM = Watermark(41, WatermarkSource.ESTIMATED)


def test_a_held_run_without_a_start_time_is_undetermined_not_healthy_nor_recycled() -> None:
    job = Job(31, JobState.RUNNING, nodelist="gpu011", submit_time=NOW)
    h = assess_holding(
        "gpu011",
        Holding(31, started_at=None),
        job,
        untracked=False,
        asked=False,
        watermark=WM,
        now=NOW,
    )
    assert h.hazard is Hazard.UNDETERMINED
    assert "no start time" in h.reason


def test_absence_alone_never_makes_an_id_untracked() -> None:
    h = assess_holding(
        "gpu001",
        Holding(7, started_at=NOW),
        None,
        untracked=False,
        asked=False,
        watermark=WM,
        now=NOW,
    )
    assert h.hazard is Hazard.UNDETERMINED


def judge(holding: Holding, job: Job | None, *, untracked: bool = False) -> HeldId:
    return assess_holding(
        "gpu003", holding, job, untracked=untracked, asked=False, watermark=WM, now=NOW
    )


def test_a_run_started_just_before_its_submission_is_clock_skew_not_a_reissued_id() -> None:
    # The node's clock runs 20 s behind the controller's: a post-wipe run looks older than
    # its own submission. Calling that "reissued" would recycle a node running live work.
    job = Job(23, JobState.RUNNING, nodelist="gpu003", submit_time=NOW)
    skewed = judge(Holding(23, started_at=NOW - timedelta(seconds=20)), job)
    assert skewed.hazard is Hazard.UNDETERMINED
    assert "clock skew" in skewed.reason
    assert judge(Holding(23, started_at=NOW - timedelta(hours=3)), job).hazard is Hazard.REISSUED
    assert judge(Holding(23, started_at=NOW + timedelta(seconds=90)), job).hazard is Hazard.HEALTHY


def test_a_reissued_id_whose_new_nodelist_is_unreadable_is_still_reissued() -> None:
    job = Job(23, JobState.RUNNING, nodelist="gpu[01", submit_time=NOW)
    h = judge(Holding(23, started_at=NOW - timedelta(hours=3)), job)
    assert h.hazard is Hazard.REISSUED
    assert "not a readable hostlist" in h.reason


def test_untracked_ids_are_split_by_the_watermark() -> None:
    at = judge(Holding(41, started_at=NOW), None, untracked=True)
    assert (at.hazard, at.submissions_until) == (Hazard.ABOVE_WATERMARK, 1)
    assert "at most 1 more submission from now" in at.reason
    below = judge(Holding(40, started_at=NOW), None, untracked=True)
    assert (below.hazard, below.submissions_until) == (Hazard.UNTRACKED_BELOW_WATERMARK, None)


def test_stop_submissions_covers_every_partition_since_the_counter_is_cluster_wide() -> None:
    nodes = {
        "a1": Node("a1", NodeState.IDLE, partitions=("gpu",)),
        "b1": Node("b1", NodeState.IDLE, partitions=("debug", "cpu")),
    }
    a = Assessment(
        controller_address="http://ctl:6817",
        controller_version="0.8.0",
        taken_at=NOW,
        view_complete=True,
        jobs_seen=0,
        jobs_total=0,
        watermark=WM,
        nodes={
            "a1": NodeAssessment(
                "a1",
                (
                    assess_holding(
                        "a1",
                        Holding(50, started_at=NOW),
                        None,
                        untracked=True,
                        asked=False,
                        watermark=WM,
                        now=NOW,
                    ),
                ),
                None,
                nodes["a1"],
            )
        },
        partitions=("cpu", "debug", "gpu"),
    )
    steps = build_steps(a, ["a1"], verify=False)
    stop = steps[0]
    assert stop.id is StepId.STOP_SUBMISSIONS
    assert tuple(map(command_line, stop.commands)) == (
        "scontrol update PartitionName=cpu State=DRAIN",
        "scontrol update PartitionName=debug State=DRAIN",
        "scontrol update PartitionName=gpu State=DRAIN",
    )
    assert "cluster-wide" in stop.detail
    # The verify step's commands collect and read as the checklist run did, quoted.
    flagged = build_steps(
        a, ["a1"], verify=False, collect_flags=["--command", "ssh -p 2 %h x"],
        read_flags=["--controller", "http://ctl:6817", "--watermark", "40"],
    )  # fmt: skip
    verify = next(s for s in flagged if s.id is StepId.VERIFY_INVENTORIES)
    assert tuple(map(command_line, verify.commands)) == (
        "spurctl collect --nodes a1 --command 'ssh -p 2 %h x' -o after.jsonl",
        "spurctl checklist post-wipe --verify --nodes a1 --inventory after.jsonl "
        "--controller http://ctl:6817 --watermark 40",
    )


# -- "Restart spurd" is proven by the node's own spurd start, never slurmd_start_time ----

WIPED_BY = datetime(2026, 12, 2, 6, 5, tzinfo=UTC)  # the first post-wipe submission
BEFORE = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
AFTER = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)


def _one_node(
    agent: AgentProcess | None,
    *,
    slurmd: datetime | None,
    checked: bool = True,
    held: tuple[HeldId, ...] = (),
    wiped_by: datetime | None = WIPED_BY,
) -> Assessment:
    ctl = Node("a1", NodeState.DRAIN, agent_start_time=slurmd)
    return Assessment(
        controller_address="http://ctl:6817",
        controller_version="0.8.0",
        taken_at=NOW,
        view_complete=True,
        jobs_seen=0,
        jobs_total=0,
        watermark=WM,
        nodes={"a1": NodeAssessment("a1", held, None, ctl, agent=agent, agent_checked=checked)},
        partitions=(),
        wiped_by=wiped_by,
    )


def _step(a: Assessment, sid: StepId) -> Step:
    return next(s for s in build_steps(a, ["a1"], verify=True) if s.id is sid)


@pytest.mark.parametrize(
    ("assessment", "done", "says"),
    [
        pytest.param(
            _one_node(AgentProcess(7, AFTER), slurmd=BEFORE),
            True,
            "started after the wipe",
            id="restarted, though slurmd_start_time says not",
        ),
        pytest.param(
            _one_node(AgentProcess(7, BEFORE), slurmd=AFTER),
            False,
            "agent not restarted",
            id="not restarted, though slurmd_start_time says it was",
        ),
        pytest.param(
            _one_node(None, slurmd=AFTER, checked=False),
            False,
            "`spurctl node-inventory`",
            id="no agent recorded: not proven, says what to collect",
        ),
        pytest.param(
            _one_node(None, slurmd=AFTER, checked=True),
            False,
            "no spurd runs on it",
            id="the scan found no spurd",
        ),
        pytest.param(
            _one_node(AgentProcess(7, None), slurmd=AFTER),
            False,
            "without a start time",
            id="spurd without a start time",
        ),
        pytest.param(
            _one_node(AgentProcess(7, AFTER), slurmd=AFTER, wiped_by=None),
            False,
            "by hand",
            id="nothing dates the wipe",
        ),
    ],
)
def test_the_restart_follows_the_nodes_spurd_start(
    assessment: Assessment, done: bool, says: str
) -> None:
    restart = _step(assessment, StepId.RESTART_AGENTS)
    assert restart.done is done
    assert says in restart.detail


def test_a_pre_wipe_run_left_after_a_restart_keeps_the_stop_step_open() -> None:
    run = assess_holding(
        "a1",
        Holding(50, started_at=BEFORE - timedelta(days=1), pids=(9,)),
        None,
        untracked=True,
        asked=False,
        watermark=WM,
        now=NOW,
    )
    a = _one_node(AgentProcess(7, AFTER), slurmd=BEFORE, held=(run,))
    stop = _step(a, StepId.STOP_RUNS)
    assert stop.done is False
    assert "50 outlived spurd's restart" in stop.detail
    # Run on the node: one ssh word for the whole command, which pastes as it reads.
    assert tuple(map(command_line, stop.commands)) == (
        "ssh a1 'spurctl node-release --job 50 --started-at 2026-11-24T12:00:00Z'",
    )
    steps = [s.id for s in build_steps(a, ["a1"], verify=True)]
    assert steps.index(StepId.STOP_RUNS) < steps.index(StepId.RESTART_AGENTS)


def test_every_hazard_is_named_as_the_audit_names_it() -> None:
    from spurctl.decide.post_wipe import Hazard
    from spurctl.model import Kind

    assert {h.value for h in Hazard} <= {k.value for k in Kind}


def test_a_pre_wipe_run_under_a_live_spurstepd_session_is_waited_out_not_released() -> None:
    # Spur #754: a restarted spurd adopts every live session, so restarting it does not
    # end the run and node-release refuses it; the checklist says so instead of
    # printing a node-release that would be refused.
    from spurctl.holdings import Session, SessionBinding

    live = Session(1, 0xFFFF_FFFE, 6100, SessionBinding.LIVE, workload=9)
    run = assess_holding(
        "a1",
        Holding(50, started_at=BEFORE - timedelta(days=1), pids=(9, 6100), sessions=(live,)),
        None,
        untracked=True,
        asked=False,
        watermark=WM,
        now=NOW,
    )
    assert run.adopted is not None and "a live spurstepd session binds it" in run.adopted
    a = _one_node(AgentProcess(7, AFTER), slurmd=BEFORE, held=(run,))
    stop = _step(a, StepId.STOP_RUNS)
    assert stop.done is False
    assert "50 runs under a live spurstepd supervisor" in stop.detail
    assert "restarted spurd adopts again" in stop.detail
    assert "outlived spurd's restart" not in stop.detail
    (step,) = stop.commands
    command = command_line(step)
    assert not step.argv  # advice, not a command
    assert command.startswith("# a1: job 50 is adopted across spurd restarts")
    assert "node-release refuses it" in command and "wait it out" in command


def test_the_plan_says_which_restart_changes_slurmd_start_time() -> None:
    # Up to Spur 0.11 a graceful spurd stop sends DeregisterAgent and the controller
    # removes the node; the next spurd registers a fresh record: a new slurmd_start_time,
    # and the drain gone. A crash changes neither (docs/spur-facts.md).
    plan = build_steps(_one_node(AgentProcess(7, AFTER), slurmd=BEFORE), ["a1"], verify=False)
    [restart] = [s for s in plan if s.id is StepId.RESTART_AGENTS]
    assert "never by the controller's slurmd_start_time" in restart.detail
    assert "a crash restart keeps it" in restart.detail
    assert "a graceful one before Spur #784 renews it and drops the node's drain" in (
        restart.detail
    )
    assert "drain it again" in restart.detail
    assert "which a restart does not change" not in restart.detail
