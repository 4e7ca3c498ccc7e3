"""spurstepd's session descriptors (Spur #754): which process is which run, by pid and start.

Newer spurd hands every job step to a supervisor, `spurstepd <state-dir> <job>
<attempt> <spec>`, double-forked so that it outlives spurd. The supervisor
publishes `<state-dir>/runtime/<job>.<attempt>.<step>/descriptor.json` (0600, in
0700 directories owned by spurd's user) whose `pid` and `process_start_ticks` name
the supervisor itself and `workload_pid` and `workload_start_ticks` the job's own
process. spurd counts a session as live exactly when /proc/<pid>/stat field 22
still equals the recorded ticks (stepd.rs `stepd_liveness`), and adopts every
live one when it starts. A pid and its start ticks name one process for the life
of the boot, whatever its environment or cgroup say: this is the strongest
binding of a process to a run a node offers.

What is read here is only ever trusted as far as it checks out: a descriptor
whose directory is writable by others, whose identity disagrees with its
directory, or whose process is claimed twice is refused with what was seen, and
its processes stay judged by their cgroup and environment alone.
docs/node-evidence.md names the upstream code each rule follows.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from spurctl.holdings import Session, SessionBinding, SessionRefusal
from spurctl.model import MAX_JOB_ID
from spurctl.node.node_files import SkipHook, read_bytes

STATE_DIR = Path("/var/spool/spur")
"""spurd's default state directory: `--state-dir` / SPUR_STEPD_STATE_DIR, else spur.conf
`[controller] state_dir`, else this (crates/spurd/src/main.rs; node/agent_config.py
reads which one the node's spurd has)."""
RUNTIME = "runtime"
DESCRIPTOR = "descriptor.json"
SUPERVISOR_COMM = "spurstepd"
# crates/spur-core/src/step.rs: a descriptor written before `step_id` existed is the batch step.
STEP_BATCH = 0xFFFF_FFFE
# stepd.rs MIN_SUPPORTED_FORMAT_VERSION..=FORMAT_VERSION: what spurd itself still adopts.
FORMAT_VERSIONS = range(1, 2)
# Sessions read per runtime directory: spurd keeps few (it prunes finalized ones and caps
# the settled answers it retains); a directory holding more is not read further.
MAX_SESSIONS = 20_000
_SESSION_DIR = re.compile(r"([0-9]{1,10})\.([0-9]{1,10})\.([0-9]{1,10})")
_U64 = 2**64 - 1

Ticks = Callable[[int], int | None]
"""pid -> /proc/<pid>/stat field 22 (start ticks since boot); None when it is gone."""


@dataclass(frozen=True, slots=True)
class _Descriptor:
    path: Path  # the session directory
    job_id: int
    attempt: int
    step: int
    pid: int
    ticks: int
    workload_pid: int
    workload_ticks: int
    cgroup: str

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(slots=True)
class Sessions:
    """What the descriptors bind: each job's sessions and the processes they name."""

    by_job: dict[int, list[Session]] = field(default_factory=dict)
    # job -> the pids its sessions bind by pid and start ticks (supervisor, workload)
    bound: dict[int, set[int]] = field(default_factory=dict)
    refusals: list[SessionRefusal] = field(default_factory=list)
    dirs: dict[int, list[str]] = field(default_factory=dict)  # job -> its session directories

    def of(self, job_id: int) -> tuple[Session, ...]:
        return tuple(self.by_job.get(job_id, ()))

    def supervisors(self, job_id: int) -> set[int]:
        return {s.supervisor for s in self.of(job_id) if s.binding is SessionBinding.LIVE}

    def attempt(self, job_id: int) -> int | None:
        """The attempt the job's live sessions agree on; None when none is live or they differ."""
        attempts = {s.attempt for s in self.of(job_id) if s.binding is SessionBinding.LIVE}
        return attempts.pop() if len(attempts) == 1 else None


# -- where the descriptors are ---------------------------------------------------------


def state_dirs(
    given: Iterable[Path],
    proc_root: Path,
    supervisors: Iterable[int],
    sys_root: Path,
    skip: SkipHook,
) -> list[Path]:
    """`given` (the scan's, spurd's own), then the state directory each live spurstepd names
    as its first argument (its supervisors say which spurd gave them), under `sys_root`."""
    found = list(given)
    for pid in sorted(supervisors):
        raw = read_bytes(proc_root / str(pid) / "cmdline", skip)
        args = [] if raw is None else raw.split(b"\0")
        if len(args) > 1 and args[1].startswith(b"/"):
            named = args[1].decode("utf-8", "replace")
            found.append(sys_root.joinpath(*[p for p in named.split("/") if p]))
    return list(dict.fromkeys(found))


def _untrusted(st: os.stat_result, what: str, owners: frozenset[int]) -> str | None:
    """Why a directory or file spurd would have made private cannot be its (None: it can).

    spurd creates them 0700/0600 as the user it runs as, and refuses any that
    others can write or that another user owns (stepd.rs `verify_private_dir`).
    `owners`: root, the user this scan runs as, and spurd's effective uid (a spurd
    run as a service user makes them that user's).
    """
    if st.st_uid not in owners:
        named = ", ".join(str(u) for u in sorted(owners - {0}))
        return f"{what} is owned by uid {st.st_uid}, not root" + (
            f" nor spurd's or this scan's user (uid {named})" if named else ""
        )
    if st.st_mode & 0o022:
        return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def owners(agent_uid: int | None) -> frozenset[int]:
    """Who may own a session's files: root, this scan's user, and spurd's (`agent_uid`)."""
    return frozenset({0, os.geteuid(), *([agent_uid] if agent_uid is not None else [])})


def read(
    dirs: Iterable[Path], skip: SkipHook, trusted: frozenset[int] | None = None
) -> tuple[list[_Descriptor], list[SessionRefusal]]:
    """Every session descriptor under `<dir>/runtime` of each of `dirs`, and the refused
    ones; `trusted`: the uids that may own them (default `owners(None)`)."""
    trusted = trusted if trusted is not None else owners(None)
    found: list[_Descriptor] = []
    refused: list[SessionRefusal] = []
    for state_dir in dirs:
        runtime = state_dir / RUNTIME
        try:
            st = runtime.lstat()
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"{runtime} is not a directory")
            doubt = _untrusted(st, str(runtime), trusted)
            if doubt is not None:
                why = f"{doubt}: no session under it read"
                refused.append(SessionRefusal(path=str(runtime), why=why))
                continue
            names = sorted(os.listdir(runtime))
        except FileNotFoundError:
            continue
        except OSError as exc:
            skip(runtime, exc)
            refused.append(SessionRefusal(path=str(runtime), why=f"cannot be read ({_said(exc)})"))
            continue
        sessions = [n for n in names if _SESSION_DIR.fullmatch(n)]
        if len(sessions) > MAX_SESSIONS:
            refused.append(
                SessionRefusal(
                    path=str(runtime),
                    why=f"holds {len(sessions)} sessions; only the first {MAX_SESSIONS} were read",
                )
            )
        for name in sessions[:MAX_SESSIONS]:
            loaded = _load(runtime / name, skip, trusted)
            if isinstance(loaded, SessionRefusal):
                refused.append(loaded)
            elif loaded is not None:
                found.append(loaded)
    return found, refused


