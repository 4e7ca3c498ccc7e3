"""The simulated controller's JobInfo records are real-sized; its GetJobs node filter is indexed.

A real JobInfo carries name, command, work_dir, stdio paths, comment
and more (400-700 bytes); the simulated cluster appends those upstream fields
to what spurctl's own proto declares, and spurctl must read the same Job from
either.
"""

from __future__ import annotations

import msgspec
import pytest

from spurctl.model import Job, JobState
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.wire import job_from_pb
from spurctl_sim import incident, large, post_wipe
from spurctl_sim.encoders import job_to_pb
from spurctl_sim.state import ClusterState, expand, upstream_extras

# Upstream spur proto/slurm.proto JobInfo (docs/spur-facts.md): number -> wire type.
UPSTREAM_ONLY = {
    13: 2, 14: 2, 22: 0, 24: 2, 25: 2, 30: 0, 31: 2, 32: 2, 33: 0, 35: 2,
    41: 0, 42: 2, 53: 2, 55: 0, 56: 2,
}  # fmt: skip


def _fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """(number, wire type, value) of each top-level field: a protobuf reader of our own."""

    def varint(pos: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            byte = data[pos]
            value |= (byte & 0x7F) << shift
            pos += 1
            if byte < 0x80:
                return value, pos
            shift += 7

    out: list[tuple[int, int, bytes | int]] = []
    pos = 0
    while pos < len(data):
        key, pos = varint(pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(pos)
            out.append((number, wire, value))
        elif wire == 2:
            size, pos = varint(pos)
            out.append((number, wire, data[pos : pos + size]))
            pos += size
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {number}")
    return out


@pytest.fixture(scope="module")
def busy() -> ClusterState:
    return ClusterState(large(300, 3_000, 1_500, seed=3))


def test_realistic_records_decode_to_the_same_job_as_the_lean_ones(busy: ClusterState) -> None:
    states = [busy, ClusterState(incident()), ClusterState(post_wipe())]
    for state in states:
        for job in state.jobs.values():
            lean = job_from_pb(job_to_pb(job))
            real = job_from_pb(pb.JobInfo.FromString(state.encoded(job)))
            assert real == lean == job


def test_records_are_real_sized_and_carry_upstream_fields_by_their_upstream_numbers(
    busy: ClusterState,
) -> None:
    sizes = []
    for job in busy.jobs.values():
        data = busy.encoded(job)
        sizes.append(len(data))
        extra = _fields(upstream_extras(job))
        assert extra and all(UPSTREAM_ONLY.get(n) == w for n, w, _ in extra), extra
        assert data.endswith(upstream_extras(job))
        assert upstream_extras(job) == upstream_extras(job)  # deterministic
        text = {n: v for n, w, v in extra if w == 2 and n != 13 and n != 14}
        work_dir = text[24].decode()  # type: ignore[union-attr]
        assert work_dir == f"/home/{job.user}/runs/{job.name}-{job.job_id}"
        assert text[31] == f"{work_dir}/slurm-{job.job_id}.out".encode()
    assert min(sizes) >= 400 and max(sizes) <= 700, (min(sizes), max(sizes))
    assert 450 <= sum(sizes) / len(sizes) <= 600


def _by_brute_force(state: ClusterState, nodes: set[str]) -> list[int]:
    return sorted(j.job_id for j in state.jobs.values() if nodes & expand(j.nodelist))


def test_the_nodes_filter_answers_from_an_index_kept_in_step_with_every_change() -> None:
    state = ClusterState(large(60, 600, 300, seed=5))
    names = sorted(state.nodes)
    probes = [{names[0]}, {names[1], names[7]}, set(names[10:14]), {"gpu999", names[3]}]

    def check() -> None:
        for nodes in probes:
            got = [j.job_id for j in state.select_jobs(pb.GetJobsRequest(nodes=sorted(nodes)))]
            assert got == _by_brute_force(state, nodes), nodes

    check()  # builds the index
    running = next(
        j for j in state.jobs.values() if j.state is JobState.RUNNING and j.nodelist == names[0]
    )
    # A requeue moves a job from gpu(0) to gpu(1) and gpu(7).
    state.requeue(running.job_id, f"{names[1]},{names[7]}")
    assert running.job_id not in [
        j.job_id for j in state.select_jobs(pb.GetJobsRequest(nodes=[names[0]]))
    ]
    check()
    state.requeue(running.job_id, "")  # PENDING, on no node
    check()
    on_10 = next(j for j in state.jobs.values() if names[10] in expand(j.nodelist))
    state.forget_job(on_10.job_id)
    check()
    active = next(j for j in state.jobs.values() if j.state.active and j.nodelist)
    state.cancel_job(active.job_id)  # CANCELLED keeps its nodelist, as spurctld does
    check()
    new_id = state.next_job_id
    state.set_job(
        Job(job_id=new_id, state=JobState.RUNNING, nodelist=f"{names[12]},{names[13]}",
            user="u0001", num_nodes=2)
    )  # fmt: skip
    assert new_id in [j.job_id for j in state.select_jobs(pb.GetJobsRequest(nodes=[names[13]]))]
    check()


def test_the_nodes_filter_combines_with_the_others() -> None:
    state = ClusterState(large(60, 600, 300, seed=5))
    names = sorted(state.nodes)[:20]
    on = {j.job_id for j in state.jobs.values() if set(names) & expand(j.nodelist)}
    running = [int(JobState.RUNNING)]
    req = pb.GetJobsRequest(nodes=names, states=running)  # type: ignore[arg-type]
    assert {j.job_id for j in state.select_jobs(req)} == {
        i for i in on if state.jobs[i].state is JobState.RUNNING
    }
    some = [*sorted(on)[:5], 1, 10**8]
    req = pb.GetJobsRequest(nodes=names, job_ids=some)
    assert [j.job_id for j in state.select_jobs(req)] == sorted(on)[:5]
    assert state.select_jobs(pb.GetJobsRequest(nodes=["nowhere"])) == []


def test_a_plain_node_name_expands_without_a_hostlist_parse() -> None:
    assert expand(" gpu001 ") == frozenset({"gpu001"})
    assert expand("gpu[001-002]") == frozenset({"gpu001", "gpu002"})
    with pytest.raises(ValueError):
        expand("gpu[001-")
    # A job replaced in place keeps one index entry, on its new nodes only.
    state = ClusterState(incident())
    job = next(j for j in state.jobs.values() if j.nodelist)
    state.select_jobs(pb.GetJobsRequest(nodes=["x"]))  # build the index
    state.set_job(msgspec.structs.replace(job, nodelist=""))
    assert all(job.job_id not in ids for ids in (state._by_node or {}).values())
