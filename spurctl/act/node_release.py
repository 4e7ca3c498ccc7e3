"""`spurctl node-release`: stop one agent orphan on this node, from the node.

An agent orphan is a run that began before the node's current spurd started:
spurd's running map did not survive the restart while the run's processes and
cgroup did (Spur #803), and its CancelJob answers Ok for the id and does
nothing. Only the node can free it. The release:

1. re-scans the node as `spurctl node-inventory` does, immediately before acting,
   and refuses (decide/release.py) unless the job is held, its run started at
   the time the operator passed, and the read-only evidence says spurd does not
   track it;
2. pins every process of the job (the cgroup.procs of its job cgroups and the
   processes carrying its SPUR_JOB_ID) by pidfd, checked against the start time
   the scan read, so a pid reused meanwhile is never signalled;
3. sends SIGTERM, waits up to the grace period for them to exit, then writes
   `cgroup.kill` in each job cgroup that has one and SIGKILLs what is left;
4. removes the emptied job cgroups, deepest first.

A job whose scan shows no process (a `leftover`: an empty cgroup spurd's rmdir
failed on) has nothing to signal: only its empty job cgroups are removed.

A journal record (intent before, outcome after, the reclaim journal's format
and lock) says what was done; kind `agent-orphan` (or `leftover`).
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from spurctl.decide.reasons import plural
from spurctl.decide.release import held_run, refusal
from spurctl.decide.release import select as select_processes
from spurctl.errors import SpurctlError
from spurctl.model import Holding, Inventory, format_time
from spurctl.node.node_scan import (
    cgroup_pids,
    job_cgroup_dirs,
    process_stats,
    scan_for_release,
    walk_dirs,
)
from spurctl.sources import bounded

KIND = "agent-orphan"
LEFTOVER_KIND = "leftover"  # a job's trace with no process: nothing to signal
DEFAULT_GRACE_S = 10.0
# After SIGKILL and cgroup.kill, how long to wait for the processes to exit and the
# cgroups to empty before reporting what is left.
KILL_WAIT_S = 5.0
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Target:
    """What a release would stop: the job's run as the fresh scan saw it."""

    inventory: Inventory
    holding: Holding
    pids: dict[int, int]  # pid -> start ticks (/proc/<pid>/stat field 22)
    cgroups: tuple[Path, ...]
    spared: dict[int, str] = field(default_factory=dict)  # pid -> why it is left alone

    @property
    def node(self) -> str:
        return self.inventory.node

    @property
    def job_id(self) -> int:
        return self.holding.job_id


@dataclass(slots=True)
class Released:
    """What a release did."""

    terminated: list[int] = field(default_factory=list)  # exited within the grace period
    killed: list[int] = field(default_factory=list)  # SIGKILLed after it
    survivors: list[int] = field(default_factory=list)  # still running at the end
    cgroup_killed: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    left: list[Path] = field(default_factory=list)  # cgroups that could not be removed
    # Cgroups that also hold a process not released (spurd's own run): kept by design.
    kept: list[Path] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.survivors and not self.left

    def sentence(self, target: Target) -> str:
        parts = [
            f"{plural(len(self.terminated), 'process', 'processes')} exited on SIGTERM",
            f"{len(self.killed)} killed after the grace period",
        ]
        if self.cgroup_killed:
            parts.append(f"cgroup.kill written in {plural(len(self.cgroup_killed), 'cgroup')}")
        parts.append(f"{plural(len(self.removed), 'job cgroup')} removed")
        if self.survivors:
            parts.append(f"still running: {_pids(self.survivors)}")
        if self.left:
            parts.append(f"not removed: {', '.join(str(p) for p in self.left)}")
        if self.kept:
            kept = ", ".join(str(p) for p in self.kept)
            parts.append(f"kept (holds a process not released): {kept}")
        what = "released" if self.complete else "not fully released"
        return f"job {target.job_id} on {target.node} {what}: {'; '.join(parts)}"


