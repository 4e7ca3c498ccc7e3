"""Benchmark: `spurctl audit` of a large cluster, beside the floor, against a no-cost controller.

    python bench/audit_scale.py                       # 20,000 nodes (the target)
    python bench/audit_scale.py --sizes 1000,5000,20000,50000 [--lean] [--release R] [--library]

Each size gets N nodes, 10*N jobs with real-sized JobInfo records (400-700
bytes) and inventories for half the nodes (`spurctl_sim.large`),
served by bench/preencoded_controller.py in its own process, from bytes
encoded once at its start, on two ports: one refusing answers over spurctld's
32 MiB, one without a cap. Measured side by side in the same run, each in a
fresh process:

- floor: a bare client downloading an unfiltered GetJobs and GetNodes from the
  uncapped port and json-decoding every inventory line (bench/_audit_child.py
  floor): the least any audit must do, with nothing spent on the server side;
- cli: `python -m spurctl audit --inventory FILE --format json > /dev/null`
  against the capped port, as against a real spurctld;
- library (with --library): spurctl's audit path phase by phase, capped port.

And one probe: an unfiltered GetJobs on the capped port, refused once the
answer passes 32 MiB (the reason spurctl reads through filters).

The ratio is the CLI process against the floor process, both from exec to
exit, the best of --repeat runs each (issue 44: best of five), the runs
interleaved (floor, CLI, floor, CLI, ...) so that a busy moment of the machine
falls on both, after one unmeasured CLI run (which fills the controller's answer
cache for the CLI's requests; the floor's are built at start); the median
runs' ratio is printed beside it. Target, at 20,000 nodes: the CLI within 1.2x
the floor and 400 MiB peak RSS. A CLI that fails is reported in one line and
counts as FAIL; the floor is still measured and printed. Each line ends with the
machine's load average (1, 5, 15 minutes) when its runs ended.

`--lean` serves minimal JobInfo records (id, state, nodelist, resources,
times; preencoded_controller.py --lean): the download is small, spurctl's own
CPU shows, and the target is the CLI within 1.45x the floor (issue 51; 1.5x with
`--full`).

`--full` serves the cluster of an audit with `--collect` of the whole of it (issue 51):
issue 49's striped shape (`spurctl_sim.striped`: 10N jobs, half of them RUNNING on one
node each, each held by its node's agent, the other half ended, one node in twenty also
holding an ended job), every node inventoried: ~5.05N holdings against half-inventoried
`large()`'s ~2.5N. Combine with `--lean` for the issue's figure.

`--release` chooses the Spur release the controller plays (spurctl_sim.
releases; default main-4cc3da8, whose Ping says 0.8.0 as main's did until 0.9.0):
a controller that says 0.8.0 is read by job-id range (sources/id_ranges.py), one
that says 0.9.0 or later (`--release 0.9-0.11`) node by node.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, REPO, Run, compile_bytecode, run, serve, verdict

from spurctl_sim.releases import MAIN_4CC3DA8, SPUR_RELEASES

TARGET_RATIO = 1.2
TARGET_RATIO_LEAN = 1.45  # issue 51 item 1: the half-inventoried lean audit
TARGET_RATIO_LEAN_FULL = 1.5  # issue 51: every node inventoried, lean
TARGET_RSS_MIB = 400
TARGET_NODES = 20_000
CHILD = str(REPO / "bench" / "_audit_child.py")


def mib(n: float) -> float:
    return n / 2**20


def middle(runs: list[Run]) -> Run:
    """The run with the median wall time (the upper one of an even count)."""
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.wall)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def cli(ready: dict[str, Any]) -> Run:
    return run(
        [PYTHON, "-m", "spurctl", "audit", "--controller", ready["capped"],
         "--inventory", ready["inventory"], "--format", "json"],
        stdout_to_null=True,
        check=False,
    )  # fmt: skip


def measure(
    nodes: int,
    repeat: int,
    library: bool,
    inventoried: float,
    lean: bool,
    release: str,
    full: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp:
        args = ["--nodes", str(nodes), "--jobs", str(10 * nodes), "--held", str(5 * nodes),
                "--inventoried", "1" if full else str(inventoried), "--release", release,
                ] + (["--lean"] if lean else [])  # fmt: skip
        if full:
            args += ["--shape", "striped"]
        with serve(Path(tmp), *args, script="preencoded_controller.py") as ready:
            out: dict[str, Any] = {
                "ready": ready,
                "target_ratio": (
                    (TARGET_RATIO_LEAN_FULL if full else TARGET_RATIO_LEAN)
                    if lean
                    else TARGET_RATIO
                ),
            }
            out["probe"] = json.loads(run([PYTHON, CHILD, "probe", ready["capped"]]).stdout)
            warm = cli(ready)
            floors: list[Run] = []
            clis: list[Run] = []
            libs: list[Run] = []
            for _ in range(repeat):
                floors.append(run([PYTHON, CHILD, "floor", ready["uncapped"], ready["inventory"]]))
                if warm.rc in (0, 1):
                    clis.append(cli(ready))
                if library:
                    libs.append(
                        run([PYTHON, CHILD, "library", ready["capped"], ready["inventory"]],
                            check=False)
                    )  # fmt: skip
            out["floor"] = best(floors)
            out["floor_median"] = middle(floors)
            out["floor_figures"] = json.loads(out["floor"].stdout)
            out["cli"] = best(clis) if clis else warm
            out["cli_median"] = middle(clis) if clis else warm
            out["load"] = load()
            ok_libs = [r for r in libs if r.rc == 0]
            out["library"] = middle(ok_libs) if ok_libs else (libs[0] if libs else None)
            return out


def report(m: dict[str, Any]) -> tuple[bool, dict[str, str]]:
    """Print one size's lines; returns its verdict (True off the target size) and table cells."""
    ready, floor, cli_run, lib = m["ready"], m["floor"], m["cli"], m["library"]
    target_ratio = m["target_ratio"]
    n, jobs, held = ready["nodes"], ready["jobs"], ready["held"]
    probe, figures = m["probe"], m["floor_figures"]
    answer_mb = ready["jobs_answer_bytes"] / 1e6
    refused = (
        f"refused code={probe['code']} details={probe['details']!r}"
        if probe["refused"]
        else f"answered bytes={probe['bytes']}"
    )
    over = ready["jobs_answer_bytes"] > ready["cap"]
    print(
        f"audit_cap: nodes={n} jobs={jobs} unfiltered_bytes={ready['jobs_answer_bytes']} "
        f"cap={ready['cap']} {refused} expected={'refused' if over else 'answered'} "
        f"{verdict(probe['refused'] == over)}"
    )
    print(
        f"audit_floor: nodes={n} release={ready['release']} version={ready['version']} "
        f"wall={floor.wall:.2f}s median={m['floor_median'].wall:.2f}s cpu={floor.cpu:.2f}s "
        f"rpc={figures['rpc_s']:.2f}s inventory={figures['inventory_s']:.2f}s "
        f"peak_rss={mib(floor.peak_rss):.0f}MiB records={ready['record_bytes_mean']:.0f}B "
        f"unfiltered_answer={answer_mb:.1f}MB inventoried_nodes={ready['inventoried_nodes']} "
        f"load={m['load']}"
    )
    target = n == TARGET_NODES
    cells = {
        "nodes": f"{n:,}",
        "jobs": f"{jobs:,}",
        "holdings": f"{held:,}",
        "answer": f"{answer_mb:.0f} MB",
        "floor_wall": f"{floor.wall:.2f} s",
        "floor_cpu": f"{floor.cpu:.2f} s",
        "floor_rss": f"{mib(floor.peak_rss):.0f} MiB",
        "load": m["load"],
    }
    if cli_run.rc not in (0, 1):
        print(f"audit_scale_cli_error: nodes={n} rc={cli_run.rc} error={cli_run.error()}")
        print(
            f"audit_scale: nodes={n} jobs={jobs} holdings={held} floor_s={floor.wall:.2f} "
            f"cli_s=failed ratio=n/a"
            + (f" target ratio<={target_ratio:g},rss<={TARGET_RSS_MIB}MiB FAIL" if target else "")
        )
        cells.update(cli_wall="failed", ratio="-", cli_cpu="-", cli_rss="-")
        ok = not target
    else:
        ratio = cli_run.wall / floor.wall
        median_ratio = m["cli_median"].wall / m["floor_median"].wall
        rss = mib(cli_run.peak_rss)
        ok = ratio <= target_ratio and rss <= TARGET_RSS_MIB
        print(
            f"audit_scale: nodes={n} jobs={jobs} holdings={held} floor_s={floor.wall:.2f} "
            f"cli_s={cli_run.wall:.2f} ratio={ratio:.2f} median_ratio={median_ratio:.2f} "
            f"floor_cpu_s={floor.cpu:.2f} cli_cpu_s={cli_run.cpu:.2f} cli_rss_mib={rss:.0f} "
            f"floor_rss_mib={mib(floor.peak_rss):.0f} load={m['load']}"
            + (
                f" target ratio<={target_ratio:g},rss<={TARGET_RSS_MIB}MiB {verdict(ok)}"
                if target
                else ""
            )
        )
        cells.update(
            cli_wall=f"{cli_run.wall:.2f} s",
            ratio=f"{ratio:.2f} ({median_ratio:.2f})",
            cli_cpu=f"{cli_run.cpu:.2f} s",
            cli_rss=f"{rss:.0f} MiB",
        )
        ok = ok or not target
    cells["library"] = "-"
    if lib is not None:
        if lib.rc != 0:
            print(f"audit_scale_library_error: nodes={n} rc={lib.rc} error={lib.error()}")
            cells["library"] = "failed"
        else:
            f = json.loads(lib.stdout)
            print(
                f"audit_library: nodes={n} work={f['work_s']:.2f}s read={f['read_s']:.2f}s "
                f"classify={f['classify_s']:.2f}s render={f['render_s']:.2f}s "
                f"peak_rss={mib(lib.peak_rss):.0f}MiB"
            )
            cells["library"] = f"{f['read_s']:.2f} / {f['classify_s']:.2f} s"
    return ok, cells


