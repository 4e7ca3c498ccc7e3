"""spurctl checklist: operational checklists built from the live cluster (post-wipe)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.commands.help import HelpCommand, HelpGroup
from spurctl.errors import ExitStatus
from spurctl.render.common import ChecklistFormat
from spurctl.scope import Scope

NAME = "checklist"

app = typer.Typer(
    name=NAME,
    help="Operational checklists built from the live cluster.",
    epilog="\b\nExample:\n  spurctl checklist post-wipe --collect -o recycle.md",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=HelpGroup,
)

WatermarkOpt = Annotated[
    int | None,
    opt.watermark_option(
        "The controller's next job id, if known (default: max tracked id + 1, "
        "at least spur.conf's first_job_id)."
    ),
]
VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Re-read the controller and the --nodes' inventories and tick every step "
        "that now holds.",
    ),
]
FormatOpt = Annotated[
    ChecklistFormat, opt.format_option(ChecklistFormat, "checklist", "the checklist")
]
OutputOpt = Annotated[Path | None, opt.output_option("Write here instead of stdout.")]


@app.command("post-wipe", cls=HelpCommand)
@opt.scoped(
    "Nodes to check. With --verify: the nodes the first run said to recycle, as its verify "
    "command lists them (required)."
)
@opt.connected()
@opt.with_holdings()
def post_wipe(
    ctx: typer.Context,
    watermark: WatermarkOpt = None,
    verify: VerifyOpt = False,
    fmt: FormatOpt = ChecklistFormat.MARKDOWN,
    as_json: opt.JsonOpt = False,
    output: OutputOpt = None,
    ack_version: opt.AckVersionOpt = None,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Which agents to recycle after a controller wipe, and how.

    Every node still holding a pre-wipe run (an id the wiped controller did not
    issue, or has since reissued to another run) must be recycled before
    submissions resume. Markdown (checkboxes, to paste into an incident document) or --format json
    (spurctl.checklist/v1); on a terminal, unless --format is given, the Markdown rendered
    as text at the terminal's width. --verify re-reads the controller and the inventories of the
    nodes given by --nodes (the hostlist the first run printed in its verify command)
    and ticks every step that now holds; stopping and resuming submissions cannot be
    observed over Spur's RPCs and stay to confirm by hand.

    Exit 0 when nothing needs recycling (with --verify: every checkable step is done), 1
    otherwise, 2 on errors.

    \b
    Example:
      spurctl checklist post-wipe --collect -o recycle.md
      spurctl checklist post-wipe --verify --nodes 'gpu[001-007]' --collect
    """
    from spurctl.commands.environment import detect
    from spurctl.render.checklist import show
    from spurctl.usecases.checklist import ChecklistRequest, run_post_wipe

    fmt = opt.with_json(ctx, fmt, as_json)
    ack = opt.ack_version(ctx, ack_version)
    # Every option check first (the request refuses when built), then what they name is read.
    request = ChecklistRequest(
        scope=scope,
        watermark=watermark,
        verify=verify,
        collect_flags=tuple(opt.collect_flags(holdings)),
        # The commands it prints collect and read as this run did.
        read_flags=(
            *opt.controller_flags(conn),
            *(["--watermark", str(watermark)] if watermark is not None else []),
        ),
    )
    # Markdown unless it is for eyes: asked for by --format, or written to -o or a pipe.
    asked = getattr(ctx.get_parameter_source("fmt"), "name", "DEFAULT") == "COMMANDLINE"
    env = detect()
    on_screen = not asked and not as_json and output is None and env.tty
    result = run_post_wipe(request, holdings.sources(request.scope), conn.connect())
    show(result, fmt, output, env, on_screen=on_screen, ack=ack)
    return ExitStatus.OK if result.ok else ExitStatus.ACTION_NEEDED
