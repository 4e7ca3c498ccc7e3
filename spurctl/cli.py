"""The spurctl command line: the app assembled from spurctl/commands/, and `main`.

Each command lives in its own module (its options, one request, one use-case call,
one render call, its exit status returned). Heavy modules (grpc, protobuf,
ClusterShell) are imported inside the commands that use them, so `spurctl --help`
and `--version` stay fast; a run builds only the command it names (`build_app`).
`main` is the one place an error becomes an exit status.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

from spurctl import heap
from spurctl.commands import root
from spurctl.commands.help import (
    HELP_ONLY_LONG,
    HELP_OPTIONS,
    ChangingCommand,
    HelpCommand,
    HelpGroup,
)
from spurctl.errors import ExitStatus
from spurctl.render import sink

# Each command's module under spurctl/commands/, in the order `spurctl --help` lists them.
COMMANDS = (
    "snapshot", "audit", "nodes", "explain", "reclaim", "repair", "drain", "resume",
    "autopilot", "journal", "checklist", "node_inventory", "collect", "demo", "node_release",
)  # fmt: skip
_GROUPS = ("checklist",)  # a Typer of its own, with subcommands
_HEADERLESS = ("audit", "nodes")  # -h is --no-header, as sinfo's and squeue's
# Commands that change nodes or the controller: SIGTERM and SIGHUP are Ctrl-C there.
_CHANGING = ("reclaim", "repair", "drain", "resume", "node_release")


def build_app(only: str | None = None) -> typer.Typer:
    """The spurctl app with every command, or with only the module `only` (the command a
    run names): a run builds and imports only the command it runs, not the other dozen."""
    made = typer.Typer(
        name="spurctl",
        help="Audit Spur node agents against the controller; reclaim what is stranded.\n\n"
        "Keep a Spur GPU cluster honest: compare what every node agent holds with the "
        "controller's view, explain each discrepancy, and reclaim stranded allocations "
        "safely.",
        epilog="\b\nExample:\n  spurctl audit --nodes 'gpu[001-128]' --collect",
        no_args_is_help=True,
        add_completion=False,  # one way to install: the scripts in completions/ (README)
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        cls=HelpGroup,  # options by group, every summary whole (commands/help.py)
        context_settings=HELP_OPTIONS,  # -h is the help, but where it is --no-header
    )
    for name in COMMANDS if only is None else (only,):
        module: Any = importlib.import_module(f"spurctl.commands.{name}")
        if name in _GROUPS:
            made.add_typer(module.app)
        else:
            made.command(
                module.NAME,
                epilog=module.EPILOG,
                cls=ChangingCommand if name in _CHANGING else HelpCommand,
                context_settings=HELP_ONLY_LONG if name in _HEADERLESS else None,
            )(module.command)
    # The root's options (--version, --debug, --context): commands/root.py.
    made.callback()(root.options)
    return made


def _command_module(args: Sequence[str]) -> str | None:
    """The module of the command `args` (hoisted: root.hoisted) run, when nothing before its
    name asks the root for anything else (--help, --version, a name no command has)."""
    values = 0
    for arg in args:
        if values:
            values -= 1
        elif arg == "--context":
            values = 1
        elif arg == "--debug" or arg.startswith("--context="):
            continue
        else:
            return _MODULE_OF.get(arg)
    return None


_MODULE_OF = {name.replace("_", "-"): name for name in COMMANDS}  # node-inventory


def __getattr__(name: str) -> Any:
    """`spurctl.cli.app`: the whole app (tests, completion), built when first asked for."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one spurctl command; its exit status. Every operator error is one clear line
    and exit 2; nothing here exits the process, so a test can call it in-process."""
    args, debug = root.hoisted(list(sys.argv[1:] if argv is None else argv))
    if not debug:
        # grpc's C core logs handshake and connection trouble to stderr itself; the
        # error line says it in the operator's words (set before grpc is imported).
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    # Every child spurctl forks execs at once (a collect's commands) or starts gRPC only
    # after the fork (a watch's round, heap.Child): gRPC's own fork handlers have nothing
    # to save, and a fork landing while another thread is in gRPC (the demo's simulated
    # cluster serving while it collects) could abort in them. Set before grpc is imported.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    root.reset()  # the root's options set it again for this command
    with sink.installed():  # every line spurctl writes, redacted (render/sink.py)
        completing = "_SPURCTL_COMPLETE" in os.environ
        if completing:
            # The scripts in completions/ call back here; Typer registers its shells only
            # when it adds its own --install-completion, which spurctl leaves out.
            from typer.completion import completion_init

            completion_init()
        try:
            with heap.gc_paused():  # the command's module and its imports: no cycles to find
                made = build_app(None if completing else _command_module(args))
            code = made(args=args, prog_name="spurctl", standalone_mode=False)
        except (KeyboardInterrupt, Exception) as exc:  # one line, never a bare traceback
            from spurctl.render.terminal import report

            return report(exc, debug=root.state.debug)
        # Without standalone mode Typer returns typer.Exit's code, or what the command returned.
        return code if isinstance(code, int) else ExitStatus.OK


def entry() -> None:
    """The console script: `main`, then out without freeing the heap object by object."""
    heap.exit_now(main())
