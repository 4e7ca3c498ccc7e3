"""GetJobs' lazily converted answer read from a live simulated controller, over real gRPC.

A live view converts each job on first access; everything past the edge must
see exactly what an eager conversion would have given it.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.audit_view import audit, gather
from spurctl.decide.classify import classify
from spurctl.errors import DocumentError, SpurctlError
from spurctl.holdings import held_ids
from spurctl.model import (
    JobTable,
    NodeTable,
    Watermark,
    WatermarkSource,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.controller import ControllerClient
from spurctl.sources.inventories import (
    load_inventories,
    read_view_and_holdings,
    read_view_and_inventories,
)
from spurctl.sources.settings import Connection
from spurctl.sources.snapshot_document import snapshot_from_dict, snapshot_to_dict
from spurctl.sources.wire import (
    job_from_pb,
)
from spurctl_sim import SimCluster, large

SMALL = {"nodes": 120, "jobs": 1_200, "held": 600, "seed": 3}


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(large(**SMALL), agents=False) as sim:
        yield sim


def client_for(sim: SimCluster) -> ControllerClient:
    return ControllerClient(Connection((sim.controller_address,), timeout=30.0))


def test_a_live_view_holds_exactly_the_jobs_an_eager_conversion_gives(
    cluster: SimCluster,
) -> None:
    with client_for(cluster) as client:
        jobs = client.get_jobs()
        answer = client.read("GetJobs", pb.GetJobsRequest())
    assert isinstance(jobs, JobTable)
    eager = {m.job_id: job_from_pb(m) for m in answer.jobs}
    assert len(jobs) == len(eager) == SMALL["jobs"]
    assert list(jobs) == list(eager)  # the answer's order
    assert dict(jobs.items()) == eager
    assert jobs == eager
    # and what the controller holds, field for field
    assert eager == cluster.state.jobs


def test_a_live_view_holds_exactly_the_nodes_the_controller_has(cluster: SimCluster) -> None:
    with client_for(cluster) as client:
        nodes = client.view().nodes
    assert isinstance(nodes, NodeTable)
    assert list(nodes) == list(cluster.state.nodes)  # the answer's order
    assert nodes.allocations() == {n: node.alloc for n, node in cluster.state.nodes.items()}
    assert dict(nodes.items()) == cluster.state.nodes


def test_classifying_a_live_view_finds_what_the_eager_view_finds(cluster: SimCluster) -> None:
    inventories = {inv.node: inv for inv in cluster.inventories()}
    held = {h.job_id for inv in inventories.values() for h in inv.held}
    with client_for(cluster) as client:
        lazy = client.look_up(client.view(), held)  # what an audit reads
    eager = dataclasses.replace(lazy, jobs=dict(lazy.jobs.items()), nodes=dict(lazy.nodes.items()))
    watermark = cluster.next_job_id
    for include_healthy in (False, True):
        a = classify(lazy, inventories, watermark=watermark, include_healthy=include_healthy)
        b = classify(eager, inventories, watermark=watermark, include_healthy=include_healthy)
        assert a == b
    found = {f.kind.value for f in a.findings}
    assert {"healthy", "terminal-held", "active-elsewhere", "lost-on-node"} <= found


def test_a_snapshot_of_a_live_view_carries_every_job(cluster: SimCluster) -> None:
    with client_for(cluster) as client:
        view = client.view(everything=True)
    doc = snapshot_to_dict(view, Watermark(view.estimated_watermark(), WatermarkSource.ESTIMATED))
    assert len(doc["jobs"]) == SMALL["jobs"] == doc["view"]["jobs_seen"]
    saved, _ = snapshot_from_dict(doc, where="snapshot")
    assert saved.jobs == cluster.state.jobs


def test_both_sources_read_at_once_equal_reading_them_one_after_the_other(
    cluster: SimCluster, tmp_path: Path
) -> None:
    inventory = cluster.write_inventories(tmp_path / "inv.jsonl")
    with client_for(cluster) as client:
        view, inventories = read_view_and_inventories(client, [str(inventory)])
        alone = client.view()
    assert inventories == load_inventories([str(inventory)])
    assert view.jobs == alone.jobs and view.nodes == alone.nodes
    with client_for(cluster) as client:
        report = audit(gather(view, inventories, client=client))
    assert report.view_complete and report.jobs_total == SMALL["jobs"] and report.findings


def test_the_held_ids_read_beside_the_view_are_the_inventories_held_ids(
    cluster: SimCluster, tmp_path: Path
) -> None:
    # gather takes them instead of computing them again (where no node repeats).
    inventory = cluster.write_inventories(tmp_path / "inv.jsonl")
    with client_for(cluster) as client:
        view, inventories, held = read_view_and_holdings(client, [str(inventory)])
        assert held == held_ids(inventories) and held
        given = gather(view, inventories, client=client, held=held)
        computed = gather(view, inventories, client=client)
    assert (given.view, given.confirmed, given.watermark) == (
        computed.view,
        computed.confirmed,
        computed.watermark,
    )


def test_ctrl_c_while_a_slow_controller_answers_returns_at_once(tmp_path: Path) -> None:
    with SimCluster(large(**SMALL), agents=False, controller_latency=5.0) as slow:
        inventory = slow.write_inventories(tmp_path / "inv.jsonl")
        timer = threading.Timer(
            0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)
        )
        started = time.monotonic()
        with client_for(slow) as client:
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                read_view_and_inventories(client, [str(inventory)])
        assert time.monotonic() - started < 3.0, "waited for the controller's answer"


def test_a_dead_controller_is_reported_before_a_bad_inventory(tmp_path: Path) -> None:
    bad = tmp_path / "inv.json"
    bad.write_text('{"schema": "something/else"}')
    dead = ControllerClient(Connection(("http://127.0.0.1:1",), timeout=2.0))
    with pytest.raises(SpurctlError, match="did not answer Ping"):
        read_view_and_inventories(dead, [str(bad)])
    with pytest.raises(DocumentError, match="schema"):
        load_inventories([str(bad)])


def test_a_read_sent_ahead_fails_over_when_its_endpoint_is_down(cluster: SimCluster) -> None:
    conn = Connection(("http://127.0.0.1:1", cluster.controller_address), timeout=5.0)
    with ControllerClient(conn) as client:
        assert client.address == "http://127.0.0.1:1"
        answer = client.read_later("GetNodes", pb.GetNodesRequest())()
        assert len(answer.nodes) == SMALL["nodes"]
        assert client.address == cluster.controller_address
        view = client.view()  # Ping now picks the live endpoint first
    assert len(view.nodes) == SMALL["nodes"] and view.complete


def test_a_read_sent_ahead_that_the_controller_refuses_names_endpoint_and_method(
    cluster: SimCluster,
) -> None:
    with client_for(cluster) as client:
        collect = client.read_later("GetNodes", pb.GetNodesRequest(nodelist="gpu[1-"))
        with pytest.raises(
            SpurctlError, match=r"controller http://127\.0\.0\.1:\d+ failed GetNodes"
        ):
            collect()
