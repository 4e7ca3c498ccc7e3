"""The controller-version note on a screen: its short form (what it means, how to hide it),
whole, told once per watch, and gone once the operator acknowledges the version (option,
environment variable or config file); the whole note stays in JSON `notes`, and in
`explain` until acknowledged (tests/e2e/test_version_note_words.py)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import termios
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import cli_process, lines_of, read_terminal, run_cli
from tests.e2e.test_version_note_words import HIDE, SAYS, shown_note
from tests.e2e.test_watch_cli import Screen, read_round, watch

NOTE = f"{SAYS} {HIDE}"
WHOLE = "cannot tell them apart"  # a phrase of the whole note, never on a screen
HEADER = b"spurctl audit --watch: round "


def test_on_an_80x24_terminal_the_watch_tells_the_version_whole_in_its_first_round_only(
    sim: SimCluster, tmp_path: Path
) -> None:
    assert sim.state.version == "0.8.0"
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    controller_side, terminal_side = pty.openpty()
    fcntl.ioctl(terminal_side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    size = {"COLUMNS": "80", "LINES": "24", "TERM": "xterm-256color"}
    argv = watch(sim, inventory, "--interval", "0.5", "--rounds", "3")
    with cli_process(*argv, home=tmp_path / "home", stdout=terminal_side, env=size) as proc:
        os.close(terminal_side)
        # Up to the end of the first drawing's note (the drawing is written in pieces).
        seen = read_terminal(controller_side, lambda shown: b"config file)." in shown)
        first = Screen(80, 24)
        first.feed(seen)
        seen = read_terminal(controller_side, lambda _: False, seen=seen)  # to the end
        _, err = proc.communicate(timeout=30)
        os.close(controller_side)
    assert proc.returncode == 1, err

    lines = first.lines()
    assert "round 1," in lines[0]
    assert shown_note(lines) == NOTE, "\n".join(lines)  # whole, wrapped at 80 columns
    assert " ".join(lines).count("ack-version") == 1
    assert WHOLE not in " ".join(lines)

    # Every drawing of round 1 carries the line; no drawing of a later round does.
    drawings = seen.split(HEADER)[1:]
    numbers = [int(d.split(b",", 1)[0]) for d in drawings]
    assert set(numbers) == {1, 2, 3}, numbers
    for number, drawing in zip(numbers, drawings, strict=True):
        assert (b"Spur 0.8.0 may free" in drawing) is (number == 1), (number, drawing)


def test_a_watch_in_a_pipe_tells_the_version_in_its_first_block_only(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    argv = watch(sim, inventory, "--interval", "0.2", "--rounds", "3")
    with cli_process(*argv, home=tmp_path / "home", env={"COLUMNS": "200"}) as proc:
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        blocks = [read_round(proc, lines) for _ in range(3)]
        proc.wait(timeout=30)
    assert [shown_note(block) for block in blocks] == [NOTE, None, None]


def _acknowledged(how: str, version: str, home: Path) -> tuple[list[str], dict[str, str]]:
    """The arguments and environment that acknowledge `version` the way `how` names."""
    if how == "option":
        return ["--ack-version", version], {}
    if how == "environment":
        return [], {"SPURCTL_ACK_VERSION": version}
    config = home / ".config" / "spurctl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'ack_version = "{version}"\n')
    return [], {}


@pytest.mark.parametrize("how", ["option", "environment", "config-file"])
def test_acknowledging_the_version_drops_its_line_and_keeps_the_whole_note_elsewhere(
    how: str, incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agents = incident_cluster
    home = tmp_path / "home"
    args, env = _acknowledged(how, "0.8.0", home)
    env["SPUR_CONTROLLER_ADDR"] = sim.controller_address
    base = ("--inventory", str(inventory))
    table = run_cli("audit", *base, *args, home=home, env=env)
    plan = run_cli(
        "reclaim", "--node", "gpu003", "--dry-run", "--agent-map", str(agents), *base, *args,
        home=home, env=env,
    )  # fmt: skip
    doc = run_cli("audit", *base, "--format", "json", *args, home=home, env=env)
    assert table.returncode == 1 and plan.returncode in (0, 1), table.stderr + plan.stderr
    for screen in (table.stdout, plan.stdout):
        assert "Spur 0.8.0 may free" not in screen and WHOLE not in " ".join(screen.split())
        assert "gpu003" in screen  # the report itself is all there
    assert any(WHOLE in note for note in json.loads(doc.stdout)["notes"])
    explained = run_cli("explain", "gpu003", *base, "--json", *args, home=home, env=env)
    assert explained.returncode == 0, explained.stderr
    assert any(WHOLE in note for note in json.loads(explained.stdout)["notes"])

    # Another version is not acknowledged by it: the line is back.
    args, env = _acknowledged(how, "0.7.9", tmp_path / "other")
    env["SPUR_CONTROLLER_ADDR"] = sim.controller_address
    again = run_cli("audit", *base, *args, home=tmp_path / "other", env=env)
    assert shown_note(again.stdout.splitlines()) == NOTE, again.stdout
