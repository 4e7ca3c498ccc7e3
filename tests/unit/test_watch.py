"""`audit --watch`: the tracker ages findings by when they were seen and when
their evidence was collected, and calls a reclaim finding stranded only once
its evidence spans two agent heartbeats; the view shows all of it."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spurctl.decide.tracker import STRANDED_AFTER, TrackedFinding, Tracker, WatchRound
from spurctl.model import (
    Action,
    AuditReport,
    Finding,
    Kind,
    SinceEvidence,
    Watermark,
    WatermarkSource,
)
from spurctl.render.watch import format_age, render_watch_round
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.usecases.audit import every, scheduled

T0 = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# The job ended two days before the watch started: its holding is that old, not the watch's.
ENDED = datetime(2026, 11, 30, 8, 12, 40, tzinfo=UTC)
TERMINAL = Finding(
    "gpu017",
    4711,
    Kind.TERMINAL_HELD,
    Action.RECLAIM,
    "gpu017 holds job 4711, which the controller finished (COMPLETED).",
    live=True,
    controller_state="COMPLETED",
    pids=(81234,),
    since=ENDED,
    since_evidence=SinceEvidence.JOB_END,
)
PHANTOM = Finding(
    "gpu020", None, Kind.PHANTOM_ALLOC, Action.INVESTIGATE, "gpu020 has 4 GPUs allocated."
)
NOT_STARTED = Finding(
    "gpu021",
    4800,
    Kind.NOT_STARTED,
    Action.SPARE,
    "job 4800 is PENDING; spared.",
    since=T0 + timedelta(seconds=50),
    since_evidence=SinceEvidence.RUN_START,
)


def only(tracked: list[TrackedFinding]) -> TrackedFinding:
    (t,) = tracked
    return t


# -- the tracker -------------------------------------------------------------------


def test_a_new_finding_is_first_seen_now_with_age_zero_and_not_stranded() -> None:
    t = only(Tracker().update([TERMINAL], at(0)))

    assert (t.finding, t.first_seen, t.age, t.stranded) == (TERMINAL, at(0), timedelta(0), False)


def test_a_persisting_finding_keeps_its_first_sighting_and_ages() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracker.update([TERMINAL], at(30))
    t = only(tracker.update([TERMINAL], at(45)))

    assert (t.first_seen, t.age) == (at(0), timedelta(seconds=45))


UNREACHABLE = Finding(
    "gpu017", None, Kind.AGENT_UNREACHABLE, Action.INVESTIGATE, "no inventory from gpu017."
)


def test_a_round_without_evidence_for_a_node_keeps_its_findings_ages() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": at(0)})
    tracker.update([UNREACHABLE], at(30))  # gpu017's collect failed: nothing proves it gone
    t = only(tracker.update([TERMINAL], at(60), evidence_at={"gpu017": at(60)}))
    assert (t.first_seen, t.age, t.stranded) == (at(0), timedelta(seconds=60), True)


def test_a_flapping_node_is_stranded_across_rounds_that_fail_every_other_time() -> None:
    tracker = Tracker()
    for second in range(0, 121, 30):
        if (second // 30) % 2:
            tracker.update([UNREACHABLE], at(second))
        else:
            t = only(tracker.update([TERMINAL], at(second), evidence_at={"gpu017": at(second)}))
    assert t.age == timedelta(seconds=120) and t.stranded


def test_a_round_that_inventoried_the_node_without_the_holding_resets_it() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracker.update([], at(30))  # inventoried, holding gone
    t = only(tracker.update([TERMINAL], at(60)))
    assert (t.first_seen, t.age) == (at(60), timedelta(0))


def test_a_reclaim_finding_is_stranded_once_it_outlives_two_heartbeats() -> None:
    assert timedelta(seconds=60) == STRANDED_AFTER
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))

    assert not only(tracker.update([TERMINAL], at(59.9))).stranded
    assert only(tracker.update([TERMINAL], at(60))).stranded
    assert only(tracker.update([TERMINAL], at(3600))).stranded


def test_stranded_depends_on_persistence_not_on_how_often_the_watch_looks() -> None:
    sparse, dense = Tracker(), Tracker()
    sparse.update([TERMINAL], at(0))
    for s in range(0, 60, 2):
        dense.update([TERMINAL], at(s))

    assert only(sparse.update([TERMINAL], at(60))).stranded
    assert only(dense.update([TERMINAL], at(60))).stranded


def test_only_reclaim_findings_are_ever_stranded() -> None:
    tracker = Tracker()
    tracker.update([PHANTOM, NOT_STARTED], at(0))
    tracked = tracker.update([PHANTOM, NOT_STARTED], at(86400))

    assert [t.age for t in tracked] == [timedelta(days=1)] * 2
    assert [t.stranded for t in tracked] == [False, False]
    assert [t.evidence_stale for t in tracked] == [False, False]


def test_a_finding_that_disappears_for_a_round_starts_afresh_when_it_returns() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracker.update([TERMINAL], at(50))
    assert tracker.update([], at(55)) == []
    t = only(tracker.update([TERMINAL], at(70)))

    assert (t.first_seen, t.age, t.stranded) == (at(70), timedelta(0), False)
    assert not only(tracker.update([TERMINAL], at(120))).stranded


def test_findings_are_the_same_only_when_node_job_and_kind_all_match() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    other_kind = Finding("gpu017", 4711, Kind.ACTIVE_ELSEWHERE, Action.RECLAIM, "moved.")
    other_node = Finding("gpu018", 4711, Kind.TERMINAL_HELD, Action.RECLAIM, "also.")
    other_job = Finding("gpu017", 4712, Kind.TERMINAL_HELD, Action.RECLAIM, "also.")
    reworded = Finding("gpu017", 4711, Kind.TERMINAL_HELD, Action.RECLAIM, "new words.")

    tracked = tracker.update([other_kind, other_node, other_job, reworded], at(90))

    assert [t.first_seen for t in tracked] == [at(90), at(90), at(90), at(0)]
    assert [t.stranded for t in tracked] == [False, False, False, True]
    assert tracked[3].finding.reason == "new words."  # the latest round's finding is shown


def test_the_latest_rounds_order_is_kept() -> None:
    tracker = Tracker()
    tracker.update([PHANTOM, TERMINAL], at(0))

    assert [t.finding for t in tracker.update([TERMINAL, NOT_STARTED, PHANTOM], at(1))] == [
        TERMINAL,
        NOT_STARTED,
        PHANTOM,
    ]


def test_an_inventory_nobody_recollected_never_makes_a_finding_stranded() -> None:
    tracker = Tracker()
    collected = {"gpu017": at(-5)}
    tracker.update([TERMINAL], at(0), evidence_at=collected)
    t = only(tracker.update([TERMINAL], at(600), evidence_at=collected))

    assert (t.age, t.persisted, t.stranded) == (timedelta(seconds=600), timedelta(0), False)
    assert t.evidence_stale


def test_recollected_evidence_two_heartbeats_apart_makes_it_stranded() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": at(-5)})
    early = only(tracker.update([TERMINAL], at(60), evidence_at={"gpu017": at(30)}))
    late = only(tracker.update([TERMINAL], at(90), evidence_at={"gpu017": at(55)}))

    assert (early.persisted, early.stranded, early.evidence_stale) == (
        timedelta(seconds=35),
        False,
        True,
    )
    assert (late.persisted, late.stranded, late.evidence_stale) == (
        timedelta(seconds=60),
        True,
        False,
    )


def test_an_old_inventory_at_first_sighting_does_not_make_a_young_finding_stranded() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": at(-600)})
    young = only(tracker.update([TERMINAL], at(30), evidence_at={"gpu017": at(25)}))
    old = only(tracker.update([TERMINAL], at(60), evidence_at={"gpu017": at(55)}))

    assert (young.persisted, young.stranded) == (timedelta(seconds=30), False)
    assert (old.persisted, old.stranded) == (timedelta(seconds=60), True)


def test_persistence_is_measured_on_the_nodes_own_clock_however_skewed() -> None:
    tracker = Tracker()
    skewed = at(-7 * 3600)  # a node whose clock is seven hours behind
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": skewed})
    t = only(tracker.update([TERMINAL], at(61), evidence_at={"gpu017": skewed + timedelta(61)}))

    assert t.stranded


def test_evidence_older_than_the_first_sighting_counts_as_no_persistence() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": at(0)})
    t = only(tracker.update([TERMINAL], at(120), evidence_at={"gpu017": at(-300)}))

    assert (t.persisted, t.stranded) == (timedelta(0), False)


def test_a_node_without_a_collection_time_is_taken_as_observed_each_round() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": None})

    assert only(tracker.update([TERMINAL], at(60), evidence_at={"gpu017": None})).stranded


# -- the controller's record dates the holding (#53 item 11) -----------------------

# The controller's clock at the view: two days after the job's end, whatever ours says.
CONTROLLER_NOW = ENDED + timedelta(days=2)


def test_a_job_the_controller_ended_days_ago_is_stranded_in_a_round_that_collected_it() -> None:
    t = only(Tracker().update([TERMINAL], at(0), collected=True, controller_clock=CONTROLLER_NOW))

    assert (t.age, t.lasted, t.stranded, t.evidence_stale) == (
        timedelta(0), timedelta(days=2), True, False
    )  # fmt: skip


def test_a_file_read_as_the_watch_found_it_proves_nothing_until_it_is_re_collected() -> None:
    tracker = Tracker()
    first = only(
        tracker.update(
            [TERMINAL], at(0), evidence_at={"gpu017": at(-9)}, controller_clock=CONTROLLER_NOW
        )
    )
    same = only(
        tracker.update(
            [TERMINAL], at(5), evidence_at={"gpu017": at(-9)}, controller_clock=CONTROLLER_NOW
        )
    )
    again = only(
        tracker.update(
            [TERMINAL], at(10), evidence_at={"gpu017": at(8)}, controller_clock=CONTROLLER_NOW
        )
    )

    assert [(t.stranded, t.evidence_stale) for t in (first, same, again)] == [
        (False, True), (False, True), (True, False)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "clock",
    [None, ENDED - timedelta(seconds=1)],
    ids=["no-controller-clock", "end-in-the-controllers-future"],
)
def test_without_a_controller_clock_to_read_it_against_the_end_counts_for_nothing(
    clock: datetime | None,
) -> None:
    tracker = Tracker()
    t = only(tracker.update([TERMINAL], at(0), collected=True, controller_clock=clock))

    assert (t.lasted, t.stranded, t.evidence_stale) == (timedelta(0), False, False)


def test_a_held_runs_start_does_not_date_when_the_controller_stopped_knowing_its_job() -> None:
    # below-watermark-unknown, dated by the run's start on the node: the controller forgot
    # the job at some time after that, which nothing says; the watch's sighting counts.
    unknown = Finding(
        "gpu013", 4388, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM, "job 4388 is untracked.",
        since=ENDED, since_evidence=SinceEvidence.RUN_START,
    )  # fmt: skip
    t = only(Tracker().update([unknown], at(0), collected=True, controller_clock=CONTROLLER_NOW))

    assert (t.lasted, t.stranded) == (timedelta(0), False)


@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=40), st.booleans()), min_size=1, max_size=30
    )
)
def test_stranded_exactly_when_present_in_every_round_for_sixty_seconds(
    rounds: list[tuple[int, bool]],
) -> None:
    """Any schedule of rounds, the finding present or not in each: stranded iff the
    current unbroken run of sightings started at least 60 s ago."""
    tracker = Tracker()
    now, run_start = T0, None
    for gap, present in rounds:
        now += timedelta(seconds=gap)
        tracked = tracker.update([TERMINAL] if present else [], now)
        if not present:
            run_start = None
            assert tracked == []
            continue
        run_start = run_start or now
        t = only(tracked)
        assert t.first_seen == run_start
        assert t.stranded == (now - run_start >= timedelta(seconds=60))


def test_seen_at_rounds_1_to_3_of_a_30_s_watch_it_is_stranded_at_round_3() -> None:
    """Round 1's collect ran 1.8 s into its round (it also opened the connections),
    round 3's 0.4 s: the inventories span 58.6 s of the rounds' 60 s."""
    tracker = Tracker()
    rounds = [(at(0), at(1.8)), (at(30), at(30.5)), (at(60), at(60.4))]
    tracked = [
        only(tracker.update([TERMINAL], when, evidence_at={"gpu017": collected}))
        for when, collected in rounds
    ]

    assert [t.age for t in tracked] == [timedelta(seconds=s) for s in (0, 30, 60)]
    assert [t.stranded for t in tracked] == [False, False, True]
    assert [t.evidence_stale for t in tracked] == [False, False, False]


def test_inventories_spanning_much_less_than_the_rounds_do_not_make_it_stranded() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0), evidence_at={"gpu017": at(1)})
    t = only(tracker.update([TERMINAL], at(60), evidence_at={"gpu017": at(50)}))

    assert (t.age, t.persisted, t.stranded, t.evidence_stale) == (
        timedelta(seconds=60),
        timedelta(seconds=49),
        False,
        True,
    )


class SlowFirstAudit:
    """run_audit as a watch sees it: the controller answers each round some time after
    the round starts, round 1 slowest (it opens the connection)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls = 0

    def __call__(self, *_: object, **__: object) -> tuple[AuditReport, object]:
        from types import SimpleNamespace

        self.calls += 1
        self.clock.now += 0.9 if self.calls == 1 else 0.2
        taken = datetime.now(UTC)  # what the view's taken_at is: the wall clock, late
        evidence = SimpleNamespace(collected_at=None)
        # No controller clock: the job's end dates nothing here, the schedule alone does.
        return replace(report([TERMINAL]), taken_at=taken), SimpleNamespace(
            inventories={"gpu017": evidence}, view=SimpleNamespace(clock=None)
        )


