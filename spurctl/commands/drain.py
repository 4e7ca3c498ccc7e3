"""`spurctl drain --node HOSTLIST`: drain the nodes holding what spurctl cannot free now."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.errors import SpurctlError
from spurctl.render.common import ReclaimFormat

NAME = "drain"
EPILOG = (
    "\b\nExamples:\n  spurctl drain --node 'gpu[001-128]' --collect --dry-run\n"
    "  spurctl drain -w gpu017 --collect --yes"
)

NodeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--node",
        "--nodes",
        "-w",
        help="Nodes to consider (Slurm hostlist); repeated: the union.",
        metavar="HOSTLIST",
        show_default=False,
    ),
]
DryRunOpt = Annotated[bool, opt.dry_run_option("Print the plan; send nothing.")]
YesOpt = Annotated[bool, typer.Option("--yes", help="Do not prompt.")]
JournalOpt = Annotated[
    Path | None,
    opt.journal_option(
        "Journal file, shared with reclaim and repair (default "
        "$XDG_STATE_HOME/spurctl/journal.jsonl); also read for the cancels reclaim sent."
    ),
]
MaxAgeOpt = Annotated[
    float,
    typer.Option(
        "--max-inventory-age",
        help="resume: a node whose inventory was collected longer ago than this (e.g. 90s, "
        "10m) is not clean yet and stays drained.",
        parser=opt.parse_duration,
        metavar="DURATION",
        show_default="10m",
    ),
]
FormatOpt = Annotated[ReclaimFormat, opt.format_option(ReclaimFormat, "drain", "the result")]


def hostlist_of(node: list[str] | None) -> str:
    """--node's hostlists, repeated or not, as one (their union); a usage error when none."""
    from spurctl.hostlist import fold, parse_scope

    if not node:
        raise SpurctlError("missing option --node: name the nodes with --node HOSTLIST (or -w)")
    return fold(sorted(set().union(*(parse_scope(h) for h in node))))


@opt.connected()
@opt.with_holdings()
def command(
    ctx: typer.Context,
    node: NodeOpt = None,
    exclude: opt.ExcludeOpt = None,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    journal_path: JournalOpt = None,
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Drain nodes holding what spurctl cannot free now.

    A node holding a live run the audit can only investigate, a cancel that failed
    or was never confirmed, or an agent orphan awaiting node-release keeps taking
    jobs it then rejects. Each such node is drained with spurctl's reason, e.g.
    `spurctl: agent-orphan job 4711 (spurctl explain gpu017)`; a node already
    drained or DOWN for another reason is left alone. Journaled. `spurctl resume`
    lifts these drains once the node is clean. Exit 0 when every such node is
    drained, 1 when one could not be, 2 on errors.
    """
    from spurctl.act.journal import default_path
    from spurctl.render import drain as shown
    from spurctl.usecases.drain import DrainRequest, Verb, change

    fmt = opt.with_json(ctx, fmt, as_json)
    hostlist = hostlist_of(node)
    request = DrainRequest(
        verb=Verb.DRAIN,
        nodes=hostlist,
        src=holdings.sources(hostlist, exclude=exclude),
        conn=conn.connect(),
        journal_path=journal_path or default_path(),
        dry_run=dry_run,
        yes=yes,
    )
    done = change(
        request,
        show_plan=lambda plan: shown.show_plan(plan, fmt),
        ask=shown.ask if sys.stdin.isatty() else None,
    )
    shown.show(done, fmt)
    return int(done.exit_status)
