"""A finding is dated by its evidence (decide/onset.py): the job's end for a terminal
holding, the move for an active-elsewhere one, the run's start or the inventory for the
rest; nothing dates what only the view shows, nor anything on a node whose clock runs ahead."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from spurctl.decide.onset import dated
from spurctl.model import (
    Action,
    ControllerView,
    Finding,
    Holding,
    Inventory,
    Job,
    JobState,
    Kind,
    SinceEvidence,
)

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
ENDED = datetime(2026, 11, 29, 23, 40, 51, tzinfo=UTC)
MOVED = datetime(2026, 12, 1, 22, 16, 5, tzinfo=UTC)
RUN = datetime(2026, 12, 1, 14, 2, 11, tzinfo=UTC)
COLLECTED = T0 - timedelta(minutes=3)

JOBS = {
    4702: Job(4702, JobState.COMPLETED, "gpu012", end_time=ENDED),
    4711: Job(4711, JobState.RUNNING, "gpu015", start_time=MOVED),
    4712: Job(4712, JobState.COMPLETED, "gpu016"),  # no end time recorded
}
VIEW = ControllerView("http://ctl:6817", "0.9.1", T0, JOBS, {}, jobs_total=3)


def inventory(node: str, *held: Holding, collected: datetime | None = COLLECTED) -> Inventory:
    return Inventory(node, collected, "cgroup+proc", held=held)


def finding(node: str, job: int | None, kind: Kind) -> Finding:
    return Finding(node, job, kind, Action.INVESTIGATE, f"{node} {job} {kind}")


def since_of(
    f: Finding,
    inventories: dict[str, Inventory],
    confirmed: Mapping[int, Job | None] | None = None,
) -> tuple[datetime | None, SinceEvidence | None]:
    (out,) = dated([f], VIEW, inventories, confirmed or {})
    return out.since, out.since_evidence


def test_a_terminal_holding_is_dated_by_the_jobs_end_not_by_when_it_was_seen() -> None:
    inv = {"gpu012": inventory("gpu012", Holding(4702, started_at=RUN))}
    assert since_of(finding("gpu012", 4702, Kind.TERMINAL_HELD), inv) == (
        ENDED,
        SinceEvidence.JOB_END,
    )


def test_a_run_left_behind_by_a_move_is_dated_by_the_jobs_start_elsewhere() -> None:
    inv = {"gpu003": inventory("gpu003", Holding(4711, started_at=RUN))}
    assert since_of(finding("gpu003", 4711, Kind.ACTIVE_ELSEWHERE), inv) == (
        MOVED,
        SinceEvidence.JOB_START,
    )


def test_a_job_without_its_time_falls_back_to_the_runs_start_then_the_inventory() -> None:
    held = {"gpu016": inventory("gpu016", Holding(4712, started_at=RUN))}
    assert since_of(finding("gpu016", 4712, Kind.TERMINAL_HELD), held) == (
        RUN,
        SinceEvidence.RUN_START,
    )
    unstarted = {"gpu016": inventory("gpu016", Holding(4712))}
    assert since_of(finding("gpu016", 4712, Kind.TERMINAL_HELD), unstarted) == (
        COLLECTED,
        SinceEvidence.INVENTORY,
    )


def test_a_job_the_controller_answered_for_by_id_dates_it_too() -> None:
    inv = {"gpu013": inventory("gpu013", Holding(4388, started_at=RUN))}
    confirmed = {4388: Job(4388, JobState.FAILED, "gpu013", end_time=ENDED)}
    f = finding("gpu013", 4388, Kind.TERMINAL_HELD)
    assert since_of(f, inv, confirmed) == (ENDED, SinceEvidence.JOB_END)


def test_an_untracked_holding_is_dated_by_its_runs_start() -> None:
    inv = {"gpu013": inventory("gpu013", Holding(4388, started_at=RUN))}
    f = finding("gpu013", 4388, Kind.BELOW_WATERMARK_UNKNOWN)
    assert since_of(f, inv) == (RUN, SinceEvidence.RUN_START)


def test_nothing_dates_a_finding_about_the_node_or_a_job_it_lost() -> None:
    inv = {
        "gpu009": inventory("gpu009"),
        "gpu021.cluster.local": inventory("gpu021.cluster.local"),
        "gpu022": inventory("gpu022", collected=None),
        "gpu015": inventory("gpu015"),
    }
    for f in (
        finding("gpu009", None, Kind.PHANTOM_ALLOC),
        finding("gpu009", None, Kind.EXCESS_ALLOC),
        finding("gpu030", None, Kind.NOT_INVENTORIED),
        finding("gpu022", None, Kind.AGENT_UNREACHABLE),
        finding("gpu021.cluster.local", None, Kind.NAME_MISMATCH),
        finding("gpu015", 4711, Kind.LOST_ON_NODE),  # it holds nothing of 4711
    ):
        assert since_of(f, inv) == (None, None), f.kind


def test_a_held_run_without_a_start_time_is_dated_by_the_inventory_that_shows_it() -> None:
    inv = {"gpu010": inventory("gpu010", Holding(5118))}
    f = finding("gpu010", 5118, Kind.NOT_STARTED)
    assert since_of(f, inv) == (COLLECTED, SinceEvidence.INVENTORY)


def test_nothing_on_a_node_whose_clock_runs_ahead_is_dated() -> None:
    ahead = T0 + timedelta(hours=2)
    inv = {"gpu012": inventory("gpu012", Holding(4702, started_at=ahead), collected=ahead)}
    findings = [
        finding("gpu012", None, Kind.CLOCK_AHEAD),
        finding("gpu012", 4702, Kind.TERMINAL_HELD),
    ]
    assert [(f.since, f.since_evidence) for f in dated(findings, VIEW, inv, {})] == [
        (None, None),
        (None, None),
    ]


def test_dating_keeps_the_order_and_everything_else_of_each_finding() -> None:
    inv = {"gpu012": inventory("gpu012", Holding(4702, started_at=RUN))}
    findings = [
        finding("gpu009", None, Kind.PHANTOM_ALLOC),
        finding("gpu012", 4702, Kind.TERMINAL_HELD),
    ]
    out = dated(findings, VIEW, inv, {})
    assert out[0] is findings[0]
    assert out[1].since == ENDED and out[1].reason == findings[1].reason
    assert [(f.node, f.job_id, f.kind) for f in out] == [
        (f.node, f.job_id, f.kind) for f in findings
    ]
