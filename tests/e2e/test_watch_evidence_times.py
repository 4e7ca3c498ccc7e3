"""`audit --watch` tells the real age (#43 item 7): each holding says since when the
evidence has it stranded (the job's end, its move elsewhere), apart from how long the
watch has seen it, on a terminal and down a pipe."""

from __future__ import annotations

import re
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import clean_env, on_a_terminal, read_terminal, run_cli, spurctl_argv
from tests.e2e.test_watch_cli import Screen, watch

# The incident: 4702 ended on gpu012 at 23:40:51 on Dec 1; 4711 moved to gpu015 and its
# new run started at 22:16:05, leaving the old run on gpu003 (sim/spurctl_sim/scenarios).
ENDED = "2026-12-01T23:40:51Z"
MOVED = "2026-12-01T22:16:05Z"


def _when(stamp: str, header: str) -> str:
    """The time as the view writes it: the clock alone on the round's own day."""
    day = re.search(r"round 1, (\d{4}-\d\d-\d\d)T", header)
    assert day, header
    return stamp[11:19] if stamp.startswith(day[1]) else stamp


def test_down_a_pipe_each_holding_is_dated_by_its_evidence_and_watched_apart(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    run = run_cli(
        *watch(sim, inventory, "--nodes", "gpu[003,012]", "--rounds", "1"),
        home=tmp_path / "home",
        env={"COLUMNS": "200"},
    )
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    header = lines[0]
    (head,) = [line for line in lines if line.startswith("node ")]
    assert head.split()[5:8] == ["since", "watched", "status"]
    (ended,) = [line for line in lines if line.startswith("gpu012 ") and " 4702 " in line]
    assert ended.split()[5:8] == ["ended", _when(ENDED, header), "0s"]
    (moved,) = [line for line in lines if line.startswith("gpu003 ") and " 4711 " in line]
    assert moved.split()[5:8] == ["moved", _when(MOVED, header), "0s"]


def test_on_a_terminal_the_view_says_when_the_job_ended_and_how_long_it_was_watched(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    argv = spurctl_argv(*watch(sim, inventory, "--nodes", "gpu012", "--rounds", "1"))
    env = clean_env(tmp_path / "home", COLUMNS="80", LINES="30", TERM="xterm-256color")

    def to_the_end(terminal: int) -> bytes:
        return read_terminal(terminal, lambda _: False)

    status, seen = on_a_terminal(argv, env, to_the_end)

    assert status == 1
    screen = Screen(80, 30)
    screen.feed(seen)
    lines = [line for line in screen.lines() if line]
    header = next(line for line in lines if line.startswith("spurctl audit --watch: round 1"))
    # At 80 columns each finding's times are a line of their own, each labelled. The job
    # ended days ago, but the file was collected before the watch began: not stranded,
    # stale inv (docs/watch.md).
    row = next(i for i, line in enumerate(lines) if re.match(r"\s+4702\s+terminal-held", line))
    assert lines[row + 1].split() == [
        "ended",
        _when(ENDED, header),
        "watched",
        "0s",
        "stale",
        "inv",
    ]
