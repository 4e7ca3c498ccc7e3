"""The classifier: every arm of the controller's decision and every kind it cannot see.

Each case is named after the invariant it pins. The property tests generate small
clusters and check what must hold for any of them: nothing the controller spares is
reclaimed, a loose name never reclaims, a lower watermark never adds a reclaim, a
partial view never proves absence, and the answer depends only on the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spurctl import hostlist
from spurctl.decide import classify as classify_module
from spurctl.decide.classify import Classification, controller_decision
from spurctl.model import (
    ACTIVE_STATES,
    Action,
    AgentProcess,
    Allocation,
    ControllerView,
    Device,
    Holding,
    Inventory,
    Job,
    JobState,
    Kind,
    Node,
    NodeState,
)

NOW = datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
# When a held run started, as `spurctl node-inventory` records it: after every job's
# submit time in these cases, so only a case that says otherwise is a suspected reuse.
RUN_START = T0 + timedelta(minutes=10)
WM = 100
NODES = ("gpu016", "gpu017", "gpu018", "gpu020")


def gpus(n: int) -> dict[str, tuple[Device, ...]]:
    return {"gpu": tuple(Device(i) for i in range(n))} if n else {}


def job(
    job_id: int,
    state: JobState = JobState.RUNNING,
    nodelist: str = "",
    *,
    submit: datetime | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    cpus: int = 0,
    memory_mb: int = 0,
    gpu_count: int = 0,
) -> Job:
    return Job(
        job_id=job_id,
        state=state,
        nodelist=nodelist,
        submit_time=submit,
        start_time=start,
        end_time=end,
        resources=Allocation(cpus=cpus, memory_mb=memory_mb, devices=gpus(gpu_count)),
    )


def node(name: str, *, cpus: int = 0, memory_mb: int = 0, gpu_count: int = 0) -> Node:
    alloc = Allocation(cpus=cpus, memory_mb=memory_mb, devices=gpus(gpu_count))
    state = NodeState.IDLE if alloc.empty else NodeState.MIXED
    return Node(name=name, state=state, alloc=alloc)


def view(
    *jobs: Job, nodes: tuple[Node, ...] | None = None, jobs_total: int | None = None
) -> ControllerView:
    node_list = nodes if nodes is not None else tuple(node(n) for n in NODES)
    return ControllerView(
        address="http://ctl:6817",
        version="test",
        taken_at=NOW,
        jobs={j.job_id: j for j in jobs},
        nodes={n.name: n for n in node_list},
        jobs_total=len(jobs) if jobs_total is None else jobs_total,
    )


def held(
    job_id: int,
    *,
    gpu_ids: tuple[int, ...] = (),
    pids: tuple[int, ...] = (),
    started: datetime | None = RUN_START,
) -> Holding:
    return Holding(job_id=job_id, gpus=gpu_ids, pids=pids, started_at=started)


def inv(name: str, *holdings: Holding, error: str | None = None) -> Inventory:
    return Inventory(node=name, collected_at=NOW, source="test", error=error, held=holdings)


def invs(*inventories: Inventory) -> dict[str, Inventory]:
    return {i.node: i for i in inventories}


def classify(*args: Any, **kwargs: Any) -> Classification:
    """classify() without its not-inventoried findings.

    Most cases inventory a few of the view's nodes and pin what the holdings and
    allocations mean; the nodes left uninventoried are pinned by their own tests
    (`test_every_node_in_scope_without_an_inventory_is_a_not_inventoried_finding`),
    which call classify_module.classify itself.
    """
    result = classify_module.classify(*args, **kwargs)
    result.findings = [f for f in result.findings if f.kind is not Kind.NOT_INVENTORIED]
    return result


# -- the controller's own decision ----------------------------------------------

DECISIONS = [
    ("arm 1: a tracked terminal job is reclaimed", job(5, JobState.COMPLETED, "gpu017"), 5,
     Kind.TERMINAL_HELD),
    ("arm 1: NODE_FAIL is terminal", job(5, JobState.NODE_FAIL, "gpu017"), 5, Kind.TERMINAL_HELD),
    ("arm 2: an active job on other nodes is reclaimed here", job(5, JobState.RUNNING, "gpu020"),
     5, Kind.ACTIVE_ELSEWHERE),
    ("arm 2: a node outside a multi-node job's hostlist is elsewhere",
     job(5, JobState.COMPLETING, "gpu[018-020]"), 5, Kind.ACTIVE_ELSEWHERE),
    ("arm 3: an active job with an empty nodelist is spared", job(5, JobState.RUNNING), 5,
     Kind.MID_COMMIT),
    ("arm 3: a suspended job with an empty nodelist is spared", job(5, JobState.SUSPENDED), 5,
     Kind.MID_COMMIT),
    ("arm 4: PENDING has not started", job(5, JobState.PENDING, "gpu020"), 5, Kind.NOT_STARTED),
    ("arm 4: PREEMPTED is not terminal: it may run again", job(5, JobState.PREEMPTED, "gpu020"), 5,
     Kind.NOT_STARTED),
    ("arm 4: REQUEUED is not terminal: it may run again", job(5, JobState.REQUEUED), 5,
     Kind.NOT_STARTED),
    ("arm 5: held inside its own hostlist is healthy", job(5, JobState.RUNNING, "gpu[016-018]"), 5,
     Kind.HEALTHY),
    ("arm 6: untracked below the watermark is reclaimed", None, WM - 1,
     Kind.BELOW_WATERMARK_UNKNOWN),
    ("arm 7: untracked at the watermark was never issued here", None, WM,
     Kind.ABOVE_WATERMARK_UNKNOWN),
]  # fmt: skip


@pytest.mark.parametrize(
    ("the_job", "job_id", "expected"),
    [pytest.param(j, i, k, id=name) for name, j, i, k in DECISIONS],
)
def test_controller_decision(the_job: Job | None, job_id: int, expected: Kind) -> None:
    assert controller_decision("gpu017", the_job, job_id, WM) is expected


def test_controller_decision_compares_node_names_exactly_as_spur_does() -> None:
    running = job(5, JobState.RUNNING, "gpu017")
    assert controller_decision("GPU017", running, 5, WM) is Kind.ACTIVE_ELSEWHERE
    assert controller_decision("gpu017.example.com", running, 5, WM) is Kind.ACTIVE_ELSEWHERE


# -- classify, case by case -----------------------------------------------------


@dataclass
class Case:
    view: ControllerView
    inventories: dict[str, Inventory]
    expected: list[tuple[str, int | None, Kind, Action]]
    confirmed: dict[int, Job | None] = field(default_factory=dict)
    scope: frozenset[str] | None = None
    include_healthy: bool = False
    note: str | None = None


CASES: dict[str, Case] = {
    "GATE: a terminal job aged out of the job map stays reclaimable below the watermark": Case(
        view(),
        invs(inv("gpu017", held(40, pids=(9,)))),
        [("gpu017", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM)],
    ),
    "a terminal job still tracked is reclaimed where it is held": Case(
        view(job(40, JobState.CANCELLED, "gpu017", end=T0)),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.TERMINAL_HELD, Action.RECLAIM)],
    ),
    "a job restarted elsewhere is reclaimed on the node that still holds it": Case(
        view(job(40, JobState.RUNNING, "gpu020", start=T0), job(41, JobState.RUNNING, "gpu020")),
        invs(inv("gpu017", held(40, pids=(7, 8))), inv("gpu020", held(40), held(41))),
        [("gpu017", 40, Kind.ACTIVE_ELSEWHERE, Action.RECLAIM)],
    ),
    "an active job with an empty nodelist is spared: state and allocation commit separately": Case(
        view(job(40, JobState.RUNNING, "")),
        invs(inv("gpu017", held(40, pids=(7,)))),
        [("gpu017", 40, Kind.MID_COMMIT, Action.SPARE)],
    ),
    "a pending job is spared: it may be mid-dispatch here": Case(
        view(job(40, JobState.PENDING)),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.NOT_STARTED, Action.SPARE)],
    ),
    "a preempted job is spared: it may run again under the same id": Case(
        view(job(40, JobState.PREEMPTED, "gpu020")),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.NOT_STARTED, Action.SPARE)],
    ),
    "a job held where the controller placed it is not a finding without --all": Case(
        view(job(40, JobState.RUNNING, "gpu[016-018]")),
        invs(inv("gpu017", held(40))),
        [],
    ),
    "a job held where the controller placed it is healthy with --all": Case(
        view(job(40, JobState.RUNNING, "gpu[016-018]")),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.HEALTHY, Action.NONE)],
        include_healthy=True,
    ),
    "an id at or above the watermark is investigated, never reclaimed": Case(
        view(),
        invs(inv("gpu017", held(WM))),
        [("gpu017", WM, Kind.ABOVE_WATERMARK_UNKNOWN, Action.INVESTIGATE)],
    ),
    "a held id missing from a scoped view is unverifiable without NOT_FOUND": Case(
        view(job(1, JobState.RUNNING, "gpu020"), jobs_total=5),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.UNVERIFIABLE, Action.SPARE)],
        note="controller view is incomplete (1 of 5 jobs)",
    ),
    "a held id above the watermark missing from a scoped view is unverifiable too": Case(
        view(jobs_total=5),
        invs(inv("gpu017", held(WM + 5))),
        [("gpu017", WM + 5, Kind.UNVERIFIABLE, Action.SPARE)],
    ),
    "NOT_FOUND from GetJob makes an id absent from a scoped view reclaimable below the watermark": (
        Case(
            view(jobs_total=5),
            invs(inv("gpu017", held(40))),
            [("gpu017", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM)],
            confirmed={40: None},
        )
    ),
    "a job GetJob returns for an id missing from the view is judged against that job": Case(
        view(jobs_total=5),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.ACTIVE_ELSEWHERE, Action.RECLAIM)],
        confirmed={40: job(40, JobState.RUNNING, "gpu020")},
    ),
    "a redacted GetJob answer (no nodelist) for an active job spares the holding": Case(
        view(jobs_total=5),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.MID_COMMIT, Action.SPARE)],
        confirmed={40: job(40, JobState.RUNNING, "")},
    ),
    "a loose name match never reclaims: case": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(inv("GPU017", held(40))),
        [
            ("GPU017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("GPU017", 40, Kind.TERMINAL_HELD, Action.INVESTIGATE),
        ],
    ),
    "a loose name match never reclaims: an FQDN inventory for a short controller name": Case(
        view(),
        invs(inv("gpu017.cluster.example", held(40))),
        [
            ("gpu017.cluster.example", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu017.cluster.example", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.INVESTIGATE),
        ],
    ),
    "a loose name match never reclaims: a short inventory name for an FQDN controller": Case(
        view(job(40, JobState.RUNNING, "gpu020.c"), nodes=(node("gpu017.c"), node("gpu020.c"))),
        invs(inv("gpu017", held(40))),
        [
            ("gpu017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu017", 40, Kind.ACTIVE_ELSEWHERE, Action.INVESTIGATE),
        ],
    ),
    "a loosely named node is judged under the controller's name, so its own run is healthy": Case(
        view(job(40, JobState.RUNNING, "gpu017")),
        invs(inv("GPU017", held(40))),
        [
            ("GPU017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("GPU017", 40, Kind.HEALTHY, Action.NONE),
        ],
        include_healthy=True,
    ),
    "an inventory matching no controller node is reported and never reclaims": Case(
        view(),
        invs(inv("login1", held(40))),
        [
            ("login1", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("login1", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.INVESTIGATE),
        ],
    ),
    "a name loosely matching two controller nodes is matched to neither": Case(
        view(nodes=(node("gpu017.a"), node("gpu017.b"))),
        invs(inv("gpu017", held(40))),
        [
            ("gpu017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu017", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.INVESTIGATE),
        ],
    ),
    "a held run started before its id was submitted is suspected reuse, never reclaimed": Case(
        view(job(40, JobState.COMPLETED, "gpu017", submit=T0)),
        invs(inv("gpu017", held(40, started=T0 - timedelta(seconds=1)))),
        [("gpu017", 40, Kind.ID_REUSE_SUSPECTED, Action.INVESTIGATE)],
    ),
    "a held run started at its job's submit time is not reuse: the comparison is strict": Case(
        view(job(40, JobState.COMPLETED, "gpu017", submit=T0)),
        invs(inv("gpu017", held(40, started=T0))),
        [("gpu017", 40, Kind.TERMINAL_HELD, Action.RECLAIM)],
    ),
    "an active job a reachable node does not hold is lost on that node": Case(
        view(job(40, JobState.RUNNING, "gpu[017,020]", start=T0)),
        invs(inv("gpu017", held(40)), inv("gpu020")),
        [("gpu020", 40, Kind.LOST_ON_NODE, Action.INVESTIGATE)],
    ),
    "a job that started after the inventory was taken is not lost": Case(
        view(job(40, JobState.RUNNING, "gpu020", start=NOW + timedelta(seconds=1))),
        invs(inv("gpu020")),
        [],
    ),
    "a node never inventoried is not judged lost, only counted": Case(
        view(job(40, JobState.RUNNING, "gpu[017,020]")),
        invs(inv("gpu017", held(40))),
        [],
    ),
    "an allocation no active job lists is a phantom": Case(
        view(
            job(40, JobState.COMPLETED, "gpu017"),
            nodes=(node("gpu017", cpus=16, memory_mb=65536, gpu_count=4),),
        ),
        {},
        [("gpu017", None, Kind.PHANTOM_ALLOC, Action.INVESTIGATE)],
    ),
    "an allocation above its active jobs' even shares is excess": Case(
        view(
            job(40, JobState.RUNNING, "gpu[017-018]", cpus=32, gpu_count=8),
            nodes=(node("gpu017", cpus=16, gpu_count=8), node("gpu018", cpus=16, gpu_count=4)),
        ),
        {},
        [("gpu017", None, Kind.EXCESS_ALLOC, Action.INVESTIGATE)],
    ),
    "an uneven remainder of a multi-node job's split is not excess": Case(
        view(
            job(40, JobState.RUNNING, "gpu[017-018]", gpu_count=3),
            nodes=(node("gpu017", gpu_count=2), node("gpu018", gpu_count=1)),
        ),
        {},
        [],
    ),
    "phantom, excess and lost need the whole job list: withheld on an incomplete view": Case(
        view(
            job(40, JobState.RUNNING, "gpu[017,020]"),
            nodes=(node("gpu017", cpus=4), node("gpu018", cpus=4), node("gpu020")),
            jobs_total=2,
        ),
        invs(inv("gpu020"), inv("gpu017", held(40))),
        [],
        note="phantom-alloc, excess-alloc and lost-on-node are withheld",
    ),
    "an unreachable agent is one finding and nothing of it is classified": Case(
        view(),
        invs(inv("gpu017", held(40), error="ssh: connection refused")),
        [("gpu017", None, Kind.AGENT_UNREACHABLE, Action.INVESTIGATE)],
    ),
    "an unreadable nodelist never reclaims and is named in a note": Case(
        view(job(40, JobState.RUNNING, "gpu[017-")),
        invs(inv("gpu017", held(40))),
        [("gpu017", 40, Kind.UNVERIFIABLE, Action.INVESTIGATE)],
        note="job 40's nodelist 'gpu[017-' is not a valid hostlist",
    ),
    "a list Spur folds across a width (gpu[01-100]) places its job on each of its nodes": Case(
        view(
            job(40, JobState.RUNNING, "gpu[01-100]", cpus=1600),
            nodes=(node("gpu01", cpus=16), node("gpu100", cpus=16), node("gpu101", cpus=16)),
        ),
        invs(inv("gpu01", held(40)), inv("gpu100", held(40)), inv("gpu101", held(40))),
        [
            ("gpu101", 40, Kind.ACTIVE_ELSEWHERE, Action.RECLAIM),
            ("gpu101", None, Kind.PHANTOM_ALLOC, Action.INVESTIGATE),
        ],
    ),
    "a nodelist naming more nodes than the controller lists is not read, and noted": Case(
        view(
            job(40, JobState.RUNNING, "gpu[1-90000000]", cpus=16),
            job(41, JobState.COMPLETED, "gpu017"),
            nodes=(node("gpu017", cpus=16), node("gpu018", cpus=8)),
        ),
        invs(inv("gpu017", held(40)), inv("gpu018", held(41))),
        [
            ("gpu017", 40, Kind.UNVERIFIABLE, Action.INVESTIGATE),
            ("gpu018", 41, Kind.TERMINAL_HELD, Action.RECLAIM),
        ],
        note=(
            "job 40's nodelist 'gpu[1-90000000]' names 90,000,000 nodes, more than the 1,024 "
            "one nodelist is read to here; the job may run on any node"
        ),
    ),
    "a job whose placement is not read explains any node's allocation": Case(
        view(
            job(40, JobState.RUNNING, "gpu[1 -3]", cpus=16),
            nodes=(node("gpu017", cpus=16), node("gpu018", cpus=64, gpu_count=8)),
        ),
        {},
        [],
        note="job 40's nodelist 'gpu[1 -3]' is not a valid hostlist ('1 -3' is not a range",
    ),
    "scope leaves out other nodes' holdings and allocations": Case(
        view(nodes=(node("gpu017"), node("gpu020", cpus=8))),
        invs(inv("gpu017", held(40)), inv("gpu020", held(41))),
        [("gpu017", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM)],
        scope=frozenset({"gpu017"}),
    ),
    "scope by the controller's name still covers a loosely named inventory": Case(
        view(),
        invs(inv("GPU017", held(40)), inv("gpu020", held(41))),
        [
            ("GPU017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("GPU017", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.INVESTIGATE),
        ],
        scope=frozenset({"gpu017"}),
    ),
}


def run(case: Case) -> Classification:
    return classify(
        case.view,
        case.inventories,
        watermark=WM,
        confirmed=case.confirmed,
        scope=case.scope,
        include_healthy=case.include_healthy,
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_classify(case: Case) -> None:
    result = run(case)
    assert [(f.node, f.job_id, f.kind, f.action) for f in result.findings] == case.expected
    if case.note is not None:
        assert any(case.note in n for n in result.notes), result.notes
    for f in result.findings:
        assert f.node in f.reason and (f.job_id is None or str(f.job_id) in f.reason), f.reason


def test_a_reason_names_the_job_the_node_and_the_evidence() -> None:
    result = classify(
        view(job(4711, JobState.RUNNING, "gpu020", start=datetime(2026, 12, 2, 10, 5, tzinfo=UTC))),
        invs(inv("gpu017", held(4711, gpu_ids=(0, 1, 2, 3), pids=(81234, 81235)))),
        watermark=WM,
    )
    [finding] = result.findings
    assert finding.reason == (
        "job 4711 is RUNNING on gpu020 (since 10:05 UTC); "
        "gpu017 still holds it with GPUs 0-3 and 2 live processes"
    )
    assert finding.live is True
    assert finding.controller_state == "RUNNING"
    assert finding.allocated_nodes == "gpu020"
    assert finding.gpus == (0, 1, 2, 3) and finding.pids == (81234, 81235)


def test_an_untracked_holding_has_no_controller_state_or_nodelist() -> None:
    [finding] = classify(view(), invs(inv("gpu017", held(40))), watermark=WM).findings
    assert finding.controller_state is None and finding.allocated_nodes is None
    assert finding.live is False
    assert "absent from the complete view" in finding.reason


def test_node_allocation_reasons_name_the_amounts() -> None:
    result = classify(
        view(
            job(40, JobState.RUNNING, "gpu[017-018]", cpus=32, gpu_count=8),
            nodes=(
                node("gpu017", cpus=16, gpu_count=8),
                node("gpu018", cpus=16, gpu_count=4),
                node("gpu020", cpus=16, memory_mb=65536, gpu_count=1),
            ),
        ),
        {},
        watermark=WM,
    )
    assert [f.reason for f in result.findings] == [
        "gpu017 has 8 GPUs allocated, but its active job 40 accounts for 4 GPUs",
        "gpu020 has 16 CPUs, 65536 MB of memory and 1 GPU allocated but no active job lists "
        "it, so the scheduler sees it busy and nothing frees it but a fresh registration "
        "(DeregisterNode): `spurctl repair --node gpu020`",
    ]


def test_a_finding_cannot_be_changed_once_made_and_equal_ones_hash_alike() -> None:
    made = classify(view(job(5, JobState.COMPLETED, "gpu017")), invs(inv("gpu017", held(5))),
                    watermark=WM).findings  # fmt: skip
    again = classify(view(job(5, JobState.COMPLETED, "gpu017")), invs(inv("gpu017", held(5))),
                     watermark=WM).findings  # fmt: skip
    assert made == again and len({*made, *again}) == len(made) == 1
    with pytest.raises(AttributeError):
        made[0].action = Action.NONE  # type: ignore[misc]
    assert made[0].action is Action.RECLAIM


def test_findings_are_ordered_by_node_then_action_then_job() -> None:
    result = classify(
        view(
            job(3, JobState.PENDING),
            job(4, JobState.RUNNING, "gpu017"),
            job(5, JobState.RUNNING, "gpu020"),
            nodes=(node("gpu016", cpus=1), node("gpu017"), node("gpu020")),
        ),
        invs(inv("gpu017", held(WM + 1), held(3), held(5), held(4), held(2)), inv("gpu020")),
        watermark=WM,
        include_healthy=True,
    )
    assert [(f.node, f.job_id, f.action) for f in result.findings] == [
        ("gpu016", None, Action.INVESTIGATE),
        ("gpu017", 2, Action.RECLAIM),
        ("gpu017", 5, Action.RECLAIM),
        ("gpu017", WM + 1, Action.INVESTIGATE),
        ("gpu017", 3, Action.SPARE),
        ("gpu017", 4, Action.NONE),
        ("gpu020", 5, Action.INVESTIGATE),
    ]


def test_nodes_in_scope_without_an_inventory_are_counted_as_not_inventoried() -> None:
    result = classify(
        view(),
        invs(inv("gpu017"), inv("gpu018", error="timed out"), inv("login1")),
        watermark=WM,
    )
    # Four controller nodes plus login1; the unreachable one is not inventoried.
    assert (result.nodes_in_scope, result.nodes_inventoried) == (5, 2)
    scoped = classify(
        view(), invs(inv("gpu017")), watermark=WM, scope=frozenset({"gpu017", "gpu999"})
    )
    assert (scoped.nodes_in_scope, scoped.nodes_inventoried) == (2, 1)
    assert scoped.findings == []


# -- nodelist spacing, missing start times, coverage, inventory age ------------------


@pytest.mark.parametrize(
    "nodelist", ["gpu017 ", " gpu017", "gpu017\t", " gpu[016-017] ", "gpu020 , gpu017 ,"]
)
def test_a_nodelist_with_spaces_names_the_nodes_spur_reads_in_it(nodelist: str) -> None:
    # Spur trims each comma-separated part: gpu017 belongs to the job, its run is its own.
    running = job(5, JobState.RUNNING, nodelist)
    assert controller_decision("gpu017", running, 5, WM) is Kind.HEALTHY
    result = classify(view(running), invs(inv("gpu017", held(5))), watermark=WM)
    assert result.findings == []


def test_a_node_named_in_the_nodelist_text_is_never_active_elsewhere() -> None:
    # "gpu016 gpu017" is one odd name to Spur and to the parse, but its text names
    # gpu017: the backstop investigates instead of reclaiming gpu017's run.
    odd = job(5, JobState.RUNNING, "gpu016 gpu017")
    assert controller_decision("gpu017", odd, 5, WM) is Kind.ACTIVE_ELSEWHERE
    [finding] = classify(view(odd), invs(inv("gpu017", held(5, pids=(9,)))), watermark=WM).findings
    assert (finding.kind, finding.action) == (Kind.UNVERIFIABLE, Action.INVESTIGATE)
    assert finding.reason == (
        "job 5 is RUNNING on 'gpu016 gpu017', which does not parse as including gpu017 but "
        "whose text names it, so this may be the job's own run; gpu017 holds it with no GPU "
        "and 1 live process"
    )
    [other] = classify(view(odd), invs(inv("gpu016", held(5))), watermark=WM).findings
    assert other.kind is Kind.UNVERIFIABLE
    # A name that is only part of a token is not named by it: gpu017's run is stale.
    elsewhere = job(5, JobState.RUNNING, "gpu0170 gpu020")
    [stale] = classify(view(elsewhere), invs(inv("gpu017", held(5))), watermark=WM).findings
    assert (stale.kind, stale.action) == (Kind.ACTIVE_ELSEWHERE, Action.RECLAIM)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True),
    st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=10, max_size=10),
    st.sampled_from(NODES),
)
def test_spacing_in_a_nodelist_never_makes_a_listed_node_reclaimable(
    names: list[str], pads: list[str], holder: str
) -> None:
    parts = [f"{pads[2 * i % 10]}{n}{pads[(2 * i + 1) % 10]}" for i, n in enumerate(names)]
    running = job(5, JobState.RUNNING, ",".join(parts))
    result = classify(view(running), invs(inv(holder, held(5))), watermark=WM)
    if holder in names:
        assert result.findings == []
    else:
        assert [f.kind for f in result.findings] == [Kind.ACTIVE_ELSEWHERE]


@pytest.mark.parametrize(
    ("the_job", "kind"),
    [
        (job(40, JobState.COMPLETED, "gpu017", submit=T0), Kind.TERMINAL_HELD),
        (job(40, JobState.RUNNING, "gpu020", submit=T0), Kind.ACTIVE_ELSEWHERE),
    ],
)
def test_a_tracked_holding_without_a_start_time_is_investigated_never_reclaimed(
    the_job: Job, kind: Kind
) -> None:
    [finding] = classify(
        view(the_job), invs(inv("gpu017", held(40, started=None))), watermark=WM
    ).findings
    assert (finding.kind, finding.action) == (kind, Action.INVESTIGATE)
    assert finding.reason.endswith(
        "; not reclaimed: gpu017's inventory records no start time for this run, so an id "
        "reissued after a controller wipe cannot be ruled out; re-collect it with "
        "`spurctl node-inventory`, which records start times"
    )
    # With the start time the same holding is the controller's reclaim.
    [timed] = classify(view(the_job), invs(inv("gpu017", held(40))), watermark=WM).findings
    assert (timed.kind, timed.action) == (kind, Action.RECLAIM)


def test_an_untracked_holding_without_a_start_time_stays_reclaimable() -> None:
    # No job has the id, so no reissue can be mistaken for it.
    [finding] = classify(view(), invs(inv("gpu017", held(40, started=None))), watermark=WM).findings
    assert (finding.kind, finding.action) == (Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM)


def test_every_node_in_scope_without_an_inventory_is_a_not_inventoried_finding() -> None:
    result = classify_module.classify(
        view(),
        invs(inv("gpu017"), inv("GPU018"), inv("gpu020", error="ssh: timed out")),
        watermark=WM,
    )
    # gpu018 is spoken for loosely (a name-mismatch), gpu020 is unreachable: only gpu016
    # has nothing to say for it.
    missing = [f for f in result.findings if f.kind is Kind.NOT_INVENTORIED]
    assert [(f.node, f.job_id, f.action) for f in missing] == [("gpu016", None, Action.INVESTIGATE)]
    assert missing[0].reason == (
        "no inventory speaks for gpu016, so what its agent holds is unknown and it was not "
        "audited; collect it (spurctl collect --nodes gpu016) or use --collect"
    )
    assert missing[0].inventory_age_s is None
    assert (result.nodes_in_scope, result.nodes_inventoried) == (4, 2)


def test_a_hostlist_naming_no_controller_node_is_not_a_clean_audit() -> None:
    # A typo such as gpu[01-24] for gpu[001-024]: nothing was audited, and it must say so.
    result = classify_module.classify(
        view(),
        invs(*(inv(n) for n in NODES)),
        watermark=WM,
        scope=hostlist.parse_scope("gpu[16-17]"),
    )
    assert [(f.node, f.kind, f.action) for f in result.findings] == [
        ("gpu16", Kind.NOT_INVENTORIED, Action.INVESTIGATE),
        ("gpu17", Kind.NOT_INVENTORIED, Action.INVESTIGATE),
    ]
    assert result.findings[0].reason == (
        "the controller has no node gpu16 and no inventory speaks for it, so nothing was "
        "audited there; check the --nodes hostlist for a typo (e.g. gpu[01-24] for gpu[001-024])"
    )
    assert (result.nodes_in_scope, result.nodes_inventoried) == (2, 0)


def test_a_scope_named_by_the_inventorys_loose_name_counts_the_node_once() -> None:
    result = classify_module.classify(
        view(), invs(inv("GPU017")), watermark=WM, scope=frozenset({"GPU017"})
    )
    assert [f.kind for f in result.findings] == [Kind.NAME_MISMATCH]
    assert (result.nodes_in_scope, result.nodes_inventoried) == (1, 1)


def aged(name: str, age_s: float, *holdings: Holding, error: str | None = None) -> Inventory:
    return replace(inv(name, *holdings, error=error), collected_at=NOW - timedelta(seconds=age_s))


def test_every_finding_carries_its_inventorys_age() -> None:
    result = classify_module.classify(
        view(
            job(40, JobState.COMPLETED, "gpu017"),
            job(41, JobState.RUNNING, "gpu[016,020]", start=T0),
            nodes=(node("gpu016"), node("gpu017"), node("gpu018"), node("gpu020", cpus=4)),
        ),
        invs(
            aged("gpu017", 12.5, held(40)),
            aged("gpu016", 30),
            aged("gpu018", 5, error="ssh: refused"),
            aged("GPU020", 40),
        ),
        watermark=WM,
    )
    ages = {(f.node, f.kind): f.inventory_age_s for f in result.findings}
    assert ages == {
        ("gpu017", Kind.TERMINAL_HELD): 12.5,
        ("gpu016", Kind.LOST_ON_NODE): 30.0,
        ("gpu018", Kind.AGENT_UNREACHABLE): 5.0,
        ("GPU020", Kind.NAME_MISMATCH): 40.0,
        # gpu020's allocation is judged on the controller's word; its inventory is loose.
        ("gpu020", Kind.EXCESS_ALLOC): None,
    }
    # An inventory taken after the view is younger than it: a negative age.
    [late] = classify(view(), invs(aged("gpu017", -3, held(40))), watermark=WM).findings
    assert late.inventory_age_s == -3.0


def test_inventories_older_than_two_heartbeats_are_named_in_a_note() -> None:
    fresh = classify(view(), invs(aged("gpu017", 60), aged("gpu016", 10)), watermark=WM)
    assert not any("heartbeats" in n for n in fresh.notes)
    stale = classify(
        view(),
        invs(aged("gpu017", 61), aged("gpu016", 725), aged("gpu018", 10)),
        watermark=WM,
    )
    assert stale.notes == [
        "2 inventories were collected more than 60 s (two agent heartbeats) before the "
        "controller view, the oldest 12 min before (gpu016, gpu017): what those nodes hold "
        "may have changed since; re-collect them, or use --collect"
    ]


# -- properties over generated clusters ------------------------------------------

ID_RANGE = st.integers(min_value=1, max_value=40)
TIMES = st.none() | st.integers(min_value=0, max_value=5).map(lambda m: T0 + timedelta(minutes=m))
RECLAIM_ARMS = {Kind.TERMINAL_HELD, Kind.ACTIVE_ELSEWHERE, Kind.BELOW_WATERMARK_UNKNOWN}


@dataclass
class Cluster:
    view: ControllerView
    inventories: dict[str, Inventory]
    confirmed: dict[int, Job | None]
    watermark: int
    scope: frozenset[str] | None


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    nodes = draw(st.lists(st.sampled_from(NODES), max_size=3, unique=True))
    return job(
        draw(ID_RANGE),
        draw(st.sampled_from(JobState)),
        hostlist.fold(nodes),
        submit=draw(TIMES),
        start=draw(TIMES),
        cpus=draw(st.integers(0, 8)),
        gpu_count=draw(st.integers(0, 4)),
    )


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    job_list = draw(st.lists(jobs(), max_size=12, unique_by=lambda j: j.job_id))
    nodes = tuple(
        node(n, cpus=draw(st.integers(0, 8)), gpu_count=draw(st.integers(0, 4))) for n in NODES
    )
    the_view = view(*job_list, nodes=nodes, jobs_total=len(job_list) + draw(st.integers(0, 2)))
    # Exact, case-changed, FQDN and unknown names: the loose matches must never reclaim.
    names = st.sampled_from([*NODES, "GPU017", "gpu018.cluster", "login1"])
    holding = st.builds(
        held,
        ID_RANGE,
        gpu_ids=st.lists(st.integers(0, 7), max_size=2, unique=True).map(tuple),
        pids=st.lists(st.integers(1, 99), max_size=2, unique=True).map(tuple),
        started=TIMES,
    )
    inventories = {
        name: Inventory(
            node=name,
            collected_at=NOW,
            source="test",
            error=draw(st.none() | st.just("unreachable")),
            held=tuple(draw(st.lists(holding, max_size=4, unique_by=lambda h: h.job_id))),
        )
        for name in draw(st.lists(names, max_size=5, unique=True))
    }
    answers = draw(st.dictionaries(ID_RANGE, st.none() | jobs(), max_size=4))
    # GetJob answers about the id it was asked for.
    confirmed = {
        i: j if j is None else msgspec.structs.replace(j, job_id=i) for i, j in answers.items()
    }
    scope = draw(st.none() | st.sets(st.sampled_from(NODES), min_size=1).map(frozenset))
    return Cluster(the_view, inventories, confirmed, draw(st.integers(1, 45)), scope)


def classify_cluster(c: Cluster, watermark: int | None = None) -> Classification:
    return classify(
        c.view,
        c.inventories,
        watermark=c.watermark if watermark is None else watermark,
        confirmed=c.confirmed,
        scope=c.scope,
        include_healthy=True,
    )


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(clusters())
def test_nothing_is_reclaimed_that_the_controller_would_spare(c: Cluster) -> None:
    for f in classify_cluster(c).findings:
        if f.action is not Action.RECLAIM:
            continue
        assert f.job_id is not None
        the_job = c.view.jobs.get(f.job_id, c.confirmed.get(f.job_id))
        decided = controller_decision(f.node, the_job, f.job_id, c.watermark)
        assert decided in RECLAIM_ARMS and f.kind is decided, f


@PROPERTY
@given(clusters())
def test_a_loose_or_unknown_node_name_never_reclaims(c: Cluster) -> None:
    for f in classify_cluster(c).findings:
        if f.node not in c.view.nodes:
            assert f.action is not Action.RECLAIM, f


@PROPERTY
@given(clusters(), st.integers(0, 45))
def test_lowering_the_watermark_never_adds_a_reclaim(c: Cluster, lower_by: int) -> None:
    def reclaims(watermark: int) -> set[tuple[str, int | None]]:
        found = classify_cluster(c, watermark).findings
        return {(f.node, f.job_id) for f in found if f.action is Action.RECLAIM}

    assert reclaims(max(0, c.watermark - lower_by)) <= reclaims(c.watermark)


@PROPERTY
@given(clusters())
def test_an_incomplete_view_never_proves_absence_without_not_found(c: Cluster) -> None:
    for f in classify_cluster(c).findings:
        if f.kind is Kind.BELOW_WATERMARK_UNKNOWN:
            assert f.job_id is not None
            assert c.view.complete or (f.job_id in c.confirmed and c.confirmed[f.job_id] is None)


@PROPERTY
@given(clusters())
def test_classify_depends_only_on_its_input(c: Cluster) -> None:
    shuffled = Cluster(
        view(*reversed(c.view.jobs.values()), nodes=tuple(reversed(c.view.nodes.values())),
             jobs_total=c.view.jobs_total),
        dict(reversed(c.inventories.items())),
        dict(reversed(c.confirmed.items())),
        c.watermark,
        c.scope,
    )  # fmt: skip
    first = classify_cluster(c)
    assert classify_cluster(c) == first
    assert classify_cluster(shuffled) == first


# -- the healthy shortcut: most holdings of a cluster are judged from a few fields ----------

# Nodelists a controller may send that are not one clean name: spaces, a bad range.
ODD_NODELISTS = st.sampled_from([" gpu017 ", "gpu017,", "gpu[017", "gpu[016-017]", ""])
MOSTLY_ACTIVE = st.sampled_from(sorted(ACTIVE_STATES)) | st.sampled_from(JobState)


@st.composite
def busy_clusters(draw: st.DrawFn) -> Cluster:
    """Clusters whose nodes mostly hold jobs the controller runs there: what the shortcut
    takes, beside what it must not (a run older than its spurd or than its job, an odd
    nodelist, another node, a job not running)."""
    job_list = [
        job(
            i,
            draw(MOSTLY_ACTIVE),
            draw(
                st.lists(st.sampled_from(NODES), max_size=3, unique=True).map(hostlist.fold)
                | ODD_NODELISTS
            ),
            submit=draw(TIMES),
        )
        for i in range(1, draw(st.integers(1, 8)) + 1)
    ]
    ids = st.integers(1, len(job_list) + 1)  # one id past the last: untracked
    agents = st.none() | st.builds(AgentProcess, st.integers(1, 99), TIMES)
    inventories = {
        name: Inventory(
            node=name,
            collected_at=NOW,
            source="test",
            held=tuple(
                held(i, started=draw(TIMES))
                for i in draw(st.lists(ids, min_size=1, max_size=4, unique=True))
            ),
            agent=draw(agents),
            agent_checked=True,
        )
        for name in draw(st.lists(st.sampled_from([*NODES, "GPU017"]), min_size=1, unique=True))
    }
    return Cluster(view(*job_list), inventories, {}, len(job_list) + 2, None)


@PROPERTY
@given(busy_clusters())
def test_the_healthy_shortcut_never_changes_an_audit(c: Cluster) -> None:
    """An audit without --all skips the full judgement of a holding `_plainly_healthy`
    calls healthy: it must find exactly what judging every holding in full finds."""

    def audit_of() -> Classification:
        return classify_module.classify(
            c.view,
            c.inventories,
            watermark=c.watermark,
            confirmed=c.confirmed,
            scope=c.scope,
        )

    shortcut = audit_of()
    with patch.object(classify_module, "_plainly_healthy", lambda *_: False):
        assert audit_of() == shortcut


@pytest.mark.parametrize(
    ("the_job", "started", "agent_started", "expected"),
    [
        (job(5, JobState.RUNNING, "gpu017", submit=T0), RUN_START, T0, True),
        (job(5, JobState.SUSPENDED, "gpu[016-017]", submit=T0), RUN_START, None, True),
        (job(5, JobState.RUNNING, "gpu017"), None, RUN_START, True),
        # An agent orphan: the run began before this spurd did.
        (job(5, JobState.RUNNING, "gpu017", submit=T0), RUN_START, NOW, False),
        # A reissued id: the run began before the job was submitted.
        (job(5, JobState.RUNNING, "gpu017", submit=NOW), RUN_START, None, False),
        (job(5, JobState.RUNNING, "gpu018"), RUN_START, None, False),
        (job(5, JobState.RUNNING, ""), RUN_START, None, False),
        (job(5, JobState.RUNNING, "gpu[017"), RUN_START, None, False),
        (job(5, JobState.PENDING, "gpu017"), RUN_START, None, False),
        (job(5, JobState.COMPLETED, "gpu017"), RUN_START, None, False),
    ],
)
def test_the_healthy_shortcut_takes_only_a_plainly_healthy_holding(
    the_job: Job, started: datetime | None, agent_started: datetime | None, expected: bool
) -> None:
    assert classify_module._plainly_healthy("gpu017", the_job, started, agent_started) is expected


# -- SPUR_TARGET_NODE: the controller's own name, carried by the job processes ----------


def targeted(
    name: str, *holdings: Holding, target: str | None = None, targets: tuple[str, ...] = ()
) -> Inventory:
    """An inventory as `spurctl node-inventory` writes it: with the processes' target names."""
    names = targets or ((target,) if target else ())
    return replace(inv(name, *holdings), hostname=name, target_node=target, target_nodes=names)


