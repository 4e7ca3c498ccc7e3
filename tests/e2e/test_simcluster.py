"""The simulated Spur cluster, exercised over real gRPC on loopback with the generated stubs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import msgspec
import pytest
from google.protobuf import empty_pb2

from spurctl.model import Holding, JobState, NodeState
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl.sources import credentials as auth
from spurctl.sources.inventory_document import parse_inventory_text
from spurctl_sim import (
    AgentCancel,
    HeartbeatDecision,
    SimCluster,
    incident,
    large,
    post_wipe,
)
from tests.cli import clean_env, lines_of, running

KEY = "simulated-cluster-secret-0123456789abcdef"
OTHER_KEY = "another-clusters-secret-0123456789abcdef"


def controller(sim: SimCluster, **options: int) -> rpc.SlurmControllerStub:
    channel = grpc.insecure_channel(
        sim.controller_address.removeprefix("http://"), options=list(options.items())
    )
    return rpc.SlurmControllerStub(channel)


def agent(sim: SimCluster, node: str) -> rpc.SlurmAgentStub:
    return rpc.SlurmAgentStub(grpc.insecure_channel(sim.agent_map()[node]))


def bearer(
    sub: str, *, key: str = KEY, admin: bool = False, now: float | None = None
) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {auth.mint(key, sub, admin=admin, now=now)}"),)


def failure(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


@pytest.fixture
def secured() -> Iterator[SimCluster]:
    with SimCluster(incident(), auth="required", jwt_key=KEY) as s:
        yield s


# -- scenarios and their JSON ---------------------------------------------------------


# -- controller: scoping, NOT_FOUND, redaction ------------------------------------------


def test_getjobs_with_a_credential_is_scoped_to_its_subject_but_metrics_count_everything(
    secured: SimCluster,
) -> None:
    stub = controller(secured)
    total = stub.GetJobMetrics(empty_pb2.Empty(), metadata=bearer("alice")).total
    assert total == 22

    alice = stub.GetJobs(pb.GetJobsRequest(user="bob"), metadata=bearer("alice"))
    assert {j.user for j in alice.jobs} == {"alice"}
    assert {j.job_id for j in alice.jobs} == {4711, 4950, 5105, 5113}

    # Admins are scoped too: an admin whose name owns no job sees none.
    ops = stub.GetJobs(pb.GetJobsRequest(), metadata=bearer("ops", admin=True))
    assert len(ops.jobs) == 0 < total


def test_getjobs_without_a_credential_honours_every_filter(sim: SimCluster) -> None:
    stub = controller(sim)
    assert len(stub.GetJobs(pb.GetJobsRequest()).jobs) == 22
    running = stub.GetJobs(pb.GetJobsRequest(states=[pb.JOB_RUNNING, pb.JOB_SUSPENDED]))
    assert {j.job_id for j in running.jobs} == {
        4690, 4711, 4712, 4715, 4716, 4719, 4720, 4950, 4960, 5001, 5040, 5077, 5119
    }  # fmt: skip
    on_nodes = stub.GetJobs(pb.GetJobsRequest(nodes=["gpu018", "gpu002"]))
    assert {j.job_id for j in on_nodes.jobs} == {4690, 4715, 4716}
    picked = stub.GetJobs(pb.GetJobsRequest(job_ids=[4711, 4388, 5187]))
    assert [j.job_id for j in picked.jobs] == [4711]
    assert {j.job_id for j in stub.GetJobs(pb.GetJobsRequest(partition="debug")).jobs} == {5077}
    assert {j.job_id for j in stub.GetJobs(pb.GetJobsRequest(name="rlhf-ppo,sd-eval")).jobs} == {
        4719,
        5118,
    }


def test_getjob_answers_not_found_only_for_untracked_ids(sim: SimCluster) -> None:
    stub = controller(sim)
    for untracked in (4388, 5187, 99):
        error = failure(lambda i=untracked: stub.GetJob(pb.GetJobRequest(job_id=i)))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        assert error.details() == f"job {untracked} not found"
    assert stub.GetJob(pb.GetJobRequest(job_id=4702)).state == pb.JOB_COMPLETED


def test_getjob_redacts_the_nodelist_for_a_non_owner_and_shows_owner_and_admin_whole(
    secured: SimCluster,
) -> None:
    stub = controller(secured)
    request = pb.GetJobRequest(job_id=4711)
    as_bob = stub.GetJob(request, metadata=bearer("bob"))
    assert as_bob.state == pb.JOB_RUNNING and as_bob.user == "alice"
    assert as_bob.nodelist == "" and not as_bob.HasField("resources")
    assert stub.GetJob(request, metadata=bearer("alice")).nodelist == "gpu015"
    whole = stub.GetJob(request, metadata=bearer("ops", admin=True))
    assert whole.nodelist == "gpu015" and whole.resources.cpus == 128


def test_getnodes_filters_by_hostlist_state_and_partition(sim: SimCluster) -> None:
    stub = controller(sim)
    picked = stub.GetNodes(pb.GetNodesRequest(nodelist="gpu[003-005,009]"))
    assert [n.name for n in picked.nodes] == ["gpu003", "gpu004", "gpu005", "gpu009"]
    down = stub.GetNodes(pb.GetNodesRequest(states=[pb.NODE_DOWN]))
    assert [n.name for n in down.nodes] == ["gpu003", "gpu004", "gpu005"]
    assert len(stub.GetNodes(pb.GetNodesRequest(partition="debug")).nodes) == 4
    phantom = stub.GetNode(pb.GetNodeRequest(name="gpu009"))
    assert phantom.alloc_resources.cpus == 64 and phantom.state == pb.NODE_MIXED
    error = failure(lambda: stub.GetNode(pb.GetNodeRequest(name="gpu017.cluster.local")))
    assert error.code() is grpc.StatusCode.NOT_FOUND
    error = failure(lambda: stub.GetNodes(pb.GetNodesRequest(nodelist="gpu[003-")))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_ping_reports_the_scenario_version_and_hostname(sim: SimCluster) -> None:
    pong = controller(sim).Ping(empty_pb2.Empty())
    assert (pong.hostname, pong.version) == ("spurctld-1", "0.8.0")
    assert abs(pong.server_time.ToSeconds() - time.time()) < 60


# -- controller: authentication ----------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "detail"),
    [
        ((), "authentication required"),
        (bearer("alice", now=time.time() - 900), "invalid credential: token expired"),
        (bearer("alice", key=OTHER_KEY), "invalid credential: bad signature"),
        ((("authorization", "Bearer not.a.jwt"),), "invalid credential: malformed token"),
        ((("authorization", "Basic YWxpY2U6eA=="),), "malformed authorization header"),
    ],
)
def test_required_auth_rejects_missing_expired_and_forged_credentials_distinctly(
    secured: SimCluster, metadata: tuple[tuple[str, str], ...], detail: str
) -> None:
    error = failure(lambda: controller(secured).GetJobs(pb.GetJobsRequest(), metadata=metadata))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error.details().startswith(detail)
    assert KEY not in error.details()
    assert secured.refusals[-1].code is grpc.StatusCode.UNAUTHENTICATED


def test_permissive_auth_accepts_no_credential_but_rejects_a_bad_one() -> None:
    with SimCluster(incident(), auth="permissive", jwt_key=KEY) as s:
        stub = controller(s)
        assert len(stub.GetJobs(pb.GetJobsRequest()).jobs) == 22
        error = failure(
            lambda: stub.GetJobs(pb.GetJobsRequest(), metadata=bearer("alice", key=OTHER_KEY))
        )
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED


def test_disabled_auth_ignores_credentials_and_answers_unscoped() -> None:
    with SimCluster(incident(), auth="disabled") as s:
        forged = bearer("alice", key=OTHER_KEY)
        assert len(controller(s).GetJobs(pb.GetJobsRequest(), metadata=forged).jobs) == 22


# -- controller: writes, follower, latency -------------------------------------------------


def test_a_follower_refuses_writes_with_the_leader_hint_and_serves_reads() -> None:
    leader = "http://ctl1.cluster.local:6817"
    with SimCluster(incident(), follower_of=leader) as s:
        stub = controller(s)
        assert len(stub.GetJobs(pb.GetJobsRequest()).jobs) == 22
        writes = [
            lambda: stub.CancelJob(pb.CancelJobRequest(job_id=4711)),
            lambda: stub.UpdateNode(pb.UpdateNodeRequest(name="gpu003", state=pb.NODE_IDLE)),
            lambda: stub.DrainNode(pb.DrainNodeRequest(name="gpu003", reason="x")),
        ]
        for write in writes:
            error = failure(write)
            assert error.code() is grpc.StatusCode.UNAVAILABLE
            assert error.details() == "not the Raft leader"
            assert ("x-spur-leader", leader) in tuple(error.trailing_metadata())
        assert s.controller_cancels == []
        assert s.job(4711).state is JobState.RUNNING  # type: ignore[union-attr]


def test_controller_cancel_kills_the_job_everywhere_it_is_allocated_but_not_stale_copies(
    sim: SimCluster,
) -> None:
    controller(sim).CancelJob(pb.CancelJobRequest(job_id=4711, signal=0))
    assert sim.job(4711).state is JobState.CANCELLED  # type: ignore[union-attr]
    assert [h.job_id for h in sim.holdings("gpu015")] == []  # the legitimate run is gone
    assert [h.job_id for h in sim.holdings("gpu003")] == [4711]  # the stale one is not
    assert sim.node("gpu015").alloc.empty and sim.node("gpu015").state is NodeState.IDLE
    assert [(c.job_id, c.user) for c in sim.controller_cancels] == [(4711, "")]
    assert sim.cancels == []  # the controller's own agent messages are not spurctl's


def test_controller_cancel_refuses_a_non_owner_and_a_finished_job(secured: SimCluster) -> None:
    stub = controller(secured)
    error = failure(
        lambda: stub.CancelJob(pb.CancelJobRequest(job_id=4711), metadata=bearer("bob"))
    )
    assert error.code() is grpc.StatusCode.PERMISSION_DENIED
    error = failure(
        lambda: stub.CancelJob(pb.CancelJobRequest(job_id=4702), metadata=bearer("henry"))
    )
    assert error.code() is grpc.StatusCode.INTERNAL and "already Completed" in error.details()
    assert secured.controller_cancels == []


def test_update_and_drain_node_change_what_getnode_reports(secured: SimCluster) -> None:
    stub = controller(secured)
    admin = bearer("ops", admin=True)
    error = failure(
        lambda: stub.UpdateNode(
            pb.UpdateNodeRequest(name="gpu003", state=pb.NODE_IDLE), metadata=bearer("bob")
        )
    )
    assert error.code() is grpc.StatusCode.PERMISSION_DENIED
    stub.UpdateNode(pb.UpdateNodeRequest(name="gpu003", state=pb.NODE_IDLE), metadata=admin)
    assert stub.GetNode(pb.GetNodeRequest(name="gpu003"), metadata=admin).state == pb.NODE_IDLE
    drained = stub.DrainNode(pb.DrainNodeRequest(name="gpu015", reason="xgmi"), metadata=admin)
    assert (drained.actual_state, drained.running_jobs) == ("draining", 1)
    node = stub.GetNode(pb.GetNodeRequest(name="gpu015"), metadata=admin)
    assert (node.state, node.state_reason) == (pb.NODE_DRAINING, "xgmi")


def test_controller_latency_makes_a_short_deadline_expire() -> None:
    with SimCluster(incident(), agents=False, controller_latency=0.5) as s:
        error = failure(lambda: controller(s).Ping(empty_pb2.Empty(), timeout=0.1))
        assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert controller(s).Ping(empty_pb2.Empty(), timeout=5).version == "0.8.0"


# -- agents ----------------------------------------------------------------------------------


def test_agent_cancel_demands_the_controller_credential_when_auth_is_required(
    secured: SimCluster,
) -> None:
    stub = agent(secured, "gpu003")
    request = pb.AgentCancelJobRequest(job_id=4711, signal=0)
    refusals = [
        ((), grpc.StatusCode.UNAUTHENTICATED, "authentication required"),
        (bearer("spurctld", key=OTHER_KEY), grpc.StatusCode.UNAUTHENTICATED, "bad signature"),
        (bearer("alice"), grpc.StatusCode.PERMISSION_DENIED, "only by the cluster controller"),
    ]
    for metadata, code, detail in refusals:
        error = failure(lambda m=metadata: stub.CancelJob(request, metadata=m))
        assert error.code() is code and detail in error.details()
        assert [h.job_id for h in secured.holdings("gpu003")] == [4711]
    assert secured.cancels == []
    assert [(r.endpoint, r.method) for r in secured.refusals] == [("gpu003", "CancelJob")] * 3

    stub.CancelJob(request, metadata=bearer(auth.CONTROLLER_SUBJECT))
    assert secured.holdings("gpu003") == ()
    assert secured.inventory("gpu003").held == ()
    assert secured.cancels == [("gpu003", 4711, 0, "spurctld")]
    # Only that node: the requeued run of 4711 on gpu015 is untouched.
    assert [h.job_id for h in secured.holdings("gpu015")] == [4711]


def test_agents_can_demand_the_credential_while_the_controller_answers_anonymous_reads() -> None:
    with SimCluster(incident(), auth="permissive", agent_auth="required", jwt_key=KEY) as s:
        jobs = controller(s).GetJobs(pb.GetJobsRequest()).jobs
        assert len(jobs) == len(incident().jobs)  # anonymous, so unscoped
        stub = agent(s, "gpu003")
        request = pb.AgentCancelJobRequest(job_id=4711, signal=0)
        error = failure(lambda: stub.CancelJob(request))
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert [h.job_id for h in s.holdings("gpu003")] == [4711]
        stub.CancelJob(request, metadata=bearer(auth.CONTROLLER_SUBJECT))
        assert s.holdings("gpu003") == ()


def test_agent_cancel_is_a_noop_for_an_unknown_id_and_keeps_a_live_run_on_other_signals(
    sim: SimCluster,
) -> None:
    stub = agent(sim, "gpu012")
    stub.CancelJob(pb.AgentCancelJobRequest(job_id=777, signal=0))
    stub.CancelJob(pb.AgentCancelJobRequest(job_id=4950, signal=10))  # SIGUSR1
    assert [h.job_id for h in sim.holdings("gpu012")] == [4702, 4950]
    stub.CancelJob(pb.AgentCancelJobRequest(job_id=4702, signal=0))
    assert [h.job_id for h in sim.holdings("gpu012")] == [4950]
    assert sim.cancels == [
        AgentCancel("gpu012", 777, 0, None),
        AgentCancel("gpu012", 4950, 10, None),
        AgentCancel("gpu012", 4702, 0, None),
    ]


def test_agent_reports_its_total_and_nothing_used(sim: SimCluster) -> None:
    answer = agent(sim, "gpu015").GetNodeResources(empty_pb2.Empty())
    assert answer.total.cpus == 128 and len(answer.total.gpus) == 8
    assert answer.HasField("used") and answer.used.cpus == 0 and not answer.used.devices


def test_agents_serve_concurrently_with_latency() -> None:
    scenario = large(nodes=200, jobs=2_000, held=1_000, seed=1)
    with SimCluster(scenario, agent_latency=0.05) as s:
        held = {node: s.holdings(node)[0].job_id for node in s.agent_map() if s.holdings(node)}
        started = time.perf_counter()
        calls = [
            agent(s, node).CancelJob.future(pb.AgentCancelJobRequest(job_id=job_id), timeout=30)
            for node, job_id in held.items()
        ]
        for call in calls:
            call.result()
        elapsed = time.perf_counter() - started
        print(f"\n{len(calls)} agent cancels at 50 ms each, concurrently: {elapsed:.2f} s")
        assert len(s.cancels) == len(calls) > 150
        # Served one after another they would take len(calls) * 50 ms.
        assert elapsed < len(calls) * 0.05 / 2


def test_stop_agent_closes_its_port_and_drops_it_from_the_agent_map(sim: SimCluster) -> None:
    stub = agent(sim, "gpu003")
    sim.stop_agent("gpu003")
    assert "gpu003" not in sim.agent_map()
    error = failure(lambda: stub.GetNodeResources(empty_pb2.Empty(), timeout=2))
    assert error.code() is grpc.StatusCode.UNAVAILABLE


# -- inventories and mutators ----------------------------------------------------------------


def test_inventories_report_what_agents_hold_now_under_the_name_they_report(
    sim: SimCluster, tmp_path: Path
) -> None:
    sim.release("gpu003", 4711)
    sim.hold("gpu024", Holding(job_id=5200, gpus=(0,), pids=(4242,)))
    path = sim.write_inventories(tmp_path / "inv.jsonl")
    by_node = {inv.node: inv for inv in parse_inventory_text(path.read_text(), name=str(path))}
    assert len(by_node) == 24 and "gpu021" not in by_node
    assert [h.job_id for h in by_node["gpu021.cluster.local"].held] == [4960]
    assert by_node["gpu003"].held == ()
    assert [h.job_id for h in by_node["gpu024"].held] == [5077, 5200]
    assert by_node["gpu006"].held[0].pids and by_node["gpu006"].held[0].gpus == (0, 1, 2, 3)
    assert {inv.source for inv in by_node.values()} == {"simulated"}


def test_requeue_moves_the_allocation_and_leaves_the_old_holder_holding(sim: SimCluster) -> None:
    sim.requeue(4950, "gpu022")
    assert sim.job(4950).nodelist == "gpu022"  # type: ignore[union-attr]
    assert sim.node("gpu012").alloc.gpus == 0 and sim.node("gpu022").alloc.gpus == 8
    assert sim.node("gpu022").state is NodeState.ALLOCATED
    assert [h.job_id for h in sim.holdings("gpu012")] == [4702, 4950]
    assert [h.job_id for h in sim.holdings("gpu022")] == [4950, 5001]
    sim.requeue(4702, "")
    assert sim.job(4702).state is JobState.PENDING  # type: ignore[union-attr]


def test_forget_job_ages_it_out_of_getjob_and_metrics_but_not_the_watermark(
    sim: SimCluster,
) -> None:
    sim.forget_job(4702)
    stub = controller(sim)
    error = failure(lambda: stub.GetJob(pb.GetJobRequest(job_id=4702)))
    assert error.code() is grpc.StatusCode.NOT_FOUND
    assert stub.GetJobMetrics(empty_pb2.Empty()).total == 21
    assert sim.next_job_id == 5121


def test_set_job_issuing_a_new_id_advances_the_watermark(sim: SimCluster) -> None:
    job = msgspec.structs.replace(sim.job(5120), job_id=5121)
    sim.set_job(job)
    assert sim.next_job_id == 5122
    assert controller(sim).GetJobMetrics(empty_pb2.Empty()).total == 23


# -- the controller's own heartbeat reclaim ------------------------------------------------------


def reclaimed_by_arm(decisions: list[HeartbeatDecision]) -> dict[int, set[tuple[str, int]]]:
    out: dict[int, set[tuple[str, int]]] = {}
    for d in decisions:
        out.setdefault(d.arm, set()).add((d.node, d.job_id))
    return out


def test_a_controller_predating_pr_623_reclaims_nothing() -> None:
    with SimCluster(incident(), heartbeat_reclaim=False) as s:
        assert s.heartbeat() == []
        assert sum(len(s.holdings(n.name)) for n in incident().nodes) == 26


def test_heartbeat_reclaim_on_the_incident_decides_each_arm() -> None:
    with SimCluster(incident(), heartbeat_reclaim=True) as s:
        arms = reclaimed_by_arm(s.heartbeat())
        stale = {("gpu003", 4711), ("gpu004", 4712), ("gpu005", 4712), ("gpu006", 4715),
                 ("gpu006", 4716), ("gpu007", 4719), ("gpu008", 4720)}  # fmt: skip
        # Arm 2 also kills gpu021's LEGITIMATE run: its agent reports an FQDN, and
        # spurctld compares names by exact equality.
        assert arms[2] == stale | {("gpu021", 4960)}
        assert arms[1] == {("gpu012", 4702)}
        assert arms[6] == {("gpu013", 4388)}
        assert arms[3] == {("gpu011", 5119)}
        assert arms[4] == {("gpu010", 5118)}
        assert arms[7] == {("gpu014", 5187)}
        assert ("gpu015", 4711) in arms[5] and ("gpu024", 5077) in arms[5]
        reclaimed = {(d.node, d.job_id) for d in s.heartbeat_reclaims}
        assert reclaimed == arms[1] | arms[2] | arms[6]
        assert s.holdings("gpu003") == () and s.holdings("gpu021") == ()
        assert [h.job_id for h in s.holdings("gpu012")] == [4950]
        assert [h.job_id for h in s.holdings("gpu014")] == [5187]


def test_after_a_wipe_a_pre_wipe_run_is_cancelled_once_the_counter_passes_its_id() -> None:
    with SimCluster(post_wipe(), heartbeat_reclaim=True) as s:
        arms = reclaimed_by_arm(s.heartbeat())
        assert arms[2] == {("gpu003", 23)}  # reissued to a run on gpu010
        assert arms[1] == {("gpu004", 12)}  # reissued to a job that completed
        assert arms[4] == {("gpu005", 35)}  # reissued to a pending job
        assert arms[7] == {("gpu001", 44), ("gpu002", 57), ("gpu002", 63), ("gpu006", 61),
                           ("gpu007", 61)}  # fmt: skip
        for job_id in range(41, 46):  # submissions resume: the counter climbs past 44
            s.set_job(msgspec.structs.replace(s.job(40), job_id=job_id))
        arms = reclaimed_by_arm(s.heartbeat())
        assert arms[4] >= {("gpu001", 44)} and 7 in arms
        s.forget_job(44)
        assert ("gpu001", 44) in reclaimed_by_arm(s.heartbeat())[6]
        assert s.holdings("gpu001") == ()


def test_heartbeat_skips_nodes_whose_agent_is_not_running() -> None:
    with SimCluster(incident(), heartbeat_reclaim=True, agents=["gpu012"]) as s:
        assert {d.node for d in s.heartbeat()} == {"gpu012"}
        assert [h.job_id for h in s.holdings("gpu003")] == [4711]


def test_heartbeat_interval_reclaims_in_the_background() -> None:
    with SimCluster(incident(), heartbeat_reclaim=True, heartbeat_interval=0.05) as s:
        deadline = time.monotonic() + 5
        while s.holdings("gpu003") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert s.holdings("gpu003") == ()


# -- at scale --------------------------------------------------------------------------------------


def test_getjobs_of_two_hundred_thousand_real_sized_jobs_is_over_spurctlds_answer_limit() -> None:
    with SimCluster(large(), agents=False) as s:
        stub = controller(s, **{"grpc.max_receive_message_length": -1})
        error = failure(lambda: stub.GetJobs(pb.GetJobsRequest(), timeout=60))
        assert error.code() is grpc.StatusCode.OUT_OF_RANGE  # ~100 MB: refused by the server
        assert "encoded message length too large" in (error.details() or "")

        s.answer_limit = None  # a controller without spurctld's limit
        capped = controller(s)
        error = failure(lambda: capped.GetJobs(pb.GetJobsRequest(), timeout=60))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED  # grpcio's own 4 MiB
        started = time.perf_counter()
        answer = stub.GetJobs(pb.GetJobsRequest(), timeout=120)
        elapsed = time.perf_counter() - started
        print(
            f"\nGetJobs: {len(answer.jobs)} jobs, {answer.ByteSize() / 1e6:.1f} MB, {elapsed:.2f} s"
        )
        assert len(answer.jobs) == 200_000
        assert stub.GetJobMetrics(empty_pb2.Empty()).total == 200_000


# -- the command line ------------------------------------------------------------------------------


def test_the_command_serves_until_interrupted_and_writes_inventory_and_agent_map(
    tmp_path: Path,
) -> None:
    with running(
        [sys.executable, "-m", "spurctl_sim", "--scenario", "incident", "--auth",
         "required", "--dir", str(tmp_path)],
        home=tmp_path / "home",
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        printed = lines_of(proc.stdout)
        lines = []
        deadline = time.monotonic() + 30
        while not lines or not lines[-1].startswith("serving"):
            line = printed.get(timeout=max(deadline - time.monotonic(), 0.1))
            assert line, f"the command ended before serving: {lines}"
            lines.append(line.rstrip("\n"))
        fields = dict(line.split(": ", 1) for line in lines if ": " in line)
        exports = dict(line[7:].split("=", 1) for line in lines if line.startswith("export "))
        address = fields["controller"]
        assert exports["SPUR_CONTROLLER_ADDR"] == address
        key = Path(exports["SPUR_JWT_KEY_FILE"]).read_text()
        assert Path(exports["SPUR_JWT_KEY_FILE"]).stat().st_mode & 0o777 == 0o600
        assert key not in "\n".join(lines)

        inventory = Path(fields["inventory"])
        assert len(list(parse_inventory_text(inventory.read_text(), name="inv"))) == 24
        agents = json.loads(Path(fields["agent map"]).read_text())
        assert set(agents) == {f"gpu{i:03d}" for i in range(1, 25)}

        stub = rpc.SlurmAgentStub(grpc.insecure_channel(agents["gpu003"]))
        stub.CancelJob(pb.AgentCancelJobRequest(job_id=4711), metadata=bearer("spurctld", key=key))
        deadline = time.monotonic() + 5
        while True:  # the command rewrites the inventory when holdings change
            held = {i.node: i.held for i in parse_inventory_text(inventory.read_text(), name="i")}
            if held["gpu003"] == () or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert held["gpu003"] == ()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


def test_the_command_rejects_a_bad_scenario_file_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "scenario.json"
    bad.write_text("[]")
    result = subprocess.run(
        [sys.executable, "-m", "spurctl_sim", "--scenario", str(bad)],
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and str(bad) in result.stderr


# -- the credential helper ----------------------------------------------------------------
