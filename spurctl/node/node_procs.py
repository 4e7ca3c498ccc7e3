"""What a node's /proc shows of Spur: job processes by their environment, process
start times, and the spurd process itself (node_scan.py puts them together with the
job cgroups). Standard library only: it is shipped to nodes (node/shipped_scan.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from spurctl.errors import SpurctlError
from spurctl.holdings import AgentProcess
from spurctl.model import MAX_JOB_ID
from spurctl.node.node_files import SkipHook, read_text, read_whole

JOB_ID_VARS = ("SPUR_JOB_ID", "SLURM_JOB_ID")
# The job's GPUs: SPUR_JOB_GPUS first, then the vendor variable spurd sets; never
# HIP_VISIBLE_DEVICES (docs/spur-facts.md, "What a node shows": GPUs).
JOB_GPUS_VAR = "SPUR_JOB_GPUS"
GPU_VARS = ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")
TARGET_NODE_VAR = "SPUR_TARGET_NODE"
# spur-core hooks.rs run_hook: "prolog_slurmd", "epilog_slurmd", "epilog_task", ...
SCRIPT_CONTEXT_VARS = ("SPUR_SCRIPT_CONTEXT", "SLURM_SCRIPT_CONTEXT")
AGENT_COMM = "spurd"


@dataclass(frozen=True, slots=True)
class ProcEnv:
    job_id: int | None
    gpus: tuple[int, ...]
    target_node: str | None = None
    epilog: bool = False


# -- processes -----------------------------------------------------------------


def read_environments(proc_root: Path, skip: SkipHook) -> dict[int, ProcEnv]:
    """pid -> the job id and GPUs its environment names, for processes that name either."""
    try:
        names = os.listdir(proc_root)
    except OSError as exc:
        raise SpurctlError(
            f"cannot list {proc_root}: {exc.strerror or exc}; point --proc-root at the node's /proc"
        ) from None
    own_pid = os.getpid() if is_live_proc(proc_root) else None
    envs: dict[int, ProcEnv] = {}
    for name in names:
        if not (name.isascii() and name.isdigit()):
            continue
        pid = int(name)
        # The scanner itself may run inside a job (srun spurctl ...); it is not the job's work.
        if pid == own_pid:
            continue
        path = proc_root / name / "environ"
        try:
            raw = read_whole(path)
        except OSError as exc:  # vanished (FileNotFoundError, ProcessLookupError) or not ours
            skip(path, exc)
            continue
        env = parse_environ(raw)
        if env.job_id is not None or env.gpus:
            envs[pid] = env
    return envs


def is_live_proc(proc_root: Path) -> bool:
    try:
        return proc_root.resolve() == Path("/proc").resolve()
    except OSError:
        return False


def parse_environ(raw: bytes) -> ProcEnv:
    """What a NUL-separated environ says about a job; garbage entries are ignored."""
    values: dict[str, str] = {}
    wanted = {*JOB_ID_VARS, JOB_GPUS_VAR, *GPU_VARS, TARGET_NODE_VAR, *SCRIPT_CONTEXT_VARS}
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
    target = values.get(TARGET_NODE_VAR, "").strip() or None
    context = next((values[v] for v in SCRIPT_CONTEXT_VARS if values.get(v)), "")
    return ProcEnv(job_id, process_gpus(values), target, context.strip().startswith("epilog"))


def process_gpus(values: dict[str, str]) -> tuple[int, ...]:
    """The device ids one process's environment names: SPUR_JOB_GPUS, else a vendor variable."""
    for var in (JOB_GPUS_VAR, *GPU_VARS):
        ids = _device_ids(values.get(var, ""))
        if ids:
            return ids
    return ()


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
    # controller's device ids without asking the driver; "-1" is spurd's deny.
    # ZE_AFFINITY_MASK names a tile as "<device>.<tile>": the device is the job's.
    ids: set[int] = set()
    for part in text.split(","):
        token = part.strip().partition(".")[0]
        if token.isascii() and token.isdigit():
            ids.add(int(token))
    return tuple(sorted(ids))


def boot_time(proc_root: Path, skip: SkipHook) -> int | None:
    path = proc_root / "stat"
    text = read_text(path, skip)
    if text is None:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "btime" and fields[1].isdigit():
            return int(fields[1])
    return None


def stat_fields(proc_root: Path, pid: int, skip: SkipHook) -> tuple[int, int] | None:
    """(parent pid, start ticks) from /proc/<pid>/stat (fields 4 and 22)."""
    path = proc_root / str(pid) / "stat"
    try:
        raw = read_whole(path)
    except OSError as exc:
        skip(path, exc)
        return None
    # comm (field 2) is in parentheses and may itself hold spaces and ")".
    _, paren, rest = raw.rpartition(b")")
    fields = rest.split()
    if not paren or len(fields) < 20 or not (fields[1].isdigit() and fields[19].isdigit()):
        skip(path, ValueError("unparsable stat line"))
        return None
    return int(fields[1]), int(fields[19])