TARGET_CASES: dict[str, Case] = {
    "an FQDN agent whose processes name the short controller node: judged exactly, reclaimed": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("gpu017.cluster.example", held(40, pids=(9,)), target="gpu017")),
        [
            ("gpu017.cluster.example", 40, Kind.TERMINAL_HELD, Action.RECLAIM),
            ("gpu017.cluster.example", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
        ],
    ),
    "an untracked id under the target name is reclaimed (no name in its re-check)": Case(
        view(),
        invs(targeted("gpu017.cluster.example", held(40, pids=(9,)), target="gpu017")),
        [
            ("gpu017.cluster.example", 40, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM),
            ("gpu017.cluster.example", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
        ],
    ),
    "the node's own run, named by its target, is healthy": Case(
        view(job(40, JobState.RUNNING, "gpu017")),
        invs(targeted("node-a17", held(40, pids=(9,)), target="gpu017")),
        [
            ("node-a17", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("node-a17", 40, Kind.HEALTHY, Action.NONE),
        ],
        include_healthy=True,
    ),
    "active-elsewhere under a target name is investigated: reclaim re-checks the agent's": Case(
        view(job(40, JobState.RUNNING, "gpu020")),
        invs(targeted("gpu017.cluster.example", held(40, pids=(9,)), target="gpu017")),
        [
            ("gpu017.cluster.example", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu017.cluster.example", 40, Kind.ACTIVE_ELSEWHERE, Action.INVESTIGATE),
        ],
    ),
    "a target equal to the agent's name is no mismatch": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("gpu017", held(40, pids=(9,)), target="gpu017")),
        [("gpu017", 40, Kind.TERMINAL_HELD, Action.RECLAIM)],
    ),
    "processes naming two nodes keep the node a mismatch, never reclaimed": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("gpu017", held(40, pids=(9,)), targets=("gpu017", "gpu018"))),
        [
            ("gpu017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu017", 40, Kind.TERMINAL_HELD, Action.INVESTIGATE),
        ],
    ),
    "a target the controller does not have is a mismatch, never reclaimed": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("gpu017", held(40, pids=(9,)), target="gpu099")),
        [
            ("gpu017", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu017", 40, Kind.TERMINAL_HELD, Action.INVESTIGATE),
        ],
    ),
    "an agent named as one controller node whose processes name another is never reclaimed": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("gpu018", held(40, pids=(9,)), target="gpu017")),
        [
            ("gpu018", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("gpu018", 40, Kind.TERMINAL_HELD, Action.INVESTIGATE),
        ],
    ),
    "an agent loosely named as one node whose processes name another is never reclaimed": Case(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("GPU018", held(40, pids=(9,)), target="gpu017")),
        [
            ("GPU018", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
            ("GPU018", 40, Kind.TERMINAL_HELD, Action.INVESTIGATE),
        ],
    ),
    "the target name places lost-on-node on the controller's node": Case(
        view(job(40, JobState.RUNNING, "gpu017", start=T0), job(41, JobState.RUNNING, "gpu017")),
        invs(targeted("gpu017.cluster.example", held(41, pids=(9,)), target="gpu017")),
        [
            ("gpu017", 40, Kind.LOST_ON_NODE, Action.INVESTIGATE),
            ("gpu017.cluster.example", None, Kind.NAME_MISMATCH, Action.INVESTIGATE),
        ],
    ),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in TARGET_CASES.items()])
