"""`spurctl node-release` against real processes (and, where the machine has one, real cgroups).

A job's run is made of real `sleep` processes carrying spurd's variables; a
stand-in spurd (a copy of sleep named `spurd`) is started after them, as after
a spurd restart (Spur #803). Then, through the real CLI: a dry run kills
nothing; a wrong --started-at is refused and kills nothing; a run begun after
spurd is refused (spurd tracks it: use reclaim); the real release kills them,
journaled. One variant has job cgroups (cgroup v2 with cgroup.kill, as root;
it skips saying why where there is none), one only /proc, so it runs anywhere.
Every wait has a deadline; everything made is killed and removed in a finally.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_cli
from tests.e2e.test_node_scan_cgroup_v2 import Kernel, _writable_base, spurd_env

# A stand-in spurd on the real /proc: one such test on this host at a time (conftest).
pytestmark = pytest.mark.usefixtures("one_standin_spurd")

DEADLINE = 15.0


def _wait(what: str, ready: Callable[[], bool], seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """Running (not exited, not a zombie): the processes are reaped by their own threads."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rpartition(b")")[2].split()[:1] != [b"Z"]


class Processes:
    """Real processes started for one test, each reaped by a thread; `close` kills them all."""

    def __init__(self, tmp: Path) -> None:
        self.children: list[subprocess.Popen[bytes]] = []
        self.spurd_binary = tmp / "spurd"
        shutil.copy(shutil.which("sleep") or "/bin/sleep", self.spurd_binary)

    def start(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            argv,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.children.append(child)
        threading.Thread(target=child.wait, daemon=True).start()
        if env:  # its environment is the exec'd program's once exec happened
            marker = f"{next(iter(env))}=".encode()
            _wait(f"pid {child.pid} to exec", lambda: _environ_has(child.pid, marker))
        return child

    def spurd(self) -> subprocess.Popen[bytes]:
        agent = self.start([str(self.spurd_binary), "120"], {})
        _wait("the stand-in spurd", lambda: _comm(agent.pid) == "spurd")
        time.sleep(0.05)  # a clock tick (10 ms) or more between spurd and what follows
        return agent

    def close(self) -> None:
        for child in self.children:
            with suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        for child in self.children:
            _wait(f"pid {child.pid} to be reaped", lambda c=child: c.returncode is not None)  # type: ignore[misc]


def _environ_has(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    p = Processes(tmp_path)
    try:
        yield p
    finally:
        p.close()


def started_at(job_id: int, *cgroup_args: str) -> str:
    """The run's start time as node-inventory records it (what the finding's command carries)."""
    result = run_cli("node-inventory", *cgroup_args, timeout=60)
    assert result.returncode == 0, result.stderr
    held = {h["job_id"]: h for h in json.loads(result.stdout)["held"]}
    assert job_id in held, f"job {job_id} not seen by node-inventory"
    value: str = held[job_id]["started_at"]
    return value


def release(job_id: int, when: str, journal: Path, *args: str) -> Any:
    return run_cli(
        "node-release", "--job", str(job_id), "--started-at", when,
        "--journal", str(journal), *args, timeout=90,
    )  # fmt: skip


def journal_records(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():
        return []
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def later(when: str) -> str:
    """An hour after `when`: another run's start time."""
    from datetime import timedelta

    from spurctl.model import format_time, parse_time

    parsed = parse_time(when)
    assert parsed is not None
    return format_time(parsed + timedelta(hours=1)) or ""


# -- /proc only: runs everywhere -------------------------------------------------------


def test_node_release_stops_an_orphans_real_processes_by_their_job_id(
    procs: Processes, tmp_path: Path
) -> None:
    job_id = 3_960_000_000 + secrets.randbelow(1_000_000)
    no_cgroups = ("--cgroup-root", str(tmp_path / "no-cgroups"))
    journal = tmp_path / "journal.jsonl"
    env = spurd_env(job_id)
    run = [procs.start(["sleep", "120"], env) for _ in range(2)]
    # One that ignores SIGTERM (the disposition survives exec): only SIGKILL stops it.
    stubborn = procs.start(["sh", "-c", "trap '' TERM; exec sleep 120"], env)
    time.sleep(0.05)
    procs.spurd()  # the restarted agent: younger than the run, so it does not track it
    pids = [p.pid for p in (*run, stubborn)]
    when = started_at(job_id, *no_cgroups)

    dry = release(job_id, when, journal, "--dry-run", *no_cgroups)
    assert dry.returncode == 0, dry.stderr
    assert "an agent orphan" in dry.stdout and "dry run: nothing sent" in dry.stdout
    assert all(str(pid) in dry.stdout for pid in pids), dry.stdout
    assert all(alive(pid) for pid in pids) and journal_records(journal) == []

    wrong = release(job_id, later(when), journal, *no_cgroups)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    assert "another run holds the id now" in wrong.stderr
    assert all(alive(pid) for pid in pids) and journal_records(journal) == []

    done = release(job_id, when, journal, "--grace", "0.5", *no_cgroups)
    assert done.returncode == 0, done.stderr
    for pid in pids:
        _wait(f"pid {pid} to die", lambda pid=pid: not alive(pid))  # type: ignore[misc]
    assert "2 processes exited on SIGTERM; 1 killed after the grace period" in done.stdout
    assert done.stdout.rstrip().endswith(f"Journal: {journal}")
    records = journal_records(journal)
    assert [(r["event"], r["job_id"], r["kind"]) for r in records] == [
        ("intent", job_id, "agent-orphan"),
        ("outcome", job_id, "agent-orphan"),
    ]
    assert records[1]["result"] == "released" and records[0]["node"] == records[1]["node"]
    # A node-release is a run of its own in the journal, read back whole.
    assert {r["schema"] for r in records} == {"spurctl.journal/v1"}
    [run_id] = {r["run"] for r in records}
    shown = run_cli("journal", "--journal", str(journal), "--format", "json")
    [run_doc] = json.loads(shown.stdout)["runs"]
    assert (run_doc["run"], run_doc["sent"], run_doc["confirmed"], run_doc["interrupted"]) == (
        run_id,
        1,
        1,
        False,
    )


def test_node_release_refuses_a_run_its_spurd_launched(procs: Processes, tmp_path: Path) -> None:
    job_id = 3_950_000_000 + secrets.randbelow(1_000_000)
    no_cgroups = ("--cgroup-root", str(tmp_path / "no-cgroups"))
    journal = tmp_path / "journal.jsonl"
    procs.spurd()
    run = procs.start(["sleep", "120"], spurd_env(job_id))  # begun after spurd: it tracks it
    when = started_at(job_id, *no_cgroups)

    refused = release(job_id, when, journal, *no_cgroups)

    assert refused.returncode == 2, refused.stdout
    assert "it is not an agent orphan; use spurctl reclaim" in refused.stderr
    assert alive(run.pid) and journal_records(journal) == []


def test_node_release_refuses_a_job_not_held_and_a_bad_start_time(tmp_path: Path) -> None:
    job_id = 3_940_000_000 + secrets.randbelow(1_000_000)
    args = ("--journal", str(tmp_path / "j.jsonl"), "--cgroup-root", str(tmp_path / "none"))
    missing = run_cli(
        "node-release", "--job", str(job_id), "--started-at", "2026-12-01T14:02:11Z", *args
    )
    assert missing.returncode == 2 and f"job {job_id} is not held" in missing.stderr
    bad = run_cli("node-release", "--job", str(job_id), "--started-at", "yesterday", *args)
    assert bad.returncode == 2 and "is not an RFC 3339 time" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


# -- real job cgroups --------------------------------------------------------------------


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


def test_node_release_kills_an_orphans_job_cgroups_for_real(
    kernel: Kernel, procs: Processes, tmp_path: Path
) -> None:
    job_id = 3_930_000_000 + secrets.randbelow(1_000_000)
    root = kernel.cgroup("spur")
    job_dir = kernel.cgroup(f"spur/job_{job_id}_1")
    journal = tmp_path / "journal.jsonl"
    argv = ["sleep", "120"]
    # Newer spurd's layout: the job's processes in step leaves; one carries no job id at
    # all (only its cgroup says whose it is), one ignores SIGTERM.
    ranks = [
        kernel.process(kernel.cgroup(f"spur/job_{job_id}_1/step_0"), spurd_env(job_id), argv),
        kernel.process(kernel.cgroup(f"spur/job_{job_id}_1/step_1"), {}, argv),
        kernel.process(
            kernel.cgroup(f"spur/job_{job_id}_1/step_1"),
            spurd_env(job_id),
            ["sh", "-c", "trap '' TERM; exec sleep 120"],
        ),
    ]
    for child in ranks:
        threading.Thread(target=child.wait, daemon=True).start()
    time.sleep(0.05)
    agent = kernel.process(kernel.cgroup("agent"), {}, [str(procs.spurd_binary), "120"])
    _wait("the stand-in spurd", lambda: _comm(agent.pid) == "spurd")
    pids = [c.pid for c in ranks]
    at_root = ("--cgroup-root", str(root))
    when = started_at(job_id, *at_root)

    dry = release(job_id, when, journal, "--dry-run", *at_root)
    assert dry.returncode == 0, dry.stderr
    assert f"cgroup.kill in {job_dir}" in dry.stdout
    assert all(str(pid) in dry.stdout for pid in pids), dry.stdout
    assert all(alive(pid) for pid in pids) and job_dir.exists()

    wrong = release(job_id, later(when), journal, *at_root)
    assert wrong.returncode == 2 and "another run holds the id now" in wrong.stderr
    assert all(alive(pid) for pid in pids) and job_dir.exists()
    assert journal_records(journal) == []

    done = release(job_id, when, journal, "--grace", "0.5", *at_root)
    assert done.returncode == 0, done.stdout + done.stderr
    for pid in pids:
        _wait(f"pid {pid} to die", lambda pid=pid: not alive(pid))  # type: ignore[misc]
    assert not job_dir.exists(), "the emptied job cgroup was not removed"
    assert "cgroup.kill written in 1 cgroup; 1 job cgroup removed" in done.stdout
    assert alive(agent.pid), "spurd itself must never be signalled"
    assert [r["event"] for r in journal_records(journal)] == ["intent", "outcome"]
    assert journal_records(journal)[1]["result"] == "released"
    assert sys.platform == "linux"


# -- which processes are the orphan's: cgroup membership, two spurds, a graceful restart --


def _child_of(parent: int, marker: bytes) -> int | None:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if stat.rpartition(b")")[2].split()[1:2] == [str(parent).encode()] and _environ_has(
                int(name), marker
            ):
                return int(name)
    return None


def test_node_release_never_signals_a_process_in_another_jobs_cgroup(
    procs: Processes, tmp_path: Path
) -> None:
    job_id = 3_920_000_000 + secrets.randbelow(1_000_000)
    other = job_id + 1
    root = tmp_path / "cgroups"
    journal = tmp_path / "journal.jsonl"
    mine = procs.start(["sleep", "120"], spurd_env(job_id))
    # It inherited job_id's SPUR_JOB_ID, but sits in the other (live) job's cgroup.
    theirs = procs.start(["sleep", "120"], spurd_env(job_id))
    (root / f"job_{other}").mkdir(parents=True)
    (root / f"job_{other}" / "cgroup.procs").write_text(f"{theirs.pid}\n")
    time.sleep(0.05)
    procs.spurd()
    at_root = ("--cgroup-root", str(root))
    when = started_at(job_id, *at_root)

    dry = release(job_id, when, journal, "--dry-run", *at_root)
    assert dry.returncode == 0, dry.stderr
    assert f"left alone: process {theirs.pid}:" in dry.stdout
    assert f"job {other}'s cgroup, and cgroup membership wins" in dry.stdout

    done = release(job_id, when, journal, "--grace", "0.5", *at_root)
    assert done.returncode == 0, done.stdout + done.stderr
    _wait(f"pid {mine.pid} to die", lambda: not alive(mine.pid))
    assert alive(theirs.pid), "a process of another job's cgroup was signalled"


def test_node_release_refuses_when_two_spurds_run_naming_both(
    procs: Processes, tmp_path: Path
) -> None:
    job_id = 3_910_000_000 + secrets.randbelow(1_000_000)
    no_cgroups = ("--cgroup-root", str(tmp_path / "no-cgroups"))
    journal = tmp_path / "journal.jsonl"
    run = procs.start(["sleep", "120"], spurd_env(job_id))
    time.sleep(0.05)
    old, new = procs.spurd(), procs.spurd()
    when = started_at(job_id, *no_cgroups)

    refused = release(job_id, when, journal, *no_cgroups)

    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "2 top-level spurd processes run on" in refused.stderr
    assert str(old.pid) in refused.stderr and str(new.pid) in refused.stderr
    assert alive(run.pid) and journal_records(journal) == []


def test_after_a_graceful_restart_node_release_frees_only_the_pre_restart_run(
    procs: Processes, tmp_path: Path
) -> None:
    """spurd deregistered on SIGTERM, the job was requeued under the same id onto this
    node, and the new spurd launched it into the same job_<id> cgroup as the old run's
    surviving process: the release stops the old one only, and acts on no cgroup."""
    job_id = 3_900_000_000 + secrets.randbelow(1_000_000)
    root = tmp_path / "cgroups"
    journal = tmp_path / "journal.jsonl"
    orphan = procs.start(["sleep", "120"], spurd_env(job_id))
    time.sleep(0.05)
    shell = tmp_path / "sh-as-spurd" / "spurd"
    shell.parent.mkdir()
    shutil.copy(shutil.which("sh") or "/bin/sh", shell)
    marker = f"SPUR_JOB_ID={job_id}".encode()
    agent = procs.start(
        [str(shell), "-c", f"SPUR_JOB_ID={job_id} SLURM_JOB_ID={job_id} sleep 120 & wait"], {}
    )
    _wait("the requeued run, spurd's child", lambda: _child_of(agent.pid, marker) is not None)
    requeued = _child_of(agent.pid, marker)
    assert requeued is not None
    job_dir = root / f"job_{job_id}"
    job_dir.mkdir(parents=True)
    (job_dir / "cgroup.procs").write_text(f"{orphan.pid}\n{requeued}\n")
    (job_dir / "cgroup.kill").write_text("")
    at_root = ("--cgroup-root", str(root))
    when = started_at(job_id, *at_root)

    dry = release(job_id, when, journal, "--dry-run", *at_root)
    assert dry.returncode == 0, dry.stderr
    assert f"left alone: process {requeued}: it descends from the current spurd" in dry.stdout
    assert "no cgroup.kill there, and it is not removed" in dry.stdout

    done = release(job_id, when, journal, "--grace", "0.5", *at_root)
    _wait(f"pid {orphan.pid} to die", lambda: not alive(orphan.pid))
    assert done.returncode == 0, done.stdout + done.stderr
    assert alive(requeued), "spurd's own run of the requeued job was signalled"
    assert (job_dir / "cgroup.kill").read_text() == "", "cgroup.kill written in a shared cgroup"
    assert job_dir.exists() and "kept (holds a process not released)" in done.stdout


def test_node_release_removes_a_leftover_empty_cgroup_whichever_spurd_runs(
    kernel: Kernel, procs: Processes, tmp_path: Path
) -> None:
    # spurd's rmdir at release failed (EBUSY): an empty job cgroup, made after the
    # current spurd started, that no agent cancel removes.
    agent = kernel.process(kernel.cgroup("agent"), {}, [str(procs.spurd_binary), "120"])
    _wait("the stand-in spurd", lambda: _comm(agent.pid) == "spurd")
    time.sleep(0.05)
    job_id = 3_940_000_000 + secrets.randbelow(1_000_000)
    root = kernel.cgroup("spur")
    job_dir = kernel.cgroup(f"spur/job_{job_id}")
    journal = tmp_path / "journal.jsonl"
    at_root = ("--cgroup-root", str(root))
    when = started_at(job_id, *at_root)

    dry = release(job_id, when, journal, "--dry-run", *at_root)
    assert dry.returncode == 0, dry.stderr
    assert "and no process: a leftover no agent cancel removes" in dry.stdout
    assert "no live process to signal" in dry.stdout
    assert job_dir.exists() and journal_records(journal) == []

    done = release(job_id, when, journal, *at_root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not job_dir.exists() and alive(agent.pid)
    assert "0 processes exited on SIGTERM; 0 killed after the grace period" in done.stdout
    assert "1 job cgroup removed" in done.stdout
    assert [(r["event"], r["kind"]) for r in journal_records(journal)] == [
        ("intent", "leftover"),
        ("outcome", "leftover"),
    ]
