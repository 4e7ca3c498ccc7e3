"""`spurctl autopilot`: heal what is provably safe, round after round; page for the rest."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from spurctl import options as opt
from spurctl.commands.drain import CooldownOpt, JournalOpt, MaxAgeOpt, MaxUnavailableOpt
from spurctl.commands.repair import TickOpt, WaitOpt
from spurctl.decide.autopilot import (
    DEFAULT_BREAKER,
    DEFAULT_FLAP_LIMIT,
    DEFAULT_GRACE_S,
    DEFAULT_MAX_ACTIONS,
    DEFAULT_REPAIR_WAIT_S,
    DEFAULT_RESUME_AFTER_S,
    Threshold,
)
from spurctl.decide.budget import DEFAULT_COOLDOWN_S, DEFAULT_MAX_UNAVAILABLE, MaxUnavailable
from spurctl.defaults import DEFAULT_MAX_INVENTORY_AGE_S, DEFAULT_TICK_S
from spurctl.errors import SpurctlError, warn
from spurctl.option_values import (
    number_option,
    parse_breaker,
    parse_duration,
    parse_per_hour,
    parse_wait,
)
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.usecases.autopilot import RoundReport

NAME = "autopilot"
EPILOG = (
    "\b\nExamples:\n  spurctl autopilot --collect --dry-run --rounds 1\n"
    "  spurctl autopilot -w 'gpu[001-999]' --collect --metrics-file "
    "/var/lib/node_exporter/spurctl_autopilot.prom"
)
PAUSE_NAME = "autopilot.pause"


def _seconds(flag: str, help_text: str, shown: str, zero: bool = False) -> object:
    parse = parse_wait if zero else parse_duration
    return typer.Option(flag, help=help_text, parser=parse, metavar="DURATION",
                        show_default=shown)  # fmt: skip


IntervalOpt = Annotated[float, _seconds("--interval", "Time between rounds' starts.", "30s")]
GraceOpt = Annotated[
    float,
    _seconds("--grace", "Act only on a finding seen this long (two agent heartbeats: a 0.9+ "
             "controller's own reclaim had its chance; 0: at first sight).", "60s", zero=True),
]  # fmt: skip
ResumeAfterOpt = Annotated[
    float,
    _seconds("--resume-after", "Lift spurctl's drain of a node clean this long.", "5m", zero=True),
]
RoundsOpt = Annotated[
    int | None,
    number_option("--rounds", kind=int, low=1, help="Stop after N rounds (scripts, tests).",
                  metavar="N"),
]  # fmt: skip
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Shadow mode: everything but the calls; the JSON lines say what it would send.",
    ),
]
RepairOpt = Annotated[
    bool,
    typer.Option("--repair", help="Also repair phantom-alloc nodes as `spurctl repair` does "
                 "(it deregisters them): one a round, where spur.conf shows a removed node "
                 "registers again or --rejoin-checked is given."),
]  # fmt: skip
RejoinOpt = Annotated[
    bool,
    typer.Option(
        "--rejoin-checked", help="With --repair: a removed node is known to register again."
    ),
]
MaxActionsOpt = Annotated[
    int,
    typer.Option("--max-actions", help="Mutating calls in a sliding hour, counted from the "
                 "journal (a restart does not reset it).", parser=parse_per_hour,
                 metavar="N/h", show_default="60/h"),
]  # fmt: skip
FlapOpt = Annotated[
    int,
    number_option("--flap-limit", kind=int, low=1, help="A node acted on in N rounds in 24 h is "
                  "drained as flapping and left to a person.", metavar="N"),
]  # fmt: skip
BreakerOpt = Annotated[
    Threshold,
    typer.Option("--breaker", help="Act on nothing in a round where more nodes than this "
                 "need action (N, or P% of the audited nodes, at least 10; 0: any).",
                 parser=parse_breaker, metavar="N|P%", show_default="5%"),
]  # fmt: skip
PauseOpt = Annotated[
    Path | None,
    typer.Option("--pause-file", help="While this file exists: audit only (default "
                 f"{PAUSE_NAME} beside the journal).", metavar="FILE"),
]  # fmt: skip
MetricsOpt = Annotated[
    Path | None,
    typer.Option("--metrics-file", help="node_exporter textfile collector file, written "
                 "atomically each round.", metavar="FILE"),
]  # fmt: skip


@opt.scoped("Nodes to look after (default: every node the controller lists).")
@opt.connected(agents=True)
@opt.with_holdings()
def command(
    interval: IntervalOpt = 30.0,
    rounds: RoundsOpt = None,
    grace: GraceOpt = DEFAULT_GRACE_S,
    dry_run: DryRunOpt = False,
    repair: RepairOpt = False,
    rejoin_checked: RejoinOpt = False,
    tick: TickOpt = DEFAULT_TICK_S,
    wait: WaitOpt = DEFAULT_REPAIR_WAIT_S,
    resume_after: ResumeAfterOpt = DEFAULT_RESUME_AFTER_S,
    max_unavailable: MaxUnavailableOpt = DEFAULT_MAX_UNAVAILABLE,
    max_actions: MaxActionsOpt = DEFAULT_MAX_ACTIONS,
    flap_limit: FlapOpt = DEFAULT_FLAP_LIMIT,
    breaker: BreakerOpt = DEFAULT_BREAKER,
    cooldown: CooldownOpt = DEFAULT_COOLDOWN_S,
    max_inventory_age: MaxAgeOpt = DEFAULT_MAX_INVENTORY_AGE_S,
    pause_file: PauseOpt = None,
    metrics_file: MetricsOpt = None,
    journal_path: JournalOpt = None,
    scope: Scope = Scope(),
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> int:
    """Rounds of audit, decide, act, within budgets, until stopped.

    Each round audits the scope afresh and acts, through the manual commands' guards,
    only on findings that lasted --grace: reclaims what reclaim would, drains what no
    cancel can free (agent-orphan, leftover) with spurctl's reason, and resumes
    spurctl's own drains clean for --resume-after. Never node-release, never another's
    drain. The breaker, a pause file and the budgets stop it acting, each said in the
    round's JSON line (stdout). SIGTERM/SIGINT: the call in flight finishes, exit 0;
    SIGHUP re-reads the configuration. One autopilot per journal.
    """
    from spurctl.decide.autopilot import Limits
    from spurctl.usecases.autopilot import AutopilotRequest, run

    journal = opt.journal_at(journal_path)
    # Every option check first (the request refuses when built), then what they name is read.
    request = AutopilotRequest(
        scope=scope,
        journal_path=journal,
        pause_file=pause_file or journal.parent / PAUSE_NAME,
        interval_s=interval,
        rounds=rounds,
        limits=Limits(grace, resume_after, max_actions, flap_limit),
        breaker=breaker,
        max_unavailable=max_unavailable if isinstance(max_unavailable, MaxUnavailable) else
        DEFAULT_MAX_UNAVAILABLE,
        cooldown_s=cooldown,
        max_inventory_age_s=max_inventory_age,
        dry_run=dry_run,
        repair=repair,
        rejoin_checked=rejoin_checked,
        tick_s=tick,
        wait_s=wait,
    )  # fmt: skip
    from spurctl.sd_notify import notify

    return int(
        run(
            request, holdings.sources(request.scope), conn.connect(),
            on_round=_shown(metrics_file), tick=lambda: notify("WATCHDOG=1"),
            reconnect=conn.connect,
        )
    )  # fmt: skip


def _shown(metrics_file: Path | None) -> Callable[[RoundReport], None]:
    """Each round: its JSON line (stdout), its human line (stderr, on a terminal), the
    metrics file, and systemd told (READY once, WATCHDOG, STATUS)."""
    from spurctl.render import autopilot as shown
    from spurctl.render.common import PUBLIC_FILE_MODE, write_output
    from spurctl.sd_notify import notify

    tty = sys.stderr.isatty()

    def on_round(report: RoundReport) -> None:
        sys.stdout.write(shown.json_line(report))
        sys.stdout.flush()
        line = shown.human_line(report)
        if tty:
            sys.stderr.write(line)
        if metrics_file is not None:
            try:
                write_output(shown.metrics(report), metrics_file, create_mode=PUBLIC_FILE_MODE)
            except (OSError, SpurctlError) as exc:  # the rounds go on; the alert sees it age
                warn(f"metrics file {metrics_file} not written: {exc}")
        notify(*(("READY=1",) if report.round == 1 else ()), "WATCHDOG=1",
               f"STATUS={line.strip()}")  # fmt: skip

    return on_round
