"""Serve a simulated Spur cluster until Ctrl-C: `python -m spurctl_sim --scenario incident`.

Prints the controller address and where it wrote the nodes' inventories
(JSON Lines, rewritten whenever what the agents hold changes) and the agent map.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from spurctl.errors import SpurctlError
from spurctl.render.common import write_key_file
from spurctl_sim.identity import AUTH_MODES
from spurctl_sim.incident_scenario import incident
from spurctl_sim.post_wipe_scenario import post_wipe
from spurctl_sim.scenario import Scenario, read_scenario
from spurctl_sim.server import SimCluster

NAMED = {"incident": incident, "post_wipe": post_wipe}


def _scenario(value: str) -> Scenario:
    named = NAMED.get(value)
    return named() if named is not None else read_scenario(Path(value))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spurctl_sim",
        description="Serve a simulated Spur cluster (spurctld + one spurd per node) on 127.0.0.1.",
    )
    parser.add_argument(
        "--scenario",
        default="incident",
        help="incident, post_wipe, or a spurctl.scenario/v1 JSON file (default incident)",
    )
    parser.add_argument("--auth", choices=AUTH_MODES, default="disabled")
    parser.add_argument(
        "--jwt-key", help="cluster key for --auth permissive/required (default: a random one)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help="where to write inventories, agent map and key (default: a temp dir)",
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        metavar="SECONDS",
        help="run spurctld's post-#623 heartbeat reclaim this often (default: never)",
    )
    args = parser.parse_args(argv)

    try:
        scenario = _scenario(args.scenario)
    except SpurctlError as exc:
        print(f"spurctl_sim: error: {exc}", file=sys.stderr)
        return 2
    out = args.dir or Path(tempfile.mkdtemp(prefix="spurctl-sim-"))
    out.mkdir(parents=True, exist_ok=True)
    key = args.jwt_key or (secrets.token_urlsafe(32) if args.auth != "disabled" else None)

    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    sim = SimCluster(
        scenario,
        auth=args.auth,
        jwt_key=key,
        heartbeat_reclaim=args.heartbeat_interval is not None,
        heartbeat_interval=args.heartbeat_interval,
    )
    with sim:
        inventory = sim.write_inventories(out / "inventory.jsonl")
        agent_map = out / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map(), indent=1) + "\n")
        print(
            f"scenario {args.scenario}: {len(scenario.nodes)} nodes, {len(scenario.jobs)} jobs, "
            f"next_job_id {scenario.next_job_id}, auth {args.auth}"
        )
        print(f"controller: {sim.controller_address}")
        print(f"export SPUR_CONTROLLER_ADDR={sim.controller_address}")
        print(f"inventory: {inventory}")
        print(f"agent map: {agent_map}")
        if key is not None:
            key_file = out / "jwt.key"
            write_key_file(key, key_file)
            print(f"export SPUR_JWT_KEY_FILE={key_file}")
        print("serving; Ctrl-C to stop", flush=True)
        seen = sim.state.generation
        while not stopping.wait(0.5):
            if sim.state.generation != seen:
                seen = sim.state.generation
                sim.write_inventories(inventory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
