"""Benchmark: `spurctl collect` over 1,000 nodes whose inventory command takes 200 ms.

    python bench/collect_fanout.py [--nodes 1000] [--delay 0.2] [--fanout 64]

Each node's "remote" command is local: `sleep DELAY && cat DIR/NODE.json`, the
file being that node's inventory (a few holdings, as node-inventory prints).
Measured: the library call `collect.collect`, the real CLI (`python -m spurctl
collect --nodes ... --command ... -o FILE`), and the same fan-out with no delay,
which is ClusterShell's and spurctl's own cost per node. Ideal at fanout F:
ceil(N / F) * DELAY. Target: 1,000 nodes at 200 ms in <= 6 s at the
default fanout (64).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, run, verdict

from spurctl.model import Holding, Inventory, parse_time
from spurctl.sources.collect import collect
from spurctl.sources.documents import dump_json
from spurctl.sources.inventory_document import inventory_to_dict

TARGET_WALL = 6.0


def write_inventories(directory: Path, names: list[str]) -> None:
    started = parse_time("2026-12-01T22:14:05Z")
    for i, name in enumerate(names):
        held = tuple(
            Holding(10_000 + 4 * i + k, 32, 262_144, (2 * k, 2 * k + 1), (20_000 + i,), started)
            for k in range(4)
        )
        inv = Inventory(name, started, "cgroup+proc", None, held)
        (directory / f"{name}.json").write_text(dump_json(inventory_to_dict(inv), indent=None))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1_000)
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--fanout", type=int, default=64)
    args = p.parse_args()
    n, fanout = args.nodes, args.fanout
    width = max(4, len(str(n)))
    names = [f"node{i:0{width}d}" for i in range(1, n + 1)]
    hostlist = f"node[{1:0{width}d}-{n:0{width}d}]"
    ideal = math.ceil(n / fanout) * args.delay
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp:
        d = Path(tmp)
        write_inventories(d, names)
        slow = f"sleep {args.delay:g} && cat {d}/%h.json"
        fast = f"cat {d}/%h.json"

        started = time.perf_counter()
        results = collect(names, command=fast, fanout=fanout, timeout=60, progress=False)
        bare = time.perf_counter() - started
        assert all(r.error is None and len(r.held) == 4 for r in results), "bad no-delay run"

        started = time.perf_counter()
        results = collect(names, command=slow, fanout=fanout, timeout=60, progress=False)
        wall = time.perf_counter() - started
        failed = [r for r in results if r.error is not None]

        out = d / "out.jsonl"
        cli = run(
            [PYTHON, "-m", "spurctl", "collect", "--nodes", hostlist, "--command", slow,
             "--fanout", str(fanout), "-o", str(out)]
        )  # fmt: skip
        lines = out.read_text().splitlines()
        cli_ok = (
            cli.rc == 0
            and len(lines) == n
            and all(json.loads(line)["error"] is None for line in lines)
        )

    ok = not failed and cli_ok and wall <= TARGET_WALL and cli.wall <= TARGET_WALL
    print(
        f"collect_{n}_nodes: wall={wall:.2f}s ideal={ideal:.2f}s overhead={wall - ideal:.2f}s "
        f"fanout={fanout} delay={args.delay * 1000:.0f}ms failed={len(failed)} "
        f"target<={TARGET_WALL:g}s {verdict(ok)}"
    )
    print(
        f"collect_{n}_nodes_cli: wall={cli.wall:.2f}s records={len(lines)} ok={cli_ok} "
        f"peak_rss={cli.peak_rss / 2**20:.0f}MiB"
    )
    print(
        f"collect_{n}_nodes_no_delay: wall={bare:.2f}s per_node={bare / n * 1000:.2f}ms "
        f"fanout={fanout}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
