"""spurctl audit: compare the controller's view with what agents hold."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.model import Action, AuditReport, Kind, NextStep
from spurctl.option_values import DAY_S, number_option
from spurctl.render.common import AuditFormat
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.decide.tracker import WatchRound
    from spurctl.render.environment import Environment
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection

NAME = "audit"
EPILOG = (
    "\b\nExamples:\n  spurctl audit --nodes 'gpu[001-128]' --inventory inventories.jsonl\n"
    "  spurctl audit -w 'gpu[001-128]' --collect --kind active-elsewhere --action reclaim\n"
    "  spurctl audit --collect --format prometheus"
    " -o /var/lib/prometheus/node-exporter/spurctl.prom\n"
    "  spurctl audit --collect --watch"
)

Choice = TypeVar("Choice", Kind, Action)


def choice_option(choices: type[Choice], name: str, what: str, help_text: str) -> Any:
    """A repeatable option taking one of `choices`, or a comma list of them (as sinfo -t
    takes states): validated (one line naming them all) and completed from the prefix
    typed, after the last comma. Each value comes as typed, lower-cased; `chosen` turns
    them into `choices`."""
    values = [c.value for c in choices]

    def parse(value: str) -> str:
        words = [w.strip().lower() for w in str(value).split(",")]
        for word in words:
            if word not in values:
                raise typer.BadParameter(
                    f"unknown {what} {word!r}; use one of {', '.join(values)} "
                    "(several: repeat the option, or separate them with commas)"
                )
        return ",".join(words)

    def complete(incomplete: str) -> list[str]:
        done, _, typed = (incomplete or "").rpartition(",")
        head = f"{done}," if done else ""
        return [head + v for v in values if v.startswith(typed.lower())]

    return typer.Option(
        name,
        help=help_text,
        parser=parse,
        autocompletion=complete,
        metavar=what.split()[-1].upper() + "[,...]",
        show_default=False,
    )


def chosen(choices: type[Choice], given: list[str] | None) -> tuple[Choice, ...]:
    """A choice_option's values (repeats and comma lists), each once, in the order given."""
    return tuple(dict.fromkeys(choices(w) for v in given or () for w in v.split(",")))


AuditKindOpt = Annotated[
    list[str] | None,
    choice_option(
        Kind,
        "--kind",
        "finding kind",
        "Show only findings of this kind (repeatable, or a comma list; the summary and "
        "the exit status still count every finding). Kinds: "
        + ", ".join(k.value for k in Kind)
        + ".",
    ),
]
AuditActionOpt = Annotated[
    list[str] | None,
    choice_option(
        Action,
        "--action",
        "action",
        "Show only findings with this action (repeatable, or a comma list; with --kind, "
        "both must match). Actions: " + ", ".join(a.value for a in Action) + ".",
    ),
]

FormatOpt = Annotated[AuditFormat, opt.format_option(AuditFormat, "audit", "the findings")]


def _columns(value: str) -> str:
    from spurctl.render.audit_columns import COLUMN_NAMES, column_name

    names = [column_name(word) for word in str(value).split(",")]
    for word, name in zip(str(value).split(","), names, strict=True):
        if name is None:
            raise typer.BadParameter(
                f"unknown column {word.strip()!r}; the columns are {', '.join(COLUMN_NAMES)}"
            )
    return ",".join(n for n in names if n)


def _complete_columns(incomplete: str) -> list[str]:
    from spurctl.render.audit_columns import COLUMN_NAMES

    done, _, typed = (incomplete or "").rpartition(",")
    head = f"{done}," if done else ""
    return [head + name for name in COLUMN_NAMES if name.startswith(typed.lower())]


ColumnsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--columns",
        "-O",
        help="The table's columns, in this order (a comma list, or repeated; as sinfo -O): "
        "node, job, kind, action, live, since, controller-state, allocated-nodes, gpus, "
        "pids, inventory-age, reason. One finding per line, each cell whole.",
        parser=_columns,
        autocompletion=_complete_columns,
        metavar="COLUMN[,...]",
        show_default=False,
        rich_help_panel=opt.OUTPUT,
    ),
]
OutputOpt = Annotated[
    Path | None,
    opt.output_option(
        "Write the report here instead of stdout: to a temporary file beside it, "
        "renamed over it once whole (as node_exporter's textfile collector expects), so "
        "an error leaves the file as it was."
    ),
]
WatermarkOpt = Annotated[int | None, opt.watermark_option("Override the estimated watermark.")]
AuditShowAllOpt = Annotated[bool, typer.Option("--all", help="Also list healthy rows.")]
AuditPerNodeOpt = Annotated[
    bool,
    typer.Option(
        "--per-node",
        "-N",
        help="One row per node in the table and Markdown (as sinfo -N): by default findings "
        "that differ only in their node are one row naming the hostlist. JSON and CSV always "
        "keep one record per finding.",
    ),
]
AuditWatchOpt = Annotated[
    bool,
    typer.Option(
        "--watch",
        help="Re-audit every --interval and show how long each finding has lasted; "
        "a reclaim finding that outlives two agent heartbeats (60 s) is STRANDED.",
    ),
]
AuditIntervalOpt = Annotated[
    float | None,
    number_option(
        "--interval",
        kind=float,
        low=0.001,
        high=DAY_S,
        help="With --watch: seconds between rounds.  [default: 30, one heartbeat]",
        show_default=False,
        metavar="SECONDS",
    ),
]
AuditRoundsOpt = Annotated[
    int | None,
    number_option(
        "--rounds",
        kind=int,
        low=1,
        help="With --watch: stop after N rounds (for scripts and tests).",
        metavar="N",
    ),
]


