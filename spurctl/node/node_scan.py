"""What this node's agent holds, read at the source: spurd's cgroups, /proc and its spool.

No Spur RPC lists what an agent holds (GetNodeResources reports `used` empty),
so the inventory is read where spurd leaves its traces (docs/node-evidence.md
names the upstream code each one comes from):

- cgroup v2 job directories directly under the cgroup root: `job_<id>` (Spur
  main, a fixed `/sys/fs/cgroup/spur`) or `job_<id>_<attempt>` with `step_<n>`
  children (newer spurd, whose root systemd may delegate); cpuset.cpus(.effective),
  cpu.max, memory.max and cgroup.procs of every directory below count as the job's;
- the environment of every process: spurd exports SPUR_JOB_ID (and its Slurm
  twin SLURM_JOB_ID), SPUR_TARGET_NODE, SPUR_JOB_GPUS and one vendor GPU
  variable to the job's processes; hook processes also carry SPUR_JOB_ID, and
  SPUR_SCRIPT_CONTEXT says which hook they run (an epilog is not a holding);
- the job's spool directory `/var/spool/spur/job<id>/`, which lives as long as the run;
- the spurd process itself (`agent`): its pid and start time.

A job is held when any trace exists; each holding lists which did (`traces`).
spurd runs without cgroups when it cannot create them, so a missing cgroup root
only narrows the evidence to processes. The node is live while we read it: an
entry that vanishes or cannot be read mid-scan is skipped, never fatal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from spurctl.errors import warn
from spurctl.holdings import AgentProcess, Holding, Inventory, JobProcess
from spurctl.model import MAX_JOB_ID, utcnow
from spurctl.node import agent_config, stepd_sessions
from spurctl.node.cgroup_limits import cgroup_cpus, memory_mb
from spurctl.node.node_files import MAX_FILE, SkipHook, read_text
from spurctl.node.node_files import ignore as _ignore
from spurctl.node.node_procs import (
    ProcEnv,
    ProcTable,
    agent_hostname_option,
    boot_time,
    find_agents,
    is_live_proc,
    read_environments,
    stat_fields,
    ticks_to_time,
)
from spurctl.node.stepd_sessions import STATE_DIR, SUPERVISOR_COMM

CGROUP_ROOT = Path("/sys/fs/cgroup/spur")
"""Where Spur main's spurd creates job cgroups (executor.rs CGROUP_ROOT)."""
SPOOL_ROOT = Path("/var/spool/spur")
"""spurd's node-local spool (executor.rs SPOOL_ROOT); a job's is `job<id>/`."""

_JOB_DIR = re.compile(r"job_([0-9]+)(?:_([0-9]+))?")
_STEP_DIR = re.compile(r"step_[0-9]+")
_SPOOL_DIR = re.compile(r"job([0-9]+)")
MAX_CGROUP_DEPTH = 32  # below a job cgroup (spurd nests one level): deeper is cut, and said


@dataclass(slots=True)
class _Cgroup:
    path: Path
    attempt: int | None
    pids: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Job:
    """Evidence gathered for one job id before it becomes a Holding."""

    job_id: int
    cgroups: list[_Cgroup] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    spool: Path | None = None

    @property
    def cgroup(self) -> _Cgroup | None:
        """The cgroup whose limits and attempt speak for the job.

        Several only when an earlier attempt's cgroup was left behind: the one
        with processes wins, then the highest attempt.
        """
        if not self.cgroups:
            return None
        return max(
            self.cgroups, key=lambda c: (bool(c.pids), -1 if c.attempt is None else c.attempt)
        )


def scan(
    cgroup_root: Path | None,
    proc_root: Path,
    hostname: str,
    now: datetime | None = None,
    on_skip: SkipHook | None = None,
    *,
    spool_root: Path | None = None,
    host_name: str | None = None,
    sys_root: Path = Path("/"),
    state_dir: Path | None = None,
) -> Inventory:
    """Inventory what this node holds, from spurd's cgroups, the processes and its spool.

    `hostname` is the node name the inventory speaks for; `host_name` what the
    node calls itself (default: the same). `cgroup_root` None finds the roots
    spurd may use (see `find_cgroup_roots`; `sys_root` re-roots the paths
    /proc names, for fixture trees). `spool_root` None reads no spool, `state_dir` None
    no spurstepd session (stepd_sessions).

    Raises SpurctlError only when `proc_root` itself cannot be listed (a wrong
    --proc-root); everything below it that misbehaves is skipped.
    """
    inventory, _ = _gather(
        cgroup_root,
        proc_root,
        hostname,
        now,
        on_skip,
        spool_root=spool_root,
        host_name=host_name,
        sys_root=sys_root,
        state_dir=state_dir,
    )
    return inventory


