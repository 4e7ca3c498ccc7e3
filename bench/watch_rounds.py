"""Benchmark: `spurctl audit --watch` for many rounds beside one audit, no-cost controller.

    python bench/watch_rounds.py                        # 20,000 nodes, 100 rounds (the target)
    python bench/watch_rounds.py --nodes 5000 --rounds 30

A watch runs for days: what it costs per round, and whether its memory grows
with the rounds, decide whether an operator can leave it running. The cluster
is bench/audit_scale.py's (N nodes, 10*N real-sized jobs, half the nodes
inventoried), served by bench/preencoded_controller.py from bytes encoded once,
on its port that refuses answers over spurctld's 32 MiB. Measured in one run:

- one audit: `spurctl audit --inventory FILE > /dev/null` (the default table, as
  the watch draws it), median of --repeat runs, exec to exit;
- the watch: `spurctl audit --watch --interval 0.001 --rounds R --inventory FILE`,
  its output read through a pipe (one plain block per round). Each block's
  first line marks its round as done: there the bench takes the time since the
  previous round's block, the watch's CPU so far (its own and its reaped
  children's, from /proc/PID/stat), and its VmRSS and VmHWM.
- the watch's memory as a whole: each round's audit runs in a forked child
  (spurctl.heap.in_child), so the watch process's own VmHWM is not its
  footprint. A thread samples the VmRSS of the watch and of every process under
  it every 10 ms (each one audit is sampled too, so that both pay for it); a
  round's peak is the largest sum seen up to its block. The sum counts the
  pages parent and child share (the imported code and what the watch keeps,
  ~50 MiB) twice, so it overstates the footprint; a peak shorter than a sample
  is missed.

Targets: the median round costs no more than one audit (a round skips the
process start and imports one audit pays, so this is the loose side), and the
peak RSS after the last round is within 10% of the peak after round 5, both for
the sampled sum and for the largest single process.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, Run, compile_bytecode, env, serve, verdict

TARGET_NODES = 20_000
TARGET_ROUNDS = 100
EARLY_ROUND = 5
TARGET_RSS_GROWTH = 1.10
SAMPLE_EVERY = 0.01  # s; an audit's peak lasts some 100 ms at 20,000 nodes
_ROUND = re.compile(r"^spurctl audit --watch: round (\d+),")


def mib(n: float) -> float:
    return n / 2**20


def audit_once(ready: dict[str, Any]) -> Run:
    """One audit, exec to exit, sampled as the watch is (so both pay the sampler)."""
    cmd = [
        PYTHON, "-m", "spurctl", "audit", "--controller", ready["capped"],
        "--inventory", ready["inventory"],
    ]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env())
    with TreeSampler(proc.pid):
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    rc = proc.returncode = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1):
        raise RuntimeError(f"one audit exited {rc}: {stderr.strip()[-300:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return Run(wall, cpu, usage.ru_maxrss * 1024, rc, "", stderr)


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of `pid` in bytes, from /proc/PID/status."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and of its children it has reaped, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime


def tree(pid: int) -> list[int]:
    """`pid` and every process under it, from /proc/PID/task/TID/children."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                todo.extend(
                    int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()
                )
            except OSError:
                continue
    return out


class TreeSampler:
    """The largest VmRSS sum of a process tree, and of one process in it, so far."""

    def __init__(self, pid: int, every: float = SAMPLE_EVERY) -> None:
        self.pid, self.every = pid, every
        self.peak_sum = self.peak_one = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            total = 0
            for p in tree(self.pid):
                try:
                    rss = memory(p)[0]
                except (OSError, KeyError):  # gone meanwhile, or a zombie with no VmRSS
                    continue
                total += rss
                self.peak_one = max(self.peak_one, rss)
            self.peak_sum = max(self.peak_sum, total)
            self.samples += 1