@dataclass(frozen=True, slots=True)
class AuditRequest:
    """One audit as asked for: options only, every mix of them that cannot mean anything
    refused when it is built (SpurctlError), before anything is read (the topology,
    spur.conf, the token) or any connection made; the holdings' Sources are built from
    `scope` and `snapshot` after it."""

    scope: Scope
    journal: Path
    fmt: AuditFormat = AuditFormat.TABLE
    kinds: tuple[Kind, ...] = ()
    actions: tuple[Action, ...] = ()
    output: Path | None = None
    watermark: int | None = None
    show_all: bool = False
    fold: bool = True
    header: bool = True
    # --snapshot, and --inventory as given (read by the Sources, checked here).
    snapshot: Path | None = None
    inventory: tuple[str, ...] = ()
    # --watch: a round every `interval` seconds (None: WATCH_INTERVAL), `rounds` times
    # (None: until stopped); either without --watch is refused.
    watch: bool = False
    interval: float | None = None
    rounds: int | None = None
    ack: str | None = None
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.watch and (self.interval is not None or self.rounds is not None):
            raise SpurctlError("--interval and --rounds only apply with --watch")
        if self.watch:
            if self.fmt not in (AuditFormat.TABLE, AuditFormat.JSON):
                raise SpurctlError(
                    f"--watch draws a table or writes JSON Lines (--format json); "
                    f"--format {self.fmt} is for one-shot audits (drop --watch)"
                )
            if self.snapshot is not None:
                raise SpurctlError(
                    "--watch follows the live controller; a saved --snapshot never changes"
                )
            if "-" in self.inventory:
                raise SpurctlError(
                    "--watch re-reads the inventories every round and standard input (-) can "
                    "be read only once: write them to a file (spurctl collect -o FILE)"
                )
            if self.kinds or self.actions or self.output is not None:
                raise SpurctlError(
                    "--kind, --action and -o do not apply with --watch (every round shows "
                    "every finding, on stdout: redirect it to keep it)"
                )
        if self.columns and self.watch:
            raise SpurctlError("--columns is for a one-shot table: drop --watch or --columns")
        if self.columns and self.fmt is not AuditFormat.TABLE:
            raise SpurctlError(
                f"--columns chooses the table's columns, and --format {self.fmt} carries "
                "every field: drop one of them"
            )
        if not self.header and (self.watch or self.fmt is not AuditFormat.TABLE):
            raise SpurctlError(
                "--no-header is for the table: drop --watch and --format (or drop --no-header)"
            )


def reclaim_step(report: AuditReport, flags: Sequence[str]) -> NextStep | None:
    """The one command that would act on the audit's reclaim findings: `spurctl reclaim`
    of their nodes, reading the view this audit read (`flags`: opt.view_flags); none when
    nothing is reclaimable."""
    from spurctl.decide.reasons import plural
    from spurctl.hostlist import fold

    held = [f for f in report.findings if f.action is Action.RECLAIM]
    if not held:
        return None
    nodes = fold(sorted({f.node for f in held}))
    return NextStep.spurctl(
        "reclaim", "--node", nodes, *flags,
        why=f"Reclaim {plural(len(held), 'holding')} on {nodes} with (it shows its plan and "
        "asks before it sends)",
    )  # fmt: skip


