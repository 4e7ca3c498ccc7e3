"""The spurctl command line: the app assembled from spurctl/commands/, and `main`.

Each command lives in its own module (its options, one request, one use-case call,
one render call, its exit status returned). Heavy modules (grpc, protobuf,
ClusterShell) are imported inside the commands that use them, so `spurctl --help`
and `--version` stay fast. `main` is the one place an error becomes an exit status.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from spurctl import heap
from spurctl.commands import (
    audit,
    checklist,
    collect,
    demo,
    drain,
    explain,
    journal,
    node_inventory,
    node_release,
    nodes,
    reclaim,
    repair,
    resume,
    snapshot,
)
from spurctl.commands.help import HELP_ONLY_LONG, HELP_OPTIONS, HelpCommand, HelpGroup
from spurctl.errors import ExitStatus
from spurctl.render import sink
from spurctl.sources import user_config

app = typer.Typer(
    name="spurctl",
    help="Audit Spur node agents against the controller; reclaim what is stranded.\n\n"
    "Keep a Spur GPU cluster honest: compare what every node agent holds with the "
    "controller's view, explain each discrepancy, and reclaim stranded allocations safely.",
    epilog="\b\nExample:\n  spurctl audit --nodes 'gpu[001-128]' --collect",
    no_args_is_help=True,
    add_completion=False,  # one way to install: the scripts in completions/ (README)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=HelpGroup,  # options by group, every summary whole (commands/help.py)
    context_settings=HELP_OPTIONS,  # -h is the help, but where it is --no-header
)


def _add(module: Any) -> None:
    # audit and nodes take -h as --no-header, as sinfo and squeue do.
    settings = HELP_ONLY_LONG if module in (audit, nodes) else None
    app.command(module.NAME, epilog=module.EPILOG, cls=HelpCommand, context_settings=settings)(
        module.command
    )


# In the order `spurctl --help` lists them.
for module in (snapshot, audit, nodes, explain, reclaim, repair, drain, resume, journal):
    _add(module)
app.add_typer(checklist.app)
for module in (node_inventory, collect, demo, node_release):
    _add(module)

_state = {"debug": False}


def _print_version(value: bool) -> None:
    if value:
        from spurctl import __version__

        print(f"spurctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
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
    _state["debug"] = debug
    user_config.use_context(context)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one spurctl command; its exit status. Every operator error is one clear line
    and exit 2; nothing here exits the process, so a test can call it in-process."""
    args = list(sys.argv[1:] if argv is None else argv)
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    # `spurctl audit --context lab` means what `spurctl --context lab audit` does.
    args = _context_first(args[:end]) + args[end:]
    if debug:
        # `spurctl audit --debug` means what `spurctl --debug audit` does.
        end = args.index("--") if "--" in args else len(args)
        args = ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]
    else:
        # grpc's C core logs handshake and connection trouble to stderr itself; the
        # error line says it in the operator's words (set before grpc is imported).
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    _state["debug"] = False
    user_config.use_context(None)  # the root option sets it again for this command
    with sink.installed():  # every line spurctl writes, redacted (render/sink.py)
        if "_SPURCTL_COMPLETE" in os.environ:
            # The scripts in completions/ call back here; Typer registers its shells only
            # when it adds its own --install-completion, which spurctl leaves out.
            from typer.completion import completion_init

            completion_init()
        try:
            code = app(args=args, prog_name="spurctl", standalone_mode=False)
        except (KeyboardInterrupt, Exception) as exc:  # one line, never a bare traceback
            from spurctl.render.terminal import report

            return report(exc, debug=_state["debug"])
        # Without standalone mode Typer returns typer.Exit's code, or what the command returned.
        return code if isinstance(code, int) else ExitStatus.OK


def _context_first(args: list[str]) -> list[str]:
    """`--context NAME` (or `--context=NAME`) moved to the front, wherever it was typed;
    a trailing one without its name is left for the parser to report."""
    for i, arg in enumerate(args):
        if arg.startswith("--context="):
            return [arg, *args[:i], *args[i + 1 :]]
        if arg == "--context" and i + 1 < len(args):
            return [arg, args[i + 1], *args[:i], *args[i + 2 :]]
    return args


def entry() -> None:
    """The console script: `main`, then out without freeing the heap object by object."""
    heap.exit_now(main())
