"""A job cgroup's CPUs and memory, read as spurd writes them (docs/node-evidence.md).

Spur main at 4cc3da8 writes `cpu.max` from the job's CPUs and `cpuset.cpus` when
CPU ids were assigned. After Spur #762 `[cgroup] cpu_quota` is off by default:
`cpu.max` is left unset ("max") and the cpuset is the job's only CPU bound
(`constrain_cores`, on by default). So the cpuset is read first, and the quota
only for a job spurd did not pin.
"""

from __future__ import annotations

from pathlib import Path

from spurctl import hostlist
from spurctl.errors import SpurctlError
from spurctl.node.node_files import SkipHook, read_text

_MIB = 1024 * 1024


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


def cgroup_cpus(job_dir: Path, skip: SkipHook) -> int | None:
    """The job's CPUs: its cpuset (effective, else as configured), else its cpu.max quota.

    An empty cpuset.cpus means spurd did not pin the job: the effective set is then
    the parent's (the whole node), and the job's share is its quota, if it has one.
    """
    configured = read_text(job_dir / "cpuset.cpus", skip)
    if configured is None or configured.strip():
        effective = read_text(job_dir / "cpuset.cpus.effective", skip)
        for listed in (effective, configured):
            count = None if listed is None else parse_cpu_list(listed)
            if count is not None:
                return count
    quota = read_text(job_dir / "cpu.max", skip)
    return _quota_cpus(quota) if quota is not None else None


def parse_memory_max(text: str) -> int | None:
    """memory.max in MiB; None for "max" (no limit) or garbage."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()):
        return None
    return int(value) // _MIB


def memory_mb(job_dir: Path, skip: SkipHook) -> int | None:
    text = read_text(job_dir / "memory.max", skip)
    return parse_memory_max(text) if text is not None else None
