"""Every command's --help opens with a one-line summary and ends with an example an
operator can paste: the summary shows in full where its parent lists it, and the
example names that very command and only options it has."""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from spurctl.cli import app
from tests.cli import run_cli

ROOT = typer.main.get_command(app)
ROOT_DIR = Path(__file__).resolve().parents[2]
# click never draws help wider than 80 columns (78 of text); pin the terminal to 80 so
# the one running the tests cannot change what "one line" means. The page is the one
# spurctl prints (tests.cli.run_cli): Typer's CliRunner forces an 80-column formatter,
# two columns more than any terminal gets, and hid a summary cut to "..." there.
WIDTH = 80


def commands(cmd: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, command) for the root and every visible command and subcommand under it."""
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not sub.hidden:
            yield from commands(sub, (*path, name))


ALL = list(commands())
IDS = [" ".join(("spurctl", *path)) for path, _ in ALL]
GROUPS = [(p, c) for p, c in ALL if getattr(c, "commands", None)]


def help_page(path: tuple[str, ...]) -> list[str]:
    result = run_cli(*path, "--help", env={"COLUMNS": str(WIDTH)})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def summary_of(page: list[str]) -> str:
    # Usage line, a blank line, then the summary paragraph.
    assert page[0].startswith("Usage: ") and page[1] == "", page[:3]
    return page[2].strip()


def test_the_walk_finds_every_command_including_nested_ones() -> None:
    # Guards the walk itself: a walk that found nothing would pass every test below.
    assert {"spurctl", "spurctl audit", "spurctl reclaim"} <= set(IDS)
    assert any(len(path) > 1 for path, _ in ALL)


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=IDS)
def test_help_opens_with_a_one_line_summary(path: tuple[str, ...], cmd: Any) -> None:
    page = help_page(path)
    summary = summary_of(page)

    assert summary, f"spurctl {' '.join(path)}: no summary under the usage line"
    assert summary.endswith("."), f"summary is not a sentence: {summary!r}"
    assert page[3] == "", (
        f"spurctl {' '.join(path)}: the summary runs onto a second line at {WIDTH} columns "
        f"({summary!r} ...); make its first paragraph one short sentence"
    )


@pytest.mark.parametrize(
    ("path", "cmd"), GROUPS, ids=[" ".join(("spurctl", *p)) for p, _ in GROUPS]
)
def test_a_group_lists_each_subcommand_with_its_whole_summary(
    path: tuple[str, ...], cmd: Any
) -> None:
    page = help_page(path)
    listing = page[page.index("Commands:") + 1 :]

    for name, sub in cmd.commands.items():
        if sub.hidden:
            continue
        (at,) = [i for i, line in enumerate(listing) if line.split()[:1] == [name]]
        entry = [listing[at]]  # and the lines its summary wraps onto, indented deeper
        entry += itertools.takewhile(lambda line: line.startswith(" " * 6), listing[at + 1 :])
        shown = " ".join(" ".join(entry).split())[len(name) :].strip()
        assert shown == summary_of(help_page((*path, name))), (
            f"`{' '.join(('spurctl', *path))} --help` cuts the summary of {name} to {shown!r}: "
            "shorten its first sentence"
        )


def examples(page: list[str]) -> list[str]:
    """The command lines of the page's Example(s): section."""
    out: list[str] = []
    for i, line in enumerate(page):
        head = re.match(r"\s*Examples?:\s*(.*)$", line)
        if not head:
            continue
        if head.group(1):
            out.append(head.group(1))
        for rest in page[i + 1 :]:
            if rest.strip().endswith(":") and not rest.startswith(" "):
                break  # the next section (Options:): an option's help is no example
            if rest.strip().startswith("spurctl") and rest.startswith(" "):
                out.append(rest.strip())
        break
    return out


@pytest.mark.parametrize(("path", "cmd"), ALL, ids=IDS)
def test_help_has_an_example_that_runs_this_command_with_its_own_options(
    path: tuple[str, ...], cmd: Any
) -> None:
    page = help_page(path)
    found = examples(page)
    source = "\n".join(filter(None, (cmd.help, cmd.epilog)))
    where = f"spurctl {' '.join(path)}".strip()

    assert found, f"{where}: no 'Example:' line in --help (add epilog='Example: ...')"
    for example in found:
        # Rewrapped by the help formatter it could not be pasted: keep it in a \b block.
        lines = {line.strip() for line in source.splitlines()}
        assert lines & {example, f"Example: {example}", f"Examples: {example}"}, (
            f"{where}: the example {example!r} was rewrapped; put it in a \\b block"
        )
        argv = shlex.split(example, comments=True)
        assert tuple(argv[: len(path) + 1]) == ("spurctl", *path), (
            f"{where}: the example {example!r} runs another command"
        )
        parse(argv)


def parse(argv: list[str]) -> None:
    """Parse a command line as spurctl would, down to the command it names, running
    nothing: unknown options, missing values and missing required options raise."""
    cmd, args, ctx = ROOT, argv[1:], None
    while True:
        subcommands = getattr(cmd, "commands", {})
        at = next((i for i, a in enumerate(args) if a in subcommands), len(args))
        # A group parses its own options and leaves the subcommand's to it.
        ctx = cmd.make_context(argv[0] if ctx is None else cmd.name, list(args), parent=ctx)
        if at == len(args):
            return
        cmd, args = subcommands[args[at]], args[at + 1 :]


def test_completion_is_installed_one_way_only() -> None:
    page = "\n".join(help_page(()))
    assert "--install-completion" not in page and "--show-completion" not in page
    readme = (ROOT_DIR / "README.md").read_text()
    for directory in ("~/.local/share/bash-completion/completions", "~/.config/fish/completions"):
        assert f"mkdir -p {directory}" in readme  # the copy below it cannot fail for want of it


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=IDS)
def test_option_placeholders_name_what_to_type_not_a_python_type(path: tuple[str, ...]) -> None:
    options = [line for line in help_page(path) if line.lstrip().startswith("-")]
    typed = re.compile(r"<(?:int|float|str|path|list\[\w+\])(?: range)?>")
    assert not [line for line in options if typed.search(line)]
