"""`spurctl resume --node HOSTLIST`: lift spurctl's own drains from nodes now clean."""

from __future__ import annotations

from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.commands.drain import CHANGING, MaxAgeOpt, run_change
from spurctl.defaults import DEFAULT_MAX_INVENTORY_AGE_S
from spurctl.render.common import ReclaimFormat
from spurctl.scope import Scope

NAME = "resume"
EPILOG = (
    "\b\nExamples:\n  spurctl resume --node 'gpu[001-128]' --collect --dry-run\n"
    "  spurctl resume -w gpu017 --collect --yes\n"
    "  spurctl resume -w gpu017 --collect --lost-reason --yes"
)
LostReasonOpt = Annotated[
    bool,
    typer.Option(
        "--lost-reason",
        help="Lift only the named nodes that spurctl drained and that Spur v0.8.0 (or "
        "older) then marked DOWN 'Not responding' when their heartbeat timed out, keeping "
        "the lock: each only when the journal records that drain still set, its audit is "
        "clean and its spurd runs. Refused on Spur 0.9 and later, which keeps the drain's "
        "reason (plain resume lifts it there).",
    ),
]
FormatOpt = Annotated[ReclaimFormat, opt.format_option(ReclaimFormat, "resume", "the result")]


@opt.scoped("Nodes whose spurctl drains to lift.")
@opt.connected()
@opt.with_holdings()
@CHANGING
def command(
    ctx: typer.Context,
    change: opt.ChangeOptions = opt.ChangeOptions(),
    max_inventory_age: MaxAgeOpt = DEFAULT_MAX_INVENTORY_AGE_S,
    lost_reason: LostReasonOpt = False,
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Lift spurctl's own drains from nodes now clean.

    Only a drain whose reason starts `spurctl:` is ever lifted (UpdateNode to IDLE),
    and only when the node's audit, on an inventory no older than
    --max-inventory-age, finds nothing that needs action; anyone else's drain (an
    admin's, a health check's) is never touched. On Spur v0.8.0 a drain of spurctl's
    whose heartbeat timed out reads DOWN 'Not responding' for ever: it is said, and
    lifted only with --lost-reason. Journaled. Exit 0 when every
    spurctl drain in scope was lifted, 1 when one stays (the node is not clean) or
    failed, 2 on errors.
    """
    from spurctl.usecases.drain import Verb

    return run_change(
        Verb.RESUME, opt.with_json(ctx, fmt, as_json), scope, holdings, conn, change,
        max_inventory_age_s=max_inventory_age, lost_reason=lost_reason,
    )  # fmt: skip