# -- the agent ------------------------------------------------------------------------


class ProcTable:
    """/proc read on demand, each process's comm and stat at most once per scan."""

    def __init__(self, proc_root: Path, skip: SkipHook) -> None:
        self.proc_root = proc_root
        self._skip = skip
        self._stats: dict[int, tuple[int, int] | None] = {}
        self._comms: dict[int, str | None] | None = None

    def stat(self, pid: int) -> tuple[int, int] | None:
        """(parent pid, start ticks), None when unreadable."""
        if pid not in self._stats:
            self._stats[pid] = stat_fields(self.proc_root, pid, self._skip)
        return self._stats[pid]

    def comms(self) -> dict[int, str | None]:
        """pid -> command name of every process (None: unreadable, but not vanished)."""
        if self._comms is None:
            self._comms = {}
            try:
                names = [n for n in os.listdir(self.proc_root) if n.isascii() and n.isdigit()]
            except OSError:
                names = []
            for name in names:
                path = self.proc_root / name / "comm"
                try:
                    self._comms[int(name)] = read_whole(path).decode("ascii", "replace").strip()
                except FileNotFoundError:
                    if (self.proc_root / name).exists():
                        self._comms[int(name)] = None
                except OSError as exc:  # a vanished process reads as ESRCH, not ENOENT
                    if not isinstance(exc, ProcessLookupError):
                        self._skip(path, exc)
                        self._comms[int(name)] = None
        return self._comms

    def named(self, comm: str) -> set[int]:
        return {pid for pid, c in self.comms().items() if c == comm}

    def lineage(self, pid: int) -> tuple[int, ...]:
        """Its parent, grandparent, ... up to pid 1 or the first unreadable one."""
        out: list[int] = []
        seen = {pid}
        here = pid
        while True:
            fields = self.stat(here)
            if fields is None or fields[0] <= 0 or fields[0] in seen:
                return tuple(out)
            here = fields[0]
            out.append(here)
            seen.add(here)


def find_agents(
    proc_root: Path, boot: int | None, skip: SkipHook, table: ProcTable | None = None
) -> list[AgentProcess]:
    """Every top-level spurd: a process whose comm is `spurd` and whose parent is not one.

    spurd forks before it execs a job, so a child named spurd is the agent's
    fork, not another agent. One listens on the agent port; two means a restart
    whose old agent lives on, and which one tracks a run cannot be told, so the
    callers take none. A spurd whose stat cannot be read is listed without a
    start time (its parent unknown, it may be the agent), oldest pid order.
    """
    table = table if table is not None else ProcTable(proc_root, skip)
    unreadable = {p for p, c in table.comms().items() if c is None}
    named = table.named(AGENT_COMM) | {p for p in unreadable if _stat_names_spurd(proc_root, p)}
    candidates = sorted(named)
    found = {pid: table.stat(pid) for pid in candidates}
    top = [pid for pid, fields in found.items() if fields is None or fields[0] not in found]
    return [
        AgentProcess(pid, None if fields is None else ticks_to_time(boot, fields[1]))
        for pid in top
        for fields in [found[pid]]
    ]


def _stat_names_spurd(proc_root: Path, pid: int) -> bool:
    """A process whose comm is unreadable still counts as spurd when its stat names it."""
    try:
        raw = read_whole(proc_root / str(pid) / "stat")
    except OSError:
        return False
    return raw.partition(b" (")[2].rpartition(b")")[0] == AGENT_COMM.encode()


def agent_hostname_option(proc_root: Path, pid: int, skip: SkipHook) -> str | None:
    """The `--hostname`/`-N` value on spurd's command line (main.rs `Args::hostname`)."""
    path = proc_root / str(pid) / "cmdline"
    try:
        raw = read_whole(path)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            skip(path, exc)
        return None
    return hostname_option([a.decode("utf-8", "replace") for a in raw.split(b"\0")[1:]])


def hostname_option(args: list[str]) -> str | None:
    """What clap takes as spurd's `-N/--hostname` from `args`: the last one given wins."""
    value = option_value(args, "--hostname", "-N")
    return value.strip() or None if value is not None else None


def option_value(args: list[str], long: str, short: str | None = None) -> str | None:
    """The value clap takes for option `long` (`--x V`, `--x=V`; `short`: `-s V`, `-sV`,
    `-s=V`) from spurd's `args` (its command line after argv[0]): the last one given wins,
    nothing after `--` counts."""
    value: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        nxt = args[i + 1] if i + 1 < len(args) else None
        if arg in (long, short):
            if nxt is not None:
                value = nxt
            i += 2
            continue
        if arg.startswith(long + "="):
            value = arg.removeprefix(long + "=")
        elif short is not None and arg.startswith(short) and not arg.startswith("--"):
            value = arg[len(short) :].removeprefix("=")
        i += 1
    return value


def ticks_to_time(boot: int | None, ticks: int) -> datetime | None:
    if boot is None:
        return None
    return datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), UTC)
