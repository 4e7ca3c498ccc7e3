"""Issue 53.7: a printed next command restates only what the command line said.

What came from config.toml or the environment (the controller, the inventory, a long
collect_command) is found again by the command pasted here, so restating it only buries
the node list; each printed command still works when pasted.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import run_cli
from tests.e2e.test_config_defaults import write_config


def last_command(out: str) -> list[str]:
    return shlex.split(out.splitlines()[-1])


def test_an_audit_configured_by_file_prints_a_reclaim_command_of_nodes_alone(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    home = tmp_path / "home"
    write_config(home, f'controller = ["{sim.controller_address}"]\ninventory = "{inventory}"\n')
    audit = run_cli("audit", home=home)
    assert audit.returncode == 1, audit.stderr
    argv = last_command(audit.stdout)
    assert argv == ["spurctl", "reclaim", "--node", "gpu[003-008,012-013]"]
    plan = run_cli(*argv[1:], "--dry-run", home=home)  # pasted: the same view
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "Reclaim plan: 9 cancels" in plan.stdout


def test_the_environments_controller_is_not_restated_and_the_command_lines_is(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    audit = run_cli("audit", "--inventory", str(inventory), env=env, home=tmp_path / "h")
    argv = last_command(audit.stdout)
    assert argv == ["spurctl", "reclaim", "--node", "gpu[003-008,012-013]", "--inventory",
                    str(inventory)]  # fmt: skip
    plan = run_cli(*argv[1:], "--dry-run", env=env, home=tmp_path / "h")
    assert plan.returncode == 0, plan.stdout + plan.stderr