def watch(ready: dict[str, Any], rounds: int, deadline: float) -> list[dict[str, float]]:
    """One watch of `rounds` rounds: per round, when its block arrived, CPU and memory."""
    cmd = [
        PYTHON, "-m", "spurctl", "audit", "--controller", ready["capped"],
        "--inventory", ready["inventory"], "--watch", "--interval", "0.001",
        "--rounds", str(rounds),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env()
    )
    out: list[dict[str, float]] = []
    started = time.perf_counter()
    try:
        assert proc.stdout is not None
        with TreeSampler(proc.pid) as sampler:
            for line in proc.stdout:
                found = _ROUND.match(line)
                if found is None:
                    continue
                rss, hwm = memory(proc.pid)
                out.append(
                    {
                        "round": int(found[1]),
                        "at": time.perf_counter() - started,
                        "cpu": cpu_seconds(proc.pid),
                        "rss": rss,
                        "hwm": hwm,
                        "tree_peak": max(sampler.peak_sum, rss),
                        "one_peak": max(sampler.peak_one, hwm),
                    }
                )
                if time.perf_counter() - started > deadline:
                    raise RuntimeError(f"the watch took over {deadline:.0f} s; stopped")
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if rc not in (0, 1) or len(out) != rounds:
        raise RuntimeError(f"the watch exited {rc} after {len(out)} of {rounds} rounds")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=TARGET_NODES)
    p.add_argument("--rounds", type=int, default=TARGET_ROUNDS)
    p.add_argument("--repeat", type=int, default=3, help="one-audit runs; the median counts")
    p.add_argument("--deadline", type=float, default=1800.0, help="seconds the watch may take")
    args = p.parse_args()
    if args.rounds <= EARLY_ROUND:
        p.error(f"--rounds must be over {EARLY_ROUND}: the growth is measured from round 5")
    compile_bytecode()
    n = args.nodes
    args_of = ["--nodes", str(n), "--jobs", str(10 * n), "--held", str(5 * n)]
    with (
        tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp,
        serve(Path(tmp), *args_of, script="preencoded_controller.py") as ready,
    ):
        audit_once(ready)  # fills the controller's answer cache for these requests
        once = [audit_once(ready) for _ in range(args.repeat)]
        rounds = watch(ready, args.rounds, args.deadline)
    audit_s = statistics.median(r.wall for r in once)
    audit_cpu = statistics.median(r.cpu for r in once)
    # Round 1 includes the process start; rounds 2.. are what a watch pays per round.
    costs = [b["at"] - a["at"] for a, b in itertools.pairwise(rounds)]
    cpus = [b["cpu"] - a["cpu"] for a, b in itertools.pairwise(rounds)]
    per_round = statistics.median(costs)
    early, last = rounds[EARLY_ROUND - 1], rounds[-1]
    growth = last["tree_peak"] / early["tree_peak"]
    growth_one = last["one_peak"] / early["one_peak"]
    ok = per_round <= audit_s and max(growth, growth_one) <= TARGET_RSS_GROWTH
    target = n == TARGET_NODES and args.rounds >= TARGET_ROUNDS
    print(
        f"watch_rounds: nodes={n} rounds={args.rounds} one_audit_s={audit_s:.2f} "
        f"round_median_s={per_round:.2f} round_max_s={max(costs):.2f} "
        f"round_min_s={min(costs):.2f} first_round_s={rounds[0]['at']:.2f} "
        f"one_audit_cpu_s={audit_cpu:.2f} round_cpu_median_s={statistics.median(cpus):.2f}"
    )
    print(
        f"watch_memory: nodes={n} tree_peak_round{EARLY_ROUND}_mib={mib(early['tree_peak']):.0f} "
        f"tree_peak_round{last['round']:.0f}_mib={mib(last['tree_peak']):.0f} "
        f"growth={growth:.3f} largest_process_peak_round{EARLY_ROUND}_mib="
        f"{mib(early['one_peak']):.0f} largest_process_peak_round{last['round']:.0f}_mib="
        f"{mib(last['one_peak']):.0f} growth_largest={growth_one:.3f} "
        f"watch_process_peak_round{EARLY_ROUND}_mib={mib(early['hwm']):.0f} "
        f"watch_process_peak_round{last['round']:.0f}_mib={mib(last['hwm']):.0f} "
        f"one_audit_peak_mib={mib(statistics.median(r.peak_rss for r in once)):.0f}"
        + (
            f" target round<=one audit,peak growth<={TARGET_RSS_GROWTH:.2f} {verdict(ok)}"
            if target
            else ""
        )
    )
    for mark in sorted(
        {1, EARLY_ROUND, 10, 25, 50, 75, args.rounds} & set(range(1, args.rounds + 1))
    ):
        r = rounds[mark - 1]
        print(
            f"watch_round: round={mark} at_s={r['at']:.1f} tree_peak_mib={mib(r['tree_peak']):.0f} "
            f"largest_process_peak_mib={mib(r['one_peak']):.0f} "
            f"watch_process_rss_mib={mib(r['rss']):.0f} watch_process_peak_mib={mib(r['hwm']):.0f}"
        )
    return 0 if ok or not target else 1


if __name__ == "__main__":
    sys.exit(main())
