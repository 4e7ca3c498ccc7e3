"""spurctl journal: the runs reclaim, repair, drain, resume and node-release journaled,
newest first."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.option_values import number_option, since_time
from spurctl.render.common import ReclaimFormat
from spurctl.scope import Scope

NAME = "journal"
EPILOG = (
    "\b\nExamples:\n  spurctl journal --last 5\n  spurctl journal --run 20261202T1447\n"
    "  spurctl journal --node 'gpu[003-008]' --since 2h\n  spurctl journal --cluster prod"
)

FileOpt = Annotated[
    Path | None,
    opt.journal_option(
        "Journal file (default the config file's journal, else "
        "$XDG_STATE_HOME/spurctl/journal.jsonl, as reclaim)."
    ),
]
LastOpt = Annotated[
    int, number_option("--last", kind=int, low=1, metavar="N", help="Show the newest N runs.")
]
RunOpt = Annotated[
    str | None,
    typer.Option("--run", metavar="ID", help="Show one run (its id, or the start of it) in full."),
]
SinceOpt = Annotated[
    datetime | None,
    typer.Option(
        "--since",
        help="Only runs with a record at or after TIME: ISO 8601 (UTC unless it says), "
        "or a span back from now such as 2h, 30m or 2d.",
        parser=since_time,
        metavar="TIME",
        show_default=False,
    ),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        metavar="NAME",
        help="Only that cluster's records (spur.conf's cluster_name, as the records name "
        "it); a record naming no cluster is every cluster's. A name no record gives shows "
        "nothing, and a note says which names the journal holds.",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    ReclaimFormat,
    opt.format_option(ReclaimFormat, "journal", "the runs (json: spurctl.journal-runs/v1)"),
]


@opt.scoped("Only what runs did on these nodes (each run's counts are those of these nodes).")
def command(
    ctx: typer.Context,
    journal_path: FileOpt = None,
    last: LastOpt = 20,
    run: RunOpt = None,
    since: SinceOpt = None,
    cluster: ClusterOpt = None,
    fmt: FormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    scope: Scope = Scope(),
) -> int:
    """Every run spurctl journaled (reclaim, repair, drain, resume, node-release).

    Per run: its operator, when it began, its cluster, the command (reclaim, repair,
    drain, resume, node-release), the nodes, and what it did: cancels sent (and of
    those, unconfirmed: no re-collect journaled the job gone), nodes drained,
    resumed, repaired or released, what was skipped and failed, and every intent
    without an outcome (an interrupted run: that call may or may not have gone out;
    check the node). --run ID shows one run, one line per outcome. A torn line
    is reported on stderr and skipped. --node (and -x) keeps the runs that touched
    those nodes, each counted for them alone; --since TIME (ISO 8601, or 2h, 30m
    back from now) the runs with a record since then; --cluster NAME that cluster's
    records (and those naming no cluster). Exit 0, also when nothing has been
    journaled yet (that is said in one line): the journal is a record to read,
    not a check; exit 2 when it cannot be read or --run names no run.
    """
    from spurctl.commands.environment import detect
    from spurctl.errors import note, warn
    from spurctl.render.journal import missing_sentence, print_one, print_runs
    from spurctl.usecases import journal_runs

    fmt = opt.with_json(ctx, fmt, as_json)
    if cluster is not None and not cluster.strip():
        raise SpurctlError("--cluster: give a cluster name (spur.conf's cluster_name)")
    only = journal_runs.JournalFilter(scope, since, cluster)
    loaded = journal_runs.load(opt.journal_at(journal_path), cluster=cluster)
    if loaded.cluster_note is not None:
        note(loaded.cluster_note)
    view = journal_runs.filtered(loaded, only)
    if run is not None:
        if not view.exists:
            raise SpurctlError(missing_sentence(view))
        print_one(view, journal_runs.select(view.runs, run), fmt=fmt, env=detect())
    else:
        if not view.exists and fmt == "json":
            warn(missing_sentence(view))
        print_runs(view, view.runs[:last], fmt=fmt, env=detect())
    return ExitStatus.OK
