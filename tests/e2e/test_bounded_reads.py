"""Reading the controller under spurctld's answer limit, end to end.

spurctld refuses to encode an answer over 32 MiB (OUT_OF_RANGE "Error, encoded
message length too large"). The simulated controller enforces a limit too; here
it is set small, so that a 1,200-job cluster needs what a 200,000-job one does:
reads by state, splits by node (0.9.0 on) or by job-id range (release v0.8.0, which
has no node filter), held ids asked for by id in small batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import msgspec
import pytest

from spurctl.decide.classify import classify
from spurctl.model import TERMINAL_STATES, Job, JobGlance, JobState, Placement
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl.sources import job_reads, wire
from spurctl.sources.controller import LOOKUP_BATCH, ControllerClient
from spurctl.sources.settings import Connection
from spurctl.sources.wire import Shapes
from spurctl_sim import SimCluster, incident, large
from spurctl_sim.releases import V0_8_0, V0_9_TO_0_11
from tests.cli import run_cli

SMALL = {"nodes": 120, "jobs": 1_200, "held": 600, "seed": 3}
LIMIT = 60_000  # bytes: about 120 real-sized records per answer


@pytest.fixture(scope="module")
def unlimited() -> Iterator[SimCluster]:
    with SimCluster(large(**SMALL), agents=False, answer_limit=None) as sim:
        yield sim


@pytest.fixture(params=[V0_9_TO_0_11, V0_8_0], ids=["split by node", "split by id"])
def limited(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    release = request.param
    with SimCluster(large(**SMALL), agents=False, answer_limit=LIMIT, spur_release=release) as sim:
        yield sim


def audit_json(
    sim: SimCluster, tmp_path: Path, *extra: str, inventory: Path | None = None
) -> dict[str, Any]:
    inventory = inventory or sim.write_inventories(tmp_path / f"inv-{id(sim)}.jsonl")
    run = run_cli(
        "audit", "--inventory", str(inventory), "--format", "json", *extra,
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    doc: dict[str, Any] = json.loads(run.stdout)
    return doc


def decided(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.items() if k != "inventory_age_s"} for f in doc["findings"]]


def test_an_unfiltered_getjobs_over_the_limit_is_refused_as_spurctld_refuses_it(
    limited: SimCluster,
) -> None:
    address = limited.controller_address.removeprefix("http://")
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as caught:
        rpc.SlurmControllerStub(channel).GetJobs(pb.GetJobsRequest(), timeout=10)
    assert caught.value.code() is grpc.StatusCode.OUT_OF_RANGE
    assert "encoded message length too large" in caught.value.details()


def test_an_audit_under_the_limit_finds_what_an_unlimited_read_finds(
    limited: SimCluster, unlimited: SimCluster, tmp_path: Path
) -> None:
    # One inventory file for both (the clusters are the same): a reason naming when an
    # inventory was taken must not differ because the two were written a minute apart.
    inventory = unlimited.write_inventories(tmp_path / "inventory.jsonl")
    capped = audit_json(limited, tmp_path, "--all", inventory=inventory)
    with SimCluster(
        large(**SMALL), agents=False, answer_limit=None, spur_release=limited.spur_release
    ) as same:
        free = audit_json(same, tmp_path, "--all", inventory=inventory)
    assert decided(capped) == decided(free)
    assert capped["view"] == free["view"] and capped["view"]["complete"] is True
    assert capped["watermark"] == free["watermark"]
    # It had to split: answers were refused, and none sent was over the limit.
    refused = [r for r in limited.refusals if r.code is grpc.StatusCode.OUT_OF_RANGE]
    assert refused and max(limited.answer_sizes) <= LIMIT
    # Never a filter this release cannot apply: v0.8.0 would answer every job.
    if not limited.spur_release.nodes_filter:
        assert not [r for r in limited.job_requests if r.nodes]
        assert not [r for r in limited.job_requests if list(r.states) == [JobState.REQUEUED]]
    # What no node filter reaches (a RUNNING job whose nodelist is not recorded yet) is
    # read by id, which shows it names no node: it explains no allocation, and the view
    # stays complete, with nothing left unread to note.
    assert not [n for n in capped["notes"] if "not read" in n or "GetNodes" in n]


def test_an_audit_asks_for_held_ids_by_id_in_small_batches_and_never_for_every_ended_job(
    unlimited: SimCluster, tmp_path: Path
) -> None:
    before = len(unlimited.job_requests)
    doc = audit_json(unlimited, tmp_path)
    requests = unlimited.job_requests[before:]
    by_id = [r for r in requests if r.job_ids]
    assert by_id and all(len(r.job_ids) <= LOOKUP_BATCH for r in by_id)
    for r in requests:
        assert r.job_ids or r.states, "an unfiltered GetJobs"
        assert r.job_ids or not TERMINAL_STATES & {JobState(s) for s in r.states}
    # Every held id that ended is among those asked for by id.
    asked = {i for r in by_id for i in r.job_ids}
    ended = {
        h.job_id
        for held in unlimited.state.held.values()
        for h in held.values()
        if h.job_id in unlimited.state.jobs and unlimited.state.jobs[h.job_id].state.terminal
    }
    assert ended and ended <= asked
    terminal = [f for f in doc["findings"] if f["kind"] == "terminal-held"]
    assert terminal


def test_a_split_read_converts_no_job_glances_at_the_wanted_ones_and_holds_every_job_whole(
    limited: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = frozenset(h.job_id for inv in limited.inventories() for h in inv.held)
    converted: list[int] = []
    real = job_reads.job_from_pb

    def counting(msg: pb.JobInfo, shapes: Shapes | None = None) -> Job:
        converted.append(msg.job_id)
        return real(msg, shapes)

    monkeypatch.setattr(job_reads, "job_from_pb", counting)
    with ControllerClient(Connection((limited.controller_address,), timeout=30.0)) as client:
        view = client.view(wanted=lambda: held)
    # The running jobs came node by node or id range by id range (the split): none
    # converted as they arrived, and every held one among them glanced at, from the same
    # record.
    assert not converted
    assert view.complete
    jobs = limited.state.jobs
    glanced = [i for i in held if isinstance(view.glance(i), JobGlance)]
    assert len(glanced) > 100
    for i in glanced:
        job = jobs[i]
        assert view.glance(i) == JobGlance(i, job.state, job.nodelist, job.submit_time)
    every = dict(view.jobs.items())  # every job, converted now from what was kept
    assert every == {i: jobs[i] for i in every}
    active = [j for j in every.values() if j.state.active]
    assert sorted(view.active_placements()) == sorted(
        Placement(j.job_id, j.nodelist, j.resources) for j in active
    )


def test_an_audit_converts_only_the_held_jobs_it_cannot_call_plainly_healthy(
    limited: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventories = {inv.node: inv for inv in limited.inventories()}
    held = frozenset(h.job_id for inv in inventories.values() for h in inv.held)
    with ControllerClient(Connection((limited.controller_address,), timeout=30.0)) as client:
        view = client.view(wanted=lambda: held)
    converted: list[int] = []
    real = wire.job_from_pb

    def counting(msg: pb.JobInfo, shapes: Shapes | None = None) -> Job:
        converted.append(msg.job_id)
        return real(msg, shapes)

    monkeypatch.setattr(wire, "job_from_pb", counting)
    glanced = classify(view, inventories, watermark=max(limited.state.jobs) + 1)
    monkeypatch.undo()
    # The same decisions as from every job converted whole ...
    whole = replace(view, jobs=dict(view.jobs.items()))
    assert classify(whole, inventories, watermark=max(limited.state.jobs) + 1) == glanced
    # ... from converting only the jobs of the holdings that have a finding, and the
    # active jobs the node checks read whole (lost-on-node candidates).
    found = {f.job_id for f in glanced.findings if f.job_id is not None}
    assert converted and set(converted) <= found
    healthy = {h.job_id for inv in inventories.values() for h in inv.held if h.job_id not in found}
    assert len(healthy) > 100 and not healthy & set(converted)


def test_jobs_too_many_for_one_answer_and_without_a_nodelist_are_named_and_spared(
    tmp_path: Path,
) -> None:
    # Room for a few records only: the pending jobs, which no node filter reaches,
    # cannot all be read; the running ones can, node by node.
    with SimCluster(
        large(**SMALL), agents=False, answer_limit=1_500, spur_release=V0_9_TO_0_11
    ) as sim:
        pending = sum(1 for j in sim.state.jobs.values() if j.state is JobState.PENDING)
        assert pending > 20
        doc = audit_json(sim, tmp_path, "--all")
    assert any("PENDING jobs without a nodelist were not read" in n for n in doc["notes"]), doc[
        "notes"
    ]
    # A held pending id is still judged: asked for by id.
    held_pending = [f for f in doc["findings"] if f["controller_state"] == "PENDING"]
    assert held_pending and {f["kind"] for f in held_pending} == {"not-started"}


def test_a_snapshot_under_the_limit_saves_every_job(limited: SimCluster, tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    run = run_cli(
        "snapshot", "-o", str(out), env={"SPUR_CONTROLLER_ADDR": limited.controller_address}
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert {j["job_id"] for j in doc["jobs"]} == set(limited.state.jobs)
    assert doc["view"]["complete"] is True
    assert max(limited.answer_sizes) <= LIMIT


def test_the_watermark_counts_jobs_that_ended_above_every_live_one() -> None:
    with SimCluster(incident(), agents=False) as sim:
        newest = max(sim.state.jobs)
        for job_id in (newest, newest - 1, newest - 2):  # the newest jobs have all ended
            ended = sim.job(job_id)
            assert ended is not None
            sim.set_job(msgspec.structs.replace(ended, state=JobState.COMPLETED))
        with ControllerClient(Connection((sim.controller_address,), timeout=10)) as client:
            view = client.view()
    assert view.bounded and newest in view.jobs
    assert view.estimated_watermark() == newest + 1


def test_a_node_answer_over_the_limit_is_one_clear_error(tmp_path: Path) -> None:
    with SimCluster(incident(), agents=False, nodes_answer_limit=1_000) as sim:
        run = run_cli("audit", "--all", env={"SPUR_CONTROLLER_ADDR": sim.controller_address})
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused to send its GetNodes answer" in lines[0]
    assert "encoded message length too large" in lines[0]


def _running_on_one_node(sim: SimCluster) -> tuple[int, str]:
    return min(
        (j.job_id, j.nodelist)
        for j in sim.state.jobs.values()
        if j.state is JobState.RUNNING and j.nodelist and "[" not in j.nodelist
    )


@pytest.mark.parametrize("limit", [None, LIMIT], ids=["one answer", "split by node"])
def test_a_running_job_on_a_node_getnodes_does_not_list_is_named_and_the_view_incomplete(
    tmp_path: Path, limit: int | None
) -> None:
    with SimCluster(large(**SMALL), agents=False, answer_limit=limit) as sim:
        job_id, node = _running_on_one_node(sim)
        sim.unlist_node(node)
        doc = audit_json(sim, tmp_path)
    assert doc["view"]["complete"] is False
    notes = doc["notes"]
    assert any(f"job {job_id} on {node}" in n and "GetNodes does not list" in n for n in notes)
    assert not any("without a nodelist" in n for n in notes), notes
    # No credential was presented: the shortfall is not blamed on credential scoping.
    (incomplete,) = [n for n in notes if n.startswith("controller view is INCOMPLETE")]
    assert "no credential was presented" in incomplete
    assert "scopes GetJobs to the credential's user" not in incomplete
