"""explain's steps, from hand-built audit inputs (no sockets): guards, proofs, arms, text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spurctl.audit_view import AuditInputs, audit
from spurctl.decide.classify import controller_decision
from spurctl.errors import SpurctlError
from spurctl.model import (
    AgentProcess,
    ControllerView,
    Holding,
    Inventory,
    Job,
    JobState,
    Node,
    NodeState,
    Watermark,
    WatermarkSource,
)
from spurctl.render.explain import render
from spurctl.sources.settings import Connection
from spurctl.usecases.explain import ARMS, explain

NOW = datetime(2026, 12, 2, 14, 47, tzinfo=UTC)


def inputs(
    jobs: list[Job],
    held: list[Holding],
    *,
    total: int | None = None,
    agent: AgentProcess | None = None,
) -> AuditInputs:
    view = ControllerView(
        address="http://ctl:6817",
        version="0.9.0",
        taken_at=NOW,
        jobs={j.job_id: j for j in jobs},
        nodes={n: Node(n, NodeState.ALLOCATED) for n in ("gpu001", "gpu002")},
        jobs_total=len(jobs) if total is None else total,
    )
    inv = Inventory("gpu001", NOW - timedelta(seconds=5), "test", held=tuple(held), agent=agent)
    return AuditInputs(
        view=view,
        inventories={"gpu001": inv},
        watermark=Watermark(100, WatermarkSource.FLAG),
        confirmed={},
        scope=None,
        offline=True,
    )


def doc_for(ins: AuditInputs, job_id: int | None, now: datetime = NOW) -> dict[str, Any]:
    report = audit(ins, include_healthy=True)
    conn = Connection(controllers=("http://ctl:6817",))
    return explain("gpu001", job_id, report, ins, conn, now=now)


def guard_names(doc: dict[str, Any]) -> list[str]:
    return [g["guard"] for g in doc["job"]["guards"]]


def test_every_arm_controller_decision_gives_is_named() -> None:
    kinds = {
        controller_decision("n", job, 5, 10)
        for job in (
            None,
            Job(5, JobState.COMPLETED),
            Job(5, JobState.RUNNING),
            Job(5, JobState.RUNNING, "n"),
            Job(5, JobState.RUNNING, "m"),
            Job(5, JobState.PENDING),
        )
    } | {controller_decision("n", None, 50, 10)}
    assert kinds <= ARMS.keys()
    assert len(kinds) == 7


def test_an_absence_an_incomplete_view_cannot_prove_names_no_arm() -> None:
    ins = inputs([Job(7, JobState.RUNNING, "gpu002")], [Holding(42, started_at=NOW)], total=9)
    doc = doc_for(ins, 42)
    assert doc["job"]["controller"]["tracked"] is None
    assert "incomplete view" in doc["job"]["controller"]["unproven"]
    assert doc["job"]["arm"]["kind"] is None
    assert guard_names(doc)[:2] == ["incomplete-view", "unproven-absence"]
    assert doc["job"]["finding"]["action"] == "spare"
    assert doc["job"]["reclaim"]["send"] is False


def test_id_reuse_and_a_missing_start_time_are_named() -> None:
    job = Job(7, JobState.RUNNING, "gpu002", submit_time=NOW - timedelta(hours=1))
    reused = doc_for(inputs([job], [Holding(7, started_at=NOW - timedelta(days=2))]), 7)
    assert guard_names(reused) == ["id-reuse"]
    assert reused["job"]["finding"]["kind"] == "id-reuse-suspected"
    bare = doc_for(inputs([job], [Holding(7)]), 7)
    assert guard_names(bare) == ["missing-started-at"]
    assert bare["job"]["arm"]["kind"] == "active-elsewhere"
    assert bare["job"]["finding"]["action"] == "investigate"


def test_an_agent_orphan_is_named_and_no_cancel_is_planned() -> None:
    job = Job(7, JobState.COMPLETED, "gpu001", submit_time=NOW - timedelta(days=3))
    agent = AgentProcess(123, NOW - timedelta(hours=1))
    doc = doc_for(inputs([job], [Holding(7, started_at=NOW - timedelta(days=2))], agent=agent), 7)
    assert guard_names(doc) == ["agent-orphan"]
    assert doc["job"]["arm"]["kind"] == "terminal-held"
    assert doc["job"]["finding"]["kind"] == "agent-orphan"
    assert doc["job"]["reclaim"]["send"] is False


def test_a_reclaim_goes_to_the_default_endpoint_without_an_agent_map() -> None:
    job = Job(7, JobState.COMPLETED, "gpu001", submit_time=NOW - timedelta(days=3))
    doc = doc_for(inputs([job], [Holding(7, started_at=NOW - timedelta(days=2))]), 7)
    r = doc["job"]["reclaim"]
    assert (r["endpoint"], r["send"]) == ("gpu001:6818", True)
    assert r["agent_fallback"] is True
    assert r["endpoint_from"] == "guessed: node:port, no --agent-map"
    text = render(doc, "table")
    assert "Reclaim sends:  AgentCancelJob(job_id=7, signal=0) to gpu001:" in text


def test_a_node_without_an_inventory_is_explained_and_an_unknown_one_refused() -> None:
    ins = inputs([], [])
    report = audit(ins)
    doc = explain("gpu002", None, report, ins, None)
    assert doc["inventory"] is None
    assert [f["kind"] for f in doc["findings"]] == ["not-inventoried"]
    assert "Inventory:        none speaks for this node" in render(doc, "table")
    with pytest.raises(SpurctlError, match="unknown node gpu404"):
        explain("gpu404", None, report, ins, None)


def test_an_inventory_too_old_for_reclaim_is_said_not_sent() -> None:
    job = Job(7, JobState.COMPLETED, "gpu001", submit_time=NOW - timedelta(days=3))
    ins = inputs([job], [Holding(7, started_at=NOW - timedelta(days=2))])
    doc = doc_for(ins, 7, now=NOW + timedelta(hours=1))
    assert doc["job"]["finding"]["action"] == "reclaim"
    assert doc["job"]["reclaim"]["send"] is False
    assert "older than --max-inventory-age" in doc["job"]["reclaim"]["why"]


def test_an_earlier_cancel_of_a_holding_with_no_process_is_named_and_nothing_is_sent() -> None:
    from dataclasses import replace

    job = Job(7, JobState.COMPLETED, "gpu001", submit_time=NOW - timedelta(days=3))
    trace = Holding(7, started_at=NOW - timedelta(days=2), traces=("cgroup",))
    sent = NOW - timedelta(minutes=1)
    doc = doc_for(replace(inputs([job], [trace]), cancelled={("gpu001", 7): sent}), 7)
    assert guard_names(doc) == ["earlier-cancel"]
    assert "2026-12-02T14:46:00Z" in doc["job"]["guards"][0]["detail"]
    assert doc["job"]["finding"]["kind"] == "leftover"
    assert doc["job"]["reclaim"]["send"] is False
