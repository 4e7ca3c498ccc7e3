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


def test_ci_installs_with_the_readmes_command() -> None:
    # The developer's install is the README's first line, and CI runs it as written: both
    # packages (spurctl and, from sim/, the simulator the tests and the demo run).
    first = re.search(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    assert first is not None
    install, test = first[1].splitlines()[:2]
    assert install == "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' -e ./sim"
    ci = (README.parent / ".ci" / "run").read_text().splitlines()
    assert install in ci and test in ci
    assert ci.index(install) < ci.index(test)


def test_a_wrong_readme_command_would_fail() -> None:
    with pytest.raises(Exception, match="--bogus"):
        resolve(["audit", "--bogus"])
    # reclaim's --node is checked after parsing (--plan may name the nodes instead).
    with pytest.raises(Exception, match="Missing parameter: output"):
        resolve(["snapshot"])


# -- what the README promises about reclaim and the nodes ---------------------------


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start : end if end != -1 else None].split())


def test_the_readme_confirm_command_is_the_one_reclaim_prints() -> None:
    from spurctl.hostlist import expand
    from spurctl.render.reclaim import confirm_command

    printed = confirm_command(sorted(expand("gpu[003-008]")))
    assert printed in readme_commands()
    section = _section("Reclaim a node safely")
    assert "Sent is not freed." in section and "`sent, unconfirmed`" in section
    assert "--verify-inventory" in section and "exits 1" in section


def test_the_readme_says_the_agent_map_is_exact_and_names_the_fallback() -> None:
    section = _section("Reclaim a node safely")
    assert "`--agent-map`" in section and "is the exact source" in section
    assert "falls back to the node name and `--agent-port`" in section
    assert "no Spur code reads it" in section


def test_the_readme_says_what_spurctl_cannot_see_and_links_the_evidence() -> None:
    section = _section("What spurctl cannot see")
    for words in ("600 s", "Allocation-only jobs", "srun step dispatch", "epilog processes",
                  "`SPUR_SCRIPT_CONTEXT`", "(docs/node-evidence.md)"):  # fmt: skip
        assert words in section
    evidence = (README.parent / "docs" / "node-evidence.md").read_text()
    assert "LAUNCHING_TTL" in evidence and "SPUR_SCRIPT_CONTEXT" in evidence


def test_every_docs_link_in_the_readme_exists() -> None:
    for target in re.findall(r"\]\((docs/[^)#]+)", README.read_text()):
        assert (README.parent / target).is_file(), target


def test_the_contract_page_names_every_finding_kind_and_reclaim_option() -> None:
    """docs/contract.md follows the code: each Kind has its row, each reclaim option a word."""
    from spurctl.model import Kind

    contract = (README.parent / "docs" / "contract.md").read_text()
    rows = set(re.findall(r"^\| `([a-z-]+)` \|", contract, flags=re.M))
    assert {k.value for k in Kind} <= rows
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    reclaim = group.commands["reclaim"]
    for param in reclaim.params:
        for name in param.opts:
            if name.startswith("--") and name != "--help":
                assert f"`{name}" in contract, name
