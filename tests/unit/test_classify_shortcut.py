"""The healthy shortcut (`classify._plainly_healthy`) against the full judgement.

An audit without --all clears a holding the shortcut calls plainly healthy without
judging it in full. It must decide nothing the full judgement would not: for
generated views (plain, and as a live read keeps them: encoded, with the glances of
held jobs, some left as messages), inventories, GetJob answers and journal records,
with every input that changes a verdict (start and submit times, equal or unknown;
agent start times; spellings of a nodelist and of a node that Spur trims, reads
otherwise or only loosely matches; live, adopted and tracked processes; attempts; a
clock ahead; an agent not running; an unreadable inventory; a watermark), every
holding it clears is healthy in the full judgement, and the audit is the same with
the shortcut and without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spurctl import hostlist
from spurctl.decide import classify as classify_module
from spurctl.decide.classify import Classification
from spurctl.decide.glance import glances
from spurctl.decide.node_names import NameMatcher
from spurctl.model import (
    AgentProcess,
    Allocation,
    ControllerView,
    Holding,
    Inventory,
    Job,
    JobGlance,
    JobState,
    Kind,
    Node,
    NodeState,
    Placement,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import wire
from spurctl_sim import encoders

NOW = datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
NODES = ("gpu016", "gpu017", "gpu018")
# Inventory names: the controller's, a loose one, and spellings no plain name has.
HOLDERS = (*NODES, "GPU017", "gpu017.example", "gpu[017]", "gpu017 ", "a,b")
# Nodelists: the plain ones, and what Spur trims or reads otherwise than as one name.
NODELISTS = (
    *NODES,
    "",
    " gpu017",
    "gpu017 ",
    "gpu017,",
    "gpu[017]",
    "gpu[016-017]",
    "gpu016,gpu017",
    "gpu[017",
    "GPU017",
    "gpu017.example",
    "a,b",
)
# Minutes either side of T0, or unknown: equal times included (not earlier is not reuse).
TIMES = st.sampled_from([*(T0 + timedelta(minutes=m) for m in range(-2, 3)), None])
# Weighted towards what the shortcut takes, so that it is tried often, and beside it
# every input that must keep it from taking a holding.
STATES = st.sampled_from(JobState)
IDS = st.integers(0, 14)  # 0: never issued; some ids untracked, some above the watermark


def job_of(draw: st.DrawFn, job_id: int, home: str = "gpu017") -> Job:
    return Job(
        job_id,
        draw(STATES) if draw(st.integers(0, 3)) == 2 else JobState.RUNNING,
        draw(st.sampled_from(NODELISTS)) if draw(st.integers(0, 3)) == 2 else home,
        submit_time=draw(TIMES),
        start_time=draw(TIMES),
        resources=Allocation(cpus=draw(st.integers(0, 4))),
    )


def live_view(jobs: list[Job], wanted: set[int], cut: int) -> wire.JobsFromPb:
    """The jobs as a split read keeps them: encoded, with glances of the held ones, and
    those from `cut` on left as the answer's messages (read through `glance`, not the
    kept glances)."""
    kept_part, messages = jobs[:cut], jobs[cut:]
    answer = pb.GetJobsResponse(jobs=[encoders.job_to_pb(j) for j in kept_part])
    shapes = wire.Shapes()
    kept: dict[int, wire.Encoded] = {}
    grouped: dict[str, list[Placement]] = {}
    glanced: dict[int, JobGlance] = {}
    wire.keep_encoded(
        wire.JobRecords(answer.SerializeToString()),
        shapes,
        wanted,
        kept,
        grouped,
        glanced,
    )
    return wire.JobsFromPb(
        [encoders.job_to_pb(j) for j in messages],
        shapes=shapes,
        encoded=kept,
        grouped=grouped,
        glanced=glanced,
    )


@dataclass
class Audit:
    view: ControllerView
    inventories: dict[str, Inventory]
    confirmed: dict[int, Job | None]
    watermark: int
    cancelled: dict[tuple[str, int], datetime]


@st.composite
def audits(draw: st.DrawFn) -> Audit:
    # The name most jobs run on and most inventories are named: the controller's, or one
    # that only looks like it.
    # (Hypothesis draws the ends of a range most: a rare branch is a middle value.)
    home = draw(st.sampled_from(HOLDERS)) if draw(st.integers(0, 3)) == 2 else "gpu017"
    ids = draw(st.lists(st.integers(1, 12), max_size=10, unique=True))
    jobs = [job_of(draw, i, home) for i in ids]
    inventories: dict[str, Inventory] = {}
    others = draw(st.lists(st.sampled_from(HOLDERS), max_size=3, unique=True))
    for name in dict.fromkeys([home, *others]):  # the home inventory first, always
        agent = draw(st.none() | st.builds(AgentProcess, st.integers(1, 9), TIMES))
        holdings = tuple(
            Holding(
                job_id,
                pids=draw(st.sampled_from(((), (7,), (7, 8)))),
                started_at=draw(TIMES),
                attempt=draw(st.none() | st.integers(0, 2)),
                tracked_pids=draw(st.sampled_from(((), (), (7,)))),
                supervisors=draw(st.sampled_from(((), (), (9,)))),
            )
            # Mostly the view's ids; beside them 0, untracked ids, ids above the watermark.
            for job_id in draw(
                st.lists(
                    st.sampled_from(ids) if ids and draw(st.integers(0, 3)) != 2 else IDS,
                    min_size=1 if draw(st.integers(0, 3)) != 2 else 0,
                    max_size=3,
                    unique=True,  # one holding of a job per node, as an agent holds it
                )
            )
        )
        inventories[name] = Inventory(
            node=name,
            collected_at=draw(
                st.sampled_from((NOW, NOW - timedelta(hours=1), NOW + timedelta(hours=1)))
            ),
            source="test",
            error="timed out" if draw(st.integers(0, 5)) == 3 else None,
            held=holdings,
            agent=agent,
            agent_checked=draw(st.booleans()),
            ancestry_read=draw(st.booleans()),
            target_node=draw(st.none() | st.sampled_from(NODES)),
        )
    held = {h.job_id for inv in inventories.values() for h in inv.held}
    table: Mapping[int, Job] = {j.job_id: j for j in jobs}
    as_read: bool = draw(st.booleans())
    if jobs and as_read:
        table = live_view(jobs, held, len(jobs) - draw(st.integers(0, len(jobs) // 2)))
    view = ControllerView(
        address="http://ctl:6817",
        version="test",
        taken_at=NOW,
        jobs=table,
        nodes={
            n: Node(n, NodeState.MIXED, alloc=Allocation(cpus=draw(st.integers(0, 4))))
            for n in NODES
        },
        jobs_total=len(jobs) + draw(st.integers(0, 1)),  # complete, or not
    )
    missing = sorted(held - set(ids))
    confirmed = {
        i: draw(st.none() | st.just(job_of(draw, i, home)))
        for i in draw(st.lists(st.sampled_from(missing), unique=True) if missing else st.just([]))
    }
    cancelled = {
        (inv.node, h.job_id): T0
        for inv in inventories.values()
        for h in inv.held
        if draw(st.integers(0, 3)) == 0
    }
    return Audit(view, inventories, confirmed, draw(st.integers(1, 16)), cancelled)


def classified(a: Audit, *, include_healthy: bool = False) -> Classification:
    return classify_module.classify(
        a.view,
        a.inventories,
        watermark=a.watermark,
        confirmed=a.confirmed,
        include_healthy=include_healthy,
        cancelled=a.cancelled,
    )


PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(audits())
def test_every_holding_the_shortcut_clears_is_healthy_in_the_full_judgement(a: Audit) -> None:
    # --all judges every holding in full (the shortcut takes no part then).
    full = classified(a, include_healthy=True)
    verdicts: dict[tuple[str, int | None], set[Kind]] = {}
    for f in full.findings:
        if f.kind is not Kind.LOST_ON_NODE:  # a node's finding: the next test covers it
            verdicts.setdefault((f.node, f.job_id), set()).add(f.kind)
    names = NameMatcher(a.view.nodes)
    glance_of = glances(a.view, a.confirmed)
    kept = a.view.kept_glances()
    limit = hostlist.nodelist_limit(len(a.view.nodes))
    for inv in a.inventories.values():
        if inv.error is not None:
            continue
        node = names.controller_name(inv)[0]
        agent_started = None if inv.agent is None else inv.agent.started_at
        for h in inv.held:
            # As classify looks a holding's job up: the read's glances first.
            glance = kept.get(h.job_id) or glance_of(h.job_id)
            if glance is not None and classify_module._plainly_healthy(
                node, glance, h.started_at, agent_started, limit
            ):
                assert verdicts.get((inv.node, h.job_id)) == {Kind.HEALTHY}, (inv.node, h)


@PROPERTY
@given(audits())
def test_the_shortcut_never_changes_an_audit(a: Audit) -> None:
    shortcut = classified(a)
    with patch.object(classify_module, "_plainly_healthy", lambda *_: False):
        assert classified(a) == shortcut
