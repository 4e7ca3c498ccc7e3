"""Benchmark: `spurctl reclaim` sending 1,000 cancels to 1,000 agents that each take 50 ms.

    python bench/reclaim_fanout.py [--nodes 1000] [--agent-latency 0.05]

bench/simserver.py serves, in its own process, a controller and one agent per
node, each node holding one job the controller has finished (one
`terminal-held` finding per node). This process plans the reclaim from a real
audit and runs `reclaim.execute` with a real Journal (fsynced), a real
AgentPool and the real ControllerClient for the per-entry GetJob re-check.
The default --concurrency is measured against a sweep, and once more with the
controller slowed to the agents' latency, to show the re-checks are not
serialized behind one channel. Target: 1,000 cancels in <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import serve, verdict

from spurctl.act import cancels
from spurctl.act.agents import AgentPool
from spurctl.act.journal import Journal
from spurctl.audit_view import run_audit
from spurctl.decide import plan as reclaim_plan
from spurctl.defaults import DEFAULT_CONCURRENCY
from spurctl.scope import Scope
from spurctl.sources.controller import ControllerClient
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import Connection

TARGET_WALL = 5.0
SWEEP = (8, 16, 32, 64, 128)


def one_run(ready: dict[str, Any], workdir: Path, concurrency: int) -> tuple[float, int, int]:
    """(seconds to execute, cancels sent, journal records) for one full reclaim."""
    agent_map = json.loads(Path(ready["agent_map"]).read_text())
    conn = Connection((ready["controller"],), agent_map=agent_map, timeout=30.0)
    journal_path = workdir / f"journal-{concurrency}-{time.monotonic_ns()}.jsonl"
    report, inputs = run_audit(Sources(Scope(), [ready["inventory"]], False, "", 1), conn)
    entries = reclaim_plan.plan(report, set(inputs.view.nodes), None, conn.agent_address)
    with ControllerClient(conn) as client:
        if len(entries) != ready["nodes"]:
            raise RuntimeError(f"planned {len(entries)} cancels, expected {ready['nodes']}")
        agents = AgentPool(jwt_key=None, timeout=30.0)
        with Journal(journal_path) as journal:
            started = time.perf_counter()
            run = cancels.execute(
                entries,
                jobs=client,
                agents=agents,
                journal=journal,
                watermark=inputs.watermark.value,
                concurrency=concurrency,
            )
            wall = time.perf_counter() - started
        agents.close()
    sent = sum(1 for o in run.outcomes if o.result is reclaim_plan.Result.SENT)
    records = len(journal_path.read_text().splitlines())
    return wall, sent, records


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1_000)
    p.add_argument("--agent-latency", type=float, default=0.05)
    p.add_argument("--no-sweep", action="store_true", help="only the default concurrency")
    args = p.parse_args()
    default = DEFAULT_CONCURRENCY
    n, lat_ms = args.nodes, round(args.agent_latency * 1000)
    ok = True
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp:
        workdir = Path(tmp)
        latency = str(args.agent_latency)
        base = ["--scenario", "reclaim", "--nodes", str(n), "--agent-latency", latency]
        with serve(workdir / "fast", *base) as ready:
            wall, sent, records = one_run(ready, workdir, default)
            ok = sent == n and records == 2 * n and wall <= TARGET_WALL
            print(
                f"reclaim_{n}_agents: wall={wall:.2f}s concurrency={default} sent={sent} "
                f"journal_records={records} agent_latency={lat_ms}ms "
                f"target<={TARGET_WALL:g}s {verdict(ok)}",
                flush=True,
            )
            for c in () if args.no_sweep else SWEEP:
                wall, sent, _ = one_run(ready, workdir, c)
                print(f"reclaim_{n}_agents_sweep: concurrency={c} wall={wall:.2f}s sent={sent}")
        slow = [*base, "--controller-latency", str(args.agent_latency)]
        with serve(workdir / "slow", *slow) as ready:
            wall, sent, _ = one_run(ready, workdir, default)
            print(
                f"reclaim_{n}_agents_slow_controller: wall={wall:.2f}s concurrency={default} "
                f"sent={sent} controller_latency={lat_ms}ms agent_latency={lat_ms}ms"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
