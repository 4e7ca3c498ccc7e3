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
from typing import Any

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
    root,
    snapshot,
)
from spurctl.commands.help import HELP_ONLY_LONG, HELP_OPTIONS, HelpCommand, HelpGroup
from spurctl.errors import ExitStatus
from spurctl.render import sink

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

# The root's options (--version, --debug, --context): commands/root.py.
app.callback()(root.options)


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
        if "_SPURCTL_COMPLETE" in os.environ:
            # The scripts in completions/ call back here; Typer registers its shells only
            # when it adds its own --install-completion, which spurctl leaves out.
            from typer.completion import completion_init

            completion_init()
        try:
            code = app(args=args, prog_name="spurctl", standalone_mode=False)
        except (KeyboardInterrupt, Exception) as exc:  # one line, never a bare traceback
            from spurctl.render.terminal import report

            return report(exc, debug=root.state.debug)
        # Without standalone mode Typer returns typer.Exit's code, or what the command returned.
        return code if isinstance(code, int) else ExitStatus.OK


def entry() -> None:
    """The console script: `main`, then out without freeing the heap object by object."""
    heap.exit_now(main())
