"""Issue 43 item 1, through the real CLI: down a pipe, grep finds every node.

`audit -w 'gpu[020-030]' -h | grep gpu026` found nothing: the six nodes the controller
does not know were folded into one `gpu[025-030]` row even in a pipe, though the README
promises one finding per line there. Anywhere but a terminal (a pipe, -o FILE) the table
is one line per finding, unfolded, its reason whole; on a terminal rows that differ only
in their node still fold, and -N/--per-node unfolds them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import on_screen, run_cli

SCOPE = "gpu[020-030]"  # gpu025-gpu030 the controller does not have: alike findings
UNKNOWN = [f"gpu{n:03d}" for n in range(25, 31)]


def _audit(sim: SimCluster, inventory: Path) -> list[str]:
    return ["audit", "-w", SCOPE, "--controller", sim.controller_address,
            "--inventory", str(inventory)]  # fmt: skip


@pytest.mark.parametrize("flags", [["-h"], []], ids=["no-header", "table"])
def test_down_a_pipe_every_finding_is_a_line_that_names_its_node(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path, flags: list[str]
) -> None:
    sim, inventory, _ = incident_cluster
    args = _audit(sim, inventory)
    findings = json.loads(run_cli(*args, "--json", home=tmp_path / "h").stdout)["findings"]
    assert [f["node"] for f in findings if f["kind"] == "not-inventoried"] == UNKNOWN

    piped = run_cli(*args, *flags, home=tmp_path / "h", env={"COLUMNS": "80"})
    assert piped.returncode == 1, piped.stderr
    lines = piped.stdout.splitlines()
    for f in findings:  # `| grep NODE` finds each finding, whole, on a line naming it
        (line,) = [ln for ln in lines if ln.split()[:1] == [f["node"]]]
        assert line.endswith(f["reason"]), line
    assert not [ln for ln in lines if ln.startswith("gpu[025-030]")]
    assert "(6 nodes)" not in piped.stdout
    if flags:
        assert len(lines) == len(findings)


def test_a_file_gets_the_lines_a_pipe_gets(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    report = tmp_path / "audit.txt"
    run = run_cli(*_audit(sim, inventory), "-o", str(report), home=tmp_path / "h")
    assert run.returncode == 1, run.stderr
    lines = report.read_text().splitlines()
    assert [ln.split()[0] for ln in lines if ln.split()[2:3] == ["not-inventoried"]] == UNKNOWN


def test_on_a_terminal_alike_rows_fold_and_per_node_unfolds_them(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    args = _audit(sim, inventory)
    for flags in ([], ["-h"]):
        status, lines = on_screen(*args, *flags, home=tmp_path / "h", width=120, height=40)
        assert status == 1, lines
        (folded,) = [ln for ln in lines if ln.split()[2:3] == ["not-inventoried"]]
        assert folded.split()[0] == "gpu[025-030]", lines
    for flag in ("-N", "--per-node"):
        _, lines = on_screen(*args, flag, home=tmp_path / "h", width=120, height=40)
        rows = [ln.split()[0] for ln in lines if ln.split()[2:3] == ["not-inventoried"]]
        assert rows == UNKNOWN, lines
