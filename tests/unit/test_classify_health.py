"""Spur's health checks (Spur #836): spurctl frees none, and nothing on a node one drained.

Spur submits each check as an exclusive whole-node job named `_spur-health.…` and
drains a node whose check fails or starves with a reason starting `health-check(`
(ROCm/spur tests/native_host/e2e/test_health_check.py: "_spur-health" in squeue,
"health-check(pending)" as a starved check's drain reason). The health system owns
both, so whatever verdict would free such a run, the holding is spared with the
reason, and reclaim's last re-check refuses a health check too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spurctl.decide import classify as classify_module
from spurctl.decide.health import is_health_check_drain, is_health_check_job
from spurctl.decide.plan import Entry, recheck
from spurctl.model import Action, Finding, Inventory, Job, JobState, Kind, Node, NodeState
from tests.unit.test_classify import (
    NODES,
    PROPERTY,
    T0,
    WM,
    Cluster,
    classify_cluster,
    clusters,
    held,
    inv,
    invs,
    job,
    node,
    view,
)
from tests.unit.test_classify_agent_orphan import BEFORE, on_node

CHECK = "_spur-health.node-health.sh"


def check(job_id: int, state: JobState, nodelist: str = "gpu017") -> Job:
    end = T0 if state.terminal else None
    return msgspec.structs.replace(job(job_id, state, nodelist, end=end), name=CHECK)


def drained(reason: str, state: NodeState = NodeState.DRAIN) -> Node:
    return replace(node("gpu017"), state=state, state_reason=reason)


@dataclass
class Case:
    jobs: tuple[Job, ...]
    inventory: Inventory
    expected: tuple[Kind, Action] | None
    gpu017: Node | None = None  # the controller's gpu017, when not a plain idle one


CASES: dict[str, Case] = {
    "GATE: a terminal health check's run is spared, never reclaimed": Case(
        (check(40, JobState.FAILED),),
        inv("gpu017", held(40, pids=(7,))),
        (Kind.TERMINAL_HELD, Action.SPARE),
    ),
    "a health check's run restarted elsewhere is spared": Case(
        (check(40, JobState.RUNNING, "gpu020"),),
        inv("gpu017", held(40, pids=(7,))),
        (Kind.ACTIVE_ELSEWHERE, Action.SPARE),
    ),
    "a health check's run older than spurd is spared, never released": Case(
        (check(40, JobState.TIMEOUT),),
        on_node(held(40, pids=(7,)), agent_started=BEFORE),
        (Kind.AGENT_ORPHAN, Action.SPARE),
    ),
    "a health check running where the controller placed it needs nothing": Case(
        (check(40, JobState.RUNNING),),
        inv("gpu017", held(40, pids=(7,))),
        None,
    ),
    "GATE: a stale run on a node a failed check drained is spared": Case(
        (job(41, JobState.COMPLETED, "gpu017", end=T0),),
        inv("gpu017", held(41, pids=(7,))),
        (Kind.TERMINAL_HELD, Action.SPARE),
        drained("health-check(gpu fell off the bus)"),
    ),
    "a stale run on a node a starved check is draining is spared": Case(
        (job(41, JobState.COMPLETED, "gpu017", end=T0),),
        inv("gpu017", held(41, pids=(7,))),
        (Kind.TERMINAL_HELD, Action.SPARE),
        drained("health-check(pending)", NodeState.DRAINING),
    ),
    "an untracked id on a health-drained node is spared": Case(
        (),
        inv("gpu017", held(42, pids=(7,))),
        (Kind.BELOW_WATERMARK_UNKNOWN, Action.SPARE),
        drained("health-check(pending)"),
    ),
    "an admin's drain is no health check's: the reclaim stands": Case(
        (job(41, JobState.COMPLETED, "gpu017", end=T0),),
        inv("gpu017", held(41, pids=(7,))),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
        drained("operator-maintenance"),
    ),
    "a job whose name only contains the prefix is no health check": Case(
        (
            msgspec.structs.replace(
                job(40, JobState.FAILED, "gpu017", end=T0), name="x_spur-health.y"
            ),
        ),
        inv("gpu017", held(40, pids=(7,))),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
    ),
    "a spared verdict on a health-drained node stays spared": Case(
        (job(41, JobState.PENDING),),
        inv("gpu017", held(41, pids=(7,))),
        (Kind.NOT_STARTED, Action.SPARE),
        drained("health-check(pending)"),
    ),
}


def classify(case: Case) -> classify_module.Classification:
    nodes = tuple(case.gpu017 if n == "gpu017" and case.gpu017 else node(n) for n in NODES)
    return classify_module.classify(
        view(*case.jobs, nodes=nodes),
        invs(case.inventory),
        watermark=WM,
        confirmed={},
        scope=["gpu017"],
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_health_checks(case: Case) -> None:
    got = [(f.kind, f.action) for f in classify(case).findings if f.job_id is not None]
    assert got == ([case.expected] if case.expected else [])


def test_the_reasons_name_the_health_system() -> None:
    (run,) = classify(
        CASES["GATE: a terminal health check's run is spared, never reclaimed"]
    ).findings
    assert f"job 40 ('{CHECK}') is a Spur health check (Spur #836)" in run.reason
    assert "spurctl never frees one" in run.reason
    name = "GATE: a stale run on a node a failed check drained is spared"
    (on_drained,) = classify(CASES[name]).findings
    assert "gpu017 is DRAIN with reason 'health-check(gpu fell off the bus)'" in on_drained.reason
    assert "the health system's (Spur #836)" in on_drained.reason


@pytest.mark.parametrize(
    ("name", "is_check"),
    [(CHECK, True), ("_spur-health.0", True), ("_spur-health", False), ("spur-health.x", False),
     ("job_spur-health.x", False), ("", False)],
)  # fmt: skip
def test_what_a_health_check_job_is(name: str, is_check: bool) -> None:
    assert is_health_check_job(name) is is_check


@pytest.mark.parametrize(
    ("reason", "is_drain"),
    [("health-check(pending)", True), ("health-check(exit 1: degraded)", True),
     ("  health-check(x)", True), ("health-check", False), ("post-wipe agent recycle", False),
     ("spurctl: terminal-held job 7", False), ("", False)],
)  # fmt: skip
def test_what_a_health_check_drain_is(reason: str, is_drain: bool) -> None:
    assert is_health_check_drain(reason) is is_drain


def test_reclaims_last_recheck_refuses_a_health_check() -> None:
    e = Entry(Finding("gpu017", 40, Kind.TERMINAL_HELD, Action.RECLAIM, "ended"), "gpu017:6818")
    plain = job(40, JobState.FAILED, "gpu017", end=T0)
    assert recheck(e, plain, WM) is None
    why = recheck(e, msgspec.structs.replace(plain, name=CHECK), WM)
    assert why is not None and why.startswith("not sent: job 40") and "health check" in why


@PROPERTY
@given(clusters(), st.data())
def test_no_health_check_and_nothing_on_a_health_drained_node_is_ever_reclaimed(
    c: Cluster, data: st.DataObject
) -> None:
    checks = data.draw(st.sets(st.sampled_from(sorted(c.view.jobs) or [0])))
    drains = data.draw(st.sets(st.sampled_from(NODES)))
    jobs = {
        i: msgspec.structs.replace(j, name=CHECK) if i in checks else j
        for i, j in c.view.jobs.items()
    }
    nodes = {
        n: replace(x, state=NodeState.DRAIN, state_reason="health-check(pending)")
        if n in drains
        else x
        for n, x in c.view.nodes.items()
    }
    c = replace(c, view=replace(c.view, jobs=jobs, nodes=nodes))
    for f in classify_cluster(c).findings:
        if f.action is not Action.RECLAIM:
            continue
        assert f.job_id not in checks, f
        assert f.node not in drains, f