def test_classify_by_target_node(case: Case) -> None:
    test_classify(case)


def test_a_target_name_mismatch_says_which_name_spur_compares() -> None:
    result = classify(
        view(job(40, JobState.COMPLETED, "gpu017")),
        invs(targeted("gpu017.cluster.example", held(40, pids=(9,)), target="gpu017")),
        watermark=WM,
    )
    mismatch = next(f for f in result.findings if f.kind is Kind.NAME_MISMATCH)
    assert "SPUR_TARGET_NODE 'gpu017'" in mismatch.reason
    assert "Spur's own reclaim compares the reported name" in mismatch.reason
    disagree = classify(
        view(),
        invs(targeted("gpu017", held(40, pids=(9,)), targets=("gpu017", "gpu018"))),
        watermark=WM,
    )
    reasons = [f.reason for f in disagree.findings]
    assert any("name several controller nodes" in r and "'gpu018'" in r for r in reasons)


def test_with_all_a_node_that_holds_nothing_still_gets_a_row() -> None:
    running = job(1, JobState.RUNNING, NODES[0])
    inventories = invs(inv(NODES[0], held(1)), inv(NODES[1]))
    shown = classify(view(running), inventories, watermark=2, include_healthy=True).findings
    quiet = [f for f in shown if f.node == NODES[1]]
    assert [(f.kind, f.action, f.job_id) for f in quiet] == [(Kind.HEALTHY, Action.NONE, None)]
    assert quiet[0].reason == f"{NODES[1]} holds no job, and the controller runs none there"
    hidden = classify(view(running), inventories, watermark=2).findings
    assert not [f for f in hidden if f.node == NODES[1]]


