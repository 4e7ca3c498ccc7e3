"""`spurctl --help`, `--version` and every command's --help stay light.

grpc, protobuf and ClusterShell cost most of a second to import on a small
machine; only the commands that talk to a cluster or expand hostlists may pay
for them, and only when they run. Checked in a real interpreter with
`-X importtime`, which lists every module the process imported.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli import clean_env, home_for

HEAVY = ("grpc", "google.protobuf", "ClusterShell")


def imported_modules(*argv: str) -> set[str]:
    """Every module `python -X importtime ARGV...` imported (ARGV after the interpreter)."""
    env = clean_env(home_for(), COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def spurctl_modules(*argv: str) -> set[str]:
    return imported_modules("-m", "spurctl", *argv)


def commands() -> list[str]:
    import typer.main

    from spurctl.cli import app

    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("argv", [["--help"], ["--version"]], ids=["help", "version"])
def test_the_root_help_and_version_import_no_grpc_protobuf_or_clustershell(
    argv: list[str],
) -> None:
    modules = spurctl_modules(*argv)
    assert "spurctl.cli" in modules  # the check sees our imports at all
    assert heavy(modules) == []


def test_no_command_help_imports_grpc_protobuf_or_clustershell() -> None:
    names = commands()
    assert {"audit", "reclaim", "snapshot", "collect", "node-inventory"} <= set(names)
    for name in names:
        assert heavy(spurctl_modules(name, "--help")) == [], name


def test_the_check_sees_a_heavy_import_when_there_is_one() -> None:
    modules = imported_modules(
        "-c", "from spurctl.hostlist import parse_scope; parse_scope('gpu[1-2],cpu[3-4]')"
    )
    assert "ClusterShell.NodeSet" in heavy(modules)
