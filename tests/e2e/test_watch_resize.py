"""`audit --watch` on a terminal redraws at once when the terminal is resized
(SIGWINCH), at the new size, not at the next round."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import termios
import time
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import cli_process, read_terminal
from tests.e2e.test_watch_cli import drawn, watch

_ESCAPE = re.compile(rb"\x1b\[[?0-9;]*[A-Za-z]")


def widest(drawing: bytes) -> int:
    """The longest line a drawing writes, escape sequences left out."""
    text = _ESCAPE.sub(b"", drawing).replace(b"\r", b"")
    return max(len(line.decode(errors="replace")) for line in text.split(b"\n"))


def set_size(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def test_a_resized_terminal_gets_the_view_redrawn_at_once_at_its_new_width(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    controller_side, terminal_side = pty.openpty()
    set_size(terminal_side, 40, 140)
    # COLUMNS as a login shell exports it: the new size must come from the terminal.
    env = {"COLUMNS": "140", "LINES": "40", "TERM": "xterm-256color"}
    argv = watch(sim, inventory, "--interval", "300")  # no second round during the test
    with cli_process(*argv, home=tmp_path / "home", stdout=terminal_side, env=env) as proc:
        first = read_terminal(controller_side, drawn)
        assert widest(first) > 100  # drawn at 140 columns
        set_size(terminal_side, 24, 80)
        sent = time.monotonic()
        proc.send_signal(signal.SIGWINCH)
        redrawn = read_terminal(
            controller_side,
            drawn,
            timeout=10,
        )
        took = time.monotonic() - sent
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        os.close(terminal_side)
        os.close(controller_side)
    assert took < 10
    assert b"round 1," in redrawn and b"round 2" not in redrawn  # the same round, again
    assert widest(redrawn) <= 80