def test_a_watch_round_is_timed_by_its_schedule_so_round_3_is_60_s_and_stranded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import spurctl.usecases.audit as use_case

    clock = FakeClock()
    monkeypatch.setattr(use_case, "run_audit", SlowFirstAudit(clock))
    src = Sources(scope=Scope(), inventory=["inv.jsonl"], collect=False, command="", fanout=1)

    states = list(
        use_case.watch_rounds(
            src, None, interval=30.0, rounds=3, clock=clock, sleep=clock.sleep, isolate=False
        )
    )

    third = states[2]
    assert [s.at - states[0].at for s in states] == [timedelta(seconds=s) for s in (0, 30, 60)]
    assert (only(list(third.tracked)).age, only(list(third.tracked)).stranded) == (
        timedelta(seconds=60),
        True,
    )
    assert not any(t.stranded for s in states[:2] for t in s.tracked)
    (line,) = [
        line for line in render_watch_round(third, console_width=200).splitlines() if "4711" in line
    ]
    assert line.split()[5:9] == ["ended", "2026-11-30T08:12:40Z", "1m00s", "STRANDED"]


# -- the schedule ------------------------------------------------------------------


class FakeClock:
    """A monotonic clock the test moves: sleeping advances it, so does work."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_rounds_start_an_interval_apart_whatever_each_round_takes() -> None:
    clock = FakeClock()
    starts = []
    for _ in every(30.0, 3, clock=clock, sleep=clock.sleep):
        starts.append(clock.now)
        clock.now += 4.0  # the audit itself

    assert starts == [100.0, 130.0, 160.0]
    assert clock.sleeps == [26.0, 26.0]


def test_a_round_that_overran_is_followed_at_once_without_a_catch_up_burst() -> None:
    clock = FakeClock()
    starts = []
    for number in every(30.0, 4, clock=clock, sleep=clock.sleep):
        starts.append(clock.now)
        clock.now += 95.0 if number == 1 else 1.0  # one slow collect

    assert starts == [100.0, 195.0, 225.0, 255.0]
    assert clock.sleeps == [0.0, 29.0, 29.0]


def test_a_round_on_time_is_dated_when_it_was_due_however_late_its_sleep_woke() -> None:
    # A loaded machine wakes a sleep late by a little: 4.001 s between rounds 1 and 3
    # of a 2 s watch made a finding's watched_s 4.001, not 4.
    clock = FakeClock()
    late = iter([0.0007, 0.0, 0.3])

    def oversleep(seconds: float) -> None:
        clock.sleep(seconds)
        clock.now += next(late)

    starts = []
    for number, started in scheduled(2.0, 4, clock=clock, sleep=oversleep):
        starts.append(started)
        clock.now += 0.5 if number < 3 else 2.5  # round 3 overruns its 2 s

    assert starts == [100.0, 102.0, 104.0, 106.5 + 0.3]
    assert clock.sleeps == pytest.approx([1.5, 1.4993, 0.0])


def test_rounds_stop_after_the_count_or_never() -> None:
    clock = FakeClock()
    endless = every(0.5, None, clock=clock, sleep=clock.sleep)

    assert list(every(1.0, 2, clock=clock, sleep=clock.sleep)) == [1, 2]
    assert [next(endless) for _ in range(1000)][-1] == 1000


# -- the view ----------------------------------------------------------------------


def report(findings: list[Finding], notes: list[str] | None = None) -> AuditReport:
    return AuditReport(
        controller_address="http://ctl:6817",
        controller_version="0.9.1",
        taken_at=at(90),
        watermark=Watermark(5121, WatermarkSource.ESTIMATED),
        view_complete=True,
        jobs_seen=812,
        jobs_total=812,
        findings=findings,
        nodes_in_scope=128,
        nodes_inventoried=128,
        notes=notes or [],
    )


def test_age_reads_in_the_largest_sensible_units() -> None:
    assert [
        format_age(timedelta(seconds=s)) for s in (0, 45, 60, 125, 3600 * 3 + 420, 86400 * 2 + 3600)
    ] == ["0s", "45s", "1m00s", "2m05s", "3h07m", "2d01h"]


def test_the_view_shows_since_when_the_evidence_dates_it_how_long_it_was_watched_and_stranded() -> (
    None
):
    tracker = Tracker()
    tracker.update([TERMINAL, PHANTOM], at(0))
    tracked = tracker.update([TERMINAL, PHANTOM, NOT_STARTED], at(90))
    state = WatchRound(4, at(90), 30.0, report([t.finding for t in tracked]), tracked, 4)

    text = render_watch_round(state, console_width=200)
    lines = text.splitlines()

    assert lines[0] == (
        "spurctl audit --watch: round 4, 2026-12-02T10:01:30Z (times UTC), every 30 s."
    )
    (row,) = [line for line in lines if "4711" in line and "terminal-held" in line]
    (head,) = [line for line in lines if line.startswith("node ")]
    assert head.split()[:9] == [
        "node", "job", "kind", "action", "live", "since", "watched", "status", "reason"
    ]  # fmt: skip
    assert row.split()[:10] == [
        "gpu017",
        "4711",
        "terminal-held",
        "reclaim",
        "yes",
        "ended",
        "2026-11-30T08:12:40Z",  # another day than the round's: the date too
        "1m30s",
        "STRANDED",
        "gpu017",
    ]
    (phantom,) = [line for line in lines if line.startswith("gpu020")]
    assert phantom.split()[:7] == [
        "gpu020",
        "-",
        "phantom-alloc",
        "investigate",
        "-",  # nothing but the view dates a phantom allocation
        "1m30s",
        "gpu020",
    ]
    (pending,) = [line for line in lines if line.startswith("gpu021")]
    assert pending.split()[:8] == [
        "gpu021",
        "4800",
        "not-started",
        "spare",
        "started",
        "10:00:50",  # the round's day: the clock alone
        "0s",
        "job",
    ]
    assert (
        "STRANDED: 1 reclaimable holding outlived two agent heartbeats (60 s): the "
        "controller is not releasing them. Reclaim with:\nspurctl reclaim --node gpu017\n"
    ) in text
    assert "stale inv" not in text


def test_a_narrow_view_stacks_each_reason_under_its_finding_as_the_audit_table_does() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracked = tracker.update([TERMINAL, PHANTOM], at(75))
    state = WatchRound(2, at(75), 30.0, report([TERMINAL, PHANTOM]), tracked, 2)

    lines = render_watch_round(state, console_width=80).splitlines()
    # Under the verdict (see the test on the verdict first); every cell whole, and
    # each reason under its row (render/table.py).
    first = lines.index("gpu017")  # too wide for one row: its cells stack under its name

    assert all(len(line) <= 80 for line in lines)
    assert lines[first : first + 8] == [
        "gpu017",
        "    4711  terminal-held  reclaim  live: yes",
        "          ended 2026-11-30T08:12:40Z  watched 1m15s  STRANDED",
        "          gpu017 holds job 4711, which the controller finished (COMPLETED).",
        "gpu020",
        "       -  phantom-alloc  investigate",
        "          watched 0s",
        "          gpu020 has 4 GPUs allocated.",
    ]


def test_a_failed_round_keeps_the_last_good_findings_and_says_why() -> None:
    tracked = Tracker().update([TERMINAL], at(0))
    good = WatchRound(1, at(0), 30.0, report([TERMINAL]), tracked, 1)
    failed = WatchRound(
        2, at(30), 30.0, good.report, good.tracked, 1, error="controller unreachable"
    )

    text = render_watch_round(failed, console_width=200)

    assert "Round 2 FAILED: controller unreachable. Showing round 1" in text
    assert "terminal-held" in text
    assert (good.exit_status, failed.exit_status) == (1, 2)


def test_a_clean_round_exits_zero_and_says_no_discrepancies() -> None:
    state = WatchRound(1, at(0), 0.5, report([], notes=["view is INCOMPLETE."]), [], 1)

    text = render_watch_round(state, console_width=200)

    assert state.exit_status == 0
    assert text.splitlines()[1:4] == [
        "128 nodes in scope, 128 inventoried; findings: none; 0 need action.",
        "WARNING: view is INCOMPLETE.",
        "No discrepancies: 128 nodes, 128 inventoried.",
    ]
    assert "every 0.5 s" in text.splitlines()[0]


# -- the verdict first, the findings folded to fit -----------------------------------


def many_findings() -> list[Finding]:
    """The simulated incident's kind of round, on a big cluster: 30 reclaims and more."""
    terminal = [
        Finding(
            f"gpu{i:03d}",
            5000 + i,
            Kind.TERMINAL_HELD,
            Action.RECLAIM,
            f"gpu{i:03d} holds job {5000 + i}, which the controller finished (COMPLETED) at "
            "09:12; its cgroup and 2 processes are still there.",
            live=False,
            controller_state="COMPLETED",
        )
        for i in range(1, 31)
    ]
    return [*terminal, PHANTOM, NOT_STARTED]