# -- an inventory dated ahead of the audit's clock -----------------------------------


def _dated(inventory: Inventory, at: datetime) -> Inventory:
    return replace(inventory, collected_at=at)


def test_an_inventory_dated_well_ahead_of_the_audits_clock_is_clock_ahead_and_never_reclaimed() -> (
    None
):
    ended = job(5, JobState.COMPLETED, "gpu017", end=T0)
    ahead = _dated(inv("gpu017", held(5, gpu_ids=(0,), pids=(81,))), NOW + timedelta(days=1800))
    result = classify(view(ended), invs(ahead), watermark=WM, now=NOW)
    by_kind = {f.kind: f for f in result.findings}
    clock = by_kind[Kind.CLOCK_AHEAD]
    assert (clock.node, clock.job_id, clock.action) == ("gpu017", None, Action.INVESTIGATE)
    assert "the node's clock is ahead" in clock.reason and "2031-" in clock.reason
    held_finding = by_kind[Kind.TERMINAL_HELD]
    assert held_finding.action is Action.INVESTIGATE
    assert "not reclaimed" in held_finding.reason and "clock-ahead" in held_finding.reason
    assert not [f for f in result.findings if f.action is Action.RECLAIM]


def test_an_inventory_within_the_allowed_clock_skew_is_judged_as_usual() -> None:
    ended = job(5, JobState.COMPLETED, "gpu017", end=T0)
    skewed = _dated(inv("gpu017", held(5, gpu_ids=(0,))), NOW + timedelta(seconds=59))
    result = classify(view(ended), invs(skewed), watermark=WM, now=NOW)
    assert [(f.kind, f.action) for f in result.findings] == [(Kind.TERMINAL_HELD, Action.RECLAIM)]


