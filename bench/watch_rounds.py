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
  first line marks its round as done: there the bench reads the child's
  VmRSS and VmHWM (its peak so far) from /proc, and the time since the
  previous round's block.

Targets: the median round costs no more than one audit (a round skips the
process start and imports one audit pays, so this is the loose side), and the
peak RSS after the last round is within 10% of the peak after round 5.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, Run, compile_bytecode, env, run, serve, verdict

TARGET_NODES = 20_000
TARGET_ROUNDS = 100
EARLY_ROUND = 5
TARGET_RSS_GROWTH = 1.10
_ROUND = re.compile(r"^spurctl audit --watch: round (\d+),")


def mib(n: float) -> float:
    return n / 2**20


def audit_once(ready: dict[str, Any]) -> Run:
    return run(
        [PYTHON, "-m", "spurctl", "audit", "--controller", ready["capped"],
         "--inventory", ready["inventory"]],
        stdout_to_null=True,
    )  # fmt: skip


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of `pid` in bytes, from /proc/PID/status."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def watch(ready: dict[str, Any], rounds: int, deadline: float) -> list[dict[str, float]]:
    """One watch of `rounds` rounds: per round, when its block arrived and the child's memory."""
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
        for line in proc.stdout:
            found = _ROUND.match(line)
            if found is None:
                continue
            rss, hwm = memory(proc.pid)
            out.append(
                {
                    "round": int(found[1]),
                    "at": time.perf_counter() - started,
                    "rss": rss,
                    "hwm": hwm,
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
        once = sorted(audit_once(ready).wall for _ in range(args.repeat))
        rounds = watch(ready, args.rounds, args.deadline)
    audit_s = statistics.median(once)
    # Round 1 includes the process start; rounds 2.. are what a watch pays per round.
    costs = [b["at"] - a["at"] for a, b in itertools.pairwise(rounds)]
    per_round = statistics.median(costs)
    early, last = rounds[EARLY_ROUND - 1], rounds[-1]
    growth = last["hwm"] / early["hwm"]
    ok = per_round <= audit_s and growth <= TARGET_RSS_GROWTH
    target = n == TARGET_NODES and args.rounds >= TARGET_ROUNDS
    print(
        f"watch_rounds: nodes={n} rounds={args.rounds} one_audit_s={audit_s:.2f} "
        f"round_median_s={per_round:.2f} round_max_s={max(costs):.2f} "
        f"round_min_s={min(costs):.2f} first_round_s={rounds[0]['at']:.2f}"
    )
    print(
        f"watch_memory: nodes={n} peak_rss_round{EARLY_ROUND}_mib={mib(early['hwm']):.0f} "
        f"peak_rss_round{last['round']:.0f}_mib={mib(last['hwm']):.0f} growth={growth:.3f} "
        f"rss_round{EARLY_ROUND}_mib={mib(early['rss']):.0f} "
        f"rss_round{last['round']:.0f}_mib={mib(last['rss']):.0f}"
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
            f"watch_round: round={mark} at_s={r['at']:.1f} rss_mib={mib(r['rss']):.0f} "
            f"peak_mib={mib(r['hwm']):.0f}"
        )
    return 0 if ok or not target else 1


if __name__ == "__main__":
    sys.exit(main())
