"""Helpers for end-to-end tests: a simulated cluster, its inventory file, the CLI."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from spurctl.cli import Sources, connection, run_audit_sources
from spurctl.model import AuditReport, Finding
from spurctl.simcluster import SimCluster
from tests.cli import clean_env, spurctl_argv

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


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess, in harness.clean_env with a HOME of its own."""
    home = Path(tempfile.mkdtemp(prefix="spurctl-home-"))
    return subprocess.run(
        spurctl_argv(*args),
        capture_output=True,
        text=True,
        env=clean_env(home, **(env or {})),
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )
