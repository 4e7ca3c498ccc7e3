"""Every spurctl command the README shows parses (e2e/test_readme_commands.py runs them)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

from spurctl.cli import app

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


def test_a_wrong_readme_command_would_fail() -> None:
    with pytest.raises(Exception, match="--bogus"):
        resolve(["audit", "--bogus"])
    with pytest.raises(Exception, match="Missing parameter: node"):
        resolve(["reclaim", "--dry-run"])
