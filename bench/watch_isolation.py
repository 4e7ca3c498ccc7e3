"""Benchmark: does a watch need each round in a child process? Forked beside in-process.

    python bench/watch_isolation.py --interval 1            # 20,000 nodes, 100 rounds
    python bench/watch_isolation.py --interval 30           # the product default (~50 min)

Issue #41.6: keep the watch's forked rounds (spurctl.heap.Child) only if an
in-process watch (each round's audit in the watch's own process, then gc.collect()
and malloc_trim(0)) misses the peak-growth target: the peak RSS after round 100
within 10% of the peak after round 5. Both run at once against one no-cost
controller (bench/preencoded_controller.py, bench/audit_scale.py's cluster), each
driven by bench/_watch_driver.py without a screen, each sampled as
bench/watch_rounds.py samples (every process of its tree every 10 ms: the sum, and
the largest single process).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, REPO, compile_bytecode, env, serve
from watch_rounds import EARLY_ROUND, TARGET_RSS_GROWTH, TreeSampler, mib

MODES = ("forked", "in-process")


def drive(mode: str, ready: dict[str, Any], interval: float, rounds: int, out: dict) -> None:  # type: ignore[type-arg]
    cmd = [
        PYTHON, str(REPO / "bench" / "_watch_driver.py"), mode, str(interval), str(rounds),
        ready["capped"], ready["inventory"],
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env())
    peaks: list[tuple[int, int, float]] = []
    started = time.perf_counter()
    assert proc.stdout is not None
    with TreeSampler(proc.pid) as sampler:
        for line in proc.stdout:
            if line.startswith("round "):
                peaks.append((sampler.peak_sum, sampler.peak_one, time.perf_counter() - started))
            elif line.startswith("error"):
                out[mode] = RuntimeError(line.strip())
    proc.wait()
    out[mode] = peaks if len(peaks) == rounds else RuntimeError(f"{mode}: {len(peaks)} rounds")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--interval", type=float, default=1.0)
    args = p.parse_args()
    compile_bytecode()
    n = args.nodes
    out: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp,
        serve(
            Path(tmp), "--nodes", str(n), "--jobs", str(10 * n), "--held", str(5 * n),
            script="preencoded_controller.py",
        ) as ready,
    ):  # fmt: skip
        threads = [
            threading.Thread(target=drive, args=(m, ready, args.interval, args.rounds, out))
            for m in MODES
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for mode in MODES:
        peaks = out[mode]
        if isinstance(peaks, Exception):
            print(f"watch_isolation: mode={mode} failed: {peaks}")
            continue
        early, last = peaks[EARLY_ROUND - 1], peaks[-1]
        growth, growth_one = last[0] / early[0], last[1] / early[1]
        ok = max(growth, growth_one) <= TARGET_RSS_GROWTH
        print(
            f"watch_isolation: mode={mode} nodes={n} rounds={args.rounds} "
            f"interval_s={args.interval:g} tree_peak_round{EARLY_ROUND}_mib={mib(early[0]):.0f} "
            f"tree_peak_round{args.rounds}_mib={mib(last[0]):.0f} growth={growth:.3f} "
            f"largest_round{EARLY_ROUND}_mib={mib(early[1]):.0f} "
            f"largest_round{args.rounds}_mib={mib(last[1]):.0f} growth_largest={growth_one:.3f} "
            f"wall_s={last[2]:.0f} target growth<={TARGET_RSS_GROWTH:.2f} "
            f"{'PASS' if ok else 'FAIL'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
