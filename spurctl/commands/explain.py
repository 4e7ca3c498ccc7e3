"""spurctl explain: one node's decision, or one holding's, step by step."""

from __future__ import annotations

from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus
from spurctl.option_values import job_id_parser
from spurctl.render.common import ReclaimFormat
from spurctl.scope import Scope

NAME = "explain"
EPILOG = (
    "\b\nExamples:\n  spurctl explain gpu003 --inventory inventories.jsonl\n"
    "  spurctl explain gpu003 4711 --collect --format json"
)

ExplainNodeArg = Annotated[
    str, typer.Argument(metavar="NODE", help="The node (either of its names).")
]
ExplainJobArg = Annotated[
    int | None,
    typer.Argument(metavar="[JOB]", help="One job the node holds.", parser=job_id_parser()),
]
FormatOpt = Annotated[
    ReclaimFormat,
    opt.format_option(ReclaimFormat, "explain", "the decision (json: spurctl.explain/v1)"),
]


@opt.connected(agents=True)
@opt.with_holdings()
def command(
    ctx: typer.Context,
    node: ExplainNodeArg,
    job: ExplainJobArg = None,
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    journal_path: opt.HistoryJournalOpt = None,
    ack_version: opt.AckVersionOpt = None,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """One node's decision, or one holding's, step by step.

    The controller's record, the node's evidence, the watermark and where it came
    from, which arm of Spur's reclaim predicate applies, every spurctl guard that
    stands over it, the finding as `audit` gives it, and exactly what `reclaim
    --node NODE` would send to which agent. Exit 0; 2 when neither the controller
    nor any inventory knows NODE.
    """
    from spurctl.commands.environment import detect
    from spurctl.render.explain import show
    from spurctl.usecases.explain import run_explain

    fmt = opt.with_json(ctx, fmt, as_json)
    ack = opt.ack_version(ctx, ack_version)
    flags = opt.view_flags(holdings, conn)
    names = opt.next_command("nodes", flags=flags)
    doc = run_explain(
        node, job, holdings.sources(Scope()), conn.connect(),
        journal=opt.journal_at(journal_path), names_command=names, view_flags=flags,
    )  # fmt: skip
    show(doc, fmt, detect(), ack=ack)
    return ExitStatus.OK
