"""The root of the command line: --version, --debug and --context, typed before or after
the command, and what they set for the one command `main` runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from spurctl.sources import user_config


@dataclass(slots=True)
class RootState:
    debug: bool = False


state = RootState()


def reset() -> None:
    """Before each command: no --debug, no --context (the options set them again)."""
    state.debug = False
    user_config.use_context(None)


def hoisted(args: list[str]) -> tuple[list[str], bool]:
    """`args` with --context and --debug moved in front of the command, as if typed before
    it (`spurctl audit --debug` means `spurctl --debug audit`); whether --debug was given.
    Nothing after `--` is touched."""
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    args = _context_first(args[:end]) + args[end:]
    if debug:
        end = args.index("--") if "--" in args else len(args)
        args = ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]
    return args, debug


def _context_first(args: list[str]) -> list[str]:
    """`--context NAME` (or `--context=NAME`) moved to the front, wherever it was typed;
    a trailing one without its name is left for the parser to report."""
    for i, arg in enumerate(args):
        if arg.startswith("--context="):
            return [arg, *args[:i], *args[i + 1 :]]
        if arg == "--context" and i + 1 < len(args):
            return [arg, args[i + 1], *args[:i], *args[i + 2 :]]
    return args


def _print_version(value: bool) -> None:
    if value:
        from spurctl import __version__

        print(f"spurctl {__version__}")
        raise typer.Exit()


def options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Show a traceback on errors (secrets stay redacted), and on stderr where each "
            "default came from: option, environment, config file or built-in.",
        ),
    ] = False,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            envvar="SPURCTL_CONTEXT",
            show_envvar=True,
            help="The config file's cluster to use ([contexts.NAME], as kubectl's contexts; "
            "default: its current_context). Before or after the command.",
            metavar="NAME",
            show_default=False,
        ),
    ] = None,
) -> None:
    state.debug = debug
    user_config.use_context(context)
