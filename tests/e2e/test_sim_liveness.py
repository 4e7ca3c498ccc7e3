"""The simulated controller's heartbeat timeout over real gRPC, as spurctld does it.

docs/spur-facts.md, "A drained node whose heartbeat is lost": the timeout turns a
DRAINING node (a drain on a charged node) DOWN with the drain's reason and its lock,
which the heartbeat's return does not lift; an up node goes DOWN `Not responding` and
comes back by itself; a DRAIN node stays DRAIN; an UpdateNode to IDLE lifts a locked
DOWN. Since #784 a graceful spurd stop marks a DRAINING hold DOWN the same way. In
the incident gpu009 carries a phantom charge; gpu012 runs job 4950.
"""

from __future__ import annotations

from spurctl.model import JobState, NodeState, utcnow
from spurctl.proto import slurm_pb2 as pb
from spurctl_sim import SimCluster, incident
from spurctl_sim.releases import NEWEST, V0_8_0
from tests.e2e.test_simcluster import controller


def _state(sim: SimCluster, node: str) -> tuple[int, str]:
    got = controller(sim).GetNode(pb.GetNodeRequest(name=node), timeout=5)
    return got.state, got.state_reason


def test_a_draining_node_whose_heartbeat_is_lost_goes_down_locked_with_its_reason(
    sim: SimCluster,
) -> None:
    sim.admin_update("gpu009", NodeState.DRAIN, "ops: check")
    assert _state(sim, "gpu009") == (pb.NODE_DRAINING, "ops: check")  # charged
    sim.lose_heartbeat("gpu009")
    assert _state(sim, "gpu009") == (pb.NODE_DOWN, "ops: check")
    assert sim.inventory("gpu009").agent is None
    sim.start_agent("gpu009")
    sim.heartbeat()
    assert _state(sim, "gpu009") == (pb.NODE_DOWN, "ops: check")  # locked: never by itself
    controller(sim).UpdateNode(pb.UpdateNodeRequest(name="gpu009", state=pb.NODE_IDLE), timeout=5)
    assert _state(sim, "gpu009")[1] == ""
    assert _state(sim, "gpu009")[0] != pb.NODE_DOWN


def test_an_up_node_goes_down_not_responding_evicting_its_jobs_and_recovers_by_itself(
    sim: SimCluster,
) -> None:
    assert sim.lose_heartbeat("gpu012") == [4950]
    assert _state(sim, "gpu012") == (pb.NODE_DOWN, "Not responding")
    job = sim.job(4950)
    assert job is not None and job.state is JobState.NODE_FAIL
    sim.start_agent("gpu012")
    assert _state(sim, "gpu012")[0] != pb.NODE_DOWN
    assert sim.inventory("gpu012").agent is not None


def test_a_drained_node_stays_drain(sim: SimCluster) -> None:
    idle = next(n for n in sorted(sim.state.nodes) if sim.node(n).alloc.empty)
    sim.admin_update(idle, NodeState.DRAIN, "ops: idle drain")
    assert _state(sim, idle) == (pb.NODE_DRAIN, "ops: idle drain")
    sim.lose_heartbeat(idle)
    assert _state(sim, idle) == (pb.NODE_DRAIN, "ops: idle drain")


def test_after_784_a_graceful_spurd_stop_turns_a_draining_hold_down_locked() -> None:
    with SimCluster(incident(), spur_release=NEWEST) as sim:
        sim.admin_update("gpu009", NodeState.DRAIN, "ops: check")
        assert _state(sim, "gpu009") == (pb.NODE_DRAINING, "ops: check")
        sim.restart_agent("gpu009", utcnow(), graceful=True)
        assert _state(sim, "gpu009") == (pb.NODE_DOWN, "ops: check")
        assert sim.node("gpu009").reason_uid == 1000  # the hold's, kept
        sim.heartbeat()
        assert _state(sim, "gpu009") == (pb.NODE_DOWN, "ops: check")


def test_v0_8_0_replaces_a_holds_reason_with_not_responding_and_keeps_its_lock() -> None:
    """Release v0.8.0 (cluster.rs `apply_health_actions`, l. 2311-2340, before #624): the
    timeout stamps `Not responding` on a hold too, and the lock stays: the heartbeat's
    return and the node's registration do not bring it back; an UpdateNode IDLE does."""
    with SimCluster(incident(), spur_release=V0_8_0) as sim:
        sim.admin_update("gpu009", NodeState.DRAIN, "ops: check")
        sim.lose_heartbeat("gpu009")
        assert _state(sim, "gpu009") == (pb.NODE_DOWN, "Not responding")
        sim.start_agent("gpu009")
        sim.heartbeat()
        assert _state(sim, "gpu009") == (pb.NODE_DOWN, "Not responding")  # locked
        assert sim.inventory("gpu009").agent is not None
        controller(sim).UpdateNode(
            pb.UpdateNodeRequest(name="gpu009", state=pb.NODE_IDLE), timeout=5
        )
        assert _state(sim, "gpu009")[0] != pb.NODE_DOWN
        # An up node's DOWN is unlocked there too: it recovers by itself.
        sim.lose_heartbeat("gpu012")
        sim.start_agent("gpu012")
        assert _state(sim, "gpu012")[0] != pb.NODE_DOWN
