"""The shipped Prometheus alerting rules: promtool checks them and runs their unit
tests, and every metric they alert on is one `audit --format prometheus` writes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from spurctl_sim import SimCluster
from tests.cli import WORKTREE, run_cli
from tests.tools import require

RULES = WORKTREE / "contrib" / "prometheus" / "spurctl.rules.yml"
RULE_TESTS = WORKTREE / "contrib" / "prometheus" / "spurctl.rules.test.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require("promtool"), *args],
        capture_output=True, text=True, timeout=60, cwd=RULES.parent,
    )  # fmt: skip


def test_promtool_accepts_the_rules() -> None:
    check = promtool("check", "rules", RULES.name)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 9 rules found" in check.stdout


def test_the_rules_unit_tests_pass_in_promtool() -> None:
    run = promtool("test", "rules", RULE_TESTS.name)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_each_alert_the_issue_asks_for_is_shipped_and_unit_tested() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    alerts = {rule["alert"]: rule for rule in rules}
    assert set(alerts) == {
        "SpurctlStrandedNode",
        "SpurctlStrandedLongAfterItsJob",
        "SpurctlPhantomAllocation",
        "SpurctlNodeNameMismatch",
        "SpurctlAuditNotRunning",
        "SpurctlAgentsUnreachable",
        "SpurctlControllerViewIncomplete",
        "SpurctlDrainLeftTooLong",
        "SpurctlDrainReasonLost",
    }
    assert alerts["SpurctlStrandedNode"]["for"] == "15m"
    # The alerts on one node's kind of finding name the node (#43 item 11).
    for name in (
        "SpurctlStrandedLongAfterItsJob",
        "SpurctlPhantomAllocation",
        "SpurctlNodeNameMismatch",
        "SpurctlAgentsUnreachable",
    ):
        assert "{{ $labels.node }}" in alerts[name]["annotations"]["summary"], name
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert tested == set(alerts), "every alert has a test where it fires"


def test_every_metric_the_rules_use_is_one_the_audit_writes(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    prom = tmp_path / "spurctl.prom"
    run = run_cli(
        "audit", "--controller", sim.controller_address, "--inventory", str(inventory),
        "--format", "prometheus", "-o", str(prom),
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    written = set(re.findall(r"^# TYPE (spurctl_\w+) gauge$", prom.read_text(), re.M))
    used = set(re.findall(r"\bspurctl_\w+", RULES.read_text()))
    # "spurctl_audit" etc. in prose would not be metric names: the rules name only metrics.
    assert used and used <= written, used - written


def test_the_per_node_series_name_the_incidents_nodes_and_date_its_stranded_jobs(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    run = run_cli(
        "audit", "--controller", sim.controller_address, "--inventory", str(inventory),
        "--format", "prometheus",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    samples = dict(
        re.findall(r"^(spurctl_finding(?:_since_seconds)?\{[^}]*\}) (\S+)$", run.stdout, re.M)
    )
    per_node = 'spurctl_finding{{node="{}",kind="{}",action="{}"}}'
    assert samples[per_node.format("gpu009", "phantom-alloc", "investigate")] == "1"
    assert samples[per_node.format("gpu012", "terminal-held", "reclaim")] == "1"
    assert samples[per_node.format("gpu021.cluster.local", "name-mismatch", "investigate")] == "1"
    # 4702 ended on gpu012 at 2026-12-01T23:40:51Z; nothing dates the phantom allocation.
    dated = per_node.replace("spurctl_finding{", "spurctl_finding_since_seconds{")
    ended = dated.format("gpu012", "terminal-held", "reclaim")
    assert float(samples[ended]) == 1796168451.0
    assert dated.format("gpu009", "phantom-alloc", "investigate") not in samples
    # Bounded: only nodes with findings (gpu001-002 run a healthy job and have none).
    assert not any('node="gpu001"' in key for key in samples)
