"""Through the real CLI: where a cancel's agent address comes from.

spurd listens on its own `--listen` (default 6818) and registers that address;
spur.conf `[network] agent_port` is in Spur's schema but no Spur code reads it.
So the agent map is the exact source, and NODE:PORT (PORT from --agent-port,
else agent_port, else 6818) is a fallback the help and the plan say is one.
"""

from __future__ import annotations

import json
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import run_cli


def _plan_agents(sim: SimCluster, tmp_path: Path, *extra: str) -> dict[str, str]:
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    proc = run_cli(
        "reclaim", "--controller", sim.controller_address, "--node", "gpu[003-004]",
        "--inventory", str(inventory), "--dry-run", "--format", "json", *extra,
        home=tmp_path / "home",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {p["node"]: p["agent"] for p in json.loads(proc.stdout)["plan"]}


def test_the_agent_map_is_exact_and_node_port_the_fallback_in_that_order(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    conf = tmp_path / "spur.conf"
    conf.write_text("[network]\nagent_port = 7000\n")
    partial = tmp_path / "agents.json"
    partial.write_text(json.dumps({"gpu003": sim.agent_map()["gpu003"]}))

    assert _plan_agents(sim, tmp_path) == {"gpu003": "gpu003:6818", "gpu004": "gpu004:6818"}
    assert _plan_agents(sim, tmp_path, "--conf", str(conf))["gpu004"] == "gpu004:7000"
    flagged = _plan_agents(sim, tmp_path, "--conf", str(conf), "--agent-port", "7100")
    assert flagged["gpu004"] == "gpu004:7100"
    mapped = _plan_agents(sim, tmp_path, "--agent-map", str(partial), "--agent-port", "7100")
    assert mapped == {"gpu003": sim.agent_map()["gpu003"], "gpu004": "gpu004:7100"}


def test_the_help_says_the_map_is_exact_and_what_the_fallback_is(tmp_path: Path) -> None:
    proc = run_cli("reclaim", "--help", home=tmp_path, env={"COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "The exact source of agent addresses" in text
    assert "falls back to NODE:--agent-port" in text
    assert "no Spur code reads agent_port" in text
    assert "spurd listens on its own --listen (default 6818)" in text
