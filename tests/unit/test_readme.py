"""Every spurctl command the README shows parses, and the ones that need no ssh run for real."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from spurctl.cli import app
from spurctl.simcluster import SimCluster, incident
from tests.live import run_cli

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_commands() -> list[str]:
    """`spurctl ...` lines of the README's sh blocks, continuations joined, comments dropped."""
    text = README.read_text()
    out: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" # ")[0].strip()
            if line.startswith("spurctl "):
                out.append(line)
    return out


def argv(command: str) -> list[str]:
    words = shlex.split(command)
    if ">" in words:  # the shell's redirection, not spurctl's
        words = words[: words.index(">")]
    return words[1:]


def resolve(words: list[str]) -> None:
    """Parse through the Typer app's commands; raises when the README is wrong."""
    command = typer.main.get_command(app)
    ctx = command.make_context("spurctl", list(words), resilient_parsing=False)
    while isinstance(command, TyperGroup):
        name, sub, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert sub is not None, f"no such command {name!r}"
        command, ctx = sub, sub.make_context(name, rest, parent=ctx)


def test_the_readme_shows_commands() -> None:
    commands = readme_commands()
    assert len(commands) >= 10
    assert {argv(c)[0] for c in commands} >= {"audit", "reclaim", "collect", "checklist", "demo"}


@pytest.mark.parametrize("command", readme_commands())
def test_every_readme_command_parses(command: str) -> None:
    resolve(argv(command))


# -- the ones that need no ssh, run against a simulated cluster ------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path]]:
    tmp = tmp_path_factory.mktemp("readme")
    with SimCluster(incident()) as sim:
        sim.write_inventories(tmp / "inventories.jsonl")
        (tmp / "agents.json").write_text(json.dumps(sim.agent_map()))
        yield sim, tmp


def runnable(command: str) -> bool:
    words = argv(command)
    return words[0] in ("audit", "reclaim", "snapshot") and "--collect" not in words


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


def test_a_wrong_readme_command_would_fail() -> None:
    with pytest.raises(Exception, match="--bogus"):
        resolve(["audit", "--bogus"])
    with pytest.raises(Exception, match="Missing parameter: node"):
        resolve(["reclaim", "--dry-run"])
