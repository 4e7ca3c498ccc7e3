"""What every benchmark shares: the simulated cluster in its own process, child processes
timed with their own peak RSS, and one greppable result line per figure."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def env() -> dict[str, str]:
    """This checkout first on the path (spurctl, and the simulator in sim/), so a benchmark
    measures the code beside it."""
    out = dict(os.environ)
    ours = [str(REPO), str(REPO / "sim")]
    out["PYTHONPATH"] = os.pathsep.join([*ours, *filter(None, [os.environ.get("PYTHONPATH")])])
    return out


def compile_bytecode() -> None:
    """Compile this checkout's modules, as `pip install` does for an installed package.

    Run from an editable install with PYTHONDONTWRITEBYTECODE set (as on the
    development VM), every measured run would otherwise compile each spurctl
    module it imports (~45 ms for an audit), a cost no installed spurctl pays and
    the floor's libraries do not pay either: pip compiled theirs.
    """
    import compileall

    for package in (REPO / "spurctl", REPO / "sim" / "spurctl_sim"):
        if not compileall.compile_dir(package, quiet=1):
            raise RuntimeError(f"cannot compile {package}")


@contextlib.contextmanager
def serve(workdir: Path, *args: str, script: str = "simserver.py") -> Iterator[dict[str, Any]]:
    """A bench server (bench/simserver.py, or `script`) in its own process; yields its `ready`
    record."""
    proc = subprocess.Popen(
        [PYTHON, str(REPO / "bench" / script), "--dir", str(workdir), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"bench server did not start (exit {proc.wait()})")
        yield json.loads(line.removeprefix("ready "))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the server stops when its stdin closes
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True, slots=True)
class Run:
    wall: float
    cpu: float  # user + system seconds of the child itself
    peak_rss: int  # bytes
    rc: int
    stdout: str
    stderr: str = ""

    def error(self) -> str:
        """The child's last non-empty line on stderr (its error), or its exit status."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exited {self.rc}"


def run(cmd: Sequence[str], *, stdout_to_null: bool = False, check: bool = True) -> Run:
    """Run a child to completion: its wall time and its own peak RSS (from wait4).

    With `check`, an exit status other than 0 or 1 raises; without, the caller
    reads `rc` and `error()`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.DEVNULL if stdout_to_null else out,
            stderr=err,
            env=env(),
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        if check and rc not in (0, 1):
            sys.stderr.write(stderr)
            raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {rc}")
        # ru_maxrss is in KiB on Linux.
        cpu = usage.ru_utime + usage.ru_stime
        return Run(wall, cpu, usage.ru_maxrss * 1024, rc, out.read().decode(), stderr)


def self_maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def gib(n: int) -> str:
    return f"{n / 2**30:.2f}GiB" if n >= 2**30 else f"{n / 2**20:.0f}MiB"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
