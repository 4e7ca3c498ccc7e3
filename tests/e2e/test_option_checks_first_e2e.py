"""A mix of options that cannot mean anything is the line an operator reads, before anything
those options name is read (issue #51, item 3): every command builds its request, which
refuses such a mix, before it reads spur.conf, the token or a --topology file, or connects.

Each run is the real CLI in its own process, pointed at a spur.conf and a topology that do not
exist: were either read first, its error would be the line printed instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spurctl import repair_view
from spurctl.usecases import autopilot, checklist
from tests.cli import one_line_error, run_process

MISSING_CONF = "/nonexistent/spur.conf"
MISSING_TOPOLOGY = "/nonexistent/topology.conf"

# Each command, an option mix its request refuses, and the refusal's line.
MIXES = {
    "reclaim": (
        ["reclaim", "--node", "gpu001", "-o", "plan.json"],
        "-o saves the plan of a dry run: add --dry-run (then apply it with --plan FILE)",
    ),
    "repair -o": (
        ["repair", "--node", "gpu001", "-o", "plan.json"],
        "-o saves the plan of a dry run: add --dry-run (then repair with --plan FILE)",
    ),
    "repair --plan": (
        ["repair", "--node", "gpu001", "--plan", "plan.json"],
        "--plan names its own nodes: drop --node, or drop --plan",
    ),
    "repair, no node": (["repair"], repair_view.MISSING_NODES),
    "autopilot": (["autopilot", "--rejoin-checked"], autopilot.REJOIN_WITHOUT_REPAIR),
    "checklist": (["checklist", "post-wipe", "--verify"], checklist.VERIFY_NEEDS_NODES),
    "audit --watch": (
        ["audit", "--watch", "--format", "csv"],
        "--watch draws a table or writes JSON Lines (--format json); --format csv is for "
        "one-shot audits (drop --watch)",
    ),
    "audit --rounds": (
        ["audit", "--rounds", "2"],
        "--interval and --rounds only apply with --watch",
    ),
    "collect": (
        ["collect", "-w", "gpu001", "--timeout", "5", "--node-timeout", "5"],
        "collect's --timeout is the old name of --node-timeout; give --node-timeout only",
    ),
}


@pytest.mark.parametrize("command", sorted(MIXES))
def test_an_option_mix_is_refused_before_spur_conf_or_the_topology_is_read(
    command: str, tmp_path: Path
) -> None:
    argv, says = MIXES[command]
    proc = run_process(
        *argv, "--conf", MISSING_CONF, "--topology", MISSING_TOPOLOGY, home=tmp_path, timeout=30
    )
    line = one_line_error(proc)
    assert line == f"spurctl: error: {says}", line
    assert proc.stdout == ""


def test_the_same_runs_without_the_mix_do_read_spur_conf(tmp_path: Path) -> None:
    """The missing spur.conf is read, and refused, once the options make sense: the test above
    would see its line were the order wrong."""
    proc = run_process(
        "repair", "--node", "gpu001", "--dry-run", "--conf", MISSING_CONF, home=tmp_path,
        timeout=30,
    )  # fmt: skip
    one_line_error(proc, f"cannot read spur.conf {MISSING_CONF}")