def big_round() -> WatchRound:
    findings = many_findings()
    tracker = Tracker()
    tracker.update(findings[:12], at(0))
    tracked = tracker.update(findings, at(90))
    notes = ["controller view is INCOMPLETE: GetJobs returned 812 of 812 jobs."]
    return WatchRound(4, at(90), 30.0, report(findings, notes=notes), tracked, 4)


ROW = re.compile(r"\b5\d{3}\s+terminal-held|-\s+phantom-alloc|4800\s+not-started")
VERDICT = (
    "128 nodes in scope, 128 inventoried;",
    "STRANDED: 12 reclaimable holdings",
    "Reclaim with:",
    "spurctl reclaim --node 'gpu[001-012]'",
)


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 50), (160, 60)])
def test_the_verdict_comes_first_and_the_findings_fold_to_fit_the_terminal(
    width: int, height: int
) -> None:
    lines = render_watch_round(big_round(), console_width=width, height=height).splitlines()
    top = " ".join(lines[:8])  # the verdict may wrap, but sits right under the header

    assert len(lines) <= height
    assert all(len(line) <= width for line in lines)
    assert all(words in top for words in VERDICT), lines[:8]
    more = [line for line in lines if line.startswith("... and ")]
    hidden = int(more[0].split()[2]) if more else 0
    rows = [i for i, line in enumerate(lines) if ROW.search(line)]
    shown = [lines[i] for i in rows]
    # Short of lines, one line a finding: 80x24 still leaves some out, and says so.
    assert len(shown) + hidden == 32 and (hidden > 0) == (height == 24)
    assert all(line.endswith("; spurctl audit lists all.") for line in more)
    assert lines[-1].startswith("Controller ") or lines[-2].startswith("Controller ")
    # The most urgent first: the stranded reclaims are the rows still shown, each a line.
    assert "5001" in shown[0] and all("STRANDED" in line for line in shown[:12])


