"""An admin's UpdateNode(state=DOWN) leaves runs behind: the finding names that cause.

spurctld's `update_node_state` proposes a NodeStateChange to Down, whose apply
evicts every active job on the node to NODE_FAIL (pending reason NodeDown) and frees
it on all its nodes; the UpdateNode handler sends no cancel (ROCm/spur
crates/spurctld/src/cluster.rs `update_node_state`, `apply_operation`,
`evict_jobs_on_node`; server.rs `update_node`, at v0.8.0 and 4cc3da8). The heartbeat
timeout ("Not responding") and spurd's own deregistration ("agent shutdown", #784)
evict the same way but do send SIGKILL cancels. The verdict is the controller's as
ever; the reason says why the run is there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec
import pytest

from spurctl.decide import classify as classify_module
from spurctl.model import Action, Job, JobState, Kind, Node, NodeState
from tests.unit.test_classify import NODES, T0, WM, held, inv, invs, job, node, view

CAUSE = "an admin's UpdateNode(state=DOWN) evicts the node's active jobs to NODE_FAIL"


def down(reason: str) -> Node:
    return replace(node("gpu017"), state=NodeState.DOWN, state_reason=reason)


def evicted(job_id: int = 40, nodelist: str = "gpu[016-017]") -> Job:
    j = job(job_id, JobState.NODE_FAIL, nodelist, end=T0)
    return msgspec.structs.replace(j, state_reason="NodeDown")


@dataclass
class Case:
    job: Job
    gpu017: Node
    expected: tuple[Kind, Action]
    named: bool


CASES: dict[str, Case] = {
    "GATE: a run an admin's DOWN evicted names the cause and stays a reclaim": Case(
        evicted(), down("swap DIMM"), (Kind.TERMINAL_HELD, Action.RECLAIM), True
    ),
    "a DOWN with no reason is no reason Spur gives itself": Case(
        evicted(), down(""), (Kind.TERMINAL_HELD, Action.RECLAIM), True
    ),
    "a requeued job running elsewhere names the cause too": Case(
        job(40, JobState.RUNNING, "gpu020"),
        down("swap DIMM"),
        (Kind.ACTIVE_ELSEWHERE, Action.RECLAIM),
        True,
    ),
    "a heartbeat timeout's DOWN sent its cancels: no cause named": Case(
        evicted(), down("Not responding"), (Kind.TERMINAL_HELD, Action.RECLAIM), False
    ),
    "spurd's own deregistration (#784) sent its cancels: no cause named": Case(
        evicted(), down("agent shutdown"), (Kind.TERMINAL_HELD, Action.RECLAIM), False
    ),
    "a job that completed on its own was not evicted: no cause named": Case(
        job(40, JobState.COMPLETED, "gpu017", end=T0),
        down("swap DIMM"),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
        False,
    ),
    "a node that is only drained evicts nothing: no cause named": Case(
        evicted(),
        replace(node("gpu017"), state=NodeState.DRAIN, state_reason="swap DIMM"),
        (Kind.TERMINAL_HELD, Action.RECLAIM),
        False,
    ),
}


def classify(case: Case) -> classify_module.Classification:
    nodes = tuple(case.gpu017 if n == "gpu017" else node(n) for n in NODES)
    return classify_module.classify(
        view(case.job, nodes=nodes),
        invs(inv("gpu017", held(40, pids=(7,)))),
        watermark=WM,
        confirmed={},
        scope=["gpu017"],
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_an_admins_down_is_named_only_where_the_node_shows_it(case: Case) -> None:
    (finding,) = [f for f in classify(case).findings if f.job_id is not None]
    assert (finding.kind, finding.action) == case.expected
    assert (CAUSE in finding.reason) is case.named, finding.reason


def test_the_cause_quotes_the_nodes_reason_and_says_no_cancel_was_sent() -> None:
    name = "GATE: a run an admin's DOWN evicted names the cause and stays a reclaim"
    (finding,) = classify(CASES[name]).findings
    assert "gpu017 is DOWN with reason 'swap DIMM'" in finding.reason
    assert "without sending their runs any cancel" in finding.reason
