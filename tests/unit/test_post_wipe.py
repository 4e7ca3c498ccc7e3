"""The post-wipe hazards judged without a cluster: one held id at a time, and the steps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spurctl.decide.post_wipe import (
    Assessment,
    Hazard,
    HeldId,
    NodeAssessment,
    StepId,
    assess_holding,
    build_steps,
)
from spurctl.model import (
    Holding,
    Job,
    JobState,
    Node,
    NodeState,
    Watermark,
    WatermarkSource,
)

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
    assert stop.commands == (
        "scontrol update PartitionName=cpu State=DRAIN",
        "scontrol update PartitionName=debug State=DRAIN",
        "scontrol update PartitionName=gpu State=DRAIN",
    )
    assert "cluster-wide" in stop.detail