@dataclass(slots=True)
class _Evidence:
    """What the scan read beside the inventory, for `spurctl node-release`."""

    table: ProcTable
    boot: int | None
    envs: dict[int, ProcEnv]
    membership: dict[int, int]  # pid -> the job whose cgroup it sits in


def _gather(
    cgroup_root: Path | None,
    proc_root: Path,
    hostname: str,
    now: datetime | None,
    on_skip: SkipHook | None,
    *,
    spool_root: Path | None,
    host_name: str | None,
    sys_root: Path,
    state_dir: Path | None = None,
) -> tuple[Inventory, _Evidence]:
    collected_at = now if now is not None else utcnow()
    skip: SkipHook = on_skip if on_skip is not None else _ignore
    jobs: dict[int, _Job] = {}

    # Listing /proc first: a wrong --proc-root is the one fatal mistake.
    envs = read_environments(proc_root, skip)
    boot = boot_time(proc_root, skip)
    table = ProcTable(proc_root, skip)
    agents = find_agents(proc_root, boot, skip, table)
    # Two top-level spurds: which one is the agent cannot be told (docs/node-evidence.md).
    agent = agents[0] if len(agents) == 1 else None
    roots = (
        [cgroup_root]
        if cgroup_root is not None
        else find_cgroup_roots(proc_root, agent.pid if agent else None, sys_root, skip)
    )

    own = {os.getpid()} if is_live_proc(proc_root) else set()
    any_root = False
    membership: dict[int, int] = {}
    for root in roots:
        found = _list_job_cgroups(root, skip)
        if found is None:
            continue
        any_root = True
        for job_id, attempt, path in found:
            # `srun spurctl node-inventory` sits in its job's cgroup: not the job's work.
            pids = _cgroup_pids(path, skip) - own
            cgroup = _Cgroup(path, attempt, pids)
            job = jobs.setdefault(job_id, _Job(job_id))
            job.cgroups.append(cgroup)
            job.pids.update(cgroup.pids)
            for pid in pids:
                membership.setdefault(pid, job_id)

    target_nodes: set[str] = set()
    for pid, env in envs.items():
        if env.job_id is None or env.epilog:
            continue
        # Cgroup membership wins over the environment: a process in another job's
        # cgroup is that job's, whatever SPUR_JOB_ID it inherited.
        home = membership.get(pid)
        if home is None:
            home = _cgroup_job(proc_root, pid, skip)
            if home is not None:
                membership[pid] = home
        if home is not None and home != env.job_id:
            continue
        jobs.setdefault(env.job_id, _Job(env.job_id)).pids.add(pid)
        if env.target_node:
            target_nodes.add(env.target_node)

    if spool_root is not None:
        for job_id, path in _list_spool_dirs(spool_root, skip):
            jobs.setdefault(job_id, _Job(job_id)).spool = path

    # What spurd was started with: its state directory and user, and its cluster.
    config = (
        agent_config.read(proc_root, agent.pid, sys_root, skip)
        if agent is not None
        else agent_config.AgentConfig()
    )
    supervisors = table.named(SUPERVISOR_COMM)
    ticks_of, comms = (lambda pid: _ticks(table.stat(pid))), table.comms()
    sessions = stepd_sessions.scan(
        state_dir, proc_root, sys_root, supervisors, ticks_of, comms.get, membership, skip,
        agent_dir=config.state_dir, agent_uid=config.euid,
    )  # fmt: skip
    for job_id, bound in sessions.bound.items():  # pid and start ticks: the strongest tie
        jobs.setdefault(job_id, _Job(job_id)).pids.update(bound)
    held = tuple(
        _holding(jobs[job_id], envs, table, boot, skip, agent, supervisors, sessions)
        for job_id in sorted(jobs)
    )
    names = tuple(sorted(target_nodes))
    # Only a lineage that reaches pid 1 proves a process does not descend from spurd.
    ancestry_read = agent is not None and all(
        table.lineage(pid)[-1:] == (1,) for h in held for pid in h.pids
    )
    inventory = Inventory(
        node=hostname,
        collected_at=collected_at,
        source="cgroup+proc" if any_root else "proc",
        error=None,
        held=held,
        agent=agent,
        hostname=host_name if host_name is not None else hostname,
        target_node=names[0] if len(names) == 1 else None,
        target_nodes=names,
        agent_checked=len(agents) <= 1,
        agents=tuple(agents) if len(agents) > 1 else (),
        agent_hostname=agent_hostname_option(proc_root, agent.pid, skip) if agent else None,
        ancestry_read=ancestry_read,
        session_refusals=tuple(sessions.refusals),
        agent_controller=config.controller,
        agent_cluster=config.cluster,
    )
    return inventory, _Evidence(table, boot, envs, membership)


