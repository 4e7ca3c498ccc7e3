"""The autopilot as a service: its systemd unit (systemd-analyze verify), its notify
messages over a real $NOTIFY_SOCKET, its metrics file (read by the real node_exporter's
textfile collector) and its alert rules (promtool)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli import WORKTREE, run_cli
from tests.e2e.test_autopilot_e2e import running_fleet, strand
from tests.e2e.test_node_exporter import exporter_on, spurctl_samples
from tests.e2e.test_systemd_units import verify
from tests.tools import require

UNIT = WORKTREE / "contrib" / "systemd" / "spurctl-autopilot.service"
RULES = WORKTREE / "contrib" / "prometheus" / "spurctl-autopilot.rules.yml"
RULE_TESTS = WORKTREE / "contrib" / "prometheus" / "spurctl-autopilot.rules.test.yml"
INSTALLED_AT = "/usr/local/bin/spurctl"


def test_systemd_analyze_verifies_the_autopilot_service(tmp_path: Path) -> None:
    probe = tmp_path / "probe" / "probe.service"
    probe.parent.mkdir()
    probe.write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    if verify(probe).returncode != 0:  # systemd-analyze cannot work in this container
        pytest.skip(f"systemd-analyze verify cannot run here: {verify(probe).stderr.strip()}")
    program = Path(sys.executable).with_name("spurctl")
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace(INSTALLED_AT, str(program)))
    check = verify(copy)
    assert check.returncode == 0, check.stderr
    assert check.stderr.strip() == "", "systemd-analyze warned: " + check.stderr


def test_the_unit_is_a_watched_notify_service_restarted_on_failure() -> None:
    unit = UNIT.read_text()
    for line in ("Type=notify", "Restart=on-failure", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ExecReload=/bin/kill -HUP $MAINPID"):  # fmt: skip
        assert re.search(f"^{re.escape(line)}$", unit, re.M), line
    assert re.search(r"^WatchdogSec=\S+$", unit, re.M)
    [exec_start] = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    assert exec_start.startswith(f"{INSTALLED_AT} autopilot ")
    assert "--metrics-file /var/lib/prometheus/node-exporter/" in exec_start


def test_it_tells_systemd_ready_watchdog_and_status_over_notify_socket(tmp_path: Path) -> None:
    sock_path = tmp_path / "notify.sock"
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock,
        running_fleet(tmp_path, 10, agents=[]) as f,
    ):
        sock.bind(str(sock_path))
        sock.settimeout(30)
        proc = run_cli(*f.args("--interval", "0.2", "--rounds", "2"), home=f.home,
                       env={"NOTIFY_SOCKET": str(sock_path)}, process=True)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        messages = []
        sock.settimeout(0.5)
        while True:
            try:
                messages.append(sock.recv(4096).decode())
            except TimeoutError:
                break
    first = messages[0].split("\n")
    assert first[0] == "READY=1" and "WATCHDOG=1" in first
    assert any(m.startswith("STATUS=spurctl autopilot: round 1 acting") for m in first)
    assert any("STATUS=spurctl autopilot: round 2" in m for m in messages[1:])
    assert all("READY=1" not in m for m in messages[1:])


def test_the_metrics_file_is_read_by_node_exporter_and_names_what_the_rules_use(
    tmp_path: Path,
) -> None:
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    prom = textfiles / "spurctl-autopilot.prom"
    with running_fleet(tmp_path, 10, agents=["gpu0003"]) as f:
        strand(f.sim, 3)
        proc = run_cli(*f.args("--grace", "0", "--rounds", "1", "--metrics-file", str(prom)),
                       home=f.home)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    text = prom.read_text()
    assert 'spurctl_autopilot_actions_total{action="reclaim",result="sent"} 1' in text
    assert "spurctl_autopilot_rounds_total 1" in text
    assert 'spurctl_autopilot_findings{kind="terminal-held"} 1' in text
    assert 'spurctl_autopilot_budget_remaining{budget="max-actions"} 59' in text
    assert oct(prom.stat().st_mode & 0o777) == oct(0o644)  # node_exporter's user reads it
    written = set(re.findall(r"^# TYPE (spurctl_autopilot_\w+) ", text, re.M))
    used = set(re.findall(r"spurctl_autopilot_\w+", RULES.read_text()))
    assert used <= written
    # The real node_exporter's textfile collector serves it as written.
    with exporter_on(textfiles) as exporter:
        served = spurctl_samples(exporter.scrape())
    assert served['spurctl_autopilot_actions_total{action="reclaim",result="sent"}'] == 1
    assert served["spurctl_autopilot_breaker_open"] == 0
    check = subprocess.run(
        [require("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_promtool_checks_the_rules_and_their_unit_tests_fire_each_alert() -> None:
    promtool = require("promtool")
    check = subprocess.run([promtool, "check", "rules", RULES.name], capture_output=True,
                           text=True, timeout=60, cwd=RULES.parent)  # fmt: skip
    assert check.returncode == 0 and "SUCCESS: 4 rules found" in check.stdout, check.stdout
    run = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], capture_output=True,
                         text=True, timeout=60, cwd=RULES.parent)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    alerts = {r["alert"] for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}
    assert {"SpurctlAutopilotBreakerOpen", "SpurctlAutopilotBudgetSpent",
            "SpurctlAutopilotNotRunning"} <= alerts  # fmt: skip
    fired = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == alerts
