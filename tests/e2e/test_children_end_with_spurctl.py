"""Every command spurctl starts ends with it: however spurctl is stopped (kill -9, SIGTERM,
SIGHUP), its per-node collect commands are gone within seconds, never left orphaned.

Each node's command is real: it writes its pid and sleeps for minutes. spurctl runs in
a session of its own, and the commands are looked for by pid after it is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident, node_line
from tests import standin_ssh
from tests.cli import cli_process

NODES = ("gpu001", "gpu002", "gpu003")
STARTED_WITHIN_S = 30.0
GONE_WITHIN_S = 15.0  # the keeper's grace is 2 s


def make_sim() -> SimCluster:
    return SimCluster(incident(), agents=False)  # the `sim` fixture (tests/conftest.py)


def hanging(tmp_path: Path) -> tuple[str, Path]:
    """A --command whose node writes its pid to DIR/NODE.pid and then sleeps (node_line)."""
    answers = tmp_path / "answers"
    answers.mkdir(parents=True)
    for node in NODES:
        (answers / f"{node}.hang").write_text("300")
    return node_line.answers_command(answers), answers


def compound(tmp_path: Path) -> tuple[str, Path]:
    """A --command that is a shell's script: the sleep is the shell's child, not spurctl's."""
    pids = tmp_path / "pids"
    pids.mkdir()
    return f"sh -c 'sleep 300 & echo $! > {pids}/%h.pid; wait'", pids


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a PID 1 that never reaps)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


class AbortedEarly(Exception):
    """spurctl ended on SIGABRT before its commands started: gRPC's poller, under load, in
    a watch whose rounds fork (seen before this test's change too); not what is tested."""


def started(pids: Path, proc: subprocess.Popen[str]) -> list[int]:
    deadline = time.monotonic() + STARTED_WITHIN_S
    while True:
        found = [pids / f"{node}.pid" for node in NODES]
        texts = [p.read_text().strip() if p.exists() else "" for p in found]
        if all(texts):
            return [int(t) for t in texts]
        if proc.poll() is not None:
            _, err = proc.communicate(timeout=10)
            if proc.returncode == -signal.SIGABRT and "epoll_wait error" in err:
                raise AbortedEarly(err)
            raise AssertionError(f"spurctl ended ({proc.returncode}) before its commands: {err}")
        assert time.monotonic() < deadline, "the commands did not start"
        time.sleep(0.05)


def still_running_after(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := [p for p in pids if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:  # what this test started must not outlive it
        os.kill(pid, signal.SIGKILL)
    return left


def audit(sim: SimCluster, command: str, *extra: str) -> list[str]:
    nodes = f"gpu[{NODES[0][3:]}-{NODES[-1][3:]}]"
    return [
        "audit", *extra, "--collect", "--nodes", nodes, "--command", command,
        "--controller", sim.controller_address,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("how", "extra"),
    [
        (signal.SIGTERM, ()),
        (signal.SIGKILL, ("--watch",)),
        (signal.SIGTERM, ("--watch",)),
        (signal.SIGHUP, ("--watch",)),
    ],
    ids=["audit-SIGTERM", "watch-SIGKILL", "watch-SIGTERM", "watch-SIGHUP"],
)
def test_the_collect_commands_end_when_spurctl_is_stopped(
    sim: SimCluster, tmp_path: Path, how: signal.Signals, extra: tuple[str, ...]
) -> None:
    for attempt in range(3):
        command, pids = hanging(tmp_path / str(attempt))
        with cli_process(*audit(sim, command, *extra), home=tmp_path / "home") as proc:
            try:
                children = started(pids, proc)
            except AbortedEarly:
                continue
            assert all(running(p) for p in children)
            proc.send_signal(how)
            proc.wait(timeout=20)
            # Inside: leaving the block kills spurctl's whole process group, which would
            # hide an orphan still in it.
            assert still_running_after(children) == []
            return
    pytest.fail("spurctl aborted three times before its commands started")


def test_what_a_command_started_itself_ends_too_even_after_kill_9(
    sim: SimCluster, tmp_path: Path
) -> None:
    command, pids = compound(tmp_path)
    with cli_process(*audit(sim, command), home=tmp_path / "home") as proc:
        grandchildren = started(pids, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
        assert still_running_after(grandchildren) == []


def test_a_collect_that_ends_leaves_no_command_behind(tmp_path: Path) -> None:
    # Nodes past --node-timeout: ClusterShell kills each one's shell, and the shell's own
    # child (the sleep) ends with this spurctl, not 300 s later.
    command, pids = compound(tmp_path)
    nodes = f"gpu[{NODES[0][3:]}-{NODES[-1][3:]}]"
    argv = ["collect", "--nodes", nodes, "--command", command, "--node-timeout", "2"]
    with cli_process(*argv, home=tmp_path / "home") as proc:
        grandchildren = started(pids, proc)
        assert proc.wait(timeout=60) == 1  # every node failed: no answer within 2 s
        assert still_running_after(grandchildren) == []


def test_the_gateway_trees_commands_end_after_kill_9(tmp_path: Path) -> None:
    # The relays run in sessions of their own (their timeouts kill what they started), so
    # the keeper's group does not reach them: the relay here ends with spurctl
    # (PDEATHSIG), ends its gateway's relay (SIGTERM), which ends the nodes' commands.
    from spurctl.sources.tree import root_name

    ssh = standin_ssh.write(tmp_path / "ssh")
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: gw1\ngw1: gpu[001-003]\n")
    pids = tmp_path / "pids"
    pids.mkdir()
    remote = f"sh -c 'sleep 300 & echo $! > {pids}/$STANDIN_HOST.pid; wait'"
    argv = [
        "collect", "--nodes", "gpu[001-003]", "--topology", str(topology), "--ssh", str(ssh),
        "--remote-command", remote, "--node-timeout", "250", "-o", str(tmp_path / "out"),
    ]  # fmt: skip
    with cli_process(*argv, home=tmp_path / "home") as proc:
        grandchildren = started(pids, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
        assert still_running_after(grandchildren) == []
