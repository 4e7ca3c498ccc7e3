"""spurctl reclaim: cancel the stranded holdings of these nodes, safely."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LOCK_WAIT_S,
    DEFAULT_MAX_INVENTORY_AGE_S,
    DEFAULT_SETTLE_S,
)
from spurctl.errors import SpurctlError
from spurctl.option_values import DAY_S, job_id_parser, number_option, parse_duration
from spurctl.render.common import ReclaimFormat
from spurctl.scope import Scope

NAME = "reclaim"
EPILOG = (
    "\b\nExamples:\n  spurctl reclaim --node gpu017 --collect --dry-run\n"
    "  spurctl reclaim -w 'gpu[003-008]' --collect"
)

JobOpt = Annotated[
    list[int] | None,
    typer.Option(
        "--job", parser=job_id_parser(), help="Only these job ids. Repeatable.", metavar="ID"
    ),
]
DetailedExitcodeOpt = Annotated[
    bool,
    typer.Option(
        "--detailed-exitcode",
        help="With --dry-run, as terraform plan's: exit 1 when the real run would send a "
        "cancel, 0 when it would send none (2: an error, as always).",
    ),
]
PlanOutputOpt = Annotated[
    Path | None,
    opt.output_option("With --dry-run: save the plan here, for `spurctl reclaim --plan FILE`."),
]
PlanOpt = Annotated[
    Path | None,
    typer.Option(
        "--plan",
        help="Send only the entries of this saved plan (reclaim --dry-run -o FILE), each "
        "re-checked; refused when older than --max-inventory-age or from another controller.",
        metavar="FILE",
        show_default=False,
    ),
]
JournalOpt = Annotated[
    Path | None,
    opt.journal_option(
        "Journal file (default the config file's journal, else "
        "$XDG_STATE_HOME/spurctl/journal.jsonl)."
    ),
]
SettleOpt = Annotated[
    float,
    number_option(
        "--settle",
        kind=float,
        low=0,
        high=DAY_S,
        help="With --collect or --verify-inventory: the longest to wait for the cancelled "
        "jobs to leave their nodes, re-collecting every 2 s until they have (spurd frees a "
        "run that ignores SIGTERM about 7 s after the cancel).",
        metavar="SECONDS",
    ),
]
VerifyInventoryOpt = Annotated[
    bool,
    typer.Option(
        "--verify-inventory",
        help="After --settle, re-collect the touched nodes (with --command and --fanout, "
        "even when the plan came from --inventory files) and confirm each cancel from the "
        "node: the agent answers Ok even for a job it does not track. --collect does this "
        "too. Without either, sent cancels are reported unconfirmed (exit 1).",
    ),
]
ConcurrencyOpt = Annotated[
    int,
    number_option(
        "--concurrency", kind=int, low=1, high=100_000, help="Nodes cancelled at once.", metavar="N"
    ),
]
MaxInventoryAgeOpt = Annotated[
    float,
    typer.Option(
        "--max-inventory-age",
        help="Skip entries whose inventory was collected longer ago than this "
        "(e.g. 90s, 10m, 1h); re-collect them.",
        parser=parse_duration,
        metavar="DURATION",
        show_default="10m",
    ),
]
FormatOpt = Annotated[
    ReclaimFormat, opt.format_option(ReclaimFormat, "reclaim", "the plan and outcomes")
]


@opt.scoped("Nodes to act on.")
@opt.connected(agents=True)
@opt.with_holdings()
def command(
    ctx: typer.Context,
    job: JobOpt = None,
    # Not @opt.changing: --help lists --detailed-exitcode between --dry-run and -o.
    dry_run: opt.DryRunOpt = False,
    detailed_exitcode: DetailedExitcodeOpt = False,
    output: PlanOutputOpt = None,
    plan_file: PlanOpt = None,
    yes: opt.YesOpt = False,
    journal_path: JournalOpt = None,
    lock_wait: opt.LockWaitOpt = DEFAULT_LOCK_WAIT_S,
    settle: SettleOpt = DEFAULT_SETTLE_S,
    verify_inventory: VerifyInventoryOpt = False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    max_inventory_age: MaxInventoryAgeOpt = DEFAULT_MAX_INVENTORY_AGE_S,
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    ack_version: opt.AckVersionOpt = None,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Cancel the stranded holdings of these nodes, safely.

    Acts on the reclaimable findings of --node (or --nodes, -w: one option)
    only: each is re-checked against the controller just before its cancel is
    sent, journaled, and cancelled on that node alone (the agent's CancelJob
    with signal 0). Sent is not freed: the agent answers Ok even for a job it
    does not track, so a cancel counts as done only once a re-collect of its
    node (--collect, --verify-inventory) shows the job gone; otherwise the run
    prints the command that confirms it and exits 1.
    """
    from spurctl.commands.environment import detect
    from spurctl.render import reclaim as shown
    from spurctl.render.common import asker, write_output
    from spurctl.sources.plan_file import load_plan
    from spurctl.usecases.reclaim import Given, ReclaimRequest, plan_document
    from spurctl.usecases.reclaim import reclaim as use_case

    fmt = opt.with_json(ctx, fmt, as_json)
    ack = opt.ack_version(ctx, ack_version)
    request = ReclaimRequest(
        scope=scope,
        journal_path=opt.journal_at(journal_path),
        lock_wait_s=lock_wait,
        jobs=tuple(job) if job else None,
        max_inventory_age_s=max_inventory_age,
        dry_run=dry_run,
        yes=yes,
        settle=settle,
        concurrency=concurrency,
        verify_inventory=verify_inventory,
        plan_file=plan_file,
        plan_output=output,
        detailed_exitcode=detailed_exitcode,
        # What the commands it points at repeat, so that they read this very view.
        given=Given(
            view=tuple(opt.view_flags(holdings, conn)),
            agents=_agent_flags(conn),
            exclude=scope.exclude_hostlist,
            journal=("--journal", str(journal_path)) if journal_path is not None else (),
        ),
    )
    if plan_file is not None:
        request = request.with_saved(load_plan(plan_file))
    env = detect()
    connection = conn.connect()
    done = use_case(
        request,
        holdings.sources(request.scope),
        connection,
        show_plan=lambda prepared: shown.show_plan(
            prepared, fmt, env, ack, agent_map_given=bool(connection.agent_map)
        ),
        ask=asker(env.ask, shown.question),
        on_settle=shown.settling,
    )
    if output is not None:
        write_output(shown.plan_text(plan_document(done.prepared, request.nodes)), output)
    shown.show_reclaimed(
        done, fmt, env, confirm_flags=opt.confirm_flags(holdings, conn), settle_s=settle
    )
    if output is not None and done.apply is not None:
        shown.saved_plan(output, done.apply, env)
    if done.error is not None:
        raise SpurctlError(done.error)
    return done.exit_status


def _agent_flags(conn: opt.ConnectionOptions) -> tuple[str, ...]:
    """The agent options given (a key file's path, never a key), for a printed reclaim
    that must reach the agents as this one would."""
    given = [
        ("--jwt-key-file", conn.jwt_key_file),
        ("--agent-port", conn.agent_port),
        ("--agent-map", conn.agent_map),
    ]
    return tuple(word for flag, value in given if value is not None for word in (flag, str(value)))
