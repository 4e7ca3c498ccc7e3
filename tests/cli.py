"""Running spurctl for real in tests: the CLI as a subprocess in a clean environment, dead ports.

Every run gets its own HOME and XDG_STATE_HOME (so ~/.spur/token and the default
journal are the test's own) and no SPUR_* variable from the developer's shell.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[1]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPUR_")}
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / "state"),
        PYTHONPATH=str(WORKTREE),
        # Wide enough that rich never folds a table cell the test reads.
        COLUMNS="240",
    )
    env.update(extra)
    return env


def spurctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "spurctl", *args]


def run_cli(
    *args: str, home: Path, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        spurctl_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(home, **env),
        stdin=subprocess.DEVNULL,
    )


def stderr_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Assert the contract for an operator error and return the line: exit 2, one line, no trace."""
    lines = stderr_lines(proc)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    line = lines[0]
    assert line.startswith("spurctl: error: "), line
    for word in words:
        assert word.lower() in line.lower(), (word, line)
    return line


def dead_url() -> str:
    """A loopback controller URL nothing listens on: connections are refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
