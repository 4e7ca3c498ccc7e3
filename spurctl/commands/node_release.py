"""spurctl node-release: stop a run this node's spurd no longer tracks (run on the node)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.commands.node_inventory import cgroup_root_option, proc_root_option
from spurctl.errors import ExitStatus
from spurctl.option_values import DAY_S, job_id_parser, number_option, rfc3339

NAME = "node-release"
EPILOG = None

JobOpt = Annotated[
    int,
    typer.Option(
        "--job",
        help="The job id whose run to stop on this node.",
        parser=job_id_parser(),
        metavar="ID",
    ),
]
StartedAtOpt = Annotated[
    str,
    typer.Option(
        "--started-at",
        help="The run's start time (RFC 3339), as the agent-orphan finding gives it; "
        "the release refuses unless the run held now started then (within 1 s).",
        metavar="TIME",
    ),
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print what would be signalled; send nothing.")
]
GraceOpt = Annotated[
    float,
    number_option(
        "--grace",
        kind=float,
        low=0,
        high=DAY_S,
        help="Seconds between SIGTERM and SIGKILL (or cgroup.kill).",
        metavar="SECONDS",
    ),
]
CgroupRootOpt = Annotated[
    Path | None,
    cgroup_root_option(
        "Look for the job's cgroups only under this directory. Default: found as "
        "node-inventory finds it (see `spurctl node-inventory --help`)."
    ),
]
ProcRootOpt = Annotated[
    Path,
    proc_root_option(
        "The node's /proc. A real release needs this system's own /proc "
        "(it signals by pid); another is only read, with --dry-run."
    ),
]
JournalOpt = Annotated[
    Path | None,
    opt.journal_option(
        "Journal file, shared with reclaim (default the config file's journal, else "
        "$XDG_STATE_HOME/spurctl/journal.jsonl)."
    ),
]


def command(
    job: JobOpt,
    started_at: StartedAtOpt,
    dry_run: DryRunOpt = False,
    grace: GraceOpt = 10.0,
    cgroup_root: CgroupRootOpt = None,
    proc_root: ProcRootOpt = Path("/proc"),
    journal_path: JournalOpt = None,
) -> int:
    """Stop a run this node's spurd no longer tracks.

    Run it on the node, as root, with the job id and start time an agent-orphan
    finding gives. It re-scans the node and refuses (exit 2) unless the job is
    held, its run started at --started-at, and it began before the current spurd
    (a spurd tracks what it launched: use `spurctl reclaim` for those). Then
    SIGTERM to every process of the job, SIGKILL (and cgroup.kill) after --grace,
    and the emptied job cgroups removed; journaled like reclaim. Exit 0 when all
    is gone, 1 when something was left.

    \b
    Example:
      spurctl node-release --job 4711 --started-at 2026-12-01T14:02:11Z --dry-run
    """
    from spurctl.act.node_release import run

    done = run(
        job,
        rfc3339(started_at, "--started-at"),
        dry_run=dry_run,
        grace_s=grace,
        cgroup_root=cgroup_root,
        proc_root=proc_root,
        journal_path=opt.journal_at(journal_path),
        out=print,
    )
    return ExitStatus.OK if done is None or done.complete else ExitStatus.ACTION_NEEDED
