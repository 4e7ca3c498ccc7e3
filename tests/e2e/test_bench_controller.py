"""bench/preencoded_controller.py answers like the simulated spurctld, from bytes encoded once.

The benchmark's figures are only worth what its controller is: these tests
start it on loopback (a small scenario, a small cap) and check that its
filtered GetJobs answers hold exactly the jobs the simulated cluster selects,
that the capped port refuses an over-cap answer as tonic does while the
uncapped one answers it, and that its records are real-sized and decode with
spurctl's proto.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2

from spurctl.model import JobState
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl.sources.wire import job_from_pb
from spurctl_sim import large
from spurctl_sim.state import ClusterState
from tests.cli import WORKTREE, lines_of, running

NODES, JOBS, HELD, SEED = 80, 800, 400, 7
CAP = 60_000  # small enough that an unfiltered answer (~390 kB) is refused
ACTIVE = [JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED, JobState.PENDING]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("bench-controller")
    argv = [
        sys.executable, str(WORKTREE / "bench" / "preencoded_controller.py"), "--dir", str(workdir),
        "--nodes", str(NODES), "--jobs", str(JOBS), "--held", str(HELD), "--seed", str(SEED),
        "--cap", str(CAP),
    ]  # fmt: skip
    with running(argv, home=workdir / "home", stdin=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        line = lines_of(proc.stdout).get(timeout=60)
        assert line.startswith("ready "), line
        yield json.loads(line.removeprefix("ready "))
        assert proc.stdin is not None
        proc.stdin.close()  # it stops when its stdin closes
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() == 0


@pytest.fixture(scope="module")
def truth() -> ClusterState:
    return ClusterState(large(NODES, JOBS, HELD, SEED))


def stub(url: str) -> rpc.SlurmControllerStub:
    channel = grpc.insecure_channel(
        url.removeprefix("http://"), options=[("grpc.max_receive_message_length", -1)]
    )
    return rpc.SlurmControllerStub(channel)


def answer_bytes(record: bytes) -> int:
    """What one record adds to a GetJobsResponse: its key, its length's varint, itself."""
    return 1 + (len(record).bit_length() + 6) // 7 + len(record)


def ids(answer: pb.GetJobsResponse) -> list[int]:
    return sorted(j.job_id for j in answer.jobs)


def test_filtered_answers_hold_the_jobs_the_simulated_cluster_selects(
    bench: dict[str, Any], truth: ClusterState
) -> None:
    names = sorted(truth.nodes)
    held = sorted(truth.jobs)[::37]
    requests = [
        pb.GetJobsRequest(states=ACTIVE),  # type: ignore[arg-type]
        pb.GetJobsRequest(states=[JobState.COMPLETED]),  # type: ignore[list-item]
        pb.GetJobsRequest(job_ids=[*held, 1, 10**7]),  # aged-out and never-issued ids too
        pb.GetJobsRequest(nodes=names[:5]),
        pb.GetJobsRequest(nodes=[names[9], "not-a-node"], states=[JobState.RUNNING]),  # type: ignore[list-item]
        pb.GetJobsRequest(job_ids=held, nodes=names[::2]),
        pb.GetJobsRequest(job_ids=held, states=ACTIVE),  # type: ignore[arg-type]
    ]
    refused = 0
    for port in ("uncapped", "capped"):
        controller = stub(bench[port])
        for req in requests:
            selected = truth.select_jobs(req)
            expected = sorted(j.job_id for j in selected)
            assert expected, req  # a request that selects nothing proves little
            size = sum(answer_bytes(truth.encoded(j)) for j in selected)
            for _ in range(2):  # asked again, the cached answer is the same
                if port == "capped" and size > CAP:
                    with pytest.raises(grpc.RpcError) as over:
                        controller.GetJobs(req, timeout=20)
                    assert over.value.code() is grpc.StatusCode.OUT_OF_RANGE, req
                    refused += 1
                else:
                    assert ids(controller.GetJobs(req, timeout=20)) == expected, (port, req)
    assert 0 < refused < 2 * len(requests)
    metrics = stub(bench["capped"]).GetJobMetrics(empty_pb2.Empty(), timeout=20)
    total, counts = truth.metrics()
    assert metrics.total == total == JOBS
    assert {JobState(c.state): c.count for c in metrics.by_state if c.count} == dict(counts)


def test_the_capped_port_refuses_an_over_cap_answer_as_tonic_does_and_the_uncapped_answers(
    bench: dict[str, Any], truth: ClusterState
) -> None:
    assert bench["cap"] == CAP and bench["jobs_answer_bytes"] > CAP
    with pytest.raises(grpc.RpcError) as refused:
        stub(bench["capped"]).GetJobs(pb.GetJobsRequest(), timeout=20)
    assert refused.value.code() is grpc.StatusCode.OUT_OF_RANGE
    assert refused.value.details() == (
        f"Error, encoded message length too large: found {bench['jobs_answer_bytes']} bytes, "
        f"the limit is: {CAP} bytes"
    )
    answer = stub(bench["uncapped"]).GetJobs(pb.GetJobsRequest(), timeout=20)
    assert ids(answer) == sorted(truth.jobs) and answer.ByteSize() == bench["jobs_answer_bytes"]
    # Under the cap, the capped port answers too.
    one_node = pb.GetJobsRequest(nodes=[sorted(truth.nodes)[0]])
    assert ids(stub(bench["capped"]).GetJobs(one_node, timeout=20)) == ids(
        stub(bench["uncapped"]).GetJobs(one_node, timeout=20)
    )


def test_records_decode_with_spurctls_proto_and_are_real_sized(
    bench: dict[str, Any], truth: ClusterState
) -> None:
    answer = stub(bench["uncapped"]).GetJobs(pb.GetJobsRequest(), timeout=20)
    sizes = [j.ByteSize() for j in answer.jobs]  # unknown fields included
    assert min(sizes) >= 400 and max(sizes) <= 700, (min(sizes), max(sizes))
    assert 400 <= bench["record_bytes_min"] <= bench["record_bytes_max"] <= 700
    for msg in answer.jobs:
        assert job_from_pb(msg) == truth.jobs[msg.job_id]
    controller = stub(bench["capped"])
    some = sorted(truth.jobs)[5]
    assert (
        job_from_pb(controller.GetJob(pb.GetJobRequest(job_id=some), timeout=20))
        == (truth.jobs[some])
    )
    with pytest.raises(grpc.RpcError) as missing:
        controller.GetJob(pb.GetJobRequest(job_id=1), timeout=20)
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    nodes = controller.GetNodes(pb.GetNodesRequest(), timeout=20)
    assert sorted(n.name for n in nodes.nodes) == sorted(truth.nodes)
    assert controller.Ping(empty_pb2.Empty(), timeout=20).version == truth.version


def test_half_the_nodes_have_an_inventory(bench: dict[str, Any], truth: ClusterState) -> None:
    lines = Path(bench["inventory"]).read_text().splitlines()
    assert len(lines) == bench["inventoried_nodes"] == NODES // 2
    held = sum(len(json.loads(line)["held"]) for line in lines)
    assert held == bench["held"] and 0 < held < bench["held_all"]


def test_two_hundred_thousand_real_sized_jobs_encode_to_about_a_hundred_megabytes() -> None:
    """What the cap was set by: large()'s whole GetJobs is ~99 MB, three times the cap."""
    state = ClusterState(large())
    size = sum(answer_bytes(state.encoded(job)) for job in state.jobs.values())
    assert len(state.jobs) == 200_000
    assert 80e6 <= size <= 140e6, size
    assert size > 32 * 1024 * 1024