# -- where spurd's cgroups are ----------------------------------------------------


def find_cgroup_roots(
    proc_root: Path, agent_pid: int | None, sys_root: Path, skip: SkipHook
) -> list[Path]:
    """The directories spurd may create job cgroups in, most specific first.

    Spur main uses a fixed `/sys/fs/cgroup/spur`. A spurd whose cgroup systemd
    delegates puts them under its own cgroup instead. So, on the cgroup v2
    mount (from /proc/self/mountinfo; on a hybrid host it is not
    /sys/fs/cgroup): walking up from spurd's own cgroup (/proc/<pid>/cgroup)
    and from this process's, every ancestor that is named `spur`, has a `spur`
    child, or directly holds `job_<id>[_<attempt>]` directories; then `spur` at
    the top of the mount, and `/sys/fs/cgroup/spur`. All of them are read.
    """
    roots: list[Path] = []
    mount = _cgroup2_mount(proc_root / "self" / "mountinfo", skip)
    if mount is not None:
        top = _under(sys_root, mount)
        for who in ([str(agent_pid)] if agent_pid is not None else []) + ["self"]:
            path = _cgroup2_path(proc_root / who / "cgroup", skip)
            if path is None:
                continue
            parts = [p for p in path.split("/") if p]
            for depth in range(len(parts), -1, -1):
                here = top.joinpath(*parts[:depth])
                if _JOB_DIR.fullmatch(here.name) or _STEP_DIR.fullmatch(here.name):
                    continue  # inside a job: its parent is the root
                if here.name == "spur" and depth > 0:
                    roots.append(here)
                if (here / "spur").is_dir():
                    roots.append(here / "spur")
                if _has_job_dirs(here):
                    roots.append(here)
        roots.append(top / "spur")
    roots.append(_under(sys_root, str(CGROUP_ROOT)))
    return list(dict.fromkeys(roots))


def _under(sys_root: Path, absolute: str) -> Path:
    return sys_root.joinpath(*[p for p in absolute.split("/") if p])


def _cgroup2_mount(mountinfo: Path, skip: SkipHook) -> str | None:
    """Where the cgroup v2 hierarchy is mounted (field 5 of the line whose type is cgroup2)."""
    text = read_text(mountinfo, skip)
    if text is None:
        return None
    for line in text.splitlines():
        before, sep, after = line.partition(" - ")
        fields = before.split()
        if sep and after.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            # mountinfo escapes blanks in paths as octal (\040).
            return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
    return None


def _cgroup2_path(cgroup_file: Path, skip: SkipHook) -> str | None:
    """The v2 cgroup of a process: the path of its `0::` line."""
    text = read_text(cgroup_file, skip)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("0::/"):
            return line[3:].removesuffix(" (deleted)")
    return None


def _has_job_dirs(directory: Path) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(
                _JOB_DIR.fullmatch(e.name) and e.is_dir(follow_symlinks=False) for e in entries
            )
    except OSError:
        return False


# -- cgroups -------------------------------------------------------------------


def _list_job_cgroups(root: Path, skip: SkipHook) -> list[tuple[int, int | None, Path]] | None:
    """(job id, attempt, dir) of each job cgroup; None when the root is absent or unreadable."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return None
    except OSError as exc:  # NotADirectoryError, PermissionError
        skip(root, exc)
        return None
    found: list[tuple[int, int | None, Path]] = []
    for entry in entries:
        match = _JOB_DIR.fullmatch(entry.name)
        if match is None:
            continue
        job_id = int(match.group(1))
        attempt = int(match.group(2)) if match.group(2) is not None else None
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            skip(Path(entry.path), exc)
            continue
        if is_dir and job_id <= MAX_JOB_ID:
            found.append((job_id, attempt, Path(entry.path)))
    return found


def _list_spool_dirs(root: Path, skip: SkipHook) -> list[tuple[int, Path]]:
    """(job id, dir) of each `job<id>` spool directory; none when the spool is absent."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        skip(root, exc)
        return []
    found: list[tuple[int, Path]] = []
    for entry in entries:
        match = _SPOOL_DIR.fullmatch(entry.name)
        if match is None or int(match.group(1)) > MAX_JOB_ID:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                found.append((int(match.group(1)), Path(entry.path)))
        except OSError as exc:
            skip(Path(entry.path), exc)
    return found


