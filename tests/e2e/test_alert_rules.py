"""The shipped Prometheus alerting rules: promtool checks them and runs their unit
tests, and every metric they alert on is one `audit --format prometheus` writes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from spurctl.simcluster import SimCluster
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
    assert "SUCCESS: 5 rules found" in check.stdout


def test_the_rules_unit_tests_pass_in_promtool() -> None:
    run = promtool("test", "rules", RULE_TESTS.name)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_each_alert_the_issue_asks_for_is_shipped_and_unit_tested() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    alerts = {rule["alert"]: rule for rule in rules}
    assert set(alerts) == {
        "SpurctlStrandedNode",
        "SpurctlAuditNotRunning",
        "SpurctlAgentsUnreachable",
        "SpurctlControllerViewIncomplete",
        "SpurctlDrainLeftTooLong",
    }
    assert alerts["SpurctlStrandedNode"]["for"] == "15m"
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
