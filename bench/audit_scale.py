"""Benchmark: `spurctl audit` of a large simulated cluster, against the floor.

    python bench/audit_scale.py                       # 20,000 nodes (the target)
    python bench/audit_scale.py --sizes 1000,5000,10000,20000

Each size gets N nodes, 10*N jobs in the controller and about 5*N held jobs in
the inventory (`simcluster.scenarios.large`), served by bench/simserver.py in
its own process. Measured, each in a fresh process:

- floor: a bare client doing GetJobs + GetNodes + GetJobMetrics and
  json-decoding the inventory, nothing else (bench/_audit_child.py floor);
- library: spurctl's audit path, phase by phase (bench/_audit_child.py library);
- cli: `python -m spurctl audit --inventory FILE --format json > /dev/null`.

Ratios compare like with like: library work against floor work (both after
imports), and the CLI process against the floor process (both from exec to
exit). The median of --repeat runs counts for each, so one noisy run does not
decide a verdict. Target (issue 8), at 20,000 nodes: the CLI within 2.0x the
floor and 8 s; peak RSS is reported.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, REPO, Run, gib, run, serve, verdict

TARGET_RATIO = 2.0
TARGET_WALL = 8.0
TARGET_NODES = 20_000


def child(mode: str, ready: dict[str, str]) -> tuple[Run, dict[str, float]]:
    r = run(
        [
            PYTHON,
            str(REPO / "bench" / "_audit_child.py"),
            mode,
            ready["controller"],
            ready["inventory"],
        ]
    )
    return r, json.loads(r.stdout)


def middle(runs: list[tuple[Run, dict[str, float]]]) -> tuple[Run, dict[str, float]]:
    """The run with the median wall time (the upper one of an even count)."""
    return sorted(runs, key=lambda rf: rf[0].wall)[len(runs) // 2]


def measure(nodes: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp:
        args = ["--nodes", str(nodes), "--jobs", str(10 * nodes), "--held", str(5 * nodes)]
        with serve(Path(tmp), *args) as ready:
            floors, libs, clis = [], [], []
            for _ in range(repeat):
                floors.append(child("floor", ready))
                libs.append(child("library", ready))
                cli = run(
                    [
                        PYTHON,
                        "-m",
                        "spurctl",
                        "audit",
                        "--controller",
                        ready["controller"],
                        "--inventory",
                        ready["inventory"],
                        "--format",
                        "json",
                    ],
                    stdout_to_null=True,
                )
                if cli.rc != 1:  # the scenario has findings that need action
                    raise RuntimeError(f"spurctl audit exited {cli.rc}, expected 1")
                clis.append(cli)
        floor_run, floor = middle(floors)
        lib_run, lib = middle(libs)
        cli_run = sorted(clis, key=lambda r: r.wall)[len(clis) // 2]
        return {
            "nodes": nodes,
            "jobs": int(ready["jobs"]),
            "held": int(ready["held"]),
            "floor_wall": floor_run.wall,
            "floor_cpu": floor_run.cpu,
            "floor_work": floor["work_s"],
            "floor_rss": floor_run.peak_rss,
            "lib_work": lib["work_s"],
            "lib_read": lib["read_s"],
            "lib_classify": lib["classify_s"],
            "lib_render": lib["render_s"],
            "lib_rss": lib_run.peak_rss,
            "cli_wall": cli_run.wall,
            "cli_cpu": cli_run.cpu,
            "cli_rss": cli_run.peak_rss,
        }


def report(m: dict[str, float]) -> bool:
    n = int(m["nodes"])
    lib_ratio = m["lib_work"] / m["floor_work"]
    cli_ratio = m["cli_wall"] / m["floor_wall"]
    print(
        f"audit_floor_{n}_nodes: wall={m['floor_wall']:.2f}s cpu={m['floor_cpu']:.2f}s "
        f"work={m['floor_work']:.2f}s "
        f"peak_rss={gib(int(m['floor_rss']))} jobs={int(m['jobs'])} held={int(m['held'])}"
    )
    print(
        f"audit_library_{n}_nodes: work={m['lib_work']:.2f}s ratio={lib_ratio:.2f} "
        f"(read={m['lib_read']:.2f}s classify={m['lib_classify']:.2f}s "
        f"render={m['lib_render']:.2f}s) "
        f"peak_rss={gib(int(m['lib_rss']))}"
    )
    ok = cli_ratio <= TARGET_RATIO and m["cli_wall"] <= TARGET_WALL
    target = (
        f" target<={TARGET_RATIO:g}x,<={TARGET_WALL:g}s {verdict(ok)}" if n == TARGET_NODES else ""
    )
    print(
        f"audit_{n}_nodes: wall={m['cli_wall']:.2f}s floor={m['floor_wall']:.2f}s "
        f"ratio={cli_ratio:.2f} cpu={m['cli_cpu']:.2f}s peak_rss={gib(int(m['cli_rss']))}{target}"
    )
    return ok or n != TARGET_NODES


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=str(TARGET_NODES), help="node counts, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median counts")
    args = p.parse_args()
    ok = True
    for size in (int(s) for s in args.sizes.split(",")):
        ok &= report(measure(size, args.repeat))
        sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
