"""spurctl nodes: one line per node (as sinfo -N): its state, jobs and agent."""

from __future__ import annotations

from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.render.common import NodesFormat
from spurctl.scope import Scope

NAME = "nodes"
EPILOG = (
    "\b\nExamples:\n  spurctl nodes --inventory inventories.jsonl\n"
    "  spurctl nodes -w 'gpu[001-128]' -x gpu017 --collect --format csv"
)

FormatOpt = Annotated[
    NodesFormat, opt.format_option(NodesFormat, "nodes", "the nodes (json: spurctl.nodes/v1)")
]

# sinfo -t's names, beside the states' own: as in sinfo, `drain` is a node drained or
# draining (Spur's DRAIN is sinfo's `drained`).
_STATE_ALIASES = {
    "alloc": ("allocated",),
    "mix": ("mixed",),
    "drng": ("draining",),
    "drained": ("drain",),
    "drain": ("drain", "draining"),
    "susp": ("suspended",),
    "unk": ("unknown",),
    "err": ("error",),
}
# The flags sinfo appends to a state (`drain*`: not responding, `idle~`: powered down...).
_SINFO_FLAGS = "*~#!%$@^-"


def _state_names() -> list[str]:
    from spurctl.model import NodeState

    return [s.name.lower() for s in NodeState]


def _states(value: str) -> str:
    names = _state_names()
    out: list[str] = []
    for typed in str(value).split(","):
        word = typed.strip().lower().rstrip(_SINFO_FLAGS)
        states = _STATE_ALIASES.get(word, (word,))
        if not all(s in names for s in states):
            raise typer.BadParameter(
                f"unknown node state {typed.strip()!r}; use one of {', '.join(names)} or "
                "sinfo's names (drng, drained, drain*...); several: repeat the option, or "
                "separate them with commas"
            )
        out += states
    return ",".join(dict.fromkeys(out))


def _complete_states(incomplete: str) -> list[str]:
    done, _, typed = (incomplete or "").rpartition(",")
    head = f"{done}," if done else ""
    return [head + name for name in _state_names() if name.startswith(typed.lower())]


StateOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        "-t",
        help="Only nodes the controller has in this state (repeatable, or a comma list; as "
        "sinfo -t): idle, allocated (alloc), mixed (mix), down, drain (drained or draining), "
        "drained, draining (drng), error, unknown, suspended; sinfo's flags (drain*) are "
        "ignored. A node the controller does not know has none.",
        parser=_states,
        autocompletion=_complete_states,
        metavar="STATE[,...]",
        show_default=False,
        rich_help_panel=opt.SCOPE,
    ),
]


@opt.scoped("Limit to these nodes.")
@opt.connected()
@opt.with_holdings()
def command(
    ctx: typer.Context,
    snapshot: opt.SnapshotOpt = None,
    state: StateOpt = None,
    fmt: FormatOpt = NodesFormat.TABLE,
    as_json: opt.JsonOpt = False,
    no_header: opt.NoHeaderOpt = False,
    ack_version: opt.AckVersionOpt = None,
    journal_path: opt.HistoryJournalOpt = None,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """One line per node (as sinfo -N): its state, jobs and agent.

    Per node: the controller's state, the active jobs the controller places
    there, the job ids its inventory holds, its agent (answered, no-spurd,
    unreachable, not-inventoried), how old its inventory is and the audit's
    findings on it; then the nodes of each agent status as folded hostlists.
    Read as `audit` reads them (the same --inventory/--collect and controller
    options). --state chooses the nodes by the controller's state. Exit 0; 2 on
    errors.
    """
    from spurctl.commands.environment import detect
    from spurctl.model import NodeState
    from spurctl.render.nodes import show
    from spurctl.usecases.nodes import run_nodes

    fmt = opt.with_json(ctx, fmt, as_json)
    if no_header and fmt != NodesFormat.TABLE:
        raise SpurctlError("--no-header is for the table: drop --format (or drop --no-header)")
    ack = opt.ack_version(ctx, ack_version)
    states = [NodeState[w.upper()] for v in state or () for w in v.split(",")]

    listing = run_nodes(
        holdings.sources(scope, snapshot), None if snapshot else conn.connect(), states=states,
        journal=opt.journal_at(journal_path),
    )  # fmt: skip
    show(listing, fmt, detect(), header=not no_header, ack=ack)
    return ExitStatus.OK