def test_clock_ahead_is_measured_from_the_audits_now_not_the_view() -> None:
    # A saved snapshot's view is old; an inventory collected since is not ahead of "now".
    ended = job(5, JobState.COMPLETED, "gpu017", end=T0)
    later = _dated(inv("gpu017", held(5, gpu_ids=(0,))), NOW + timedelta(hours=2))
    fresh = classify(view(ended), invs(later), watermark=WM, now=NOW + timedelta(hours=2))
    assert Kind.CLOCK_AHEAD not in {f.kind for f in fresh.findings}
    assert {f.action for f in fresh.findings} == {Action.RECLAIM}
    by_view = classify(view(ended), invs(later), watermark=WM)  # now defaults to taken_at
    assert Kind.CLOCK_AHEAD in {f.kind for f in by_view.findings}


def test_no_lost_on_node_is_concluded_from_a_clock_ahead_inventory() -> None:
    # Dated ahead, the inventory reads as taken after the job started: it is not.
    running = job(7, JobState.RUNNING, "gpu017", start=NOW - timedelta(minutes=1))
    ahead = _dated(inv("gpu017"), NOW + timedelta(hours=3))
    result = classify(view(running), invs(ahead), watermark=WM, now=NOW)
    assert [f.kind for f in result.findings] == [Kind.CLOCK_AHEAD]
    on_time = classify(view(running), invs(_dated(ahead, NOW)), watermark=WM, now=NOW)
    assert [f.kind for f in on_time.findings] == [Kind.LOST_ON_NODE]


