"""A split read keeps each GetJobs answer as its bytes, read two ways in C (wire.JobRecords):
each job's encoding, and a glimpse of the fields kept beside it. What it keeps must be
exactly what decoding the answer whole gives, and scrubbed as every answer is."""

from __future__ import annotations

from datetime import UTC, datetime

from spurctl.errors import register_secret
from spurctl.model import (
    Allocation,
    Device,
    Job,
    JobGlance,
    JobState,
    Node,
    NodeState,
    Placement,
    group_by_nodelist,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import scrub
from spurctl.sources.job_reads import JobRead, off_list
from spurctl.sources.wire import (
    Encoded,
    JobRecords,
    JobsFromPb,
    Shapes,
    job_from_pb,
    keep_encoded,
)
from spurctl_sim.encoders import job_to_pb, node_to_pb

GPUS = Allocation(16, 2048, {"gpu": (Device(3), Device(4))})
SUBMITTED = datetime(2026, 12, 1, 9, 0, 0, 250000, tzinfo=UTC)


def answer(jobs: list[Job]) -> bytes:
    return pb.GetJobsResponse(jobs=[job_to_pb(j) for j in jobs]).SerializeToString()


JOBS = [
    Job(41, JobState.RUNNING, "gpu[001-002]", name="train", resources=GPUS, submit_time=SUBMITTED),
    Job(42, JobState.COMPLETED, "gpu003", resources=GPUS),
    Job(43, JobState.PENDING),
    Job(44, JobState.SUSPENDED, "gpu004", submit_time=SUBMITTED),
]


def test_records_and_glimpses_read_each_job_as_decoding_the_answer_whole_does() -> None:
    part = JobRecords(answer(JOBS))
    assert len(part) == 4
    assert [job_from_pb(pb.JobInfo.FromString(r)) for r in part.records()] == JOBS
    assert [job_from_pb(m) for m in part.jobs()] == JOBS
    shapes = Shapes()
    by_id: dict[int, Encoded] = {}
    grouped: dict[str, list[Placement]] = {}
    glanced: dict[int, JobGlance] = {}
    ids = keep_encoded(part, shapes, {j.job_id for j in JOBS}, by_id, grouped, glanced)
    assert ids == [41, 42, 43, 44]
    assert glanced == {i: k.glance for i, k in by_id.items()}
    assert grouped == {
        "gpu[001-002]": [Placement(41, "gpu[001-002]", GPUS)],
        "gpu004": [Placement(44, "gpu004", Allocation())],
    }
    kept = list(by_id.values())
    assert [k.glance for k in kept] == [
        JobGlance(j.job_id, j.state, j.nodelist, j.submit_time) for j in JOBS
    ]
    assert [k.placement for k in kept] == [
        Placement(41, "gpu[001-002]", GPUS),
        None,
        None,
        Placement(44, "gpu004", Allocation()),
    ]
    assert kept[0].placement is not None and kept[0].placement.resources.gpus == 2
    # Equal resources share one record, however they were read.
    assert kept[0].placement.resources is shapes.allocation(job_to_pb(JOBS[1]).resources)


def test_two_answers_joined_are_one_answer_holding_both() -> None:
    both = JobRecords(answer(JOBS[:2])) + JobRecords(answer(JOBS[2:]))
    assert [g.job_id for g in both.glimpses()] == [41, 42, 43, 44]
    assert len(JobRecords()) == 0 and len(JobRecords() + both) == 4


def test_a_split_read_keeps_each_job_encoded_with_what_it_reads_of_it() -> None:
    read = JobRead(wanted=lambda: frozenset({41, 42}))
    assert read.keep(JobRecords(answer(JOBS))) == {41, 42, 43, 44}
    assert read.converted == {}
    assert read.encoded[41].glance == JobGlance(41, JobState.RUNNING, "gpu[001-002]", SUBMITTED)
    # Neither placed (not active) nor glanced (not wanted): kept as its encoding alone.
    pending = read.encoded[43]
    assert isinstance(pending, bytes) and job_from_pb(pb.JobInfo.FromString(pending)) == JOBS[2]
    table = JobsFromPb((), encoded=read.encoded)
    assert table.glance(43) == table[43] == JOBS[2] and len(table.placements()) == 2
    assert job_from_pb(pb.JobInfo.FromString(read.encoded[44].data)) == JOBS[3]
    read.measure(JobRecords(answer(JOBS)))
    assert read.largest == max(len(job_to_pb(j).SerializeToString()) for j in JOBS)
    whole = JobRead()  # no ids named: every job converted as it arrives
    assert whole.keep(JobRecords(answer(JOBS))) == {41, 42, 43, 44}
    assert whole.converted == {j.job_id: j for j in JOBS} and whole.encoded == {}


def test_an_answer_carrying_a_secret_is_kept_scrubbed() -> None:
    secret = "kept-records-secret-8c1f"
    register_secret(secret)
    echoed = Job(7, JobState.RUNNING, f"gpu{secret}", name=f"job-{secret}", user=secret)
    part = scrub.job_records(answer([echoed, JOBS[0]]))
    assert secret.encode() not in part.answer
    assert all(secret.encode() not in r for r in part.records())
    job = job_from_pb(pb.JobInfo.FromString(part.records()[0]))
    assert secret not in f"{job.name}{job.user}{job.nodelist}" and "redacted" in job.name
    assert secret not in part.glimpses()[0].nodelist
    assert job_from_pb(pb.JobInfo.FromString(part.records()[1])) == JOBS[0]


def test_the_jobs_on_nodes_getnodes_does_not_list_are_named_each_with_those_nodes() -> None:
    none = Allocation()
    placed = [
        Placement(9, "gpu001", none),
        Placement(3, " gpu404 ", none),  # trimmed as Spur trims it
        Placement(5, "gpu[001-003]", none),
        Placement(4, "gpu404", none),
        Placement(6, "", none),  # no nodelist yet: nothing to check
        Placement(7, "gpu[", none),  # unreadable: the classifier reports it
        Placement(8, "gpu001,gpu002", none),
    ]
    listed = {"gpu001", "gpu002"}
    grouped = group_by_nodelist(placed)
    assert off_list(grouped, listed) == [(3, "gpu404"), (4, "gpu404"), (5, "gpu003")]
    assert off_list(grouped, listed | {"gpu003", "gpu404"}) == []
    assert off_list({}, listed) == []


def test_a_getnodes_answer_carrying_a_secret_is_kept_scrubbed() -> None:
    secret = "node-table-secret-51d0"
    register_secret(secret)
    busy = Allocation(8, 512, {"gpu": (Device(0),)})
    answer = pb.GetNodesResponse(
        nodes=[node_to_pb(Node(f"gpu-{secret}", NodeState.IDLE, f"why {secret}", alloc=busy))]
    ).SerializeToString()
    nodes = scrub.node_table(answer)
    (name,) = list(nodes)
    assert secret not in name and secret not in nodes[name].state_reason
    assert nodes.allocations() == {name: busy}
