"""`spurctl node-inventory` against the real kernel: real job cgroups, real processes.

Where this machine has a writable cgroup v2 hierarchy (we run as root), the
tests make job cgroups as spurd does (Spur main's `job_<id>`; newer spurd's
`job_<id>_<attempt>/step_<n>`, under a root found from spurd's own cgroup),
put real processes carrying spurd's variables into them, and read them back
through the real CLI. Everything made is killed (cgroup.kill) and removed in a
finally, with deadlines. Skips, saying why, where there is no such hierarchy.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_cli

# A stand-in spurd on the real /proc: one such test on this host at a time (conftest).
pytestmark = pytest.mark.usefixtures("one_standin_spurd")

DEADLINE = 10.0


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        before, _, after = line.partition(" - ")
        if after.split()[:1] == ["cgroup2"]:
            return Path(before.split()[4])
    return None


def _writable_base() -> tuple[Path | None, str]:
    if sys.platform != "linux":
        return None, "not Linux: no cgroups"
    if os.geteuid() != 0:
        return None, "not root: cannot create cgroups or move processes"
    mount = _cgroup2_mount()
    if mount is None:
        return None, "no cgroup v2 hierarchy mounted"
    if not (mount / "cgroup.procs").exists():
        return None, f"{mount} is not a cgroup v2 root"
    base = mount / f"spurctl-e2e-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        base.mkdir()
    except OSError as exc:
        return None, f"cannot create a cgroup under {mount}: {exc.strerror or exc}"
    if not (base / "cgroup.kill").exists():
        base.rmdir()
        return None, f"{mount} has no cgroup.kill (kernel older than 5.14): cleanup not certain"
    return base, ""


def _wait(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {DEADLINE}s waiting for {what}")
        time.sleep(0.02)


class Kernel:
    """Job cgroups and processes made for one test; `close` undoes them all."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.children: list[subprocess.Popen[bytes]] = []

    def cgroup(self, rel: str) -> Path:
        d = self.base.joinpath(*rel.split("/"))
        d.mkdir(parents=True, exist_ok=True)
        return d

    def process(
        self, cgroup: Path, env: dict[str, str], argv: list[str] | None = None
    ) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            argv or [sys.executable, "-c", "import time; time.sleep(120)"],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.children.append(child)
        # The environment is the exec'd program's once exec happened (before,
        # it is ours); a caller passing none waits for its own sign.
        if env:
            marker = f"{next(iter(env))}=".encode()
            _wait(
                f"pid {child.pid} to exec",
                lambda: marker in Path(f"/proc/{child.pid}/environ").read_bytes(),
            )
        (cgroup / "cgroup.procs").write_text(str(child.pid))
        return child

    def close(self) -> None:
        deadline = time.monotonic() + DEADLINE
        with suppress(OSError):
            (self.base / "cgroup.kill").write_text("1")
        for child in self.children:
            with suppress(ProcessLookupError):
                child.send_signal(signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
        # Deepest first; a cgroup empties a moment after its last process is reaped.
        dirs = sorted(
            (Path(root) for root, _, _ in os.walk(self.base)),
            key=lambda p: len(p.parts),
            reverse=True,
        )
        for d in dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)


@pytest.fixture
def kernel() -> Iterator[Kernel]:
    base, why = _writable_base()
    if base is None:
        pytest.skip(f"needs a writable cgroup v2 hierarchy: {why}")
    k = Kernel(base)
    try:
        yield k
    finally:
        k.close()
    assert not base.exists(), f"{base} was left behind"


