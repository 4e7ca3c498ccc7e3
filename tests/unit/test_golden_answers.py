"""Answers encoded with upstream Spur's own slurm.proto, decoded by spurctl's reader.

The simulated controller encodes with spurctl's own wire code, so a Spur field spurctl
misread would pass every end-to-end test. These answers were encoded from upstream's
proto at release v0.8.0 and at main 4cc3da8 (scripts/gen_golden.py; tests/golden/*/
expected.json says which commit, and holds the same messages as upstream's descriptors
decode them). Every field spurctl reads must come out as upstream put it in, through the
path a live read takes (scrub.reader, then sources/wire.py), with upstream's fields that
spurctl does not declare skipped.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from spurctl import hostlist, spur_hostlist
from spurctl.model import (
    ACTIVE_STATES,
    Allocation,
    Device,
    Gpu,
    Job,
    JobGlance,
    JobState,
    Node,
    NodeState,
    Placement,
    ResourceSet,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import scrub
from spurctl.sources.wire import (
    Encoded,
    JobsFromPb,
    NodesFromPb,
    Shapes,
    counts_from_pb,
    job_from_pb,
    keep_encoded,
)
from spurctl_sim.encoders import job_to_pb

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RELEASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


@pytest.fixture(params=RELEASES)
def golden(request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    where = GOLDEN / request.param
    return where, json.loads((where / "expected.json").read_text())


def read(where: Path, name: str, method: str) -> Any:
    """The bytes of `name`, through the reader a live read of `method` uses."""
    return scrub.reader("SlurmController", method)((where / f"{name}.bin").read_bytes())


def when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def allocation(d: dict[str, Any]) -> Allocation:
    return Allocation(
        cpus=int(d.get("cpus", 0)),
        memory_mb=int(d.get("memory_mb", 0)),
        devices={
            name: tuple(Device(int(x["device_id"]), int(x["count"])) for x in v["devices"])
            for name, v in d.get("devices", {}).items()
        },
    )


def job(d: dict[str, Any]) -> Job:
    return Job(
        job_id=d["job_id"],
        state=JobState[d["state"].removeprefix("JOB_")],
        nodelist=d["nodelist"],
        name=d["name"],
        user=d["user"],
        uid=d["uid"],
        partition=d["partition"],
        account=d["account"],
        state_reason=d["state_reason"],
        submit_time=when(d.get("submit_time")),
        start_time=when(d.get("start_time")),
        end_time=when(d.get("end_time")),
        num_nodes=d["num_nodes"],
        num_tasks=d["num_tasks"],
        resources=allocation(d.get("resources", {})),
        array_job_id=d["array_job_id"],
        array_task_id=d["array_task_id"],
    )


def node(d: dict[str, Any]) -> Node:
    total = d["total_resources"]
    return Node(
        name=d["name"],
        state=NodeState[d["state"].removeprefix("NODE_")],
        state_reason=d["state_reason"],
        partitions=tuple(d["partitions"]),
        total=ResourceSet(
            cpus=total["cpus"],
            memory_mb=int(total["memory_mb"]),
            gpus=tuple(
                Gpu(g["device_id"], g["gpu_type"], int(g["memory_mb"])) for g in total["gpus"]
            ),
            generic={k: int(v) for k, v in total["generic"].items()},
        ),
        alloc=allocation(d["alloc_resources"]),
        boot_time=when(d.get("boot_time")),
        last_busy=when(d.get("last_busy")),
        agent_start_time=when(d.get("slurmd_start_time")),
        labels=dict(d["labels"]),
    )


def test_every_release_has_its_answers(golden: tuple[Path, dict[str, Any]]) -> None:
    assert set(RELEASES) >= {"v0.8.0", "main-4cc3da8"}
    _, expected = golden
    source = expected["source"]
    assert source["repository"] == "github.com/ROCm/spur" and source["path"] == "proto/slurm.proto"
    assert len(source["commit"]) == 40


def test_getjobs_answers_decode_to_upstreams_jobs_in_every_state(
    golden: tuple[Path, dict[str, Any]],
) -> None:
    where, expected = golden
    answer = read(where, "GetJobsResponse", "GetJobs")
    wanted = [job(d) for d in expected["GetJobsResponse"]["jobs"]]
    # Two of every state that release's JobState has: v0.8.0 ends at OUT_OF_MEMORY (11).
    states = {j.state for j in wanted}
    has_requeued = where.name != "v0.8.0"
    assert states == set(JobState) - (set() if has_requeued else {JobState.REQUEUED})
    unread = JobsFromPb(answer.jobs)  # glanced at before anything converts its jobs
    for j in wanted:
        assert unread.glance(j.job_id) == JobGlance(j.job_id, j.state, j.nodelist, j.submit_time)
    jobs = JobsFromPb(answer.jobs)
    assert dict(jobs.items()) == {j.job_id: j for j in wanted}
    assert sorted(jobs.placements()) == sorted(
        Placement(j.job_id, j.nodelist, j.resources) for j in wanted if j.state in ACTIVE_STATES
    )
    shapes = Shapes()
    part = scrub.job_records((where / "GetJobsResponse.bin").read_bytes())  # a split read's
    assert len(part) == len(wanted)
    by_id: dict[int, Encoded] = {}  # as a split read keeps it
    grouped: dict[str, list[Placement]] = {}
    glanced: dict[int, JobGlance] = {}
    assert keep_encoded(part, shapes, {j.job_id for j in wanted}, by_id, grouped, glanced) == [
        j.job_id for j in wanted
    ]
    for record, j in zip(part.records(), wanted, strict=True):
        kept = by_id[j.job_id]
        assert kept.data == record
        assert kept.glance == JobGlance(j.job_id, j.state, j.nodelist, j.submit_time)
        placed = Placement(j.job_id, j.nodelist, j.resources)
        assert kept.placement == (placed if j.state in ACTIVE_STATES else None)
        assert job_from_pb(pb.JobInfo.FromString(kept.data)) == j
        # Real-sized: upstream's fields spurctl does not declare came along, and were skipped.
        assert len(kept.data) > len(job_to_pb(j).SerializeToString()) + 150


def test_a_getjob_answer_decodes_to_upstreams_job(golden: tuple[Path, dict[str, Any]]) -> None:
    where, expected = golden
    assert job_from_pb(read(where, "JobInfo", "GetJob")) == job(expected["JobInfo"])
    assert job(expected["JobInfo"]).state is JobState.RUNNING


def test_getnodes_answers_decode_to_upstreams_nodes(golden: tuple[Path, dict[str, Any]]) -> None:
    where, expected = golden
    nodes = NodesFromPb(read(where, "GetNodesResponse", "GetNodes").nodes)
    wanted = {d["name"]: node(d) for d in expected["GetNodesResponse"]["nodes"]}
    assert dict(nodes.items()) == wanted
    assert nodes.allocations() == {n: v.alloc for n, v in wanted.items()}
    assert {n.state for n in wanted.values()} >= {NodeState.IDLE, NodeState.DOWN, NodeState.DRAIN}


def test_job_metrics_decode_to_upstreams_counts(golden: tuple[Path, dict[str, Any]]) -> None:
    where, expected = golden
    total, counts = counts_from_pb(read(where, "JobMetrics", "GetJobMetrics"))
    metrics = expected["JobMetrics"]
    assert total == int(metrics["total"])
    assert counts == {
        JobState[c["state"].removeprefix("JOB_")]: int(c["count"]) for c in metrics["by_state"]
    }
    # by_state has one entry per state that release's JobState has.
    assert (JobState.REQUEUED in counts) is (where.name != "v0.8.0")


def test_ping_decodes_to_the_version_upstreams_cargo_says(
    golden: tuple[Path, dict[str, Any]],
) -> None:
    where, expected = golden
    pong = read(where, "PingResponse", "Ping")
    assert pong.version == expected["PingResponse"]["version"] == "0.8.0"  # both say 0.8.0
    assert pong.hostname == expected["PingResponse"]["hostname"]


def test_nodelists_spur_folds_across_a_width_read_back_as_the_nodes_folded(
    golden: tuple[Path, dict[str, Any]],
) -> None:
    # gen_golden.py writes what spur-core's `compress` writes for these nodes (gpu[01-100]:
    # gpu01..gpu99 and gpu100), forms ClusterShell refuses ("mixes paddings").
    where, expected = golden
    folded = expected["spur_folded"]
    assert set(folded) == {"gpu[01-100]", "gpu[09-100]", "gpu[001-1000]"}
    jobs = JobsFromPb(read(where, "GetJobsResponse", "GetJobs").jobs)
    read_back = {j.nodelist: j for _, j in jobs.items() if j.nodelist in folded}
    assert set(read_back) == set(folded)
    for nodelist, names in folded.items():
        job = read_back[nodelist]
        assert job.state is JobState.RUNNING and job.num_nodes == len(names)
        assert hostlist.expand(nodelist, hostlist.nodelist_limit(len(names))) == set(names)
        assert all(hostlist.node_in(nodelist, name) for name in (names[0], names[-1]))
        assert spur_hostlist.compress(names) == nodelist  # the simulated controller's writing
