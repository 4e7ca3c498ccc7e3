"""What `-o` must not take for a file: the output formats of the tools operators came from.

`-o` is spurctl's file (as `sort -o` or `curl -o`), but kubectl's `-o wide`, `-o yaml`
and sinfo's `-o '%N %T'` are habits: taken as a file name they would write the
report to ./wide and leave the screen empty, which reads as "all clear". Such an
argument is refused with the line saying what to type instead; written as a path
(`-o ./wide`) it is a file.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Sequence
from pathlib import Path

import typer

from spurctl.errors import SpurctlError
from spurctl.render.common import AuditFormat, ChecklistFormat, ReclaimFormat

# kubectl's -o words (`kubectl get -o`); those taking a value are matched by their
# prefix (`jsonpath={.items}`, `custom-columns=NAME:.metadata.name`).
KUBECTL_WORDS = frozenset({"wide", "yaml", "name"})
KUBECTL_PREFIXES = (
    "jsonpath",
    "go-template",
    "custom-columns",
    "template",
    "templatefile",
)


def is_format_word(typed: str) -> bool:
    """Whether `typed`, given to -o, is another tool's output format rather than a file:
    a kubectl -o word, or an sinfo/squeue -o format string (it has a %). A path (any
    `/`) is always a file."""
    if "/" in typed:
        return False
    if typed in KUBECTL_WORDS or "%" in typed:
        return True
    word = typed.split("=", 1)[0]
    return "=" in typed and word.startswith(KUBECTL_PREFIXES)


def refusal(typed: str, command: str, formats: Sequence[str], own: Collection[str] = ()) -> str:
    """The one line refusing `-o TYPED` on `command`, whose --format takes `formats` (`own`:
    every name spurctl's --format takes anywhere): what TYPED means and what to type."""
    if typed in formats:
        return f"`-o` takes a file; did you mean `--format {typed}`?"
    if typed in own:
        return (
            f"`-o` takes a file, and {command} has no --format {typed}; "
            f"to write a file named {typed}, give `-o ./{typed}`"
        )
    if "%" in typed:
        what = "an sinfo/squeue format string"
    else:
        what = f"kubectl's -o {typed.split('=', 1)[0]}"
    if typed == "wide" and "table" in formats:
        instead = f"{command} prints its whole table without it"
    elif ("%" in typed or "custom-columns" in typed) and "csv" in formats:
        instead = "--format csv gives every column"
    elif "json" in formats:
        instead = "--format json gives every field (pick with jq)"
    elif formats:
        instead = f"--format takes {', '.join(formats)}"
    else:
        instead = f"{command} writes one format, to the file -o names"
    as_file = shlex.quote(f"./{typed}")
    return (
        f"`-o` takes a file, and `{typed}` is {what}: {instead}; to write a file of "
        f"that name, give `-o {as_file}`"
    )


# -- -o as every command parses it ----------------------------------------------------

# Every name --format takes anywhere: `-o json` is the kubectl/squeue reflex for it.
FORMAT_NAMES = frozenset(
    c.value for choices in (AuditFormat, ReclaimFormat, ChecklistFormat) for c in choices
)


def _formats_of(ctx: typer.Context) -> list[str]:
    """The names this command's --format takes (its metavar, "[a|b]"), or none."""
    for param in ctx.command.params:
        if param.name == "fmt" and param.metavar:
            return param.metavar.strip("[]").split("|")
    return []


class _BareName(type(Path())):  # type: ignore[misc]
    """-o's argument as typed was a bare format name (`json`, not `./json`): pathlib
    forgets the `./`, so the parser marks it for the check that knows the command."""


def output_path(text: str | Path) -> Path:
    """-o's parser: the path, marked when it is a format's bare name."""
    typed = str(text)
    return _BareName(typed) if typed in FORMAT_NAMES or is_format_word(typed) else Path(typed)


def output_file(ctx: typer.Context, value: Path | None) -> Path | None:
    """-o FILE, refused when FILE is a format's bare name (spurctl's, kubectl's, sinfo's)
    and no such file exists: `-o json` would write to ./json. A path (`./json`) is a file."""
    if not isinstance(value, _BareName):
        return value
    name, value = str(value), Path(value)
    if value.exists():
        return value
    raise SpurctlError(refusal(name, ctx.command_path, _formats_of(ctx), FORMAT_NAMES))