def inventory(*args: str) -> dict[str, Any]:
    result = run_cli("node-inventory", "--hostname", "e2e-node", *args, timeout=60)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def held(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {h["job_id"]: h for h in doc["held"]}


def spurd_env(job_id: int, **extra: str) -> dict[str, str]:
    return {
        "SPUR_JOB_ID": str(job_id),
        "SLURM_JOB_ID": str(job_id),
        "SPUR_TARGET_NODE": "e2e-target",
        **extra,
    }


def test_every_job_cgroup_layout_is_read_from_the_real_kernel(kernel: Kernel) -> None:
    base_id = 3_990_000_000 + secrets.randbelow(1_000_000) * 10
    old, new, leftover = base_id + 1, base_id + 2, base_id + 3
    root = kernel.cgroup("spur")
    # Spur main (executor.rs setup_cgroup): job_<id>, the process in it.
    p_old = kernel.process(
        kernel.cgroup(f"spur/job_{old}"),
        spurd_env(old, SPUR_JOB_GPUS="0,1", ROCR_VISIBLE_DEVICES="0,1"),
    )
    # Newer spurd: job_<id>_<attempt>/step_<n>; one rank carries no job id at
    # all (only its cgroup says whose it is), the other an Intel tile mask.
    step0 = kernel.cgroup(f"spur/job_{new}_3/step_0")
    step1 = kernel.cgroup(f"spur/job_{new}_3/step_1")
    p_rank0 = kernel.process(step0, spurd_env(new, ZE_AFFINITY_MASK="4.0,4.1"))
    p_rank1 = kernel.process(step1, {"ZE_AFFINITY_MASK": "5"})
    # A release whose rmdir failed: an empty cgroup, no process.
    kernel.cgroup(f"spur/job_{leftover}_1")

    doc = inventory("--cgroup-root", str(root))

    assert doc["source"] == "cgroup+proc" and doc["node"] == "e2e-node"
    got = held(doc)
    assert got[old]["pids"] == [p_old.pid] and got[old]["gpus"] == [0, 1]
    assert got[old]["traces"] == ["cgroup", "process"] and "attempt" not in got[old]
    assert got[new]["attempt"] == 3
    assert sorted(got[new]["pids"]) == sorted([p_rank0.pid, p_rank1.pid])
    assert got[new]["gpus"] == [4, 5]
    assert got[leftover] == {
        **got[leftover],
        "attempt": 1,
        "traces": ["cgroup"],
        "pids": [],
    }
    assert "e2e-target" in doc["target_nodes"] or doc["target_node"] == "e2e-target"
    assert "hostname" in doc and "agent" in doc

    # Killed for real: the processes go, the cgroups stay as traces.
    (kernel.base / "cgroup.kill").write_text("1")
    for child in kernel.children:
        child.wait(timeout=DEADLINE)
    after = held(inventory("--cgroup-root", str(root)))
    assert after[old]["pids"] == [] and after[old]["traces"] == ["cgroup"]
    assert after[new]["pids"] == [] and after[new]["traces"] == ["cgroup"]


def test_the_default_root_is_found_from_a_delegated_spurds_own_cgroup(
    kernel: Kernel, tmp_path: Path
) -> None:
    job_id = 3_980_000_000 + secrets.randbelow(1_000_000)
    # A stand-in spurd: a real process whose comm is "spurd", in the cgroup a
    # systemd unit with Delegate=yes gives it, its jobs beside it.
    binary = tmp_path / "spurd"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", binary)
    unit = "system.slice/spurd.service"
    before = datetime.now(UTC)
    agent = kernel.process(kernel.cgroup(f"{unit}/agent"), {}, [str(binary), "120"])
    _wait("the stand-in spurd", lambda: Path(f"/proc/{agent.pid}/comm").read_text() == "spurd\n")
    job = kernel.process(
        kernel.cgroup(f"{unit}/job_{job_id}_1/step_0"),
        spurd_env(job_id, SPUR_JOB_GPUS="6", CUDA_VISIBLE_DEVICES="6"),
    )

    doc = inventory()  # no --cgroup-root: found from spurd's /proc/<pid>/cgroup

    got = held(doc)
    assert job_id in got, "the job under the delegated root was not found"
    assert got[job_id]["attempt"] == 1 and got[job_id]["pids"] == [job.pid]
    assert got[job_id]["gpus"] == [6]
    assert doc["agent"]["pid"] == agent.pid
    started = datetime.fromisoformat(doc["agent"]["started_at"].replace("Z", "+00:00"))
    slack = timedelta(seconds=2)
    assert before - slack <= started <= datetime.now(UTC) + slack
    # The default (Spur main's fixed root) alone would have missed it.
    missed = held(inventory("--cgroup-root", str(kernel.base / "spur")))
    assert job_id in missed and missed[job_id]["traces"] == ["process"]
    assert "attempt" not in missed[job_id]


def test_the_scanner_inside_a_jobs_cgroup_is_not_that_jobs_work(kernel: Kernel) -> None:
    # `srun spurctl node-inventory`: the scanner runs in the job's cgroup.
    job_id = 3_970_000_000 + secrets.randbelow(1_000_000)
    step = kernel.cgroup(f"spur/job_{job_id}_1/step_0")
    script = (
        "import sys, os, runpy; "
        f"open({str(step / 'cgroup.procs')!r}, 'w').write(str(os.getpid())); "
        "sys.argv = ['spurctl', 'node-inventory', '--cgroup-root', sys.argv[1]]; "
        "runpy.run_module('spurctl', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(kernel.base / "spur")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )

    assert result.returncode == 0, result.stderr
    got = held(json.loads(result.stdout))
    assert got[job_id]["pids"] == [] and got[job_id]["traces"] == ["cgroup"]
