"""Defaults set once: SPUR_AGENT_MAP and $XDG_CONFIG_HOME/spurctl/config.toml, with the
command line over the environment over the file over the built-in default; --debug
says where each value came from; a failover to the next controller is one note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, node_line
from tests.cli import dead_url, one_line_error, run_cli

PLAN = ("reclaim", "--node", "gpu003", "--dry-run")


def write_config(home: Path, text: str) -> Path:
    path = home / ".config" / "spurctl" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def agent_map(tmp_path: Path, name: str, port: int) -> Path:
    """An agent map sending gpu003's cancel to 127.0.0.1:`port`: the plan names it."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"gpu003": f"127.0.0.1:{port}"}))
    return path


def debug_lines(stderr: str) -> dict[str, str]:
    """--debug's lines: option -> 'value (from source)'."""
    prefix = "spurctl: debug: "
    found = {}
    for line in stderr.splitlines():
        if line.startswith(prefix):
            option, _, said = line[len(prefix) :].partition(" = ")
            found[option] = said
    return found


def test_a_config_file_alone_is_enough_for_a_reclaim_plan_and_debug_names_it(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    home = tmp_path / "home"
    config = write_config(
        home,
        f'controller = ["{sim.controller_address}"]\n'
        f'inventory = "{inventory}"\n'
        'agent_map = "agents.json"\n',  # relative: beside the config file
    )
    (config.parent / "agents.json").write_text(json.dumps({"gpu003": "127.0.0.1:1003"}))
    run = run_cli("--debug", *PLAN, home=home)
    assert run.returncode == 0, run.stderr
    assert "127.0.0.1:1003" in run.stdout and "Reclaim plan: 1 cancel" in run.stdout
    said = debug_lines(run.stderr)
    assert said["--controller"] == f"{sim.controller_address} (from config file {config})"
    assert said["--agent-map"] == f"{config.parent / 'agents.json'} (from config file {config})"
    assert said["--inventory"] == f"{inventory} (from config file {config})"
    assert said["--collect"] == "no (from built-in default)"
    assert said["--ack-version"] == "(none) (from built-in default)"
    # Without --debug nothing of it is said.
    quiet = run_cli(*PLAN, home=home)
    assert quiet.returncode == 0 and "debug" not in quiet.stderr


def test_the_option_beats_the_environment_which_beats_the_file(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    home = tmp_path / "home"
    config = write_config(
        home,
        f'controller = "{dead_url()}"\nagent_map = "{agent_map(tmp_path, "file", 1003)}"\n',
    )
    env_map = agent_map(tmp_path, "env", 1002)
    flag_map = agent_map(tmp_path, "flag", 1001)
    base = (*PLAN, "--inventory", str(inventory))
    live = {"SPUR_CONTROLLER_ADDR": sim.controller_address}

    by_env = run_cli("--debug", *base, home=home, env={**live, "SPUR_AGENT_MAP": str(env_map)})
    assert by_env.returncode == 0, by_env.stderr
    assert "127.0.0.1:1002" in by_env.stdout  # SPUR_AGENT_MAP over the file
    said = debug_lines(by_env.stderr)
    assert said["--agent-map"] == f"{env_map} (from environment variable SPUR_AGENT_MAP)"
    assert said["--controller"].endswith("(from environment variable SPUR_CONTROLLER_ADDR)")

    by_flag = run_cli(
        "--debug", *base, "--agent-map", str(flag_map), "--controller", sim.controller_address,
        home=home, env={"SPUR_AGENT_MAP": str(env_map), "SPUR_CONTROLLER_ADDR": dead_url()},
    )  # fmt: skip
    assert by_flag.returncode == 0, by_flag.stderr
    assert "127.0.0.1:1001" in by_flag.stdout
    assert debug_lines(by_flag.stderr)["--agent-map"] == f"{flag_map} (from command line)"

    # The file's own controller is dead: with nothing over it, it is the one tried.
    by_file = run_cli(*base, home=home)
    assert by_file.returncode == 2 and "unreachable" in by_file.stderr, by_file.stderr
    assert str(config) not in by_file.stdout


def test_an_inventory_source_on_the_command_line_replaces_the_files(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    home = tmp_path / "home"
    config = write_config(home, 'collect = true\ncollect_command = "false %h"\n')
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    run = run_cli("--debug", "audit", "--inventory", str(inventory), home=home, env=env)
    assert run.returncode == 1, run.stderr  # the incident's findings, from the file given
    said = debug_lines(run.stderr)
    assert (
        said["--collect"]
        == f"no (from built-in default (the command line chose the source over {config}))"
    )
    assert "gpu003" in run.stdout


def test_the_files_collect_and_collect_command_serve_audit_and_collect(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    home = tmp_path / "home"
    command = node_line.command(inventory)
    write_config(home, f"collect = true\ncollect_command = '{command}'\n")
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    audited = run_cli("audit", "--nodes", "gpu[003-004]", home=home, env=env)
    assert audited.returncode == 1, audited.stderr
    assert "2 nodes in scope, 2 inventoried" in audited.stdout
    collected = run_cli("collect", "-w", "gpu003", home=home)
    assert collected.returncode == 0, collected.stderr
    assert json.loads(collected.stdout)["node"] == "gpu003"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('agent_map = "a.json"\nagent-map = "b.json"\n', 2, ["unknown key 'agent-map'"]),
        ('controller = "http://x:6817"\ncollect = 1\n', 2, ["collect", "bool"]),
        ("controller = [\n", 1, ["not valid TOML"]),
    ],
)
def test_a_bad_config_file_is_one_line_naming_the_file_and_line_and_exit_2(
    text: str, line: int, words: list[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    config = write_config(home, text)
    run = run_cli("audit", "--inventory", "-", home=home)
    error = one_line_error(run, *words)
    assert f"{config}:{line}:" in error, error


def test_a_failover_to_the_next_controller_is_one_note(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    dead = dead_url()
    home = tmp_path / "home"
    write_config(home, f'controller = ["{dead}", "{sim.controller_address}"]\n')
    base = ("audit", "--inventory", str(inventory))
    table = run_cli(*base, home=home, env={"COLUMNS": "300"})
    doc = run_cli(*base, "--format", "json", home=home)
    assert table.returncode == doc.returncode == 1, table.stderr + doc.stderr
    said = [line for line in table.stdout.splitlines() if "controller failover" in line]
    assert said == [
        f"WARNING: controller failover: {dead}: unreachable (connection refused); "
        f"{sim.controller_address} answered"
    ]
    notes = [n for n in json.loads(doc.stdout)["notes"] if "failover" in n]
    assert len(notes) == 1 and dead in notes[0]