def _cgroup_pids(job_dir: Path, skip: SkipHook) -> set[int]:
    """Processes in the job's cgroup and any cgroup nested below it.

    cgroup v2 keeps processes out of inner nodes that have controllers enabled,
    so newer spurd's `job_<id>_<attempt>/step_<n>` leaves hold the processes;
    only reading the job directory's cgroup.procs would miss them.
    """
    pids: set[int] = set()
    for directory in walk_dirs(job_dir, skip):
        text = read_text(directory / "cgroup.procs", skip, limit=MAX_FILE)
        if text is None:
            continue
        for token in text.split():
            # pid 0: a process in another pid namespace, invisible from ours.
            if token.isascii() and token.isdigit() and int(token) > 0:
                pids.add(int(token))
    return pids


class CgroupTooDeep(OSError):
    """A directory more than MAX_CGROUP_DEPTH levels below the job cgroup (its argument)."""


def walk_dirs(top: Path, skip: SkipHook = _ignore) -> Iterator[Path]:
    """`top` and the directories below it, MAX_CGROUP_DEPTH levels at most; one deeper is
    told to `skip` (CgroupTooDeep). A stack, not recursion: no nesting can overflow it."""
    todo = [(top, 0)]
    while todo:
        here, depth = todo.pop()
        yield here
        try:
            entries = list(os.scandir(here))
        except OSError as exc:
            skip(here, exc)
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError as exc:
                skip(Path(entry.path), exc)
                continue
            if depth < MAX_CGROUP_DEPTH:
                todo.append((Path(entry.path), depth + 1))
            else:
                skip(Path(entry.path), CgroupTooDeep(top))


# -- putting a holding together --------------------------------------------------


def _holding(
    job: _Job,
    envs: dict[int, ProcEnv],
    table: ProcTable,
    boot: int | None,
    skip: SkipHook,
    agent: AgentProcess | None,
    supervisors: set[int],
    sessions: stepd_sessions.Sessions,
) -> Holding:
    gpus = sorted({g for pid in job.pids if pid in envs for g in envs[pid].gpus})
    cgroup = job.cgroup
    traces = (
        *(("cgroup",) if job.cgroups else ()),
        *(("process",) if job.pids else ()),
        *(("spool",) if job.spool is not None else ()),
        *(("session",) if job.job_id in sessions.bound else ()),
    )
    tracked: list[int] = []
    supervised = {p for p in job.pids if p in supervisors} | sessions.supervisors(job.job_id)
    supervised |= {p for p in supervisors if p in envs and envs[p].job_id == job.job_id}
    if agent is not None or supervisors:
        for pid in sorted(job.pids):
            lineage = table.lineage(pid)
            if agent is not None and agent.pid in lineage:
                tracked.append(pid)
            supervised.update(a for a in lineage if a in supervisors)
    return Holding(
        job_id=job.job_id,
        cpus=cgroup_cpus(cgroup.path, skip) if cgroup else None,
        memory_mb=memory_mb(cgroup.path, skip) if cgroup else None,
        gpus=tuple(gpus),
        pids=tuple(sorted(job.pids)),
        started_at=_started_at(job, table, boot, skip),
        attempt=_first(sessions.attempt(job.job_id), cgroup.attempt if cgroup else None),
        traces=traces,
        tracked_pids=tuple(tracked),
        supervisors=tuple(sorted(supervised)),
        sessions=sessions.of(job.job_id),
    )


def _cgroup_job(proc_root: Path, pid: int, skip: SkipHook) -> int | None:
    """The job whose `job_<id>[_<attempt>]` cgroup /proc/<pid>/cgroup places it in, if any."""
    path = _cgroup2_path(proc_root / str(pid) / "cgroup", skip)
    if path is None:
        return None
    for part in reversed([p for p in path.split("/") if p]):
        match = _JOB_DIR.fullmatch(part)
        if match is not None and int(match.group(1)) <= MAX_JOB_ID:
            return int(match.group(1))
    return None


def _started_at(job: _Job, table: ProcTable, boot: int | None, skip: SkipHook) -> datetime | None:
    if boot is not None and job.pids:
        ticks = [t for pid in job.pids if (t := _ticks(table.stat(pid))) is not None]
        if ticks:
            return ticks_to_time(boot, min(ticks))
    # No readable process: when the cgroup (else the spool directory) was made.
    for path in [*(c.path for c in job.cgroups), *([job.spool] if job.spool else [])]:
        try:
            return datetime.fromtimestamp(path.stat().st_ctime, UTC)
        except OSError as exc:
            skip(path, exc)
    return None


