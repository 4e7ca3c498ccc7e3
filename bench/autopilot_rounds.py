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
- memory (--memory): VmRSS after round 5 and after the last round, and VmHWM; target:
  at most 10% growth.
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
        argv = [PYTHON, "-m", "spurctl", "autopilot", *view, "--agent-map", str(agent_map),
                "--journal", str(work / "journal.jsonl"), "--pause-file", str(work / "pause"),
                "--interval", str(a.interval), "--grace", str(a.grace)]  # fmt: skip
        if a.memory:
            argv += ["--rounds", str(a.rounds)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env())
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
                mem[r["round"]] = mem_of(proc.pid)
                if a.memory:
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
        early, last = mem[min(5, max(mem))], mem[max(mem)]
        growth = last["VmRSS"] / early["VmRSS"]
        print(f"memory: rounds={max(mem)} rss round5={early['VmRSS'] >> 20}MiB "
              f"last={last['VmRSS'] >> 20}MiB hwm={last['VmHWM'] >> 20}MiB growth={growth:.3f} "
              f"target<=1.10 {verdict(growth <= 1.10)}")  # fmt: skip
        return 0 if ok and growth <= 1.10 else 1
    assert latency is not None, "the stranded jobs were never reclaimed"
    target = a.grace + a.interval + reclaim_took
    print(f"stranding->reclaim: {latency:.1f}s target<={target:.1f}s "
          f"(grace {a.grace:g} + interval {a.interval:g} + the reclaim round {reclaim_took:.1f}) "
          f"{verdict(latency <= target)}")  # fmt: skip
    return 0 if ok and latency <= target else 1


if __name__ == "__main__":
    sys.exit(main())