def test_at_80_columns_each_folded_reason_reads_on_its_own_indented_lines() -> None:
    findings = many_findings()[:30]  # the reclaims: their cells fit 80 columns
    tracker = Tracker()
    tracker.update(findings[:12], at(0))
    tracked = tracker.update(findings, at(90))
    state = WatchRound(4, at(90), 30.0, report(findings), tracked, 4)
    lines = render_watch_round(state, console_width=80).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("gpu001 "))

    # Every cell whole on the row (no evidence dates these findings: since is "-"), the
    # reason under it, two columns in, carried on at the same indent.
    assert lines[first].split() == [
        "gpu001", "5001", "terminal-held", "reclaim", "no", "-", "1m30s", "STRANDED",
    ]  # fmt: skip
    assert lines[first + 1].startswith("  gpu001 holds job 5001, which the controller")
    assert lines[first + 2].startswith("  cgroup and 2 processes")
    assert all(len(line) <= 80 for line in lines)


def test_without_a_height_every_finding_is_listed_and_nothing_folds() -> None:
    lines = render_watch_round(big_round(), console_width=200).splitlines()

    assert not any(line.startswith("... and ") for line in lines)
    assert sum(bool(ROW.search(line)) for line in lines) == 32


def test_ctrl_c_while_a_round_is_drawn_waits_until_the_drawing_is_written() -> None:
    import os
    import signal

    from spurctl.commands.watch_loop import interrupts_held

    written = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        written.append("the whole drawing")  # not cut short by the interrupt

    assert written == ["the whole drawing"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_fold_keeps_the_most_urgent_rows_whatever_the_nodes_are_called() -> None:
    # Spare rows on nodes that sort first (aaa001...) must not push the reclaims off screen.
    spares = [
        Finding(f"aaa{i:03d}", 4800 + i, Kind.NOT_STARTED, Action.SPARE, "pending here", live=False)
        for i in range(1, 21)
    ]
    findings = [*many_findings()[:30], *spares]
    tracked = Tracker().update(findings, at(0))
    state = WatchRound(1, at(0), 30.0, report(findings), tracked, 1)
    lines = render_watch_round(state, console_width=120, height=30).splitlines()
    shown = [
        line
        for line in lines
        if re.search(r"\b(5\d{3}|48\d\d)\s+(terminal-held|not-started)", line)
    ]
    assert shown and all("terminal-held" in line for line in shown), shown
    (more,) = [line for line in lines if line.startswith("... and ")]
    assert "20 spare" in more


def test_the_view_names_the_nodes_without_evidence_this_round() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracked = tracker.update([UNREACHABLE, PHANTOM], at(30))
    state = WatchRound(2, at(30), 30.0, report([UNREACHABLE, PHANTOM]), tracked, 2)
    text = render_watch_round(state, console_width=200)
    assert "No evidence this round from gpu017 (1 node)" in text
    assert "gpu020 (" not in text.split("No evidence")[1].splitlines()[0]


def test_the_stranded_reclaim_command_carries_the_views_options_shell_quoted() -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracked = tracker.update([TERMINAL], at(90))
    flags = ("--inventory", "/srv/inv dir/inv.jsonl", "--controller", "http://ctl:6817")
    state = WatchRound(4, at(90), 30.0, report([TERMINAL]), tracked, 4, view_flags=flags)

    text = render_watch_round(state, console_width=400)

    lines = text.splitlines()
    command = lines[lines.index(next(t for t in lines if t.endswith("Reclaim with:"))) + 1]
    assert shlex.split(command) == ["spurctl", "reclaim", "--node", "gpu017", *flags]
    assert state.reclaim_step is not None
    assert state.reclaim_step.argv == ("spurctl", "reclaim", "--node", "gpu017", *flags)


@pytest.mark.parametrize("width", [40, 80])
def test_the_reclaim_command_is_never_wrapped_however_narrow_the_log(width: int) -> None:
    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracked = tracker.update([TERMINAL], at(90))
    flags = ("--inventory", "/srv/inventories/rack-17/inv.jsonl", "--controller", "http://ctl:6817")
    state = WatchRound(4, at(90), 30.0, report([TERMINAL]), tracked, 4, view_flags=flags)

    lines = render_watch_round(state, console_width=width).splitlines()

    (command,) = [line for line in lines if line.startswith("spurctl reclaim ")]
    assert len(command) > width  # whole on its line, wider than the log's width
    assert shlex.split(command) == ["spurctl", "reclaim", "--node", "gpu017", *flags]


def test_on_a_narrow_terminal_the_command_is_never_cut_but_broken_where_a_shell_joins_it() -> None:
    import io

    from spurctl.render.environment import Environment
    from spurctl.render.watch import WatchScreen

    tracker = Tracker()
    tracker.update([TERMINAL], at(0))
    tracked = tracker.update([TERMINAL], at(90))
    flags = ("--inventory", "/srv/inventories/rack-17/inv.jsonl", "--controller", "http://ctl:6817")
    state = WatchRound(4, at(90), 30.0, report([TERMINAL]), tracked, 4, view_flags=flags)
    argv = ["reclaim", "--node", "gpu017", *flags]
    out = io.StringIO()
    terminal = Environment(tty=True, width=60, height=40)

    with WatchScreen(terminal, out) as screen:
        screen.show(state)
        live = _plain(out.getvalue())
        broken = _command(live)
        assert len(broken) > 1 and all(len(line) <= 60 for line in broken)
        assert "…" not in live and _read_by_bash(broken) == argv
        assert f"Reclaim with (one command on {len(broken)} lines):" in " ".join(live.split())
        screen.resize(200, 40)  # wide enough now: one line
        wide = _plain(out.getvalue())[len(live) :]
        assert _command(wide) == [" ".join(["spurctl reclaim --node gpu017", *flags])]
        screen.resize(60, 40)
    # The last round, printed when the watch stops, fits the terminal as the live view did.
    final = _plain(out.getvalue()).rsplit("spurctl audit --watch:", 1)[1]
    assert _command(final) == broken


def _command(view: str) -> list[str]:
    """The reclaim command's lines in the last view drawn in `view`."""
    lines = view.rsplit("spurctl audit --watch:", 1)[-1].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("spurctl reclaim"))
    last = first
    while lines[last].rstrip().endswith("\\"):
        last += 1
    return [line.rstrip() for line in lines[first : last + 1]]


