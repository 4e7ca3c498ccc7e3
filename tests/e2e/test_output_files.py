"""`-o FILE` replaces only a regular file: a device or FIFO is written in place, a symlink's
target is replaced and the link kept, a socket is refused; nothing else is ever renamed over.

Each case runs the real CLI (`snapshot -o`, `audit -o`) against the simulated controller.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli


def snapshot_to(sim: SimCluster, path: Path, home: Path) -> None:
    proc = run_cli("snapshot", "-o", str(path), "--controller", sim.controller_address, home=home)
    assert proc.returncode == 0, proc.stderr


def test_a_fifo_is_written_in_place_and_its_reader_served(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:  # blocks until the CLI opens the FIFO for writing
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        snapshot_to(lone_controller, fifo, tmp_path / "home")
        reader.join(timeout=30)
    finally:
        if reader.is_alive():  # free the reader: open the FIFO for writing ourselves
            with open(fifo, "wb"):
                pass
            reader.join(timeout=5)
    assert got and json.loads(got[0])["schema"] == "spurctl.snapshot/v1"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a character device needs root")
def test_a_character_device_stays_a_device(lone_controller: SimCluster, tmp_path: Path) -> None:
    null = os.stat("/dev/null")
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, null.st_rdev)
    snapshot_to(lone_controller, device, tmp_path / "home")
    after = device.lstat()
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == null.st_rdev
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_is_kept_and_its_target_replaced(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    real = tmp_path / "reports" / "snap.json"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o644)
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    snapshot_to(lone_controller, link, tmp_path / "home")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["schema"] == "spurctl.snapshot/v1"
    assert real.stat().st_mode & 0o777 == 0o644  # an existing file keeps its read bits
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "latest.json", "reports"]


def test_a_dangling_symlinks_target_is_created_0600(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    real = tmp_path / "snap.json"
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    snapshot_to(lone_controller, link, tmp_path / "home")
    assert link.is_symlink()
    assert real.stat().st_mode & 0o777 == 0o600


def test_a_socket_is_refused_in_one_line_and_left_as_it_is(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        proc = run_cli(
            "audit", "--controller", lone_controller.controller_address, "--inventory",
            str(_empty_inventory(tmp_path)), "-o", str(path), home=tmp_path / "home",
        )  # fmt: skip
        one_line_error(proc, "socket", str(path))
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        server.close()


def _empty_inventory(tmp_path: Path) -> Path:
    path = tmp_path / "none.jsonl"
    path.write_text("")
    return path
