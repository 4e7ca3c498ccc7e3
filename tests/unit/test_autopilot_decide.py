"""decide/autopilot.py: what one round sends and what waits, and why; the breaker.

Table-driven for each rule, property-based for the invariants: never more calls than
--max-actions leaves, never more drains than --max-unavailable's room, nothing younger
than --grace, a flapping drain never lifted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spurctl.decide.autopilot import (
    FLAPPING,
    ORIGIN,
    Act,
    Breaker,
    Candidate,
    Limits,
    Sightings,
    Spent,
    Threshold,
    breaker_step,
    choose,
    flapping_reason,
    spent,
)

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
LIMITS = Limits(grace_s=60, resume_after_s=300, max_actions=60, flap_limit=3)


def cand(
    act: Act, node: str = "gpu001", age: float = 120, job: int = 7, reason: str = ""
) -> Candidate:
    kind = {Act.RECLAIM: "terminal-held", Act.DRAIN: "agent-orphan", Act.RESUME: "resume",
            Act.REPAIR: "phantom-alloc"}[act]  # fmt: skip
    return Candidate(act, node, job if act in (Act.RECLAIM, Act.DRAIN) else 0, kind,
                     NOW - timedelta(seconds=age), reason)  # fmt: skip


@pytest.mark.parametrize(
    ("candidate", "room", "spent_", "go", "wait"),
    [
        # A finding that lasted --grace goes out; a younger one waits for it.
        (cand(Act.RECLAIM, age=60), 5, Spent(), True, None),
        (cand(Act.RECLAIM, age=59), 5, Spent(), False, "grace"),
        (cand(Act.DRAIN, age=30), 5, Spent(), False, "grace"),
        # A drain needs room under --max-unavailable; a reclaim does not.
        (cand(Act.DRAIN), 0, Spent(), False, "max-unavailable"),
        (cand(Act.RECLAIM), 0, Spent(), True, None),
        # --max-actions: counted from the journal's last hour.
        (cand(Act.RECLAIM), 5, Spent(last_hour=60), False, "max-actions"),
        (cand(Act.RECLAIM), 5, Spent(last_hour=59), True, None),
        # A resume waits for --resume-after of clean, not for --grace.
        (cand(Act.RESUME, age=299), 5, Spent(), False, "resume-after"),
        (cand(Act.RESUME, age=300), 5, Spent(), True, None),
        # A flapping drain is never lifted by the autopilot, however clean.
        (cand(Act.RESUME, age=10_000, reason=flapping_reason("gpu001", 3)), 5, Spent(), False,
         FLAPPING),
        # Acted on in 3 rounds of the day: drained as flapping instead (needs room).
        (cand(Act.RECLAIM), 5, Spent(rounds_on={"gpu001": 3}), True, None),
        (cand(Act.RECLAIM), 0, Spent(rounds_on={"gpu001": 3}), False, "max-unavailable"),
        (cand(Act.RECLAIM), 5, Spent(rounds_on={"gpu001": 2}), True, None),
    ],
)  # fmt: skip
def test_each_rule_sends_or_holds_back_with_its_reason(
    candidate: Candidate, room: int, spent_: Spent, go: bool, wait: str | None
) -> None:
    [choice] = choose([candidate], now=NOW, limits=LIMITS, spent_=spent_, room=room)
    assert (choice.go, choice.wait) == (go, wait)
    assert choice.why and "\n" not in choice.why  # one sentence


def test_a_flapping_node_is_drained_once_with_the_flapping_reason_and_its_other_calls_wait() -> (
    None
):
    cands = [cand(Act.RECLAIM, job=7), cand(Act.RECLAIM, job=8), cand(Act.DRAIN)]
    choices = choose(cands, now=NOW, limits=LIMITS, spent_=Spent(rounds_on={"gpu001": 3}), room=5)
    going = [c for c in choices if c.go]
    assert len(going) == 1
    assert going[0].candidate.act is Act.DRAIN and FLAPPING in going[0].candidate.reason
    assert all(c.wait == FLAPPING for c in choices if not c.go)


def test_the_sixth_call_waits_under_max_actions_5() -> None:
    cands = [cand(Act.RECLAIM, node=f"gpu{i:03}") for i in range(6)]
    choices = choose(cands, now=NOW, limits=Limits(max_actions=5), spent_=Spent(), room=0)
    assert [c.go for c in choices] == [True] * 5 + [False]
    assert choices[5].wait == "max-actions" and "--max-actions 5/h" in choices[5].why


def test_spent_counts_only_the_autopilots_intents_in_the_window_and_rounds_per_node() -> None:
    def rec(minutes_ago: float, node: str = "gpu001", rnd: int = 1, **kw: object) -> dict:
        at = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"event": "outcome", "result": "sent", "origin": ORIGIN, "at": at,
                "node": node, "run": "r1", "round": rnd, **kw}  # fmt: skip

    records = [
        rec(5, rnd=1), rec(5, rnd=1),  # two calls, one round
        rec(30, rnd=2), rec(90, rnd=3),  # outside the hour, inside the day
        rec(60 * 25, rnd=4),  # outside the day
        {**rec(1), "origin": None},  # a manual reclaim: not the autopilot's
        {**rec(1), "event": "intent"},  # its outcome counts, not the intent
        {**rec(1), "result": "skipped"},  # stopped at its re-check: no call went out
        rec(1, node="gpu002", rnd=5),
    ]  # fmt: skip
    s = spent(records, NOW)
    assert s.last_hour == 4
    assert s.rounds_on == {"gpu001": 3, "gpu002": 1}


@pytest.mark.parametrize(
    ("threshold", "audited", "cap"),
    [(Threshold(percent=5), 2000, 100), (Threshold(percent=5), 24, 10), (Threshold(count=0), 9, 0),
     (Threshold(count=3), 2000, 3)],
)  # fmt: skip
def test_breaker_threshold(threshold: Threshold, audited: int, cap: int) -> None:
    assert threshold.of(audited) == cap


def test_the_breaker_opens_above_the_threshold_and_closes_after_three_calm_rounds() -> None:
    b = breaker_step(Breaker(), 101, 100, None)
    assert b.open and "checklist post-wipe" in b.why
    b = breaker_step(b, 60, 100, None)  # below the threshold, not below half: not calm
    assert b.open and b.calm == 0
    for calm in (1, 2):
        b = breaker_step(b, 10, 100, None)
        assert b.open and b.calm == calm
    b = breaker_step(b, 10, 100, None)
    assert not b.open


def test_a_blind_round_opens_the_breaker_and_resets_its_calm() -> None:
    b = Breaker(True, 2, "x")
    b = breaker_step(b, 0, 100, "the controller did not answer")
    assert b.open and b.calm == 0 and "did not answer" in b.why


def test_breaker_zero_opens_at_the_first_node_needing_action() -> None:
    assert not breaker_step(Breaker(), 0, 0, None).open
    assert breaker_step(Breaker(), 1, 0, None).open


def test_sightings_forget_what_a_round_no_longer_shows() -> None:
    s = Sightings()
    key = ("gpu001", "finding", 7, "terminal-held")
    s.seen([key], NOW)
    s.seen([key], NOW + timedelta(seconds=30))
    assert s.since(key, NOW + timedelta(seconds=60)) == NOW
    s.seen([], NOW + timedelta(seconds=90))
    s.seen([key], NOW + timedelta(seconds=120))
    assert s.since(key, NOW + timedelta(seconds=120)) == NOW + timedelta(seconds=120)


acts = st.sampled_from(list(Act))
candidates = st.builds(
    lambda act, node, age, job, flap: cand(
        act, node=f"gpu{node:03}", age=age, job=job,
        reason=flapping_reason("x", 3) if flap and act is Act.RESUME else "",
    ),
    acts, st.integers(0, 20), st.floats(0, 1000), st.integers(1, 5), st.booleans(),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(candidates, max_size=30),
    st.integers(0, 10),
    st.integers(1, 20),
    st.integers(0, 25),
    st.dictionaries(st.integers(0, 20).map(lambda n: f"gpu{n:03}"), st.integers(0, 5)),
)
def test_budgets_and_rules_always_hold(
    cands: list[Candidate], room: int, max_actions: int, last_hour: int, rounds_on: dict
) -> None:
    limits = Limits(grace_s=60, resume_after_s=300, max_actions=max_actions, flap_limit=3)
    choices = choose(cands, now=NOW, limits=limits,
                     spent_=Spent(last_hour, rounds_on), room=room)  # fmt: skip
    going = [c for c in choices if c.go]
    assert len(choices) == len(cands)
    assert sum(c.candidate.calls for c in going) <= max(0, max_actions - last_hour)
    assert sum(1 for c in going if c.candidate.act in (Act.DRAIN, Act.REPAIR)) <= room
    assert sum(1 for c in going if c.candidate.act is Act.REPAIR) <= 1
    for c in going:
        age = (NOW - c.candidate.since).total_seconds()
        k = c.candidate
        if k.act is Act.RESUME:
            assert age >= 300 and FLAPPING not in k.reason
        else:
            assert age >= 60
        if rounds_on.get(k.node, 0) >= 3 and k.act is not Act.RESUME:
            assert k.act is Act.DRAIN and FLAPPING in k.reason
    flapping_drains = [c.candidate.node for c in going if FLAPPING in c.candidate.reason]
    assert len(flapping_drains) == len(set(flapping_drains))  # once per node


def test_sightings_hold_only_what_the_last_round_showed() -> None:
    # A long-lived autopilot sees findings come and go on ever other nodes and jobs: what
    # it carries from round to round is this round's, not every finding it ever saw.
    s = Sightings()
    for r in range(300):
        now = NOW + timedelta(seconds=30 * r)
        s.seen([(f"gpu{(r * 7 + i) % 5000:04}", "finding", r, "terminal-held")
                for i in range(40)], now)  # fmt: skip
        s.seen([(f"gpu{r % 5000:04}", "clean", 0, "resume")], now, family="clean")
        assert len(s.first) == 41
    s.seen([], NOW)
    s.seen([], NOW, family="clean")
    assert s.first == {}


def test_sightings_of_one_family_do_not_forget_another() -> None:
    s = Sightings()
    clean = ("gpu001", "clean", 0, "resume")
    s.seen([clean], NOW, family="clean")
    s.seen([], NOW + timedelta(seconds=30))  # a round's findings: none
    assert s.since(clean, NOW + timedelta(seconds=60)) == NOW


def test_the_human_line_is_one_line_with_control_characters_escaped() -> None:
    from spurctl.decide.autopilot import State
    from spurctl.render.autopilot import human_line, json_line
    from spurctl.usecases.autopilot import Done, RoundReport

    r = RoundReport(4, NOW, 0.5, State.BREAKER_OPEN, ["breaker open: gpu\x1b[2J001"],
                    {"terminal-held": 2}, actions=[Done("reclaim", "gpu\x1b001", 7,
                    "terminal-held", "skipped", "x")])  # fmt: skip
    line = human_line(r)
    assert line.count("\n") == 1 and "\x1b" not in line
    assert line.startswith("spurctl autopilot: round 4 breaker-open, 2 findings, 0 sent")
    assert "\x1b" not in json_line(r) and json_line(r).count("\n") == 1


def test_nothing_more_is_done_on_a_node_left_to_a_person() -> None:
    choices = choose([cand(Act.RECLAIM), cand(Act.RESUME, age=10_000)], now=NOW, limits=LIMITS,
                     spent_=Spent(), room=5, left_to_person=frozenset({"gpu001"}))  # fmt: skip
    assert [(c.go, c.wait) for c in choices] == [(False, FLAPPING), (False, FLAPPING)]


def test_a_budget_a_blind_round_could_not_count_is_never_said_spent() -> None:
    from spurctl.decide.autopilot import State
    from spurctl.render.autopilot import metrics
    from spurctl.usecases.autopilot import RoundReport

    r = RoundReport(2, NOW, 0.1, State.BREAKER_OPEN, ["no view"], {}, budgets={"max-actions": 12},
                    breaker=Breaker(True, 0, "no view"))  # fmt: skip
    text = metrics(r)
    assert 'spurctl_autopilot_budget_remaining{budget="max-actions"} 12' in text
    assert 'budget="max-unavailable"' not in text
    assert "spurctl_autopilot_breaker_open 1" in text


def test_one_repair_a_round_counting_three_calls_and_its_drain() -> None:
    cands = [cand(Act.REPAIR, node="gpu001"), cand(Act.REPAIR, node="gpu002")]
    choices = choose(cands, now=NOW, limits=LIMITS, spent_=Spent(), room=5)
    assert [(c.go, c.wait) for c in choices] == [(True, None), (False, "one-repair")]
    # Its drain takes room under --max-unavailable; its three calls need --max-actions.
    [held] = choose(cands[:1], now=NOW, limits=LIMITS, spent_=Spent(), room=0)
    assert (held.go, held.wait) == (False, "max-unavailable")
    [held] = choose(cands[:1], now=NOW, limits=LIMITS, spent_=Spent(last_hour=58), room=5)
    assert (held.go, held.wait) == (False, "max-actions") and "3 calls, 2 left" in held.why
    [young] = choose([cand(Act.REPAIR, age=30)], now=NOW, limits=LIMITS, spent_=Spent(), room=5)
    assert (young.go, young.wait) == (False, "grace")


def test_a_node_only_owed_its_put_back_goes_at_once_and_takes_no_room() -> None:
    owed = Candidate(Act.REPAIR, "gpu001", 0, "phantom-alloc", NOW, "", removed=True)
    [c] = choose([owed], now=NOW, limits=LIMITS, spent_=Spent(last_hour=59), room=0)
    assert c.go and "earlier repair" in c.why


def test_a_repairs_getnode_notes_are_no_calls() -> None:
    at = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = {"event": "outcome", "result": "sent", "origin": ORIGIN, "at": at, "node": "gpu001",
            "run": "r1", "round": 1, "action": "repair"}  # fmt: skip
    steps = ["drain", "deregister", "return", "labels", "done"]
    assert spent([{**base, "step": s} for s in steps], NOW).last_hour == 3
