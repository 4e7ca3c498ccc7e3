"""The gateway relay's own nodes (node/gateway_relay.py), run as a gateway runs it.

The relay is started as spurctl starts it on a gateway, `python3 -I -S -` with its
program and plan on standard input, and reaches each node through a stand-in ssh
that skips ssh's options, takes the host and runs the command here with the host
in $STANDIN_HOST (as bench/collect_tree.py's). What is pinned: one thread runs every
node's command, however many run at once; each node still gets the whole node
scanner on its standard input, its output capped and counted, and a command that
exits while a process it left holds its output open is reported after the drain,
without holding up the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spurctl.node import gateway_relay
from spurctl.sources.output_cap import OUTPUT_CAP
from tests import standin_ssh


@contextlib.contextmanager
def relay(
    tmp_path: Path,
    nodes: list[str],
    remote: str,
    *,
    fanout: int = 64,
    timeout: float = 60.0,
    cap: int = OUTPUT_CAP,
    scanner: str = "",
) -> Iterator[subprocess.Popen[bytes]]:
    """The relay running `remote` on `nodes` (no sub-gateways); ended at exit."""
    ssh = standin_ssh.write(tmp_path / "ssh")
    data = {
        "relay": Path(gateway_relay.__file__).read_text(encoding="utf-8"),
        "scanner": scanner,
        "cap": cap,
        "ssh": str(ssh),
        "remote": remote,
        "fanout": fanout,
        "timeout": timeout,
        "name": "gw1",
        "plan": {"nodes": nodes, "gateways": {}},
    }
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "STANDIN_HOST"},
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(gateway_relay.program(data))
        proc.stdin.close()
        proc.stdin = None  # written: communicate() reads its output only
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def records(proc: subprocess.Popen[bytes], deadline: float = 60.0) -> list[dict[str, Any]]:
    """Every node line the relay prints, in order, until it exits (within `deadline`)."""
    assert proc.stdout is not None
    out, _ = proc.communicate(timeout=deadline)
    docs = [json.loads(line) for line in out.splitlines()]
    assert docs[0] == {"hello": "gw1"}
    return docs[1:]


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))


def test_a_relay_runs_forty_nodes_at_once_in_one_thread(tmp_path: Path) -> None:
    # Before, each node took a thread of the pool and three more (stdin, stdout,
    # stderr): 161 threads for these 40, and --fanout 1000 would ask for 4,000.
    (tmp_path / "started").mkdir()
    (tmp_path / "ended").mkdir()
    remote = (
        f"touch {tmp_path}/started/$STANDIN_HOST; sleep 8; "
        f"touch {tmp_path}/ended/$STANDIN_HOST; echo ok"
    )
    nodes = [f"n{i:02d}" for i in range(1, 41)]
    seen: list[tuple[int, int]] = []  # (commands running at once, the relay's threads)
    with relay(tmp_path, nodes, remote, fanout=40) as proc:
        until = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < until:
            running = len(os.listdir(tmp_path / "started")) - len(os.listdir(tmp_path / "ended"))
            with contextlib.suppress(FileNotFoundError, StopIteration):
                if running >= 20:
                    seen.append((running, threads_of(proc.pid)))
            time.sleep(0.05)
        got = records(proc)
    assert seen, "never saw 20 of the 40 commands running at once"
    # One thread for all the nodes; the other watches the side above hang up.
    assert max(threads for _, threads in seen) == 2, seen
    assert sorted(d["node"] for d in got) == nodes
    assert all(d["rc"] == 0 and d["stdout"] == "ok\n" for d in got), got


def test_each_node_gets_the_whole_scanner_even_past_a_pipes_buffer(tmp_path: Path) -> None:
    # 1 MiB is sixteen pipe buffers: it is written as each node reads it. A node that
    # never reads its standard input and exits is answered as it answered.
    remote = 'if [ "$STANDIN_HOST" = deaf ]; then echo deaf; else wc -c; fi'
    nodes = ["deaf", "n1", "n2", "n3"]
    with relay(tmp_path, nodes, remote, scanner="x" * (1 << 20)) as proc:
        got = {d["node"]: d for d in records(proc)}
    assert got["deaf"]["rc"] == 0 and got["deaf"]["stdout"] == "deaf\n"
    for node in ("n1", "n2", "n3"):
        assert got[node]["rc"] == 0 and got[node]["stdout"].strip() == str(1 << 20), got[node]


def test_a_nodes_output_past_the_cap_is_counted_and_none_of_it_sent(tmp_path: Path) -> None:
    remote = (
        'if [ "$STANDIN_HOST" = big ]; then head -c 300000 /dev/zero | tr "\\0" a; '
        "else echo small; fi"
    )
    with relay(tmp_path, ["big", "n1"], remote, cap=1000) as proc:
        got = {d["node"]: d for d in records(proc)}
    big, small = got["big"], got["n1"]
    assert (big["printed"], big["cut"], big["stdout"]) == (300_000, 299_000, "")
    assert (small["printed"], small["cut"], small["stdout"]) == (6, 0, "small\n")


def test_a_command_whose_leftover_holds_its_output_is_reported_after_the_drain(
    tmp_path: Path,
) -> None:
    # `slow` exits at once but leaves a process on its stdout; n2 answers meanwhile.
    left = tmp_path / "left.pid"
    remote = (
        'if [ "$STANDIN_HOST" = slow ]; then echo ok; '
        f"sh -c 'echo $$ > {left}; exec sleep 60' & "
        "else sleep 0.5; echo n2; fi"
    )
    try:
        with relay(tmp_path, ["slow", "n2"], remote) as proc:
            started = time.monotonic()
            got = records(proc)
            took = time.monotonic() - started
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(left.read_text()), signal.SIGKILL)
    assert [d["node"] for d in got] == ["n2", "slow"]  # the leftover held up no one
    assert got[1]["rc"] == 0 and got[1]["stdout"] == "ok\n" and not got[1]["timed_out"]
    assert took >= gateway_relay._DRAIN_S  # reported once the drain gave up, not before
    assert took < 60  # and not when the leftover ended


@pytest.mark.parametrize("fanout", [1, 3])
def test_a_command_past_its_timeout_is_killed_and_the_next_ones_run(
    tmp_path: Path, fanout: int
) -> None:
    remote = 'if [ "$STANDIN_HOST" = hung ]; then exec sleep 60; else echo "$STANDIN_HOST"; fi'
    nodes = ["hung", "n1", "n2", "n3", "n4"]
    with relay(tmp_path, nodes, remote, fanout=fanout, timeout=2.0) as proc:
        got = {d["node"]: d for d in records(proc)}
    assert got["hung"]["timed_out"] is True and got["hung"]["rc"] == -signal.SIGKILL
    for node in nodes[1:]:
        assert got[node]["rc"] == 0 and got[node]["stdout"] == f"{node}\n"
        assert got[node]["timed_out"] is False


def test_a_command_that_closes_its_output_and_runs_on_is_killed_at_its_timeout(
    tmp_path: Path,
) -> None:
    # Both its pipes end at once, but it has not exited: it is still the node's
    # command, and its timeout still holds.
    remote = 'if [ "$STANDIN_HOST" = quiet ]; then exec sleep 60 >&- 2>&-; else echo hi; fi'
    with relay(tmp_path, ["quiet", "n1"], remote, timeout=2.0) as proc:
        got = {d["node"]: d for d in records(proc)}
    assert got["quiet"]["timed_out"] is True and got["quiet"]["rc"] == -signal.SIGKILL
    assert got["n1"]["rc"] == 0 and got["n1"]["stdout"] == "hi\n"
