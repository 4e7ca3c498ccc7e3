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


@opt.scoped("Limit to these nodes.")
@opt.connected()
@opt.with_holdings()
def command(
    ctx: typer.Context,
    snapshot: opt.SnapshotOpt = None,
    fmt: FormatOpt = NodesFormat.TABLE,
    as_json: opt.JsonOpt = False,
    no_header: opt.NoHeaderOpt = False,
    ack_version: opt.AckVersionOpt = None,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """One line per node (as sinfo -N): its state, jobs and agent.

    Per node: the controller's state, the active jobs the controller places
    there, the job ids its inventory holds, its agent (answered, no-spurd,
    unreachable, not-inventoried) and how old its inventory is; then the nodes
    of each agent status as folded hostlists. Read as `audit` reads them (the
    same --inventory/--collect and controller options). Exit 0; 2 on errors.
    """
    from spurctl.commands.environment import detect
    from spurctl.render.nodes import show
    from spurctl.usecases.nodes import run_nodes

    fmt = opt.with_json(ctx, fmt, as_json)
    if no_header and fmt != NodesFormat.TABLE:
        raise SpurctlError("--no-header is for the table: drop --format (or drop --no-header)")
    ack = opt.ack_version(ctx, ack_version)
    listing = run_nodes(holdings.sources(scope, snapshot), None if snapshot else conn.connect())
    show(listing, fmt, detect(), header=not no_header, ack=ack)
    return ExitStatus.OK
