"""Helpers for end-to-end tests: the audit pipeline in-process against a simulated cluster."""

from __future__ import annotations

from pathlib import Path

from spurctl.audit_view import run_audit
from spurctl.model import AuditReport, Finding
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import connect_settings
from spurctl_sim import SimCluster, incident

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
    conn = connect_settings(
        controller=sim.controller_address, conf_path=conf, token=token, timeout=5.0
    )
    src = Sources(Scope.parse(nodes), [str(inventory)], False, "", 1)
    report, _ = run_audit(src, conn, include_healthy=include_healthy)
    return report


def by_key(findings: list[Finding]) -> dict[tuple[str, int | None], Finding]:
    return {(f.node, f.job_id): f for f in findings}


def secured_incident() -> SimCluster:
    """The incident cluster demanding a credential signed with KEY (agents too)."""
    return SimCluster(incident(), auth="required", jwt_key=KEY)