def test_a_node_its_own_collect_left_uninventoried_is_not_told_to_use_collect() -> None:
    result = classify_module.classify(view(), invs(inv("gpu017")), watermark=WM, collected=True)
    missing = [f for f in result.findings if f.kind is Kind.NOT_INVENTORIED]
    assert missing and all("use --collect" not in f.reason for f in missing)
    assert "this audit's --collect brought no inventory naming it" in missing[0].reason


@pytest.mark.parametrize(
    ("name", "matched", "why"),
    [
        ("gpu017", "gpu017", None),
        (
            "GPU017",
            "gpu017",
            "inventory node 'GPU017' matches controller node 'gpu017' only by  case",
        ),
        ("gpu017.ex", "gpu017", "matches controller node 'gpu017' only by short name"),
        ("gpu018.ex", None, "loosely matches several nodes ('GPU018', 'gpu018.b')"),
        ("gpu019", None, "inventory node 'gpu019' matches no controller node"),
    ],
)
def test_an_inventory_name_matches_the_controllers_exactly_loosely_or_not_at_all(
    name: str, matched: str | None, why: str | None
) -> None:
    from spurctl.decide.node_names import NameMatcher

    names = NameMatcher(["gpu017", "gpu018.b", "GPU018", "gpu020"])
    found, said = names.match(name)
    assert found == matched
    assert (said is None) if why is None else (said is not None and why in said)