def _said(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def _load(
    session: Path, skip: SkipHook, trusted: frozenset[int]
) -> _Descriptor | SessionRefusal | None:
    """One session directory's descriptor; None for an entry that is no session directory."""
    match = _SESSION_DIR.fullmatch(session.name)
    assert match is not None
    job_id, attempt, step = (int(g) for g in match.groups())
    if max(job_id, attempt, step) > MAX_JOB_ID:
        return None  # not <u32>.<u32>.<u32>: not a name spurd gives a session

    def refuse(why: str) -> SessionRefusal:
        return SessionRefusal(path=str(session), why=why, job_id=job_id, attempt=attempt, step=step)

    descriptor = session / DESCRIPTOR
    try:
        dst = session.lstat()
        if not stat.S_ISDIR(dst.st_mode):
            return None
        st = descriptor.lstat()
    except FileNotFoundError:
        return refuse(f"no {DESCRIPTOR} in it")
    except OSError as exc:
        skip(descriptor, exc)
        return refuse(f"{DESCRIPTOR} cannot be read ({_said(exc)})")
    if not stat.S_ISREG(st.st_mode):
        return refuse(f"{DESCRIPTOR} is not a regular file")
    doubt = _untrusted(dst, "the session directory", trusted) or _untrusted(st, DESCRIPTOR, trusted)
    if doubt is not None:
        return refuse(doubt)
    errors: list[str] = []
    raw = read_bytes(descriptor, lambda p, e: errors.append(str(e)))
    if raw is None:
        return refuse(f"{DESCRIPTOR} cannot be read ({errors[0] if errors else 'vanished'})")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return refuse(f"{DESCRIPTOR} is not valid JSON")
    if not isinstance(doc, dict):
        return refuse(f"{DESCRIPTOR} is not a JSON object")

    def number(key: str, default: int | None = None, high: int = MAX_JOB_ID) -> int:
        value = doc.get(key, default)
        if type(value) is not int or not 0 <= value <= high:
            raise ValueError(f"its {key} is {str(value)[:24]!r}, not a number spurd writes")
        return value

    try:
        version = number("format_version")
        said = (number("job_id"), number("run_attempt"), number("step_id", STEP_BATCH))
        pid, ticks = number("pid"), number("process_start_ticks", high=_U64)
        workload = (number("workload_pid", 0), number("workload_start_ticks", 0, _U64))
    except ValueError as exc:
        return refuse(str(exc))
    if version not in FORMAT_VERSIONS:
        first, last = FORMAT_VERSIONS[0], FORMAT_VERSIONS[-1]
        return refuse(f"format_version {version}, not one spurd adopts ({first} to {last})")
    if said != (job_id, attempt, step):
        return refuse(
            f"it names job {said[0]} attempt {said[1]} step {said[2]}, not the directory's "
            f"{session.name} (spurd refuses such a session too)"
        )
    if pid == 0:
        return refuse("its pid is 0")
    cgroup = doc.get("cgroup_path", "")
    cgroup = cgroup if isinstance(cgroup, str) else ""
    return _Descriptor(session, job_id, attempt, step, pid, ticks, *workload, cgroup)


# -- binding them to /proc -------------------------------------------------------------


def bind(
    descriptors: Iterable[_Descriptor],
    refusals: Iterable[SessionRefusal],
    ticks_of: Ticks,
    comm_of: Callable[[int], str | None],
    membership: Mapping[int, int],
) -> Sessions:
    """Each descriptor checked against /proc, as spurd checks it, and against each other.

    Live: the pid runs with the recorded start ticks (and is spurstepd). Stale: it is
    gone, or the pid now names another process. Refused: two sessions claim one
    process, or a process they name sits in another job's cgroup (`membership`).
    """
    out = Sessions(refusals=list(refusals))
    claims: dict[tuple[int, int], list[_Descriptor]] = {}
    for d in descriptors:
        now = ticks_of(d.pid)
        if now == d.ticks:
            claims.setdefault((d.pid, now), []).append(d)
            continue
        why = (
            f"pid {d.pid} no longer runs"
            if now is None
            else f"pid {d.pid} now runs a process started at tick {now}, not the supervisor's "
            f"tick {d.ticks}: the pid was reused"
        )
        workload = _workload(d, ticks_of)
        if workload is not None and membership.get(workload, d.job_id) != d.job_id:
            workload = None  # in another job's cgroup: cgroup membership stands
        _add(out, d, SessionBinding.STALE, why, workload)
    for (pid, ticks), named in claims.items():
        comm = comm_of(pid)
        for d in named:
            workload = _workload(d, ticks_of)
            strays = [
                f"pid {p} sits in job {membership[p]}'s cgroup"
                for p in (pid, workload)
                if p is not None and membership.get(p, d.job_id) != d.job_id
            ]
            if len(named) > 1:
                others = ", ".join(o.name for o in named)
                why = (
                    f"pid {pid} (start tick {ticks}) is the supervisor named by {len(named)} "
                    f"sessions ({others}): which run it supervises cannot be told"
                )
            elif comm != SUPERVISOR_COMM:
                why = (
                    f"pid {pid} runs with the recorded start tick {ticks} but is "
                    f"{comm!r}, not {SUPERVISOR_COMM}"
                )
            elif strays:
                why = f"{'; '.join(strays)}, not job {d.job_id}'s: which job it runs cannot be told"
            else:
                _add(out, d, SessionBinding.LIVE, "", workload)
                continue
            out.refusals.append(
                SessionRefusal(
                    path=str(d.path), why=why, job_id=d.job_id, attempt=d.attempt, step=d.step
                )
            )
    for job_id, sessions in sorted(out.by_job.items()):
        live = sorted({s.attempt for s in sessions if s.binding is SessionBinding.LIVE})
        if len(live) > 1:
            out.refusals.append(
                SessionRefusal(
                    path=", ".join(out.dirs[job_id]),
                    why=f"live sessions of job {job_id} name attempts "
                    f"{', '.join(str(a) for a in live)}: which attempt holds the job cannot be "
                    "told, so none is recorded from them",
                    job_id=job_id,
                )
            )
    return out


def _workload(d: _Descriptor, ticks_of: Ticks) -> int | None:
    """The workload's pid when it still runs with the start the descriptor recorded."""
    if d.workload_pid and ticks_of(d.workload_pid) == d.workload_ticks:
        return d.workload_pid
    return None


def _add(
    out: Sessions, d: _Descriptor, binding: SessionBinding, why: str, workload: int | None
) -> None:
    session = Session(
        attempt=d.attempt,
        step=d.step,
        supervisor=d.pid,
        binding=binding,
        why=why,
        workload=workload,
        cgroup=d.cgroup,
    )
    out.by_job.setdefault(d.job_id, []).append(session)
    out.dirs.setdefault(d.job_id, []).append(str(d.path))
    pids = {d.pid} if binding is SessionBinding.LIVE else set()
    if workload is not None:
        pids.add(workload)
    if pids:
        out.bound.setdefault(d.job_id, set()).update(pids)


def scan(
    state_dir: Path | None,
    proc_root: Path,
    sys_root: Path,
    supervisors: Iterable[int],
    ticks_of: Ticks,
    comm_of: Callable[[int], str | None],
    membership: Mapping[int, int],
    skip: SkipHook,
    agent_dir: Path | None = None,
    agent_uid: int | None = None,
) -> Sessions:
    """The sessions under `state_dir`, the node's spurd's own (`agent_dir`, owned by
    `agent_uid` or root) and the state directories live `supervisors` name, bound to /proc
    (`state_dir` None: none read)."""
    if state_dir is None:
        return Sessions()
    given = [state_dir, *([agent_dir] if agent_dir is not None else [])]
    dirs = state_dirs(given, proc_root, supervisors, sys_root, skip)
    found, refused = read(dirs, skip, owners(agent_uid))
    return bind(found, refused, ticks_of, comm_of, membership)
