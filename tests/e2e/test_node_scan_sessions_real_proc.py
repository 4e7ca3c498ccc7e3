"""spurstepd sessions against the real /proc: a live supervisor bound by pid and start ticks.

A real process named spurstepd stands in for the supervisor (the same name, as
/proc/<pid>/comm shows it), another one carrying SPUR_JOB_ID for its workload; the
descriptor records their real pids and start ticks (/proc/<pid>/stat field 22), as
stepd.rs `run_process` does. A descriptor whose ticks are not the process's own is
stale (the pid names another process), and once the supervisor exits its session
is stale too. Every process started here is killed and reaped, with a deadline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.holdings import Holding, SessionBinding
from spurctl.node.node_scan import scan
from tests.unit.test_node_scan import holdings

JOB = 3_999_999_002
BATCH = 0xFFFF_FFFE


def start_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[19])


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait(timeout=10)


def descriptor(state: Path, attempt: int, pid: int, ticks: int, workload: int, wticks: int) -> None:
    session = state / "runtime" / f"{JOB}.{attempt}.{BATCH}"
    session.mkdir(parents=True)
    doc = {
        "format_version": 1,
        "job_id": JOB,
        "run_attempt": attempt,
        "step_id": BATCH,
        "pid": pid,
        "process_start_ticks": ticks,
        "socket_path": str(session / "runtime.sock"),
        "cgroup_path": "",
        "workload_pid": workload,
        "workload_start_ticks": wticks,
    }
    (session / "descriptor.json").write_text(json.dumps(doc))


def held(tmp_path: Path, state: Path) -> Holding | None:
    inv = scan(tmp_path / "no-cgroups", Path("/proc"), "here", state_dir=state)
    return holdings(inv).get(JOB)


def test_a_real_supervisor_is_bound_by_its_pid_and_start_and_goes_stale_when_it_exits(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "bin").mkdir()
    supervisor_exe = tmp_path / "bin" / "spurstepd"
    supervisor_exe.symlink_to(Path("/bin/sleep"))
    supervisor = subprocess.Popen([str(supervisor_exe), "60"])
    processes.append(supervisor)
    workload = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "SPUR_JOB_ID": str(JOB)},
    )
    processes.append(workload)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{supervisor.pid}/comm").read_text().strip() != "spurstepd":
        assert time.monotonic() < deadline, "the supervisor never exec'd"
        time.sleep(0.02)
    state = tmp_path / "state"
    s_ticks, w_ticks = start_ticks(supervisor.pid), start_ticks(workload.pid)
    descriptor(state, 2, supervisor.pid, s_ticks, workload.pid, w_ticks)

    h = held(tmp_path, state)
    assert h is not None
    (session,) = h.sessions
    assert session.binding is SessionBinding.LIVE and session.workload == workload.pid
    assert h.attempt == 2 and h.supervisors == (supervisor.pid,)
    assert {supervisor.pid, workload.pid} <= set(h.pids)

    # The same pid with other start ticks: another process than the one recorded.
    other = tmp_path / "other"
    descriptor(other, 3, supervisor.pid, s_ticks + 1, workload.pid, w_ticks)
    h = held(tmp_path, other)
    assert h is not None
    (session,) = h.sessions
    assert session.binding is SessionBinding.STALE and "reused" in session.why
    assert h.supervisors == ()

    supervisor.kill()
    supervisor.wait(timeout=10)
    h = held(tmp_path, state)
    assert h is not None  # the workload still runs and carries the job's id
    (session,) = h.sessions
    assert session.binding is SessionBinding.STALE
    # (or, should the kernel hand the pid out again at once, another process's)
    assert session.why == f"pid {supervisor.pid} no longer runs" or "reused" in session.why
    assert session.workload == workload.pid and supervisor.pid not in h.pids
