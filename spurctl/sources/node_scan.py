"""What this node's agent holds, read at the source: spurd's cgroups and /proc.

No Spur RPC lists what an agent holds (GetNodeResources reports `used` empty),
so the inventory is read where spurd leaves its traces:

- cgroup v2 `/sys/fs/cgroup/spur/job_<id>/` with cpuset.cpus(.effective),
  cpu.max, memory.max and cgroup.procs (spurd's executor creates one per job);
- the environment of every process: spurd exports SPUR_JOB_ID (and its Slurm
  twin SLURM_JOB_ID) and the GPU visibility variables to the job's processes.

A job is held when either trace exists. spurd runs without cgroups when it
cannot create them, so a missing cgroup root only narrows the evidence to
processes. The node is live while we read it: an entry that vanishes or cannot
be read mid-scan is skipped, never fatal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from spurctl import hostlist
from spurctl.errors import SpurctlError
from spurctl.model import MAX_JOB_ID, Holding, Inventory, utcnow

JOB_ID_VARS = ("SPUR_JOB_ID", "SLURM_JOB_ID")
# Order matters: ROCR_VISIBLE_DEVICES carries physical ids on AMD nodes and
# CUDA_VISIBLE_DEVICES on NVIDIA nodes (spurd sets one or both to the same
# list); HIP_VISIBLE_DEVICES selects *within* ROCR's list, so it only names
# physical devices when neither of the others is set.
GPU_VARS = ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")

_JOB_DIR = re.compile(r"job_([0-9]+)")
_MIB = 1024 * 1024

SkipHook = Callable[[Path, Exception], None]
"""Told about every entry skipped mid-scan (vanished, unreadable, garbage)."""


@dataclass(slots=True)
class _Job:
    """Evidence gathered for one job id before it becomes a Holding."""

    job_id: int
    cgroup: Path | None = None
    pids: set[int] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class _ProcEnv:
    job_id: int | None
    gpus: tuple[int, ...]


def scan(
    cgroup_root: Path,
    proc_root: Path,
    hostname: str,
    now: datetime | None = None,
    on_skip: SkipHook | None = None,
) -> Inventory:
    """Inventory what this node holds, from spurd's cgroups and the processes' environments.

    Raises SpurctlError only when `proc_root` itself cannot be listed (a wrong
    --proc-root); everything below it that misbehaves is skipped.
    """
    collected_at = now if now is not None else utcnow()
    skip: SkipHook = on_skip if on_skip is not None else _ignore
    jobs: dict[int, _Job] = {}

    cgroup_dirs = _list_job_cgroups(cgroup_root, skip)
    for job_id, path in (cgroup_dirs or {}).items():
        job = jobs.setdefault(job_id, _Job(job_id))
        job.cgroup = path
        job.pids.update(_cgroup_pids(path, skip))

    envs = _read_environments(proc_root, skip)
    for pid, env in envs.items():
        if env.job_id is not None:
            jobs.setdefault(env.job_id, _Job(env.job_id)).pids.add(pid)

    boot = _boot_time(proc_root, skip)
    held = tuple(_holding(jobs[job_id], envs, proc_root, boot, skip) for job_id in sorted(jobs))
    return Inventory(
        node=hostname,
        collected_at=collected_at,
        source="proc" if cgroup_dirs is None else "cgroup+proc",
        error=None,
        held=held,
    )


def _ignore(path: Path, exc: Exception) -> None:
    return None


# -- cgroups -------------------------------------------------------------------


def _list_job_cgroups(root: Path, skip: SkipHook) -> dict[int, Path] | None:
    """job id -> its cgroup dir; None when the root is absent or unreadable (no cgroup evidence)."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return None
    except OSError as exc:  # NotADirectoryError, PermissionError
        skip(root, exc)
        return None
    found: dict[int, Path] = {}
    for entry in entries:
        match = _JOB_DIR.fullmatch(entry.name)
        if match is None:
            continue
        job_id = int(match.group(1))
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            skip(Path(entry.path), exc)
            continue
        if is_dir and job_id <= MAX_JOB_ID:
            found[job_id] = Path(entry.path)
    return found