@opt.scoped("Limit to these nodes.")
@opt.connected()
@opt.with_holdings()
def command(
    ctx: typer.Context,
    snapshot: opt.SnapshotOpt = None,
    watermark: WatermarkOpt = None,
    show_all: AuditShowAllOpt = False,
    per_node: AuditPerNodeOpt = False,
    no_header: opt.NoHeaderOpt = False,
    fmt: FormatOpt = AuditFormat.TABLE,
    as_json: opt.JsonOpt = False,
    columns: ColumnsOpt = None,
    watch: AuditWatchOpt = False,
    interval: AuditIntervalOpt = None,
    rounds: AuditRoundsOpt = None,
    kind: AuditKindOpt = None,
    action: AuditActionOpt = None,
    output: OutputOpt = None,
    journal_path: opt.HistoryJournalOpt = None,
    ack_version: opt.AckVersionOpt = None,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Compare the controller's view with what agents hold.

    Prints every finding with the reason for it. Exit 0: nothing needs action;
    1: findings need action (reclaim or investigate); 2: error.

    --kind and --action choose the findings shown; the summary and the exit
    status still count every finding, and the output says how many were hidden.
    -o FILE replaces FILE only once the whole report is written.

    With --watch, re-audits every --interval and shows how long each finding has
    lasted; a reclaim finding that outlives two agent heartbeats (60 s) is
    STRANDED: the controller will not release it by itself.
    """
    from spurctl.commands.environment import detect

    # Every option check first (the request refuses when built), then what they name is read.
    request = AuditRequest(
        scope=scope,
        journal=opt.journal_at(journal_path),
        fmt=opt.with_json(ctx, fmt, as_json),
        kinds=chosen(Kind, kind),
        actions=chosen(Action, action),
        output=output,
        watermark=watermark,
        show_all=show_all,
        fold=not per_node,
        header=not no_header,
        snapshot=snapshot,
        inventory=tuple(holdings.inventory or ()),
        watch=watch,
        interval=interval,
        rounds=rounds,
        ack=opt.ack_version(ctx, ack_version),
        columns=tuple(dict.fromkeys(c for v in columns or () for c in v.split(","))),
    )
    src = holdings.sources(request.scope, request.snapshot)
    env = detect()
    connection = None if snapshot is not None else conn.connect()
    if request.watch:
        from functools import partial

        from spurctl.usecases import audit as use_case

        # A live view redrawn in place has no room for a progress bar under it.
        src = replace(src, progress=False) if env.tty else src
        interval = use_case.WATCH_INTERVAL if request.interval is None else request.interval
        rounds_of = partial(
            use_case.watch_rounds, src, connection, watermark=request.watermark,
            include_healthy=request.show_all, journal=request.journal,
            interval=interval, rounds=request.rounds,
            view_flags=tuple(opt.view_flags(holdings, conn)),
        )  # fmt: skip
        return _watch(rounds_of, request, env)
    from spurctl import heap

    # One audit, and the process ends (cli.entry): its imports, the read and what is made
    # of it are long-lived or bulk data with no cycles, which the collector would only
    # rescan (the watch above keeps it on: each round runs in a child of its own).
    with heap.gc_paused():
        return _once(request, src, connection, env, holdings, conn)


def _once(
    request: AuditRequest,
    src: Sources,
    connection: Connection | None,
    env: Environment,
    holdings: opt.HoldingOptions,
    conn: opt.ConnectionOptions,
) -> int:
    """One audit: read, judge, write it as asked; the exit status."""
    from spurctl import heap
    from spurctl.audit_view import run_audit
    from spurctl.render.audit_command import show_audit
    from spurctl.render.finding_filter import FindingFilter

    snapshot = request.snapshot
    report, inputs = run_audit(
        src, connection, watermark=request.watermark,
        include_healthy=request.show_all, journal=request.journal,
    )  # fmt: skip
    heap.keep_until_exit(report, inputs)
    only = FindingFilter(request.kinds, request.actions)
    if request.columns:
        from spurctl.render.audit_columns import show_columns

        # Folded only on a terminal: down a pipe or into a file, one line per finding.
        fold = request.fold and env.tty and request.output is None
        show_columns(
            report, request.columns, only, request.output, fold=fold, ack=request.ack,
            header=request.header,
        )  # fmt: skip
    else:
        live = snapshot is None  # a reclaim acts on the live cluster, never on a saved view
        steps: list[NextStep] = []
        if live:  # a saved view's nodes may have moved on: its next steps read a live one
            from spurctl.decide.next_steps import beyond_reclaim

            flags = opt.view_flags(holdings, conn)
            reclaim = reclaim_step(report, flags)
            # The reclaim last: the table's last line is the command that acts on most.
            steps = beyond_reclaim(report.findings, flags, reclaiming=reclaim is not None)
            steps += [reclaim] if reclaim is not None else []
        show_audit(
            report, request.fmt, only, request.output, env,
            fold=request.fold, ack=request.ack, header=request.header, next_steps=steps,
        )  # fmt: skip
    return ExitStatus.ACTION_NEEDED if report.needs_action else ExitStatus.OK


def _watch(
    rounds_of: Callable[..., Generator[WatchRound, None, None]],
    request: AuditRequest,
    env: Environment,
) -> int:
    """--watch: each round on the terminal redrawn in place (resized at once on
    SIGWINCH, Ctrl-C held while a drawing is written), or one block per round, or
    with --format json one line of JSON per round."""
    import sys

    from spurctl.commands.watch_loop import follow, interrupts_held, resizes

    if request.fmt is AuditFormat.JSON:  # JSON Lines: one document a round
        from spurctl.render.watch_json import JsonLines

        return follow(rounds_of, JsonLines(hold=interrupts_held))
    from spurctl.render.watch import WatchScreen

    screen = WatchScreen(env, fold=request.fold, ack=request.ack, hold=interrupts_held)
    signals = resizes(screen.resize, sys.stdout.fileno()) if env.tty else None
    return follow(rounds_of, screen, signals=signals)