def _ticks(fields: tuple[int, int] | None) -> int | None:
    return None if fields is None else fields[1]


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def _present(values: Iterable[int | None]) -> list[int]:
    return [v for v in values if v is not None]


def scan_this_node(
    cgroup_root: Path | None,
    proc_root: Path,
    hostname: str | None,
    spool_root: Path = SPOOL_ROOT,
    state_dir: Path = STATE_DIR,
) -> tuple[Inventory, int]:
    """`spurctl node-inventory`: the scan, and how many processes' environments were unreadable.

    Without root, other users' environments cannot be read and their jobs go
    unseen; the count lets the command say so instead of reporting a clean node.
    `cgroup_root` None: find the roots spurd may use (`find_cgroup_roots`).
    """
    import socket

    denied = 0
    cut: dict[Path, Path] = {}  # a job cgroup too deep to read whole -> its first cut

    def on_skip(path: Path, exc: Exception) -> None:
        nonlocal denied
        if isinstance(exc, PermissionError) and path.name == "environ":
            denied += 1
        elif isinstance(exc, CgroupTooDeep):
            cut.setdefault(exc.args[0], path)

    # spurd registers under gethostname() unless started with --hostname.
    own_name = socket.gethostname()
    inventory = scan(
        cgroup_root,
        proc_root,
        hostname or own_name,
        on_skip=on_skip,
        spool_root=spool_root,
        host_name=own_name,
        state_dir=state_dir,
    )
    for top, first in cut.items():
        job = top.name.split("_")[1]
        warn(
            f"job {job}'s cgroup {top} nests more than {MAX_CGROUP_DEPTH} levels deep; below "
            f"that ({first} and more) was not read: a process only there is missing from its "
            "holding"
        )
    return inventory, denied


# -- for `spurctl node-release` ----------------------------------------------------


def scan_for_release(
    cgroup_root: Path | None, proc_root: Path, job_id: int
) -> tuple[Inventory, dict[int, JobProcess]]:
    """This node's inventory, and every process that `job_id`'s cgroups or environment
    name (also those in another job's cgroup, so a release can say why it spares them)."""
    import socket

    inventory, ev = _gather(
        cgroup_root,
        proc_root,
        socket.gethostname(),
        None,
        None,
        spool_root=SPOOL_ROOT,
        host_name=None,
        sys_root=Path("/"),
        state_dir=STATE_DIR,
    )
    claimed = {p for p, j in ev.membership.items() if j == job_id}
    claimed |= {p for p, e in ev.envs.items() if e.job_id == job_id and not e.epilog}
    comms = ev.table.comms()
    out: dict[int, JobProcess] = {}
    for pid in sorted(claimed):
        fields = ev.table.stat(pid)
        env = ev.envs.get(pid)
        out[pid] = JobProcess(
            pid=pid, ticks=_ticks(fields), lineage=ev.table.lineage(pid),
            started_at=None if fields is None else ticks_to_time(ev.boot, fields[1]),
            env_job=None if env is None else env.job_id, cgroup_job=ev.membership.get(pid),
            comm=comms.get(pid),
        )  # fmt: skip
    return inventory, out


def job_cgroup_dirs(
    cgroup_root: Path | None, proc_root: Path, job_id: int, agent_pid: int | None
) -> list[Path]:
    """The job cgroups (`job_<id>`, `job_<id>_<attempt>`) of `job_id`, found as `scan` does."""
    roots = (
        [cgroup_root]
        if cgroup_root is not None
        else find_cgroup_roots(proc_root, agent_pid, Path("/"), _ignore)
    )
    found: dict[str, Path] = {}
    for root in roots:
        for found_id, _, path in _list_job_cgroups(root, _ignore) or []:
            if found_id == job_id:
                found.setdefault(os.path.realpath(path), path)
    return list(found.values())


def cgroup_pids(job_dir: Path) -> set[int]:
    """The processes in a job cgroup and its step cgroups, read now."""
    return _cgroup_pids(job_dir, _ignore)


def process_stats(proc_root: Path, pids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """(parent pid, start ticks) of each of `pids` still readable; pid and start ticks
    name one process for the life of the boot."""
    out: dict[int, tuple[int, int]] = {}
    for pid in pids:
        fields = stat_fields(proc_root, pid, _ignore)
        if fields is not None:
            out[pid] = fields
    return out
