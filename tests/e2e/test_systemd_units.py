"""The shipped systemd service and timer: systemd-analyze verifies them, and the
service's own ExecStart line, run for real, writes the metrics file."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import WORKTREE, run_process
from tests.tools import require

UNITS = WORKTREE / "contrib" / "systemd"
INSTALLED_AT = "/usr/local/bin/spurctl"


def verify(*units: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require("systemd-analyze"), "verify", *map(str, units)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def installed_copies(tmp_path: Path) -> list[Path]:
    """The units as installed here: ExecStart names this checkout's spurctl, since
    verify checks that the program exists."""
    program = Path(sys.executable).with_name("spurctl")
    assert program.exists(), f"{program}: install the package (pip install -e .)"
    copies = []
    for name in ("spurctl-audit.service", "spurctl-audit.timer"):
        copy = tmp_path / name
        copy.write_text((UNITS / name).read_text().replace(INSTALLED_AT, str(program)))
        copies.append(copy)
    return copies


def test_systemd_analyze_verifies_the_service_and_timer(tmp_path: Path) -> None:
    probe = tmp_path / "probe" / "probe.service"
    probe.parent.mkdir()
    probe.write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    if verify(probe).returncode != 0:  # systemd-analyze cannot work in this container
        pytest.skip(f"systemd-analyze verify cannot run here: {verify(probe).stderr.strip()}")

    check = verify(*installed_copies(tmp_path))

    assert check.returncode == 0, check.stderr
    assert check.stderr.strip() == "", "systemd-analyze warned: " + check.stderr


def test_the_timer_starts_the_service_every_few_minutes() -> None:
    timer = (UNITS / "spurctl-audit.timer").read_text()
    assert re.search(r"^OnUnitInactiveSec=5min$", timer, re.M)
    assert re.search(r"^WantedBy=timers.target$", timer, re.M)


def test_the_services_command_line_writes_the_metrics_for_node_exporter(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    service = (UNITS / "spurctl-audit.service").read_text()
    line = re.search(r"^ExecStart=(.*)$", service, re.M)
    assert line is not None
    argv = shlex.split(line[1])
    assert argv[0] == INSTALLED_AT and argv[1] == "audit"
    # What /etc/default/spurctl-audit would say, and a textfile directory of our own.
    args = ["--controller", sim.controller_address, "--inventory", str(inventory)]
    out = tmp_path / "spurctl.prom"
    expanded = ["audit"]
    for word in argv[2:]:
        if word == "$SPURCTL_AUDIT_ARGS":
            expanded += args
        elif word.endswith("/spurctl.prom"):
            assert word == "/var/lib/prometheus/node-exporter/spurctl.prom"  # Debian's directory
            expanded.append(str(out))
        else:
            expanded.append(word)

    run = run_process(*expanded)

    # Exit 1 (findings to act on) is a success for the unit: the file is written.
    assert run.returncode == 1, run.stderr
    assert re.search(r"^SuccessExitStatus=1$", service, re.M)
    text = out.read_text()
    assert 'spurctl_findings{kind="terminal-held"} 1' in text.splitlines()
    assert "# TYPE spurctl_audit_timestamp_seconds gauge" in text.splitlines()
