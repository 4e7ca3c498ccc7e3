"""Every numeric option of every command is parsed by one of spurctl's number parsers
(finite, in its range, one line naming the option), so no option can take nan or inf."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer

from spurctl import option_values as options
from spurctl.cli import app

_PLAIN_NUMBER_TYPES = {"IntParamType", "FloatParamType", "IntRange", "FloatRange"}


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))
    else:
        yield path, command


def numeric_params() -> Iterator[tuple[str, Any]]:
    for path, command in commands(typer.main.get_command(app)):
        for param in command.params:
            default = param.default
            numeric = isinstance(default, int | float) and not isinstance(default, bool)
            parsed = getattr(param.type, "func", None) in options.NUMBER_PARSERS
            if parsed or numeric or type(param.type).__name__ in _PLAIN_NUMBER_TYPES:
                yield f"{' '.join(path)} {param.name}", param


def test_every_numeric_option_goes_through_a_number_parser() -> None:
    found = dict(numeric_params())
    assert len(found) >= 20  # the walk sees the commands' options at all
    unchecked = [
        name
        for name, param in found.items()
        if getattr(param.type, "func", None) not in options.NUMBER_PARSERS
    ]
    assert unchecked == []


def test_the_named_options_are_among_those_checked() -> None:
    found = dict(numeric_params())
    for name in (
        "audit interval",
        "audit timeout",
        "collect timeout",
        "node-release grace",
        "reclaim settle",
        "reclaim concurrency",
    ):
        assert name in found, name
