"""`spurctl drain --node HOSTLIST`: drain the nodes holding what spurctl cannot free now."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from spurctl import options as opt
from spurctl.decide.budget import DEFAULT_COOLDOWN_S, DEFAULT_MAX_UNAVAILABLE, MaxUnavailable
from spurctl.defaults import DEFAULT_MAX_INVENTORY_AGE_S
from spurctl.option_values import parse_duration, parse_max_unavailable
from spurctl.render.common import ReclaimFormat
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.usecases.drain import Verb

NAME = "drain"
EPILOG = (
    "\b\nExamples:\n  spurctl drain --node 'gpu[001-128]' --collect --dry-run\n"
    "  spurctl drain -w gpu017 --collect --yes"
)

JOURNAL_HELP = (
    "Journal file, shared with reclaim and repair (default "
    "the config file's journal, else "
    "$XDG_STATE_HOME/spurctl/journal.jsonl); also read for the cancels reclaim sent."
)
# drain's and resume's --dry-run, --yes and --journal.
CHANGING = opt.changing(JOURNAL_HELP)
# The autopilot's --journal (it prompts for nothing, and its --dry-run is its own).
JournalOpt = Annotated[Path | None, opt.journal_option(JOURNAL_HELP)]
MaxAgeOpt = Annotated[
    float,
    typer.Option(
        "--max-inventory-age",
        help="resume: a node whose inventory was collected longer ago than this (e.g. 90s, "
        "10m) is not clean yet and stays drained.",
        parser=parse_duration,
        metavar="DURATION",
        show_default="10m",
    ),
]
FormatOpt = Annotated[ReclaimFormat, opt.format_option(ReclaimFormat, "drain", "the result")]
MaxUnavailableOpt = Annotated[
    MaxUnavailable,
    typer.Option(
        "--max-unavailable",
        help="The most nodes spurctl may hold out of service by its own reason (any run's, "
        "counted from the controller) with this run's: N nodes, or P% of the nodes the "
        "controller lists (at least 1). A run that would pass it is refused whole.",
        parser=parse_max_unavailable,
        metavar="N|P%",
        show_default="2%",
    ),
]
CooldownOpt = Annotated[
    float,
    typer.Option(
        "--cooldown",
        help="A node spurctl resumed is not drained again by spurctl within this (e.g. "
        "10m, 1h), unless it is the only node named.",
        parser=parse_duration,
        metavar="DURATION",
        show_default="10m",
    ),
]


@opt.scoped("Nodes to consider.")
@opt.connected()
@opt.with_holdings()
@CHANGING
def command(
    ctx: typer.Context,
    change: opt.ChangeOptions = opt.ChangeOptions(),
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    max_unavailable: MaxUnavailableOpt = DEFAULT_MAX_UNAVAILABLE,
    cooldown: CooldownOpt = DEFAULT_COOLDOWN_S,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Drain nodes holding what spurctl cannot free now.

    A node holding a live run the audit can only investigate, a cancel that failed
    or was never confirmed, or an agent orphan awaiting node-release keeps taking
    jobs it then rejects. Each such node is drained with spurctl's reason, e.g.
    `spurctl: agent-orphan job 4711 (spurctl explain gpu017)`; a node already
    drained or DOWN for another reason is left alone. Journaled. `spurctl resume`
    lifts these drains once the node is clean. Never more than --max-unavailable
    nodes out of service by spurctl's reason (a run that would pass it sends nothing,
    exit 2); a node spurctl resumed within --cooldown is left unless named alone.
    Exit 0 when every such node is drained, 1 when one could not be (or is cooling
    down), 2 on errors.
    """
    from spurctl.usecases.drain import Verb

    return run_change(
        Verb.DRAIN, opt.with_json(ctx, fmt, as_json), scope, holdings, conn, change,
        max_unavailable=max_unavailable, cooldown_s=cooldown,
    )  # fmt: skip


def run_change(
    verb: Verb,
    fmt: ReclaimFormat,
    scope: Scope,
    holdings: opt.HoldingOptions,
    conn: opt.ConnectionOptions,
    change: opt.ChangeOptions,
    *,
    max_inventory_age_s: float = DEFAULT_MAX_INVENTORY_AGE_S,
    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE,
    cooldown_s: float = DEFAULT_COOLDOWN_S,
    lost_reason: bool = False,
) -> int:
    """drain's or resume's one request, use-case call and render call (they differ only
    in the verb, drain's budget and resume's inventory age and --lost-reason)."""
    from spurctl.commands.environment import detect
    from spurctl.render import drain as shown
    from spurctl.render.common import asker
    from spurctl.usecases.drain import DrainRequest
    from spurctl.usecases.drain import change as use_case

    request = DrainRequest(
        verb=verb,
        scope=scope,
        journal_path=change.journal,
        lock_wait_s=change.lock_wait_s,
        dry_run=change.dry_run,
        yes=change.yes,
        max_inventory_age_s=max_inventory_age_s,
        max_unavailable=max_unavailable,
        cooldown_s=cooldown_s,
        lost_reason=lost_reason,
        given=(
            *opt.view_flags(holdings, conn),
            *(["--journal", str(change.journal_path)] if change.journal_path is not None else []),
        ),
    )
    done = use_case(
        request,
        holdings.sources(scope),
        conn.connect(),
        show_plan=lambda plan: shown.show_plan(plan, fmt),
        ask=asker(detect().ask, shown.question),
    )
    shown.show(done, fmt)
    return int(done.exit_status)
