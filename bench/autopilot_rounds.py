"""Benchmark: `spurctl autopilot` on a quiet fleet, every node inventoried (issue 52.10).

    python bench/autopilot_rounds.py                     # 20,000 nodes, 30 s, grace 60 s
    python bench/autopilot_rounds.py --memory --nodes 2000 --rounds 1000 --interval 0.001

The cluster is spurctl_sim.fleet_scenario's: N nodes each running one job its
agent holds, every node in one inventory file that is rewritten whenever what the
agents hold changes (as a collector would), served by the simulated Spur cluster in
this process (the measured autopilot is a process of its own; the controller's CPU is
not charged to it). Measured:

- one audit: `spurctl audit --inventory FILE --format json > /dev/null`, its own CPU
  (wait4), median of 3;
- latency: once the autopilot's first round is out, 30 jobs are stranded (the
  controller finishes them, their agents keep holding them); the time from there to
  the JSON line whose calls show every cancel sent. Target: grace + one interval + that
  round's own time (the reclaim);
- CPU per round: the autopilot's utime+stime (/proc/PID/stat) between two round lines,
  median over the rounds; target: no more than one audit's;
- memory (--memory, rounds back to back): VmRSS from /proc/PID/status after round 5
  and after every 10th round, and VmHWM. Target (the issue's 10%): the median of the
  last 100 rounds at most 1.10x the median of rounds 100-200 (the first ~100 rounds
  are warm-up: bench/README.md shows what they allocate); printed beside it, round 5
  -> the last round (the first yardstick), the high-water mark and the least-squares
  slope over rounds 100..N in MiB per 100 rounds.
- --trace FILE: the autopilot run under tracemalloc (bench/_autopilot_traced.py),
  what it holds compared between the rounds of --trace-rounds; slower, so its RSS
  figures are not the target's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, compile_bytecode, env, run, verdict

from spurctl_sim import SimCluster
from spurctl_sim.fleet_scenario import fleet, node_name, strand

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def mem_of(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


SAMPLE = 10  # --memory: VmRSS read every SAMPLE rounds (and at round 5)
WARM = (100, 200)  # the first post-warm-up window (bench/README.md says what fills it)


def mib(b: float) -> float:
    return b / (1 << 20)


def memory_verdict(mem: dict[int, dict[str, int]]) -> bool:
    """Print the memory figures; True when the issue's target is met.

    Headline: the median VmRSS of the last 100 rounds against that of rounds 100-200
    (the warm-up before round 100 excluded; bench/README.md shows what it allocates),
    at most 1.10. Beside it, as first measured: round 5 -> the last round; the
    high-water mark; and the least-squares slope over rounds 100..N, MiB per 100 rounds.
    """
    last_round = max(mem)
    rss = {r: m["VmRSS"] for r, m in mem.items()}
    hwm = mem[last_round]["VmHWM"]
    early = rss.get(5, rss[min(rss)])
    print(f"memory: rounds={last_round} rss round5={mib(early):.0f}MiB "
          f"last={mib(rss[last_round]):.0f}MiB hwm={mib(hwm):.0f}MiB "
          f"growth round5->last={rss[last_round] / early:.3f}")  # fmt: skip
    every = [f"{mib(v):.0f}" for r, v in sorted(rss.items()) if r % SAMPLE == 0]
    print(f"rss MiB every {SAMPLE} rounds: {' '.join(every)}")
    warm = [v for r, v in rss.items() if WARM[0] <= r <= WARM[1]]
    tail = [v for r, v in rss.items() if r > last_round - 100]
    after = sorted((r, v) for r, v in rss.items() if r >= WARM[0])
    if not warm or last_round < 2 * WARM[1] or len(after) < 2:
        print(
            f"memory: fewer than {2 * WARM[1]} rounds: no post-warm-up figure "
            f"target<=1.10 on round5->last {verdict(rss[last_round] / early <= 1.10)}"
        )
        return rss[last_round] / early <= 1.10
    base, end = statistics.median(warm), statistics.median(tail)
    slope, _ = statistics.linear_regression([r for r, _ in after], [mib(v) for _, v in after])
    growth = end / base
    print(f"memory: median rss rounds {WARM[0]}-{WARM[1]}={mib(base):.0f}MiB "
          f"last 100 rounds={mib(end):.0f}MiB slope rounds {WARM[0]}..{last_round}="
          f"{slope * 100:+.2f}MiB/100 rounds")  # fmt: skip
    print(f"memory: growth (median last 100 / median rounds {WARM[0]}-{WARM[1]})={growth:.3f} "
          f"target<=1.10 {verdict(growth <= 1.10)} "
          f"(round5->last {rss[last_round] / early:.3f})")  # fmt: skip
    return growth <= 1.10


def kept_fresh(sim: SimCluster, path: Path, done: threading.Event) -> threading.Thread:
    def watch() -> None:
        seen = sim.state.generation
        while not done.wait(0.05):
            if sim.state.generation != seen:
                seen = sim.state.generation
                sim.write_inventories(path)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--stranded", type=int, default=30)
    p.add_argument("--interval", type=float, default=30.0)
    p.add_argument("--grace", type=float, default=60.0)
    p.add_argument("--memory", action="store_true", help="rounds back to back, memory only")
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument(
        "--trace",
        type=Path,
        help="with --memory: run the autopilot under "
        "tracemalloc (bench/_autopilot_traced.py), its report appended to this file",
    )
    p.add_argument("--trace-rounds", default="5,100,200", help="the rounds --trace compares")
    a = p.parse_args()
    compile_bytecode()
    step = max(1, a.nodes // a.stranded)
    stranded = [1 + k * step for k in range(a.stranded)]
    work = Path(tempfile.mkdtemp(prefix="spurctl-bench-autopilot-"))
    t_build = time.perf_counter()
    sim = SimCluster(fleet(a.nodes), agents=[node_name(i) for i in stranded])
    with sim:
        live = sim.write_inventories(work / "live.jsonl")
        agent_map = work / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        done = threading.Event()
        fresh = kept_fresh(sim, live, done)
        print(f"setup: nodes={a.nodes} {time.perf_counter() - t_build:.1f}s", flush=True)
        view = ["--controller", sim.controller_address, "--inventory", str(live)]
        audits = [
            run([PYTHON, "-m", "spurctl", "audit", *view, "--format", "json"], stdout_to_null=True)
            for _ in range(3)
        ]
        audit_cpu = statistics.median(r.cpu for r in audits)
        audit_wall = statistics.median(r.wall for r in audits)
        print(f"one audit: cpu={audit_cpu:.2f}s wall={audit_wall:.2f}s", flush=True)
        child_env = env()
        spurctl = [PYTHON, "-m", "spurctl"]
        if a.trace is not None:
            spurctl = [PYTHON, str(Path(__file__).resolve().parent / "_autopilot_traced.py")]
            child_env["SPURCTL_BENCH_TRACE_FILE"] = str(a.trace.resolve())
            child_env["SPURCTL_BENCH_TRACE_ROUNDS"] = a.trace_rounds
        argv = [*spurctl, "autopilot", *view, "--agent-map", str(agent_map),
                "--journal", str(work / "journal.jsonl"), "--pause-file", str(work / "pause"),
                "--interval", str(a.interval), "--grace", str(a.grace)]  # fmt: skip
        if a.memory:
            argv += ["--rounds", str(a.rounds)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=child_env)
        assert proc.stdout is not None
        cpu_rounds: list[float] = []
        mem: dict[int, dict[str, int]] = {}
        last_cpu = cpu_of(proc.pid)
        stranded_at = None
        latency = None
        reclaim_took = 0.0
        ok = True
        try:
            for line in proc.stdout:
                r = json.loads(line)
                now = time.monotonic()
                cpu = cpu_of(proc.pid)
                cpu_rounds.append(cpu - last_cpu)
                last_cpu = cpu
                if a.memory:
                    if r["round"] % SAMPLE == 0 or r["round"] in (5, a.rounds):
                        mem[r["round"]] = mem_of(proc.pid)
                    if r["round"] % 100 == 0:
                        print(f"round {r['round']}: rss={mem[r['round']]['VmRSS'] >> 20}MiB",
                              flush=True)  # fmt: skip
                    continue
                if stranded_at is None:
                    for i in stranded:
                        strand(sim, i)
                    stranded_at = time.monotonic()
                    continue
                sent = sum(1 for c in r["calls"] if c["result"] == "sent")
                if sent:
                    print(f"round {r['round']}: {sent} sent, took {r['took_s']}s", flush=True)
                if sent >= a.stranded or r["findings"] == {}:
                    latency = now - stranded_at
                    reclaim_took = r["took_s"]
                    break
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            done.set()
            fresh.join(timeout=30)
    rounds = cpu_rounds[1:] or cpu_rounds
    per_round = statistics.median(rounds)
    print(f"cpu per round: median={per_round:.2f}s (one audit {audit_cpu:.2f}s) "
          f"target<=1x {verdict(per_round <= audit_cpu)}")  # fmt: skip
    ok = ok and per_round <= audit_cpu
    if a.memory:
        return 0 if memory_verdict(mem) and ok else 1
    assert latency is not None, "the stranded jobs were never reclaimed"
    target = a.grace + a.interval + reclaim_took
    print(f"stranding->reclaim: {latency:.1f}s target<={target:.1f}s "
          f"(grace {a.grace:g} + interval {a.interval:g} + the reclaim round {reclaim_took:.1f}) "
          f"{verdict(latency <= target)}")  # fmt: skip
    return 0 if ok and latency <= target else 1


if __name__ == "__main__":
    sys.exit(main())
