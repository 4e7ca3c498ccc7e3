"""The simulated controller's node administration over real gRPC, as spurctld does it.

docs/spur-facts.md, "Phantom charges and node administration": UpdateNode DRAIN leaves
a charged node DRAINING for ever, DOWN subtracts only active jobs' slices, IDLE
changes only the state, DrainNode answers "drained" for a phantom-only node, and
DeregisterNode(force=false) refuses a node an active job lists, else removes the record,
which the node's spurd registers afresh at its next heartbeat (zero charge, IDLE, its
own labels, a new slurmd_start_time). In the incident gpu009 carries a phantom charge
(4 GPUs, no job); gpu012 runs job 4950.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
import msgspec

from spurctl.model import JobState, NodeState
from spurctl.proto import slurm_pb2 as pb
from spurctl_sim import SimCluster, incident
from tests.cli import wait_for
from tests.e2e.test_simcluster import controller, failure


def _label(sim: SimCluster, node: str, **labels: str) -> None:
    controller(sim).UpdateNode(pb.UpdateNodeRequest(name=node, labels=labels), timeout=5)


def test_a_drain_leaves_a_phantom_charged_node_draining_for_ever(sim: SimCluster) -> None:
    stub = controller(sim)
    charge = sim.node("gpu009").alloc
    assert not charge.empty
    stub.UpdateNode(
        pb.UpdateNodeRequest(name="gpu009", state=pb.NODE_DRAIN, reason="ops: check"), timeout=5
    )
    for _ in range(3):
        sim.heartbeat()
    node = stub.GetNode(pb.GetNodeRequest(name="gpu009"), timeout=5)
    assert (node.state, node.state_reason) == (pb.NODE_DRAINING, "ops: check")
    assert sim.node("gpu009").alloc == charge


def test_draining_turns_drain_only_when_a_jobs_deallocation_empties_the_node(
    sim: SimCluster,
) -> None:
    stub = controller(sim)
    stub.UpdateNode(pb.UpdateNodeRequest(name="gpu021", state=pb.NODE_DRAIN), timeout=5)
    assert sim.node("gpu021").state is NodeState.DRAINING  # job 4960 runs there
    sim.state.cancel_job(4960)
    assert sim.node("gpu021").state is NodeState.DRAIN


def test_drain_node_answers_drained_for_a_phantom_only_node_and_keeps_the_charge(
    sim: SimCluster,
) -> None:
    answer = controller(sim).DrainNode(pb.DrainNodeRequest(name="gpu009", reason="x"), timeout=5)
    assert (answer.actual_state, answer.running_jobs) == ("drained", 0)
    assert sim.node("gpu009").state is NodeState.DRAIN
    assert not sim.node("gpu009").alloc.empty


def test_down_subtracts_only_active_jobs_slices_and_idle_changes_only_the_state(
    sim: SimCluster,
) -> None:
    stub = controller(sim)
    phantom = sim.node("gpu009").alloc
    job = sim.job(4960)
    assert job is not None
    sim.set_job(msgspec.structs.replace(job, job_id=5120, nodelist="gpu009"))
    assert sim.node("gpu009").alloc != phantom  # the job's share on top of the phantom
    stub.UpdateNode(pb.UpdateNodeRequest(name="gpu009", state=pb.NODE_DOWN), timeout=5)
    assert sim.job(5120).state is JobState.NODE_FAIL  # type: ignore[union-attr]
    assert sim.node("gpu009").alloc == phantom
    stub.UpdateNode(pb.UpdateNodeRequest(name="gpu009", state=pb.NODE_IDLE), timeout=5)
    assert sim.node("gpu009").state is not NodeState.DOWN
    assert sim.node("gpu009").alloc == phantom


def test_deregister_node_refuses_a_node_an_active_job_lists(sim: SimCluster) -> None:
    error = failure(
        lambda: controller(sim).DeregisterNode(pb.DeregisterNodeRequest(name="gpu012"), timeout=5)
    )
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == "node 'gpu012' has running jobs; use --force to evict them"
    assert sim.node("gpu012").state is not NodeState.DOWN
    assert sim.job(4950).state is JobState.RUNNING  # type: ignore[union-attr]


def test_a_removed_node_registers_afresh_at_its_agents_next_heartbeat(sim: SimCluster) -> None:
    stub = controller(sim)
    sim.state.agent_labels["gpu009"] = {"rack": "r09"}
    _label(sim, "gpu009", rack="r09", owner="ml-infra")
    stub.UpdateNode(
        pb.UpdateNodeRequest(name="gpu009", state=pb.NODE_DRAIN, reason="ops: dimm"), timeout=5
    )
    before = sim.node("gpu009")
    answer = stub.DeregisterNode(
        pb.DeregisterNodeRequest(name="gpu009", reason="spurctl repair"), timeout=5
    )
    assert answer.evicted_jobs_count == 0
    assert sim.state.deregistrations == [("gpu009", False, "spurctl repair")]
    gone = failure(lambda: stub.GetNode(pb.GetNodeRequest(name="gpu009"), timeout=5))
    assert gone.code() is grpc.StatusCode.NOT_FOUND
    listed = {n.name for n in stub.GetNodes(pb.GetNodesRequest(), timeout=5).nodes}
    assert "gpu009" not in listed and "gpu008" in listed
    assert sim.inventory("gpu009").node == "gpu009"  # the agent still runs there

    sim.heartbeat()
    after = sim.node("gpu009")
    assert after.alloc.empty and after.state is NodeState.IDLE and after.state_reason == ""
    assert after.labels == {"rack": "r09"}  # the admin's label is gone
    assert after.agent_start_time is not None and after.agent_start_time != before.agent_start_time
    assert after.total == before.total and after.partitions == before.partitions


def test_an_agent_whose_registration_is_refused_never_comes_back(sim: SimCluster) -> None:
    sim.state.refuse_registration("gpu009", "join token expired")
    controller(sim).DeregisterNode(pb.DeregisterNodeRequest(name="gpu009"), timeout=5)
    for _ in range(3):
        sim.heartbeat()
    assert "gpu009" not in sim.state.nodes


def test_a_stopped_agent_does_not_register_again(sim: SimCluster) -> None:
    sim.stop_agent("gpu009")
    controller(sim).DeregisterNode(pb.DeregisterNodeRequest(name="gpu009"), timeout=5)
    sim.heartbeat()
    assert "gpu009" not in sim.state.nodes


def test_the_background_heartbeat_brings_a_removed_node_back() -> None:
    with SimCluster(incident(), heartbeat_interval=0.05) as sim:
        controller(sim).DeregisterNode(pb.DeregisterNodeRequest(name="gpu009"), timeout=5)
        wait_for(lambda: "gpu009" in sim.state.nodes, timeout=10)
        assert sim.node("gpu009").alloc.empty


def test_update_node_on_an_unknown_node_is_internal_as_spurctld_answers(sim: SimCluster) -> None:
    call: Callable[[], object] = lambda: controller(sim).UpdateNode(  # noqa: E731
        pb.UpdateNodeRequest(name="gpu999", state=pb.NODE_IDLE), timeout=5
    )
    error = failure(call)
    assert (error.code(), error.details()) == (grpc.StatusCode.INTERNAL, "node gpu999 not found")


# -- a fresh registration: partitions from labels, a waiting job placed at once ----------


def test_a_fresh_registration_takes_its_partitions_from_its_labels_and_a_waiting_job_lands() -> (
    None
):
    """spurctld's NodeRegister assigns partitions by hostlist or label selector, else the
    default; its scheduler places a pending job that fits at its next tick (here at once)."""
    from tests.e2e.restore_window import WAITING, window

    with SimCluster(window()) as sim:
        _label(sim, "gpu009", pool="reserved")
        assert sim.node("gpu009").partitions == ("reserved",)
        assert sim.job(WAITING).state is JobState.PENDING  # nothing waits for `reserved`
        controller(sim).DeregisterNode(pb.DeregisterNodeRequest(name="gpu009"), timeout=5)
        sim.heartbeat()
        node = sim.node("gpu009")
        assert (node.state, node.partitions) == (NodeState.MIXED, ("batch",))
        assert "pool" not in node.labels
        job = sim.job(WAITING)
        assert (job.state, job.nodelist) == (JobState.RUNNING, "gpu009")
        assert node.alloc.cpus == 32 and WAITING in {h.job_id for h in sim.holdings("gpu009")}
        assert sim.node("gpu010").partitions == ("gpu",)  # listed by name: kept


def test_labels_put_back_put_the_node_back_in_its_partition() -> None:
    from tests.e2e.restore_window import window

    with SimCluster(window()) as sim:
        controller(sim).DeregisterNode(pb.DeregisterNodeRequest(name="gpu009"), timeout=5)
        sim.heartbeat()
        assert sim.node("gpu009").partitions == ("batch",)
        _label(sim, "gpu009", pool="reserved")
        assert sim.node("gpu009").partitions == ("reserved",)


def test_a_refused_update_node_label_change_applies_its_state_and_not_its_labels(
    sim: SimCluster,
) -> None:
    sim.state.update_failure["labels"] = "raft propose failed"
    call = pb.UpdateNodeRequest(name="gpu010", state=pb.NODE_DRAIN, reason="x", labels={"a": "b"})
    error = failure(lambda: controller(sim).UpdateNode(call, timeout=5))
    assert (error.code(), error.details()) == (grpc.StatusCode.INTERNAL, "raft propose failed")
    node = sim.node("gpu010")
    assert node.state_reason == "x" and "a" not in node.labels


def test_a_graceful_spurd_restart_before_784_registers_afresh_the_same_way() -> None:
    """Up to 0.11 a graceful stop removes the record (remove_node(force=true)) and the new
    spurd registers a fresh one: its partitions from its labels, a waiting job placed."""
    from spurctl.model import utcnow
    from spurctl_sim.releases import V0_8_0
    from tests.e2e.restore_window import WAITING, window

    with SimCluster(window(), spur_release=V0_8_0) as sim:
        _label(sim, "gpu009", pool="reserved")
        sim.restart_agent("gpu009", utcnow(), graceful=True)
        assert sim.node("gpu009").partitions == ("batch",)
        job = sim.job(WAITING)
        assert job is not None and (job.state, job.nodelist) == (JobState.RUNNING, "gpu009")
