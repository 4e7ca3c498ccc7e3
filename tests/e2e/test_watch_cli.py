"""`audit --watch` run for real against a simulated cluster: rounds, failures, Ctrl-C."""

from __future__ import annotations

import fcntl
import os
import pty
import queue
import re
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from spurctl_sim import SimCluster, incident, node_line
from tests.cli import cli_process, lines_of, read_terminal, run_cli

# Wide enough that a finding is one line.
WIDE = {"COLUMNS": "400"}  # a failed round names its file, whose path may be long
# A round takes well under a second here; a loaded machine gets the rest.
ROUND_WITHIN = 30


def watching(
    sim: SimCluster, inventory: Path, tmp_path: Path, *args: str, **popen: Any
) -> AbstractContextManager[subprocess.Popen[str]]:
    """`spurctl audit --watch` against sim, running; killed if still running at the end."""
    options = {"env": WIDE, **popen}
    return cli_process(*watch(sim, inventory, *args), home=tmp_path / "home", **options)


def watch(sim: SimCluster, inventory: Path, *args: str) -> list[str]:
    return [
        "audit",
        "--watch",
        "--inventory",
        str(inventory),
        "--controller",
        sim.controller_address,
        "--timeout",
        "5",
        *args,
    ]


def read_round(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> list[str]:
    """One plain block: from its header to the controller line that ends it."""
    block: list[str] = []
    deadline = time.monotonic() + ROUND_WITHIN
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise AssertionError(f"no round within {ROUND_WITHIN} s: {block}") from None
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"output ended inside a round: {block}; stderr: {err}")
        if not block and not line.strip():
            continue  # the blank line between blocks
        block.append(line.rstrip("\n"))
        if line.startswith("Controller "):
            return block


# The live view's last line: where the view came from, whole or cut to the terminal's width.
_LAST_LINE = re.compile(rb"Controller [^\r\n]*(\(estimated\)\.|\xe2\x80\xa6)")


def drawn(shown: bytes) -> bool:
    """Whether a live view was drawn to its last line: Ctrl-C offered, the controller named."""
    return b"Ctrl-C to stop" in shown and _LAST_LINE.search(shown) is not None


def finish(proc: subprocess.Popen[str]) -> str:
    """Wait (bounded) for the watch to end on its own and return its stderr."""
    proc.wait(timeout=30)
    assert proc.stderr is not None
    return proc.stderr.read()


_CSI = re.compile(rb"\x1b\[([?0-9;]*)([A-Za-z])")