def find_target(
    job_id: int,
    started_at: datetime,
    *,
    cgroup_root: Path | None,
    proc_root: Path,
) -> Target:
    """Scan the node now and return what a release of `job_id` would stop.

    Raises SpurctlError with the one-line refusal when it must not be released.
    """
    inventory, procs = scan_for_release(cgroup_root, proc_root, job_id)
    holding = held_run(inventory, job_id)
    agent = inventory.agent
    why = refusal(inventory, job_id, started_at)
    if why is not None or holding is None:
        raise SpurctlError(why or f"job {job_id} is not held here")
    if not holding.pids:
        # A leftover: no process of the job, so nothing to signal; its empty cgroups go.
        if procs:
            raise SpurctlError(
                f"job {job_id} on {inventory.node} shows no process in the scan, but "
                f"{_pids(procs)} now name it; re-audit before releasing (nothing released)"
            )
        return Target(
            inventory=inventory,
            holding=holding,
            pids={},
            cgroups=tuple(
                job_cgroup_dirs(cgroup_root, proc_root, job_id, agent.pid if agent else None)
            ),
        )
    if agent is None:
        raise SpurctlError(f"no spurd process runs on {inventory.node}; nothing released")
    chosen = select_processes(job_id, procs, agent, own_pid=os.getpid())
    if not chosen.signalled and any(p.cgroup_job in (None, job_id) for p in procs.values()):
        raise SpurctlError(
            f"no process of job {job_id} on {inventory.node} predates spurd (pid {agent.pid}): "
            + "; ".join(f"{pid}: {why}" for pid, why in sorted(chosen.spared.items()))
            + " (nothing released)"
        )
    return Target(
        inventory=inventory,
        holding=holding,
        pids={pid: t for pid in chosen.signalled if (t := procs[pid].ticks) is not None},
        cgroups=tuple(job_cgroup_dirs(cgroup_root, proc_root, job_id, agent.pid)),
        spared=chosen.spared,
    )


def plan_lines(target: Target, grace_s: float) -> list[str]:
    """What a release of `target` would do, one line per step."""
    h, agent = target.holding, target.inventory.agent
    since = format_time(agent.started_at) if agent is not None else "?"
    if not h.pids:
        shown = ", ".join(h.traces) or "a trace"
        lines = [
            f"job {target.job_id} on {target.node}: {shown} since {format_time(h.started_at)} "
            "and no process: a leftover no agent cancel removes"
        ]
    else:
        lines = [
            f"job {target.job_id} on {target.node}: run started {format_time(h.started_at)}, "
            f"before spurd (pid {agent.pid if agent else '?'}) started {since}: an agent orphan"
        ]
    if target.pids:
        lines.append(
            f"SIGTERM to {plural(len(target.pids), 'process', 'processes')}: "
            f"{_pids(target.pids)}; after "
            f"{grace_s:g} s, SIGKILL to those still alive"
        )
    else:
        lines.append("no live process to signal")
    for pid, why in sorted(target.spared.items()):
        lines.append(f"left alone: process {pid}: {why}")
    shared = [c for c in target.cgroups if not _only(c, target.pids)]
    own = [c for c in target.cgroups if c not in shared]
    killable = [c for c in own if (c / "cgroup.kill").exists()]
    if killable:
        lines.append(f"then cgroup.kill in {', '.join(str(c) for c in killable)}")
    if own:
        lines.append(f"then remove the emptied job cgroup(s) {', '.join(str(c) for c in own)}")
    for c in shared:
        lines.append(
            f"{c} also holds a process that is not released: no cgroup.kill there, "
            "and it is not removed"
        )
    return lines


def _only(cgroup: Path, pids: dict[int, int]) -> bool:
    """Whether every process in `cgroup` (and its step cgroups) is one the release stops:
    cgroup.kill and rmdir act on the whole cgroup, so only then may they be used."""
    return cgroup_pids(cgroup) <= set(pids)


def is_live_proc(proc_root: Path) -> bool:
    """Whether `proc_root` is this system's /proc (pids there are pids we can signal)."""
    try:
        return proc_root.resolve() == Path("/proc").resolve()
    except OSError:
        return False


class _Process:
    """One process of the job, pinned by pidfd where the kernel has it."""

    def __init__(self, pid: int, ticks: int, proc_root: Path) -> None:
        self.pid = pid
        self.fd: int | None = None
        self._ticks = ticks
        self._proc_root = proc_root
        opener = getattr(os, "pidfd_open", None)
        if opener is not None:
            with suppress(OSError):
                self.fd = opener(pid)
        # Opened after the scan: the pid must still name the process the scan read.
        if not self._same():
            self.close()
            self.gone = True
        else:
            self.gone = False

    def _same(self) -> bool:
        stats = process_stats(self._proc_root, [self.pid])
        return self.pid in stats and stats[self.pid][1] == self._ticks

    def send(self, sig: int) -> None:
        if self.gone:
            return
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)
            elif self._same():
                os.kill(self.pid, sig)
        except ProcessLookupError:
            self.gone = True

    def exited(self) -> bool:
        if self.gone:
            return True
        if self.fd is not None:
            # A pidfd polls readable once the process has exited (a zombie counts).
            readable, _, _ = select.select([self.fd], [], [], 0)
            self.gone = bool(readable)
        else:
            self.gone = not self._same() or _zombie(self._proc_root, self.pid)
        return self.gone

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _zombie(proc_root: Path, pid: int) -> bool:
    try:
        raw = bounded.read_bytes(proc_root / str(pid) / "stat", bounded.NODE_FILE)
    except (OSError, bounded.TooLarge):
        return True
    return raw.rpartition(b")")[2].split()[:1] == [b"Z"]


