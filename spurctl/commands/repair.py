"""`spurctl repair --node HOSTLIST`: rebuild phantom charges through Spur's one path."""

from __future__ import annotations

from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.commands.drain import CooldownOpt, MaxUnavailableOpt
from spurctl.decide.budget import DEFAULT_COOLDOWN_S, DEFAULT_MAX_UNAVAILABLE
from spurctl.defaults import DEFAULT_MAX_INVENTORY_AGE_S, DEFAULT_REJOIN_WAIT_S, DEFAULT_TICK_S
from spurctl.option_values import parse_duration
from spurctl.render.common import ReclaimFormat
from spurctl.scope import Scope

NAME = "repair"
EPILOG = (
    "\b\nExamples:\n  spurctl repair --node gpu009 --collect --dry-run\n"
    "  spurctl repair --node gpu009 --collect --conf /etc/spur/spur.conf\n"
    "  spurctl repair --node gpu009 --collect --dry-run -o plan.json\n"
    "  spurctl repair --plan plan.json --collect --yes"
)

MaxAgeOpt = Annotated[
    float,
    typer.Option(
        "--max-inventory-age",
        help="Refuse a node whose inventory was collected longer ago than this (e.g. 90s, "
        "10m); it must show spurd running and holding nothing.",
        parser=parse_duration,
        metavar="DURATION",
        show_default="10m",
    ),
]
TickOpt = Annotated[
    float,
    opt.number_option(
        "--tick",
        kind=float,
        low=0,
        high=opt.DAY_S,
        help="After spurctl's drain, seconds the scheduler gets to land a dispatch it had "
        "already decided, before the node is read again.",
        metavar="SECONDS",
    ),
]
WaitOpt = Annotated[
    float,
    opt.number_option(
        "--wait",
        kind=float,
        low=0,
        high=opt.DAY_S,
        help="After DeregisterNode, the longest to wait for the node's spurd to register it "
        "again (it does at its next heartbeat, every 30 s).",
        metavar="SECONDS",
    ),
]
RejoinCheckedOpt = Annotated[
    bool,
    typer.Option(
        "--rejoin-checked",
        help="You checked that a removed node registers again here: needed when spur.conf "
        "cannot tell (none read, or [admission] mode = token: a join token may have expired).",
    ),
]
RestoreDrainOpt = Annotated[
    bool,
    typer.Option(
        "--restore-drain",
        help="Also repair a node someone else drained, and drain it again afterwards with "
        "their reason (its fresh registration drops every drain); without it such a node "
        "is refused.",
    ),
]
FormatOpt = Annotated[ReclaimFormat, opt.format_option(ReclaimFormat, "repair", "the result")]


@opt.scoped("Nodes to repair.")
@opt.connected()
@opt.with_holdings()
@opt.changing(
    "Journal file, shared with reclaim (default the config file's journal, else "
    "$XDG_STATE_HOME/spurctl/journal.jsonl); "
    "it keeps what a stopped repair must put back.",
    output_help="With --dry-run: save the plan here, for `spurctl repair --plan FILE`.",
    plan_help="Repair only the nodes of this saved plan (repair --dry-run -o FILE), each "
    "judged afresh and refused when its charge is no longer the saved one; the whole "
    "plan is refused when older than --max-inventory-age or from another controller.",
)
def command(
    ctx: typer.Context,
    change: opt.ChangeOptions = opt.ChangeOptions(),
    max_inventory_age: MaxAgeOpt = DEFAULT_MAX_INVENTORY_AGE_S,
    tick: TickOpt = DEFAULT_TICK_S,
    wait: WaitOpt = DEFAULT_REJOIN_WAIT_S,
    rejoin_checked: RejoinCheckedOpt = False,
    restore_drain: RestoreDrainOpt = False,
    max_unavailable: MaxUnavailableOpt = DEFAULT_MAX_UNAVAILABLE,
    cooldown: CooldownOpt = DEFAULT_COOLDOWN_S,
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Rebuild phantom charges by re-registering nodes.

    A charge no job owns (phantom-alloc) makes a node look busy for ever; Spur clears
    it only when the node registers afresh. For each node: spurctl's drain, a tick,
    a re-read (no active job, a fresh inventory showing spurd running and holding
    nothing, the charge unchanged), DeregisterNode(force=false; never force), a
    bounded wait for its spurd to register it again, GetNode showing no charge, then
    the labels and someone else's drain put back. Every call is journaled; a repair
    stopped part way is taken up by the next run on that node. Never more than
    --max-unavailable nodes out of service by spurctl's reason (a run that would pass
    it sends nothing, exit 2); a node spurctl resumed within --cooldown is refused
    unless named alone. A dry run shows its plan even where spur.conf cannot vouch
    for a removed node's return. Exit 0 when every node was repaired (or had no
    phantom charge), 1 when one was refused, failed or did not come back, 2 on
    errors (nothing sent).
    """
    from spurctl.commands.environment import detect
    from spurctl.render import repair as shown
    from spurctl.render.common import asker
    from spurctl.sources.repair_plan import load_repair_plan
    from spurctl.usecases.repair import RepairRequest, repair

    fmt = opt.with_json(ctx, fmt, as_json)
    # Every option check first (the request refuses when built), then what they name is read.
    request = RepairRequest(
        scope=scope,
        journal_path=change.journal,
        inventory=tuple(holdings.inventory or ()),
        lock_wait_s=change.lock_wait_s,
        dry_run=change.dry_run,
        yes=change.yes,
        max_inventory_age_s=max_inventory_age,
        tick_s=tick,
        wait_s=wait,
        rejoin_checked=rejoin_checked,
        restore_drain=restore_drain,
        max_unavailable=max_unavailable,
        cooldown_s=cooldown,
        view_flags=(
            *opt.view_flags(holdings, conn),
            *(["--journal", str(change.journal_path)] if change.journal_path else []),
            *(["--rejoin-checked"] if rejoin_checked else []),
            *(["--restore-drain"] if restore_drain else []),
        ),
        names_command=opt.next_command("nodes", flags=opt.controller_flags(conn)),
        plan_file=change.plan_file,
        plan_output=change.output,
    )
    if change.plan_file is not None:
        request = request.with_saved(load_repair_plan(change.plan_file))
    done = repair(
        request,
        holdings.sources(request.scope),
        conn.connect(),
        show_plan=lambda plan: shown.show_plan(plan, fmt),
        ask=asker(detect().ask, shown.question),
        waiting=shown.waiting,
    )
    shown.show(done, fmt, change.output)
    return int(done.exit_status)