def _cgroup_pids(job_dir: Path, skip: SkipHook) -> set[int]:
    """Processes in the job's cgroup and any cgroup nested below it.

    cgroup v2 keeps processes out of inner nodes that have controllers enabled,
    so a runtime that nests cgroups under job_<id> leaves its processes in the
    leaves; only reading job_<id>/cgroup.procs would miss them.
    """
    pids: set[int] = set()
    for directory in _walk_dirs(job_dir, skip):
        text = _read_text(directory / "cgroup.procs", skip)
        if text is None:
            continue
        for token in text.split():
            # pid 0: a process in another pid namespace, invisible from ours.
            if token.isascii() and token.isdigit() and int(token) > 0:
                pids.add(int(token))
    return pids


def _walk_dirs(top: Path, skip: SkipHook) -> Iterator[Path]:
    yield top
    try:
        entries = list(os.scandir(top))
    except OSError as exc:
        skip(top, exc)
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk_dirs(Path(entry.path), skip)
        except OSError as exc:
            skip(Path(entry.path), exc)


def parse_cpu_list(text: str) -> int | None:
    """How many CPUs a cpuset list names ("0-7,16-23" is 16); None if empty or malformed."""
    # Blanks around a range and empty ranges ("0-3,,5\n") never made a list malformed.
    ranges = ",".join(part.strip() for part in text.split(",") if part.strip())
    try:
        return len(hostlist.expand_ranges(ranges)) or None
    except SpurctlError:
        return None


