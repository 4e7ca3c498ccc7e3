"""The README's commands that need no ssh, run for real against a simulated cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident
from tests.cli import run_cli
from tests.unit.test_readme import argv, readme_commands


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path]]:
    tmp = tmp_path_factory.mktemp("readme")
    with SimCluster(incident()) as sim:
        sim.write_inventories(tmp / "inventories.jsonl")
        (tmp / "agents.json").write_text(json.dumps(sim.agent_map()))
        yield sim, tmp


def runnable(command: str) -> bool:
    words = argv(command)
    return (
        words[0] in ("audit", "reclaim", "snapshot", "explain", "nodes", "journal")
        and "--collect" not in words
    )


@pytest.mark.parametrize("command", [c for c in readme_commands() if runnable(c)])
def test_readme_command_runs_against_a_simulated_cluster(
    command: str, cluster: tuple[SimCluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, tmp = cluster
    monkeypatch.chdir(tmp)
    words = [
        w.replace("gpu[001-128]", "gpu[001-024]").replace("gpu017", "gpu001") for w in argv(command)
    ]
    if words[0] == "reclaim" and "--dry-run" not in words:
        words += ["--dry-run"]  # the README's sends are exercised in test_reclaim_e2e
    if words[0] == "reclaim":
        words += ["--agent-map", "agents.json"]
    if "--snapshot" in words and not (tmp / "ctl.json").exists():
        run_cli(
            "snapshot",
            "-o",
            str(tmp / "ctl.json"),
            env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
        )
    words = [str(tmp / w) if w in ("inventories.jsonl", "ctl.json") else w for w in words]
    run = run_cli(*words, env={"SPUR_CONTROLLER_ADDR": sim.controller_address})
    assert run.returncode in (0, 1), f"{command}: {run.stderr}"
    assert "Traceback" not in run.stderr


def test_the_readme_explain_output_is_what_explain_prints(
    cluster: tuple[SimCluster, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's explain example is real output: every line but the addresses, times
    and ages (which differ each run) is printed as shown."""
    import re

    from tests.unit.test_readme import README

    sim, tmp = cluster
    monkeypatch.chdir(tmp)
    (command,) = [c for c in readme_commands() if argv(c)[0] == "explain"]
    text = README.read_text()
    shown = text[text.index(command) :]
    shown = shown[shown.index("```text\n") + 8 :]
    shown = shown[: shown.index("```")]
    run = run_cli(*argv(command), env={"SPUR_CONTROLLER_ADDR": sim.controller_address})
    assert run.returncode == 0, run.stderr
    printed = run.stdout.splitlines()
    varying = re.compile(r"127\.0\.0\.1|before the view")
    stable = [line for line in shown.splitlines() if not varying.search(line)]
    assert len(stable) > 20
    for line in stable:
        assert line in printed, line