COLUMNS = [
    ("nodes", "nodes"), ("jobs", "jobs"), ("holdings", "holdings"),
    ("answer", "unfiltered GetJobs"), ("floor_wall", "floor wall"), ("cli_wall", "CLI wall"),
    ("ratio", "ratio best (median)"), ("floor_cpu", "floor CPU"), ("cli_cpu", "CLI CPU"),
    ("library", "library: read / classify"), ("floor_rss", "floor peak RSS"),
    ("cli_rss", "CLI peak RSS"), ("load", "load 1/5/15 min"),
]  # fmt: skip


def table(rows: list[dict[str, str]]) -> None:
    print("| " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|" + "|".join("---:" for _ in COLUMNS) + "|")
    for row in rows:
        print("| " + " | ".join(row[key] for key, _ in COLUMNS) + " |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=str(TARGET_NODES), help="node counts, comma-separated")
    p.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best counts")
    p.add_argument("--library", action="store_true", help="also measure the library path")
    p.add_argument(
        "--inventoried", type=float, default=0.5, help="fraction of nodes with an inventory"
    )
    p.add_argument(
        "--lean",
        action="store_true",
        help="minimal JobInfo records; target 1.45x (1.5x with --full)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="every node inventoried, each running job held by its node (striped(); issue 51)",
    )
    p.add_argument(
        "--release",
        choices=list(SPUR_RELEASES),
        default=MAIN_4CC3DA8.name,
        help="the Spur release the controller plays (its version decides how it is read)",
    )
    args = p.parse_args()
    compile_bytecode()  # measured as installed (_harness.compile_bytecode)
    ok = True
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        m = measure(
            size, args.repeat, args.library, args.inventoried, args.lean, args.release, args.full
        )
        good, cells = report(m)
        ok &= good
        rows.append(cells)
        sys.stdout.flush()
    if len(rows) > 1:
        table(rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
