"""Serve a simulated Spur cluster for a benchmark, in its own process.

The benchmarks run the cluster here, not in the measuring process: the
simulated spurctld is Python, and sharing the client's interpreter (and GIL)
would charge its CPU to spurctl. Scenarios:

- `large`: `spurctl_sim.large(nodes, jobs, held, seed)`, no agents
  (an audit needs none).
- `reclaim`: `nodes` nodes, each holding one job the controller has finished
  (one `terminal-held` finding per node), and an agent on every node.

Prints one line, `ready {json}` (controller address, inventory file, agent map),
then serves until its standard input closes or it is sent SIGTERM, so it never
outlives the benchmark that started it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spurctl.model import Allocation, Device, Holding, Job, JobState, Node, NodeState
from spurctl_sim import Scenario, SimCluster, large
from spurctl_sim.scenario_parts import NODE_TOTAL


def reclaim_scenario(nodes: int) -> Scenario:
    """One finished job still held on each node: `nodes` reclaimable findings, one per node."""
    t0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    width = max(4, len(str(nodes)))
    names = [f"node{i:0{width}d}" for i in range(1, nodes + 1)]
    jobs: list[Job] = []
    holdings: dict[str, list[Holding]] = {}
    two_gpus = Allocation(32, 262_144, {"gpu": (Device(0), Device(1))})
    for i, name in enumerate(names):
        job_id = 1_000 + i
        jobs.append(
            Job(
                job_id=job_id,
                state=JobState.COMPLETED,
                nodelist=name,
                user="u0001",
                uid=20_001,
                partition="gpu",
                submit_time=t0,
                start_time=t0 + timedelta(seconds=5),
                end_time=t0 + timedelta(hours=1),
                num_nodes=1,
                num_tasks=2,
                resources=two_gpus,
            )
        )
        holdings[name] = [
            Holding(job_id, 32, 262_144, (0, 1), (), t0 + timedelta(seconds=6)),
        ]
    node_list = [Node(n, NodeState.IDLE, total=NODE_TOTAL) for n in names]
    return Scenario(version="0.8.0", jobs=jobs, nodes=node_list, holdings=holdings)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=("large", "reclaim"), default="large")
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--held", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--agent-latency", type=float, default=0.0)
    p.add_argument("--controller-latency", type=float, default=0.0)
    p.add_argument("--dir", type=Path, required=True)
    args = p.parse_args()

    started = time.perf_counter()
    if args.scenario == "large":
        scenario = large(args.nodes, args.jobs, args.held, args.seed)
        agents: bool = False
    else:
        scenario = reclaim_scenario(args.nodes)
        agents = True
    built = time.perf_counter() - started

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sim = SimCluster(
        scenario,
        agents=agents,
        agent_latency=args.agent_latency,
        controller_latency=args.controller_latency,
    )
    with sim:
        # Encode every JobInfo once now, as spurctld holds its jobs ready to send;
        # otherwise the first GetJobs of a benchmark pays the simulator's encoding.
        with sim.state.lock:
            for job in sim.state.jobs.values():
                sim.state.encoded(job)
        args.dir.mkdir(parents=True, exist_ok=True)
        inventory = sim.write_inventories(args.dir / "inventory.jsonl")
        agent_map = args.dir / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        ready = {
            "controller": sim.controller_address,
            "inventory": str(inventory),
            "agent_map": str(agent_map),
            "nodes": len(scenario.nodes),
            "jobs": len(scenario.jobs),
            "held": sum(len(h) for h in scenario.holdings.values()),
            "build_s": round(built, 2),
            "pid": os.getpid(),
        }
        print("ready " + json.dumps(ready), flush=True)
        # Either the parent closes our stdin (it exited, or is done) or it signals us.
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
