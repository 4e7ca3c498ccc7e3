"""Benchmark: what the operator reads at scale. The default (folded) table, the
unfolded table (-N) and Markdown beside `--format json`, for the same audit.

    python bench/audit_formats.py                      # 20,000 nodes (the target)
    python bench/audit_formats.py --sizes 1000,5000,20000,50000 [--lean] [--release R]

Each size gets N nodes, 10*N jobs with real-sized records, and inventories for
half the nodes (so N/2 nodes are not-inventoried findings), served by
bench/preencoded_controller.py in its own process from bytes encoded once (its
own time per call is a dict lookup). Every format is run in a fresh process,
`python -m spurctl audit ... > /dev/null` (not a terminal: the table is plain
text at 120 columns), the formats interleaved round by round so that a slow
moment of the machine falls on all of them alike; the best of --repeat runs
counts (the medians' ratios are printed beside). Target (issue 26), at 20,000
nodes: the table, folded and unfolded, each at most 1.3x the JSON. `--lean` and
`--release` as for bench/audit_scale.py (lean records; the release the controller
plays, whose version decides whether it is read by id range or node by node).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, Run, compile_bytecode, run, serve, verdict

from spurctl_sim.releases import MAIN_4CC3DA8, SPUR_RELEASES

TARGET_RATIO = 1.3
TARGET_NODES = 20_000
FORMATS = {
    "json": ("--format", "json"),
    "table": (),
    "table_per_node": ("--per-node",),
    "markdown": ("--format", "markdown"),
    "csv": ("--format", "csv"),
}


def median(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.wall)


def measure(
    nodes: int, repeat: int, lean: bool, release: str
) -> tuple[dict[str, Run], dict[str, Run]]:
    """The best and the median run of each format."""
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp:
        args = ["--nodes", str(nodes), "--jobs", str(10 * nodes), "--held", str(5 * nodes),
                "--inventoried", "0.5", "--release", release,
                ] + (["--lean"] if lean else [])  # fmt: skip
        with serve(Path(tmp), *args, script="preencoded_controller.py") as ready:
            base = [PYTHON, "-m", "spurctl", "audit", "--controller", ready["capped"],
                    "--inventory", ready["inventory"]]  # fmt: skip
            runs: dict[str, list[Run]] = {name: [] for name in FORMATS}
            run([*base, "--format", "json"], stdout_to_null=True, check=False)  # warm the cache
            for _ in range(repeat):
                for name, extra in FORMATS.items():
                    r = run([*base, *extra], stdout_to_null=True, check=False)
                    if r.rc not in (0, 1):
                        raise SystemExit(f"audit_formats: {name} failed rc={r.rc}: {r.error()}")
                    runs[name].append(r)
            return (
                {name: best(rs) for name, rs in runs.items()},
                {name: median(rs) for name, rs in runs.items()},
            )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default=str(TARGET_NODES), help="node counts, comma-separated")
    p.add_argument("--repeat", type=int, default=5, help="runs per format; the best counts")
    p.add_argument("--lean", action="store_true", help="minimal JobInfo records")
    p.add_argument("--release", choices=list(SPUR_RELEASES), default=MAIN_4CC3DA8.name)
    a = p.parse_args()
    compile_bytecode()
    ok = True
    table = []
    for nodes in (int(n) for n in a.sizes.split(",")):
        m, mid = measure(nodes, a.repeat, a.lean, a.release)
        json_wall = m["json"].wall
        ratios = {name: r.wall / json_wall for name, r in m.items()}
        mid_ratios = {name: r.wall / mid["json"].wall for name, r in mid.items() if name != "json"}
        target = nodes == TARGET_NODES
        met = ratios["table"] <= TARGET_RATIO and ratios["table_per_node"] <= TARGET_RATIO
        ok = ok and (met or not target)
        walls = " ".join(f"{name}_s={r.wall:.2f}" for name, r in m.items())
        rel = " ".join(f"{name}_x={ratios[name]:.2f}" for name in m if name != "json")
        rel += " " + " ".join(f"{name}_median_x={x:.2f}" for name, x in mid_ratios.items())
        rss = " ".join(f"{name}_rss={r.peak_rss / 2**20:.0f}MiB" for name, r in m.items())
        tail = (
            f" target table,table_per_node<={TARGET_RATIO:g}x_json {verdict(met)}" if target else ""
        )
        load = "/".join(f"{x:.2f}" for x in os.getloadavg())
        records = "lean" if a.lean else "real-sized"
        print(
            f"audit_formats: nodes={nodes} records={records} release={a.release} {walls} {rel} "
            f"{rss} load={load}{tail}"
        )
        table.append(
            f"| {nodes:,} | {m['json'].wall:.2f} s "
            f"| {m['table'].wall:.2f} s ({ratios['table']:.2f}x) "
            f"| {m['table_per_node'].wall:.2f} s ({ratios['table_per_node']:.2f}x) "
            f"| {m['markdown'].wall:.2f} s ({ratios['markdown']:.2f}x) "
            f"| {m['csv'].wall:.2f} s ({ratios['csv']:.2f}x) | {load} |"
        )
    print("| nodes | json | table (folded) | table -N | markdown | csv | load 1/5/15 min |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(table))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