def _read_by_bash(lines: list[str]) -> list[str]:
    """The words bash reads from the command's lines, pasted as shown."""
    import subprocess

    script = 'spurctl() { printf "%s\\0" "$@"; }\n' + "\n".join(lines)
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return run.stdout.split("\0")[:-1]


def _plain(drawn: str) -> str:
    return re.sub(r"\x1b\[[?0-9;]*[A-Za-z]", "", drawn).replace("\r", "")


def test_the_watch_renderer_installs_no_signal_handler_and_never_probes_the_terminal() -> None:
    from pathlib import Path

    import spurctl.render.watch

    source = Path(spurctl.render.watch.__file__).read_text()
    for probe in ("import signal", "signal.signal", "isatty", "get_terminal_size", "os.environ"):
        assert probe not in source, probe


def test_a_json_round_carries_the_stranded_reclaim_as_argv_and_a_failed_round_its_error() -> None:
    import io
    import json

    from spurctl.render.watch_json import JsonLines

    tracker = Tracker()
    tracker.update([TERMINAL, PHANTOM], at(0))
    tracked = tracker.update([TERMINAL, PHANTOM], at(60))
    flags = ("--inventory", "/srv/inv dir/inv.jsonl")
    good = WatchRound(3, at(60), 30.0, report([TERMINAL, PHANTOM]), tracked, 3, view_flags=flags)
    failed = replace(good, number=4, at=at(90), error="controller unreachable")
    out = io.StringIO()

    with JsonLines(out) as lines:
        last = lines.follow(iter([good, failed]))

    assert last is failed
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["watch"]["stranded"] == 1
    assert first["watch"]["reclaim"]["argv"] == ["spurctl", "reclaim", "--node", "gpu017", *flags]
    terminal = first["findings"][0]
    assert (terminal["since"], terminal["since_evidence"]) == ("2026-11-30T08:12:40Z", "job-end")
    assert (terminal["first_seen"], terminal["watched_s"], terminal["stranded"]) == (
        "2026-12-02T10:00:00Z",
        60.0,
        True,
    )
    assert (second["watch"]["round"], second["watch"]["report_round"]) == (4, 3)
    assert second["watch"]["error"] == "controller unreachable"
    assert second["findings"] == first["findings"]  # the last good round's, as the table shows


def test_ctrl_c_while_the_watch_imports_what_its_rounds_need_is_the_first_rounds_interrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import spurctl.usecases.audit as use_case

    def interrupted(_src: Sources) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(use_case, "round_imports", interrupted)
    src = Sources(scope=Scope(), inventory=["inv.jsonl"], collect=False, command="", fanout=1)
    rounds = use_case.watch_rounds(src, None, interval=30.0, rounds=1, isolate=True)
    with pytest.raises(use_case.FirstRoundInterrupted) as stopped:
        next(rounds)
    assert stopped.value.doing == "reading the controller and the inventory files"
