"""The simulated controller answers as each Spur release does, over real gRPC.

v0.8.0's GetJobsRequest has fields 1-6 and its JobState ends at 11: the controller
skips `nodes` (7) and drops REQUEUED (12), so a node filter filters nothing and
`states=[REQUEUED]` alone answers every job; JobMetrics.by_state has no entry for 12.
Its heartbeat reclaims only held terminal jobs (#580); #623 (0.9.0) reclaims all
three kinds.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import empty_pb2

from spurctl.model import Holding
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl_sim import SimCluster, incident
from spurctl_sim.releases import (
    MAIN_4CC3DA8,
    NEWEST,
    SPUR_RELEASES,
    V0_8_0,
    V0_9_TO_0_11,
    SpurRelease,
)


@pytest.fixture(params=list(SPUR_RELEASES.values()), ids=list(SPUR_RELEASES))
def release(request: pytest.FixtureRequest) -> SpurRelease:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def stub(release: SpurRelease) -> Iterator[rpc.SlurmControllerStub]:
    with (
        SimCluster(incident(), agents=False, spur_release=release) as sim,
        grpc.insecure_channel(sim.controller_address.removeprefix("http://")) as channel,
    ):
        yield rpc.SlurmControllerStub(channel)


def ids(answer: pb.GetJobsResponse) -> set[int]:
    return {j.job_id for j in answer.jobs}


def test_each_release_answers_the_node_filter_as_its_proto_lets_it(
    release: SpurRelease, stub: rpc.SlurmControllerStub
) -> None:
    running = ids(stub.GetJobs(pb.GetJobsRequest(states=[pb.JOB_RUNNING]), timeout=10))
    on_gpu015 = ids(
        stub.GetJobs(pb.GetJobsRequest(states=[pb.JOB_RUNNING], nodes=["gpu015"]), timeout=10)
    )
    if release.nodes_filter:
        assert on_gpu015 == {4711}
    else:  # the unknown field is skipped: every running job
        assert on_gpu015 == running and len(running) > 10


def test_requeued_alone_answers_every_job_where_the_state_is_unknown(
    release: SpurRelease, stub: rpc.SlurmControllerStub
) -> None:
    every = ids(stub.GetJobs(pb.GetJobsRequest(), timeout=10))
    requeued = ids(stub.GetJobs(pb.GetJobsRequest(states=[pb.JOB_REQUEUED]), timeout=10))
    with_preempted = ids(
        stub.GetJobs(pb.GetJobsRequest(states=[pb.JOB_PREEMPTED, pb.JOB_REQUEUED]), timeout=10)
    )
    preempted = ids(stub.GetJobs(pb.GetJobsRequest(states=[pb.JOB_PREEMPTED]), timeout=10))
    assert with_preempted >= preempted  # beside a known state, REQUEUED is harmless
    if release.requeued_state:
        assert requeued < every
    else:
        assert requeued == every and with_preempted == preempted
    counted = {c.state for c in stub.GetJobMetrics(empty_pb2.Empty(), timeout=10).by_state}
    assert (pb.JOB_REQUEUED in counted) is release.requeued_state
    assert pb.JOB_OUT_OF_MEMORY in counted


def test_ping_answers_the_release_version(
    release: SpurRelease, stub: rpc.SlurmControllerStub
) -> None:
    expected = {V0_8_0: "0.8.0", MAIN_4CC3DA8: "0.8.0", V0_9_TO_0_11: "0.11.0", NEWEST: "0.12.0"}
    assert stub.Ping(empty_pb2.Empty(), timeout=10).version == expected[release]


def test_v0_8_0s_heartbeat_reclaims_only_terminal_jobs_it_still_tracks() -> None:
    with SimCluster(incident(), heartbeat_reclaim=True, spur_release=V0_8_0) as sim:
        decisions = sim.heartbeat()
        reclaimed = {(d.node, d.job_id) for d in sim.heartbeat_reclaims}
        assert reclaimed == {("gpu012", 4702)}  # #580: the terminal one only
        # Arms 2 (active elsewhere) and 6 (aged out below the watermark) came with #623.
        assert {d.arm for d in decisions if not d.reclaim} >= {2, 6}
        assert 4388 in {h.job_id for h in sim.holdings("gpu013")}
        # Once #583 drops the terminal job from memory, v0.8.0 never reclaims it.
        sim.forget_job(4702)
        sim.hold("gpu012", Holding(job_id=4702, pids=(1,)))
        assert [d.arm for d in sim.heartbeat() if d.job_id == 4702] == [6]
        assert 4702 in {h.job_id for h in sim.holdings("gpu012")}