def _quota_cpus(text: str) -> int | None:
    """CPUs granted by a cpu.max quota ("400000 100000" is 4); None for "max" or garbage."""
    fields = text.split()
    if len(fields) != 2 or not all(f.isascii() and f.isdigit() for f in fields):
        return None
    quota, period = int(fields[0]), int(fields[1])
    if quota == 0 or period == 0:
        return None
    return -(-quota // period)  # a partial CPU still occupies one


def _cgroup_cpus(job_dir: Path, skip: SkipHook) -> int | None:
    configured = _read_text(job_dir / "cpuset.cpus", skip)
    # An empty cpuset.cpus means spurd did not pin the job: the effective set
    # is then the parent's (the whole node), and the job's share is its quota.
    if configured is None or configured.strip():
        effective = _read_text(job_dir / "cpuset.cpus.effective", skip)
        if effective is not None:
            count = parse_cpu_list(effective)
            if count is not None:
                return count
    quota = _read_text(job_dir / "cpu.max", skip)
    return _quota_cpus(quota) if quota is not None else None


def parse_memory_max(text: str) -> int | None:
    """memory.max in MiB; None for "max" (no limit) or garbage."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()):
        return None
    return int(value) // _MIB


# -- processes -----------------------------------------------------------------


def _read_environments(proc_root: Path, skip: SkipHook) -> dict[int, _ProcEnv]:
    """pid -> the job id and GPUs its environment names, for processes that name either."""
    try:
        names = os.listdir(proc_root)
    except OSError as exc:
        raise SpurctlError(
            f"cannot list {proc_root}: {exc.strerror or exc}; point --proc-root at the node's /proc"
        ) from None
    own_pid = os.getpid() if _is_live_proc(proc_root) else None
    envs: dict[int, _ProcEnv] = {}
    for name in names:
        if not (name.isascii() and name.isdigit()):
            continue
        pid = int(name)
        # The scanner itself may run inside a job (srun spurctl ...); it is not the job's work.
        if pid == own_pid:
            continue
        path = proc_root / name / "environ"
        try:
            raw = path.read_bytes()
        except OSError as exc:  # vanished (FileNotFoundError, ProcessLookupError) or not ours
            skip(path, exc)
            continue
        env = parse_environ(raw)
        if env.job_id is not None or env.gpus:
            envs[pid] = env
    return envs


def _is_live_proc(proc_root: Path) -> bool:
    try:
        return proc_root.resolve() == Path("/proc").resolve()
    except OSError:
        return False


def parse_environ(raw: bytes) -> _ProcEnv:
    """The job id and GPU ids a NUL-separated environ names; garbage entries are ignored."""
    values: dict[str, str] = {}
    wanted = {*JOB_ID_VARS, *GPU_VARS}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if not sep:
            continue
        try:
            name = key.decode("ascii")
            text = value.decode("ascii")
        except UnicodeDecodeError:
            continue
        if name in wanted:
            values[name] = text
    job_id = None
    for var in JOB_ID_VARS:
        job_id = _job_id(values.get(var))
        if job_id is not None:
            break
    gpus: tuple[int, ...] = ()
    for var in GPU_VARS:
        if values.get(var, "").strip():
            gpus = _device_ids(values[var])
            break
    return _ProcEnv(job_id, gpus)


def _job_id(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value <= MAX_JOB_ID else None


def _device_ids(text: str) -> tuple[int, ...]:
    # Numeric ids only: GPU UUIDs ("GPU-8f3c...") cannot be mapped to the
    # controller's device ids without asking the driver.
    return tuple(
        sorted(
            {int(t) for t in (p.strip() for p in text.split(",")) if t.isascii() and t.isdigit()}
        )
    )


def _boot_time(proc_root: Path, skip: SkipHook) -> int | None:
    path = proc_root / "stat"
    text = _read_text(path, skip)
    if text is None:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "btime" and fields[1].isdigit():
            return int(fields[1])
    return None


def _start_ticks(proc_root: Path, pid: int, skip: SkipHook) -> int | None:
    """Field 22 of /proc/<pid>/stat: start time in clock ticks after boot."""
    path = proc_root / str(pid) / "stat"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        skip(path, exc)
        return None
    # comm (field 2) is in parentheses and may itself hold spaces and ")".
    _, paren, rest = raw.rpartition(b")")
    fields = rest.split()
    if not paren or len(fields) < 20 or not fields[19].isdigit():
        skip(path, ValueError("unparsable stat line"))
        return None
    return int(fields[19])


# -- putting a holding together --------------------------------------------------


def _holding(
    job: _Job, envs: dict[int, _ProcEnv], proc_root: Path, boot: int | None, skip: SkipHook
) -> Holding:
    gpus = sorted({g for pid in job.pids if pid in envs for g in envs[pid].gpus})
    return Holding(
        job_id=job.job_id,
        cpus=_cgroup_cpus(job.cgroup, skip) if job.cgroup else None,
        memory_mb=_memory_mb(job.cgroup, skip) if job.cgroup else None,
        gpus=tuple(gpus),
        pids=tuple(sorted(job.pids)),
        started_at=_started_at(job, proc_root, boot, skip),
    )


def _memory_mb(job_dir: Path, skip: SkipHook) -> int | None:
    text = _read_text(job_dir / "memory.max", skip)
    return parse_memory_max(text) if text is not None else None


def _started_at(job: _Job, proc_root: Path, boot: int | None, skip: SkipHook) -> datetime | None:
    if boot is not None and job.pids:
        hertz = os.sysconf("SC_CLK_TCK")
        ticks = _present(_start_ticks(proc_root, pid, skip) for pid in job.pids)
        if ticks:
            return datetime.fromtimestamp(boot + min(ticks) / hertz, UTC)
    if job.cgroup is not None:
        try:
            return datetime.fromtimestamp(job.cgroup.stat().st_ctime, UTC)
        except OSError as exc:
            skip(job.cgroup, exc)
    return None


def _present(values: Iterable[int | None]) -> list[int]:
    return [v for v in values if v is not None]


def _read_text(path: Path, skip: SkipHook) -> str | None:
    try:
        return path.read_bytes().decode("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        if not isinstance(exc, FileNotFoundError):
            skip(path, exc)
        return None


def scan_this_node(
    cgroup_root: Path, proc_root: Path, hostname: str | None
) -> tuple[Inventory, int]:
    """`spurctl node-inventory`: the scan, and how many processes' environments were unreadable.

    Without root, other users' environments cannot be read and their jobs go
    unseen; the count lets the command say so instead of reporting a clean node.
    """
    import socket

    denied = 0

    def on_skip(path: Path, exc: Exception) -> None:
        nonlocal denied
        if isinstance(exc, PermissionError) and path.name == "environ":
            denied += 1

    # spurd registers under gethostname() unless started with --hostname.
    inventory = scan(cgroup_root, proc_root, hostname or socket.gethostname(), on_skip=on_skip)
    return inventory, denied
