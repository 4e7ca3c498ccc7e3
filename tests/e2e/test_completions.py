"""The committed shell completions are what scripts/gen_completions.sh makes from
the Typer app today, and the bash one really completes spurctl's commands."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from spurctl.cli import app
from tests.cli import clean_env, home_for

REPO = Path(__file__).resolve().parents[2]
COMPLETIONS = REPO / "completions"
FILES = ("spurctl.bash", "_spurctl", "spurctl.fish")
# The console script, not `python -m spurctl`: completion runs the program by name.
SPURCTL = Path(sys.executable).parent / "spurctl"


def env() -> dict[str, str]:
    assert SPURCTL.exists(), f"no console script at {SPURCTL}: run `pip install -e .` in the venv"
    return clean_env(home_for(), PATH=f"{SPURCTL.parent}{os.pathsep}{os.environ.get('PATH', '')}")


def test_committed_completions_are_what_the_generator_makes_now(tmp_path: Path) -> None:
    subprocess.run(
        [REPO / "scripts" / "gen_completions.sh", tmp_path],
        check=True,
        env={**env(), "SPURCTL": str(SPURCTL)},
        timeout=60,
    )

    for name in FILES:
        assert (tmp_path / name).read_text() == (COMPLETIONS / name).read_text(), (
            f"completions/{name} is stale: run scripts/gen_completions.sh and commit the result"
        )


def test_the_zsh_completion_opens_with_its_compdef_tag() -> None:
    # compinit only registers a file from $fpath whose first line is the tag.
    assert (COMPLETIONS / "_spurctl").read_text().splitlines()[0] == "#compdef spurctl"


def test_the_generator_refuses_a_program_not_named_spurctl(tmp_path: Path) -> None:
    run = subprocess.run(
        [REPO / "scripts" / "gen_completions.sh", tmp_path],
        env={**env(), "SPURCTL": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert run.returncode == 2
    assert "SPURCTL must be a command named spurctl" in run.stderr
    assert list(tmp_path.iterdir()) == []


def complete(line: str) -> list[str]:
    """What bash offers for the last word of `line` (empty after a trailing space),
    with completions/spurctl.bash sourced, as on Tab."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    script = (
        f"source {shlex.quote(str(COMPLETIONS / 'spurctl.bash'))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        # bash calls the function named by `complete -F`, with the command name.
        '$(complete -p spurctl | sed -E "s/.* -F ([^ ]+) .*/\\1/") spurctl\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    run = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
    return [w for w in run.stdout.splitlines() if w]


def test_bash_registers_the_completion_for_spurctl() -> None:
    run = subprocess.run(
        [
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            f"source {COMPLETIONS / 'spurctl.bash'}; complete -p spurctl",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert run.stdout.strip() == "complete -o default -F _spurctl_completion spurctl"


def test_bash_completes_a_subcommand_from_its_prefix() -> None:
    assert complete("spurctl aud") == ["audit"]


def test_bash_offers_every_command_after_spurctl() -> None:
    root = typer.main.get_command(app)
    visible = {name for name, cmd in getattr(root, "commands", {}).items() if not cmd.hidden}

    assert set(complete("spurctl ")) == visible


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("spurctl checklist po", ["post-wipe"]),
        ("spurctl audit --wat", ["--watermark", "--watch"]),
        ("spurctl reclaim --dry", ["--dry-run"]),
    ],
)
def test_bash_completes_nested_commands_and_their_options(line: str, expected: list[str]) -> None:
    assert complete(line) == expected
