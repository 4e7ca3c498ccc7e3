"""Run a command that starts a tree of processes and say where its CPU went.

A collect through gateways is one admin process, gateway processes and, below
each gateway, one short-lived command per node; on this machine they all share
the same cores. `run_tree` times the command from exec to exit and splits its
CPU three ways:

- admin: the Python processes with no STANDIN_HOST in their environment (the
  CLI itself, and a relay it runs here): what stays on the admin host;
- gateways: the Python processes whose STANDIN_HOST is a gateway's name (the
  ssh stand-in exports the host it "reached"), their own CPU;
- nodes: what those gateways' children used (cutime/cstime: the stand-in
  shells, each node's command), reaped by the gateways; without gateways (a
  direct fan-out), what the admin processes' children used.

Each tracked process's /proc/PID/stat is read every SAMPLE_S seconds and its
last reading kept, so a process's last moments before it exits (at most
SAMPLE_S) are missed. The total is exact: this process is made a child
subreaper, so a gateway its tool leaves behind (clush exits without waiting for
its gateways) is reparented here and reaped with wait4, its CPU and its
children's counted. `other` is the total less the three parts: the shells
between the tools and their gateways, and what sampling missed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

SAMPLE_S = 0.1
SCAN_S = 0.5
_PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class TreeRun:
    wall: float
    rc: int
    total_cpu: float  # every process of the run, exact (wait4)
    admin_cpu: float
    gateway_cpu: float
    node_cpu: float
    load: float  # the 1-minute load average just before the run
    # CPU seconds the whole machine was busy during the run beyond the run's own: what
    # other work took from it (the load average counts the run's own processes too)
    others_cpu: float

    @property
    def other_cpu(self) -> float:
        return max(0.0, self.total_cpu - self.admin_cpu - self.gateway_cpu - self.node_cpu)


def _busy() -> float:
    """CPU seconds the machine has been busy since boot, all cores (/proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICK


def become_subreaper() -> None:
    """Orphans of the runs below are reparented to this process (Linux only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, start time, own ticks, reaped children's ticks) of a live process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return int(fields[1]), int(fields[19]), utime + stime, cutime + cstime


def _role(pid: int) -> str | None:
    """'admin', 'gateway' or None (not a Python process: not tracked)."""
    try:
        if "python" not in os.path.basename(os.readlink(f"/proc/{pid}/exe")):
            return None
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read().split(b"\0")
    except OSError:
        return None
    host = next((e[13:] for e in environ if e.startswith(b"STANDIN_HOST=")), None)
    if host is None:
        return "admin"
    return "gateway" if host.startswith(b"gw") else None


class _Sampler(threading.Thread):
    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.stop = threading.Event()
        # (pid, start time): pids are reused within a run of 10,000 nodes
        self.tracked: dict[tuple[int, int], str] = {}  # -> role
        self.last: dict[tuple[int, int], tuple[int, int]] = {}  # -> (own, children) ticks

    def run(self) -> None:
        next_scan = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_scan:
                self._scan()
                next_scan = now + SCAN_S
            for key in list(self.tracked):
                got = _stat(key[0])
                if got is not None and got[1] == key[1]:
                    self.last[key] = got[2:]
            self.stop.wait(SAMPLE_S)

    def _scan(self) -> None:
        """Find the run's new Python processes: descendants of the root."""
        parents: dict[int, int] = {}
        starts: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                got = _stat(int(name))
                if got is not None:
                    parents[int(name)], starts[int(name)] = got[0], got[1]
        for pid in parents:
            key = (pid, starts[pid])
            if key in self.tracked:
                continue
            up, hops = pid, 0
            while up in parents and up != self.root and hops < 64:
                up, hops = parents[up], hops + 1
            if up != self.root:
                continue
            # Not remembered when None: a process seen between its fork and its exec
            # of python is looked at again.
            role = _role(pid)
            if role is not None:
                self.tracked[key] = role

    def parts(self) -> tuple[float, float, float]:
        """(admin, gateways, nodes) CPU seconds. Without gateways (a direct fan-out) the
        node side is what the admin processes' children used."""
        admin = gateway = gw_children = admin_children = 0
        for key, (own, children) in self.last.items():
            if self.tracked[key] == "admin":
                admin += own
                admin_children += children
            else:
                gateway += own
                gw_children += children
        has_gateways = any(role == "gateway" for role in self.tracked.values())
        nodes = gw_children if has_gateways else admin_children
        return admin / _TICK, gateway / _TICK, nodes / _TICK


def run_tree(cmd: Sequence[str], env: dict[str, str], *, stdout: str, deadline: float) -> TreeRun:
    """Run `cmd` (stdout to the file `stdout`, stderr kept), killed past `deadline` s."""
    load = os.getloadavg()[0]
    busy = _busy()
    with open(stdout, "wb") as out, open(stdout + ".err", "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env)
        sampler = _Sampler(proc.pid)
        sampler.start()
        timer = threading.Timer(deadline, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        busy = _busy() - busy
        total = usage.ru_utime + usage.ru_stime + _reap_orphans(sampler, deadline=30.0)
        sampler.stop.set()
        sampler.join()
    # This process's own CPU (the sampler) is the bench's, counted with the others'.
    return TreeRun(wall, proc.returncode, total, *sampler.parts(), load, max(0.0, busy - total))


def _reap_orphans(sampler: _Sampler, deadline: float) -> float:
    """Wait for what the run left behind (reparented here); their CPU seconds."""
    cpu = 0.0
    until = time.monotonic() + deadline
    while True:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu
        if pid:
            cpu += usage.ru_utime + usage.ru_stime
        elif time.monotonic() > until:  # a leftover that will not end: end it
            for left, start in list(sampler.tracked):
                got = _stat(left)
                if got is not None and got[1] == start:  # still the run's process
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(left, 9)
            until = time.monotonic() + deadline
        else:
            time.sleep(0.05)
