"""Helpers for end-to-end tests: the audit pipeline in-process against a simulated cluster."""

from __future__ import annotations

from pathlib import Path

from spurctl.cli import Sources, connection, run_audit_sources
from spurctl.model import AuditReport, Finding
from spurctl.simcluster import SimCluster

KEY = "e2e-cluster-key-0123456789abcdef0123"


def audit_live(
    sim: SimCluster,
    inventory: Path,
    *,
    nodes: str | None = None,
    token: str | None = None,
    conf: Path | None = None,
    include_healthy: bool = False,
) -> AuditReport:
    conn = connection(controller=sim.controller_address, conf=conf, token=token, timeout=5.0)
    src = Sources(nodes, [str(inventory)], False, "", 1)
    report, _ = run_audit_sources(src, conn, watermark=None, include_healthy=include_healthy)
    return report


def by_key(findings: list[Finding]) -> dict[tuple[str, int | None], Finding]:
    return {(f.node, f.job_id): f for f in findings}
