"""Benchmark: `spurctl collect` straight from this host and through gateways, beside clush.

    python bench/collect_tree.py [--nodes 10000] [--delay 0.2] [--fanout 64] [--gateways 8]
                                 [--repeat 3] [--modes direct,tree,clush]

Every host is this machine: ssh is a stand-in that skips ssh's options, takes
the host and runs the command here with the host in STANDIN_HOST. Each node's
command is `sleep DELAY; cat DIR/$STANDIN_HOST.json` (a four-holding inventory,
as in collect_fanout.py). Three commands, each from exec to exit, stdout to a
file, interleaved round by round (the order turning each round), `--repeat`
rounds; the best (fastest) run of each is the figure:

- direct: `spurctl collect --command 'STANDIN %h CMD'`, `--fanout` at once from
  this host (ClusterShell's exec worker);
- tree: `spurctl collect --topology FILE --ssh STANDIN --remote-command CMD`:
  spurctl's JSON relay (node/gateway_relay.py) here and on each of
  `--gateways` gateways, each running `--fanout` nodes at once;
- clush: `clush -N -f F -u T -O ssh_path=STANDIN --topology FILE -w NODES CMD`:
  ClusterShell's own CLI through the same topology, its gateways
  `python -m ClusterShell.Gateway`, the same fan-out on each.

Both trees start the same interpreter on their gateways (`python3` on the
stand-in's PATH and CLUSTERSHELL_GW_PYTHON_EXECUTABLE are this venv's python).
Ideal: ceil(N / F) x DELAY direct, ceil(N / (G x F)) x DELAY through a tree.
Each run's CPU is split (bench/_proctree.py) into the admin host's processes,
the gateways' own and the node side (what the gateways' children used: the
stand-in shells and each node's command), per node; printed with it, the
1-minute load average before the run and the CPU the machine spent on other work
during it (others_cpu, with its share of the machine's cores: the load average
also counts the bench's own processes). Target: spurctl's tree within 1.2x clush's
wall at the same size. On one machine the gateways and every node's command
share its two cores, so a tree's wall time here is its CPU, not the speed-up of
gateways on hosts of their own (bench/README.md models that).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, compile_bytecode, env, median, verdict
from _proctree import TreeRun, become_subreaper, run_tree
from collect_fanout import write_inventories

from spurctl.sources.tree import root_name

TARGET_RATIO = 1.2
MODES = ("direct", "tree", "clush")
CLUSH = str(Path(PYTHON).parent / "clush")

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


def commands(d: Path, args: argparse.Namespace, hostlist: str, remote: str) -> dict[str, list[str]]:
    standin, topology = str(d / "ssh-standin"), str(d / "topology.conf")
    fanout, timeout = str(args.fanout), f"{args.timeout:g}"
    spurctl = [PYTHON, "-m", "spurctl", "collect", "-w", hostlist, "--fanout", fanout,
               "--node-timeout", timeout]  # fmt: skip
    clush = [CLUSH, "-N", "-f", fanout, "-u", timeout, "-O", f"ssh_path={standin}",
             "--topology", topology, "-w", hostlist, remote]  # fmt: skip
    return {
        "direct": [*spurctl, "--command", f"{standin} -oBatchMode=yes %h '{remote}'"],
        "tree": [*spurctl, "--topology", topology, "--ssh", standin, "--remote-command", remote],
        "clush": clush,
    }


def answered(path: Path, names: set[str]) -> int:
    """How many of `names` have their four-holding inventory in the file (one line each)."""
    good = set()
    with open(path, "rb") as fh:
        for line in fh:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("error") is None and len(doc.get("held", ())) == 4:
                good.add(doc.get("node"))
    return len(good & names)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--fanout", type=int, default=64)
    p.add_argument("--gateways", type=int, default=8)
    p.add_argument("--timeout", type=float, default=60.0, help="each node's timeout")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--deadline", type=float, default=900.0, help="a run is killed past it")
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        p.error(f"--modes: a comma-separated list of {', '.join(MODES)}")
    n, fanout, gws = args.nodes, args.fanout, args.gateways
    width = max(5, len(str(n)))
    names = [f"node{i:0{width}d}" for i in range(1, n + 1)]
    hostlist = f"node[{1:0{width}d}-{n:0{width}d}]"
    per_gw = math.ceil(n / gws)
    ideal = {
        "direct": math.ceil(n / fanout) * args.delay,
        "tree": math.ceil(per_gw / fanout) * args.delay,
        "clush": math.ceil(per_gw / fanout) * args.delay,
    }
    compile_bytecode()
    become_subreaper()
    runs: dict[str, list[TreeRun]] = {mode: [] for mode in modes}
    failed = False
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-tree-") as tmp:
        d = Path(tmp)
        write_inventories(d, names)
        standin = d / "ssh-standin"
        standin.write_text(STANDIN)
        standin.chmod(0o755)
        routes = "\n".join(
            f"gw{g + 1}: node[{g * per_gw + 1:0{width}d}-{min(n, (g + 1) * per_gw):0{width}d}]"
            for g in range(gws)
        )
        (d / "topology.conf").write_text(f"[routes]\n{root_name()}: gw[1-{gws}]\n{routes}\n")
        (d / "bin").mkdir()
        (d / "bin" / "python3").symlink_to(PYTHON)  # both trees' gateways: this interpreter
        (d / "clustershell").mkdir()  # no clush.conf of the user's or the site's beyond defaults
        run_env = env()
        run_env.update(
            PATH=os.pathsep.join([str(d / "bin"), run_env.get("PATH", "")]),
            CLUSTERSHELL_GW_PYTHON_EXECUTABLE=PYTHON,
            CLUSTERSHELL_GW_LOG_DIR=str(d),
            CLUSTERSHELL_CFGDIR=str(d / "clustershell"),
        )
        run_env.pop("STANDIN_HOST", None)
        remote = f"sleep {args.delay:g}; cat {d}/$STANDIN_HOST.json"
        cmds = commands(d, args, hostlist, remote)
        wanted = set(names)
        for round_no in range(args.repeat):
            turn = round_no % len(modes)
            for mode in modes[turn:] + modes[:turn]:
                out = d / f"{mode}.jsonl"
                run = run_tree(cmds[mode], run_env, stdout=str(out), deadline=args.deadline)
                good = answered(out, wanted)
                failed |= good != n
                runs[mode].append(run)
                print(
                    f"collect_run: mode={mode} round={round_no + 1} nodes={n} "
                    f"wall={run.wall:.2f}s answered={good} rc={run.rc} "
                    f"{_cpu(run, n)} {_others(run)}",
                    flush=True,
                )
                if good != n:
                    err = (out.parent / (out.name + ".err")).read_text(errors="replace")
                    print(f"  {mode} stderr: {err.strip().splitlines()[-1:]}", flush=True)
    best = {mode: min(rs, key=lambda r: r.wall) for mode, rs in runs.items()}
    for mode, run in best.items():
        walls = [r.wall for r in runs[mode]]
        print(
            f"collect_{mode}_{n}_nodes: best={run.wall:.2f}s median={median(walls):.2f}s "
            f"ideal={ideal[mode]:.2f}s "
            f"per_node_overhead={(run.wall - ideal[mode]) / n * 1e3:.2f}ms "
            f"{_cpu(run, n)} {_others(run)} gateways={gws if mode != 'direct' else 0} "
            f"fanout={fanout} delay={args.delay * 1000:.0f}ms runs={len(walls)}"
        )
    if "tree" in best and "clush" in best:
        ratio = best["tree"].wall / best["clush"].wall
        ok = ratio <= TARGET_RATIO and not failed
        print(
            f"collect_tree_vs_clush_{n}_nodes: spurctl={best['tree'].wall:.2f}s "
            f"clush={best['clush'].wall:.2f}s ratio={ratio:.2f} failed={failed} "
            f"target<={TARGET_RATIO} {verdict(ok)}"
        )
        return 0 if ok else 1
    return 1 if failed else 0


def _others(run: TreeRun) -> str:
    """What else the machine did: the load before the run, and the CPU other work took
    during it, as a share of this machine's cores."""
    share = run.others_cpu / (run.wall * (os.cpu_count() or 1))
    return f"load={run.load:.2f} others_cpu={run.others_cpu:.1f}s ({share:.0%})"


def _cpu(run: TreeRun, n: int) -> str:
    """The run's CPU per node, in all and by where it ran (bench/_proctree.py)."""
    per = {
        "cpu": run.total_cpu,
        "admin": run.admin_cpu,
        "gateways": run.gateway_cpu,
        "node_side": run.node_cpu,
        "other": run.other_cpu,
    }
    return " ".join(f"{k}={v / n * 1e3:.2f}ms" for k, v in per.items())


if __name__ == "__main__":
    sys.exit(main())