def release(
    target: Target,
    *,
    grace_s: float,
    proc_root: Path,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Released:
    """Stop `target`'s processes and remove its job cgroups; see the module docstring."""
    done = Released()
    procs = [_Process(pid, ticks, proc_root) for pid, ticks in sorted(target.pids.items())]
    try:
        for p in procs:
            p.send(signal.SIGTERM)
        _wait_until(lambda: all(p.exited() for p in procs), grace_s, clock, sleep)
        done.terminated = [p.pid for p in procs if p.exited()]
        for cgroup in target.cgroups:
            kill = cgroup / "cgroup.kill"
            # Read again now: spurd may have launched a requeued run into it meanwhile.
            if kill.exists() and _only(cgroup, target.pids):
                try:
                    kill.write_text("1")
                    done.cgroup_killed.append(cgroup)
                except OSError:
                    pass  # SIGKILL below still reaches every pinned process
        alive = [p for p in procs if not p.exited()]
        for p in alive:
            p.send(signal.SIGKILL)
        _wait_until(lambda: all(p.exited() for p in alive), KILL_WAIT_S, clock, sleep)
        done.killed = [p.pid for p in alive if p.exited()]
        done.survivors = [p.pid for p in alive if not p.exited()]
    finally:
        for p in procs:
            p.close()
    for cgroup in target.cgroups:
        if not _only(cgroup, target.pids):
            done.kept.append(cgroup)
        elif cgroup_pids(cgroup):  # never remove a cgroup that still has a process
            done.left.append(cgroup)
        elif _remove_tree(cgroup, clock, sleep):
            done.removed.append(cgroup)
        else:
            done.left.append(cgroup)
    return done


def _wait_until(
    ready: Callable[[], bool],
    seconds: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> bool:
    deadline = clock() + seconds
    while not ready():
        if clock() >= deadline:
            return False
        sleep(_POLL_S)
    return True


def _remove_tree(top: Path, clock: Callable[[], float], sleep: Callable[[float], None]) -> bool:
    """rmdir a job cgroup and its step cgroups, deepest first; a cgroup empties a moment
    after its last process exits, so each is retried until KILL_WAIT_S."""
    # node_scan's walk, not os.walk: that recurses, and a cgroup nested deep enough would
    # end the release in a RecursionError; past the scan's depth nothing is removed.
    dirs = sorted(walk_dirs(top), key=lambda p: len(p.parts), reverse=True)
    deadline = clock() + KILL_WAIT_S
    for d in dirs:
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if clock() >= deadline:
                    return False
                sleep(_POLL_S)
    return not top.exists()


def _pids(pids: Iterable[int]) -> str:
    return " ".join(str(p) for p in sorted(pids))


def run(
    job_id: int,
    started_at: datetime,
    *,
    dry_run: bool,
    grace_s: float,
    cgroup_root: Path | None,
    proc_root: Path,
    journal_path: Path,
    out: Callable[[str], None],
) -> Released | None:
    """`spurctl node-release`: the plan (dry run: only the plan), else the release, journaled.

    Raises SpurctlError (exit 2, one line) on a refusal, a journal another run holds,
    or a --proc-root that is not this system's /proc for a real release.
    """
    if dry_run:
        target = find_target(job_id, started_at, cgroup_root=cgroup_root, proc_root=proc_root)
        for line in plan_lines(target, grace_s):
            out(line)
        out("dry run: nothing sent")
        return None
    if not is_live_proc(proc_root):
        raise SpurctlError(
            f"--proc-root {proc_root} is not this system's /proc: a release signals processes "
            "by pid, which only this system's /proc names; use --dry-run to read another"
        )
    from spurctl.act.journal import Journal
    from spurctl.sources.cluster_binding import agent_binding
    from spurctl.sources.journal_records import stamp

    with Journal(journal_path) as journal:
        # Under the journal's lock, immediately before acting: what the operator saw may
        # have changed since (the run ended, the id was reissued, spurd restarted).
        target = find_target(job_id, started_at, cgroup_root=cgroup_root, proc_root=proc_root)
        # Its records say the cluster the node's spurd says it is of (none said: no
        # cluster fields, a record every cluster's runs read, as before records said one).
        journal.cluster = stamp(agent_binding(target.inventory))
        for line in plan_lines(target, grace_s):
            out(line)
        kind = KIND if target.holding.pids else LEFTOVER_KIND
        journal.intent(target.node, job_id, kind)
        try:
            done = release(target, grace_s=grace_s, proc_root=proc_root)
        except BaseException as exc:
            journal.outcome(
                target.node, job_id, kind, "failed", f"interrupted: {type(exc).__name__}: {exc}"
            )
            raise
        result = "released" if done.complete else "failed"
        journal.outcome(target.node, job_id, kind, result, done.sentence(target))
    out(done.sentence(target))
    out(f"Journal: {journal_path}")
    return done