class Screen:
    """Just enough of a terminal for rich's Live: text, CR, LF, cursor up/down/column,
    erase line; a line fed past the bottom scrolls the top one away. `folded` counts
    the lines written wider than the terminal, which it carried on the next line."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.rows = [[" "] * width for _ in range(height)]
        self.row = self.col = 0
        self.scrolled: list[str] = []
        self.folded = 0

    def _newline(self) -> None:
        if self.row == self.height - 1:
            self.scrolled.append("".join(self.rows.pop(0)).rstrip())
            self.rows.append([" "] * self.width)
        else:
            self.row += 1

    def feed(self, data: bytes) -> None:
        i = 0
        while i < len(data):
            m = _CSI.match(data, i)
            if m:
                params, cmd = m.group(1).decode(), m.group(2).decode()
                n = int(params) if params.isdigit() else 1
                if cmd == "A":
                    self.row = max(self.row - n, 0)
                elif cmd == "B":
                    self.row = min(self.row + n, self.height - 1)
                elif cmd == "G":
                    self.col = n - 1
                elif cmd == "K":
                    start = 0 if params in ("2", "1") else self.col
                    end = self.width if params in ("2", "", "0") else self.col + 1
                    self.rows[self.row][start:end] = [" "] * (end - start)
                i = m.end()
                continue
            ch = data[i : i + 1]
            if ch == b"\x1b":  # some other escape: skip it and its one byte
                i += 2
                continue
            if ch == b"\r":
                self.col = 0
            elif ch == b"\n":
                self.col = 0  # the pty's onlcr turns LF into CRLF
                self._newline()
            elif ch >= b" ":
                # Decode a whole UTF-8 sequence as one cell.
                j = i + 1
                while j < len(data) and 0x80 <= data[j] < 0xC0:
                    j += 1
                if self.col >= self.width:
                    self.folded += 1
                    self.col = 0
                    self._newline()
                self.rows[self.row][self.col] = data[i:j].decode(errors="replace")
                self.col += 1
                i = j
                continue
            i += 1

    def lines(self) -> list[str]:
        return ["".join(r).rstrip() for r in self.rows]


def live_and_after_ctrl_c(
    start: Callable[[int, dict[str, str]], AbstractContextManager[subprocess.Popen[str]]],
    width: int,
    height: int,
) -> tuple[Screen, Screen, subprocess.Popen[str], str]:
    """A watch on a pseudo-terminal of `width` x `height`: `start(terminal, env)` runs it
    with stdout on the terminal; the screen once its view is drawn, Ctrl-C, and the screen
    it leaves (with the process and its stderr)."""
    controller_side, terminal_side = pty.openpty()
    fcntl.ioctl(terminal_side, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    size = {"COLUMNS": str(width), "LINES": str(height), "TERM": "xterm-256color"}
    with start(terminal_side, size) as proc:
        os.close(terminal_side)
        seen = read_terminal(controller_side, drawn)
        live = Screen(width, height)
        live.feed(seen)
        proc.send_signal(signal.SIGINT)
        seen = read_terminal(controller_side, lambda _: False, seen=seen)
        _, err = proc.communicate(timeout=30)
        os.close(controller_side)
    final = Screen(width, height)
    final.feed(seen)
    return live, final, proc, err


def row(block: list[str], node: str, job: int) -> list[str]:
    (line,) = [b for b in block if b.startswith(f"{node} ") and f" {job} " in b]
    return line.split()


def test_watch_drops_a_finding_once_the_node_releases_it_and_exits_with_the_last_status(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    cmd = ("--nodes", "gpu012", "--rounds", "2", "--interval", "1")
    with watching(sim, inventory, tmp_path, *cmd) as proc:
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        first = read_round(proc, lines)
        sim.release("gpu012", 4702)
        sim.write_inventories(inventory)  # the operator re-collects into the same file
        second = read_round(proc, lines)
        err = finish(proc)

    assert first[0].startswith("spurctl audit --watch: round 1, ")
    assert row(first, "gpu012", 4702)[:8] == [
        "gpu012",
        "4702",
        "terminal-held",
        "reclaim",
        "no",
        "ended",  # since the job's end (tests/e2e/test_watch_evidence_times.py)
        "2026-12-01T23:40:51Z",
        "0s",  # watched since this round
    ]
    assert second[0].startswith("spurctl audit --watch: round 2, ")
    assert "No discrepancies: 1 node, 1 inventoried." in second
    assert not any("4702" in line for line in second)
    assert (proc.returncode, err) == (0, "")


def test_a_failed_round_is_shown_and_the_watch_goes_on_keeping_each_findings_age(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    cmd = ("--nodes", "gpu012", "--rounds", "3", "--interval", "1")
    with watching(sim, inventory, tmp_path, *cmd) as proc:
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        first = read_round(proc, lines)
        inventory.write_text('{"schema": "spurctl.inventory/v1", "node": \n')  # half-written
        second = read_round(proc, lines)
        sim.write_inventories(inventory)
        third = read_round(proc, lines)
        err = finish(proc)

    assert "FAILED" not in "\n".join(first)
    (failed,) = [line for line in second if "FAILED" in line]
    assert failed.startswith("Round 2 FAILED: ") and "inv.jsonl" in failed
    assert failed.endswith("Showing round 1; a failed round clears no finding.")
    assert row(second, "gpu012", 4702)[5:8] == row(first, "gpu012", 4702)[5:8]
    *since, age = row(third, "gpu012", 4702)[5:8]
    assert since == row(first, "gpu012", 4702)[5:7] and age != "0s"
    # Rounds are timed by their schedule: round 3 of a 1 s watch is 2 s after round 1,
    # never 1.9 s shown as "1s" because round 1's controller read was the slowest.
    assert age.endswith("s") and int(age[:-1]) >= 2, age
    assert (proc.returncode, err) == (1, "")


def test_a_watch_whose_last_round_failed_exits_2_with_one_line(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    cmd = ("--nodes", "gpu012", "--rounds", "2", "--interval", "1")
    with watching(sim, inventory, tmp_path, *cmd) as proc:
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        read_round(proc, lines)
        inventory.unlink()
        second = read_round(proc, lines)
        err = finish(proc)

    assert any(line.startswith("Round 2 FAILED: --inventory ") for line in second)
    assert proc.returncode == 2
    assert err.splitlines() == [
        f"spurctl: error: the last round failed: --inventory {inventory}: no such file or directory"
    ]


def test_ctrl_c_on_a_terminal_leaves_the_last_view_and_exits_with_its_status(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    controller_side, terminal_side = pty.openpty()
    with watching(
        sim,
        inventory,
        tmp_path,
        "--interval",
        "30",
        stdout=terminal_side,
        env={**WIDE, "TERM": "xterm-256color", "LINES": "60"},
    ) as proc:
        os.close(terminal_side)
        seen = read_terminal(controller_side, drawn)
        assert drawn(seen), seen.decode(errors="replace")
        proc.send_signal(signal.SIGINT)
        # Keep draining the terminal, or its final drawing blocks on a full buffer.
        seen = read_terminal(controller_side, lambda _: False, seen=seen)
        _, err = proc.communicate(timeout=30)
        os.close(controller_side)

    text = seen.decode(errors="replace")
    assert "gpu012" in text and "STRANDED" not in text
    # The last drawing is round 1 as it ended, no longer offering Ctrl-C.
    last = text.rsplit("spurctl audit --watch: round ", 1)[1]
    assert last.startswith("1, ") and "Ctrl-C" not in last and "gpu003" in last
    assert "Traceback" not in err and "Aborted" not in err
    assert proc.returncode == 1  # the incident's findings need action


def test_ctrl_c_before_the_first_round_ends_exits_130_without_a_traceback(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), controller_latency=10.0) as slow:
        inventory = slow.write_inventories(tmp_path / "inv.jsonl")
        address = slow.controller_address
        with watching(slow, inventory, tmp_path, "--timeout", "30") as proc:
            time.sleep(1.5)  # started, and waiting on the controller
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)

    assert (proc.returncode, out) == (130, "")
    assert "Traceback" not in err
    (said,) = err.splitlines()
    # "... at ADDRESS" while the answer is awaited; "... at ADDRESS and the inventory
    # files" had the interrupt landed between the two.
    assert said.startswith(
        f"spurctl: interrupted during the first round: reading the controller at {address}"
    )


@pytest.mark.parametrize("command", ["audit", "nodes", "snapshot"])
def test_ctrl_c_while_a_command_reads_the_controller_is_said_in_one_line_and_exits_130(
    tmp_path: Path, command: str
) -> None:
    # Typer ends a run whose command meets Ctrl-C with 130 and says nothing; spurctl says it.
    with SimCluster(incident(), controller_latency=10.0) as slow:
        inventory = slow.write_inventories(tmp_path / "inv.jsonl")
        args = {
            "audit": ["--inventory", str(inventory)],
            "nodes": [],
            "snapshot": ["-o", str(tmp_path / "snapshot.json")],
        }[command]
        with cli_process(
            command, "--controller", slow.controller_address, *args, home=tmp_path / "home"
        ) as proc:
            time.sleep(1.5)  # started, and waiting on the controller
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (130, "", "spurctl: interrupted\n")


def test_ctrl_c_during_a_slow_first_collect_says_it_was_collecting_from_n_nodes(
    sim: SimCluster, tmp_path: Path
) -> None:
    started = tmp_path / "started"  # an ssh that says it started (a file per node), then hangs
    started.mkdir()
    cmd = [
        "audit",
        "--watch",
        "--collect",
        "--command",
        node_line.hanging_command(started),
        "--nodes",
        "gpu[001-005]",
        "--controller",
        sim.controller_address,
        "--timeout",
        "30",
    ]
    with cli_process(*cmd, home=tmp_path / "home", env=WIDE) as proc:
        deadline = time.monotonic() + ROUND_WITHIN
        while len(list(started.iterdir())) < 5:  # the controller read, the five ssh started
            assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)

    assert (proc.returncode, out) == (130, "")
    assert err.splitlines() == [
        "spurctl: interrupted during the first round: collecting inventories from 5 nodes"
    ]


# A finding's row at 80 columns: the table's (its node first), or stacked under its
# node's name (when the cells alone are wider than the screen).
NARROW_ROW = re.compile(r"(\S+|\s+)\s+(\d+|-)\s+[a-z-]+\s+(reclaim|investigate|spare)\b")


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 50), (160, 60)])
def test_on_a_terminal_the_verdict_is_on_screen_and_ctrl_c_leaves_one_view_that_fits(
    sim: SimCluster, tmp_path: Path, width: int, height: int
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    live, final, proc, err = live_and_after_ctrl_c(
        lambda terminal, size: watching(
            sim, inventory, tmp_path, "--interval", "30", stdout=terminal, env=size
        ),
        width,
        height,
    )
    for screen in (live, final):
        lines = [line for line in screen.lines() if line]
        text = "\n".join(lines)
        # Nothing scrolled away, one view on screen, its verdict right under its header.
        assert screen.scrolled == [], screen.scrolled
        assert len(lines) < height
        assert text.count("spurctl audit --watch: round ") == 1, text
        assert lines[0].startswith("spurctl audit --watch: round 1, ")
        (summary,) = [i for i, line in enumerate(lines) if line.startswith("24 nodes in scope")]
        assert summary <= 2
        assert any(line.startswith("Controller ") for line in lines[-3:]), text
        folded = [line for line in lines if line.startswith("... and ")]
        if width == 80:  # the incident's 14 findings, one line each where lines are short
            rows = sum(bool(NARROW_ROW.match(line)) for line in lines)
            hidden = int(folded[0].split()[2]) if folded else 0
            assert rows > 0 and rows + hidden == 14
    assert "Ctrl-C to stop" in "\n".join(live.lines())
    assert "Ctrl-C" not in "\n".join(final.lines())  # the last round as it ended
    assert "Traceback" not in err and proc.returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--watch", "--format", "csv"],
            "--watch draws a table or writes JSON Lines (--format json); --format csv is "
            "for one-shot audits (drop --watch)",
        ),
        (
            ["--watch", "--format", "json", "-o", "rounds.jsonl"],
            "--kind, --action and -o do not apply with --watch (every round shows every "
            "finding, on stdout: redirect it to keep it)",
        ),
        (["--interval", "5"], "--interval and --rounds only apply with --watch"),
        (["--rounds", "2"], "--interval and --rounds only apply with --watch"),
        (
            ["--watch", "--snapshot", "snap.json"],
            "--watch follows the live controller; a saved --snapshot never changes",
        ),
        (
            ["--watch", "--inventory", "-"],
            "--watch re-reads the inventories every round and standard input (-) can be "
            "read only once: write them to a file (spurctl collect -o FILE)",
        ),
    ],
)
def test_watch_refuses_what_it_cannot_do_with_one_line_and_status_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    run = run_cli("audit", *args, home=tmp_path / "home", env=WIDE, timeout=30, cwd=tmp_path)

    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.splitlines() == [f"spurctl: error: {message}"]


def test_watch_as_json_lines_writes_one_audit_document_per_round_with_each_findings_history(
    sim: SimCluster, tmp_path: Path
) -> None:
    import json

    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    cmd = ("--nodes", "gpu[009,012]", "--rounds", "2", "--interval", "1", "--format", "json")
    run = run_cli(*watch(sim, inventory, *cmd), home=tmp_path / "home", env=WIDE)

    assert (run.returncode, run.stderr) == (1, "")
    lines = run.stdout.splitlines()
    assert len(lines) == 2  # one line per round, nothing else on stdout
    first, second = (json.loads(line) for line in lines)
    for number, doc in enumerate((first, second), 1):
        assert doc["schema"] == "spurctl.audit/v1"
        assert doc["controller"]["address"] == sim.controller_address
        assert doc["summary"]["nodes"] == 2
        watch_key = doc["watch"]
        assert (watch_key["round"], watch_key["report_round"], watch_key["error"]) == (
            number, number, None
        )  # fmt: skip
        assert watch_key["interval_s"] == 1 and watch_key["stranded"] == 0
        assert watch_key["reclaim"] is None  # nothing outlived two heartbeats yet
    by_key = {(f["node"], f["job_id"], f["kind"]): f for f in second["findings"]}
    held = by_key[("gpu012", 4702, "terminal-held")]
    assert (held["since"], held["since_evidence"]) == ("2026-12-01T23:40:51Z", "job-end")
    assert held["first_seen"] == first["watch"]["at"]
    assert held["watched_s"] >= 1 and held["stranded"] is False
    phantom = by_key[("gpu009", None, "phantom-alloc")]
    assert (phantom["since"], phantom["since_evidence"]) == (None, None)
