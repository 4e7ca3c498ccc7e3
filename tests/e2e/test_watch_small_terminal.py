"""`audit --watch` on a small terminal (#53 item 11): the STRANDED reclaim command is
never cut (broken over lines a shell joins back where the terminal is narrower than
it), as many findings are shown as fit, one line each with their reasons cut first,
and a line says how many more there are; nothing is wider than the terminal."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, node_line
from tests.cli import cli_process
from tests.e2e.test_watch_cli import Screen, live_and_after_ctrl_c

# gpu003-013 of the incident: 12 findings, 8 of them holdings the controller ended or
# moved days ago (active-elsewhere on gpu003-008, terminal-held on gpu012): collected
# afresh by the watch, they are STRANDED in its first round.
NODES = "gpu[003-013]"
FINDINGS = 12
STRANDED_NODES = "gpu[003-008,012]"
ROW = re.compile(r"(\S+|\s+)\s+(\d+|-)\s+[a-z-]+\s+(reclaim|investigate|spare)\b")


def _on_a_terminal(
    sim: SimCluster, tmp_path: Path, width: int, height: int
) -> tuple[list[Screen], list[str], int, str]:
    """The watch collecting gpu003-013 on a WIDTHxHEIGHT pseudo-terminal: its live view
    once drawn, then Ctrl-C and the view it leaves; the collect command it was given."""
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    collect = node_line.command(inventory)
    args = ["audit", "--watch", "--collect", "--command", collect, "--nodes", NODES,
            "--controller", sim.controller_address, "--interval", "30"]  # fmt: skip
    live, final, proc, err = live_and_after_ctrl_c(
        lambda terminal, size: cli_process(
            *args, home=tmp_path / "home", stdout=terminal, stderr=subprocess.PIPE, env=size
        ),
        width,
        height,
    )
    return [live, final], args, proc.returncode, err


def _pasted(lines: list[str]) -> list[str]:
    """What a shell reads from the reclaim command's lines as shown: its words."""
    first = next(i for i, line in enumerate(lines) if line.startswith("spurctl reclaim "))
    last = first
    while lines[last].endswith("\\"):
        last += 1
    script = 'spurctl() { printf "%s\\0" "$@"; }\n' + "\n".join(lines[first : last + 1])
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return run.stdout.split("\0")[:-1]


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 40), (60, 20)])
def test_a_small_terminal_shows_the_whole_reclaim_command_and_counts_what_it_leaves_out(
    sim: SimCluster, tmp_path: Path, width: int, height: int
) -> None:
    screens, args, status, err = _on_a_terminal(sim, tmp_path, width, height)

    assert (status, err) == (1, "")
    collect = args[args.index("--command") + 1]
    for screen in screens:
        lines = [line for line in screen.lines() if line]
        text = "\n".join(lines)
        # Nothing wider than the terminal, nothing scrolled away: one view that fits.
        assert (screen.folded, screen.scrolled) == (0, []), text
        assert text.count("spurctl audit --watch: round 1") == 1, text
        assert "STRANDED: 8 reclaimable holdings" in " ".join(lines)
        # The command as a shell reads it from the screen: every word whole.
        assert _pasted(lines) == [
            "reclaim", "--node", STRANDED_NODES, "--collect", "--command", collect,
            "--controller", sim.controller_address,
        ]  # fmt: skip
        rows = [line for line in lines if ROW.match(line)]
        more = [line for line in lines if line.startswith("... and ")]
        hidden = int(more[0].split()[2]) if more else 0
        assert rows and len(rows) + hidden == FINDINGS, text
        assert not more or "; spurctl audit lists all." in " ".join(lines)
        # The most urgent are those shown: the 8 stranded, or only stranded ones.
        stranded = [row for row in rows if "STRANDED" in row]
        assert len(stranded) == min(len(rows), 8), text
        if width == 80:  # at 80x24 each finding is one line: more than the 3 of #53
            assert len(rows) > 3, text
