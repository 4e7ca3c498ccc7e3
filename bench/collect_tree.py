"""Benchmark: `spurctl collect` straight from this host against through gateways.

    python bench/collect_tree.py [--nodes 10000] [--delay 0.2] [--fanout 64] [--gateways 8]

Every host is this machine: ssh is a stand-in that skips ssh's options, takes
the host and runs the command here. Each node's command is
`sleep DELAY; cat DIR/NODE.json` (a four-holding inventory, as in
collect_fanout.py). Direct: `--command 'STANDIN %h CMD'`, `--fanout` at once
from this host. Tree: `--topology` routing the nodes through `--gateways`
gateways, each running spurctl's relay (`python3 -I -S -`, gateway_relay.py)
started through the stand-in and running `--fanout` nodes at once. Ideal: ceil(N / F) x DELAY
direct, ceil(N / (G x F)) x DELAY through the tree; the tree's overhead per
node is (wall - ideal) / N, and admin_cpu_per_node is this process's own CPU
(what the admin host spends per node when gateways are hosts of their own).
On one machine the gateways share its cores with everything else, so the
tree's wall time is its relay cost, not the speed-up of gateways on their own
hosts.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, REPO, verdict
from collect_fanout import write_inventories

from spurctl.model import Inventory
from spurctl.sources.collect import collect
from spurctl.sources.tree import Tree, root_name

# The ssh stand-in: skip options, take the host, run the command here with the
# host in STANDIN_HOST (the node's command reads its inventory by that name).
# Kept, not real sshd (tests/e2e/test_collect_tree.py covers that): this measures
# spurctl's and ClusterShell's own cost per node, and a real session costs ~85 ms
# of this machine each, which at 10,000 nodes would be all the bench measured.
STANDIN = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -l|-p|-i|-F|-o) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
STANDIN_HOST=$1; export STANDIN_HOST; shift
exec /bin/sh -c "$*"
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--fanout", type=int, default=64)
    p.add_argument("--gateways", type=int, default=8)
    args = p.parse_args()
    n, fanout, gws = args.nodes, args.fanout, args.gateways
    width = max(5, len(str(n)))
    names = [f"node{i:0{width}d}" for i in range(1, n + 1)]
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-tree-") as tmp:
        d = Path(tmp)
        write_inventories(d, names)
        standin = d / "ssh-standin"
        standin.write_text(STANDIN)
        standin.chmod(0o755)
        per_gw = math.ceil(n / gws)
        routes = "\n".join(
            f"gw{g + 1}: node[{g * per_gw + 1:0{width}d}-{min(n, (g + 1) * per_gw):0{width}d}]"
            for g in range(gws)
        )
        topology = d / "topology.conf"
        topology.write_text(f"[routes]\n{root_name()}: gw[1-{gws}]\n{routes}\n")
        os.environ["CLUSTERSHELL_GW_PYTHON_EXECUTABLE"] = PYTHON
        os.environ["CLUSTERSHELL_GW_LOG_DIR"] = str(d)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        remote = f"sleep {args.delay:g}; cat {d}/$STANDIN_HOST.json"

        cpu = _cpu()
        started = time.perf_counter()
        direct = collect(
            names,
            command=f"{standin} -oBatchMode=yes %h '{remote}'",
            fanout=fanout,
            timeout=60,
            progress=False,
        )
        direct_wall = time.perf_counter() - started
        direct_cpu, cpu = _cpu() - cpu, _cpu()

        started = time.perf_counter()
        tree = collect(
            names,
            tree=Tree(topology, remote, str(standin)),
            fanout=fanout,
            timeout=60,
            progress=False,
        )
        tree_wall = time.perf_counter() - started
        tree_cpu = _cpu() - cpu

    def good(results: list[Inventory]) -> bool:
        return len(results) == n and all(r.error is None and len(r.held) == 4 for r in results)

    direct_ideal = math.ceil(n / fanout) * args.delay
    tree_ideal = math.ceil(per_gw / fanout) * args.delay
    ok = good(direct) and good(tree)
    failed = sum(r.error is not None for r in direct + tree)
    print(
        f"collect_direct_{n}_nodes: wall={direct_wall:.2f}s ideal={direct_ideal:.2f}s "
        f"per_node_overhead={(direct_wall - direct_ideal) / n * 1000:.2f}ms "
        f"admin_cpu_per_node={direct_cpu / n * 1000:.2f}ms fanout={fanout} "
        f"delay={args.delay * 1000:.0f}ms"
    )
    print(
        f"collect_tree_{n}_nodes: wall={tree_wall:.2f}s ideal={tree_ideal:.2f}s "
        f"per_node_overhead={(tree_wall - tree_ideal) / n * 1000:.2f}ms "
        f"admin_cpu_per_node={tree_cpu / n * 1000:.2f}ms gateways={gws} "
        f"fanout={fanout} delay={args.delay * 1000:.0f}ms failed={failed} {verdict(ok)}"
    )
    return 0 if ok else 1


def _cpu() -> float:
    """CPU seconds of this process alone: what stays on the admin host when the
    gateways and nodes are machines of their own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    sys.exit(main())
