"""The spurctl command line: parse options, call the library, pick a renderer.

Heavy modules (grpc, protobuf, ClusterShell) are imported inside the commands
that use them, so `spurctl --help` and `--version` stay fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from spurctl import heap
from spurctl import options as opt
from spurctl.commands import drain, repair, resume
from spurctl.defaults import DEFAULT_CONCURRENCY, DEFAULT_MAX_INVENTORY_AGE_S, DEFAULT_SETTLE_S
from spurctl.errors import ExitStatus, fail
from spurctl.render import sink
from spurctl.render.common import (
    AuditFormat,
    ChecklistFormat,
    NodesFormat,
    ReclaimFormat,
    write_output,
)
from spurctl.sources.collect import DEFAULT_COMMAND
from spurctl.sources.stepd_sessions import STATE_DIR
from spurctl.sources.tree import DEFAULT_REMOTE_COMMAND

app = typer.Typer(
    name="spurctl",
    help="Audit Spur node agents against the controller; reclaim what is stranded.\n\n"
    "Keep a Spur GPU cluster honest: compare what every node agent holds with the "
    "controller's view, explain each discrepancy, and reclaim stranded allocations safely.",
    epilog="\b\nExample:\n  spurctl audit --nodes 'gpu[001-128]' --collect",
    no_args_is_help=True,
    add_completion=False,  # one way to install: the scripts in completions/ (README)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state = {"debug": False}


@app.callback()
def _root(version: opt.VersionOpt = False, debug: opt.DebugOpt = False) -> None:
    _state["debug"] = debug


# -- snapshot --------------------------------------------------------------------


@app.command(
    epilog="\b\nExample:\n  spurctl snapshot -o /var/tmp/spur-before-upgrade.json",
)
@opt.connected()
def snapshot(
    output: opt.SnapshotOutputOpt,
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> None:
    """Save the controller's view for offline audits.

    Jobs, nodes, watermark and completeness, as one spurctl.snapshot/v1
    document; `spurctl audit --snapshot FILE` reaches the same findings from it.
    """
    from spurctl.render.snapshot import saved_sentence
    from spurctl.sources.documents import dump_json, snapshot_to_dict
    from spurctl.usecases.audit import take_snapshot

    view, watermark = take_snapshot(conn.connect())
    write_output(dump_json(snapshot_to_dict(view, watermark)) + "\n", output)
    print(saved_sentence(view, output), file=sys.stderr)


# -- audit -----------------------------------------------------------------------


@app.command(
    epilog="\b\nExamples:\n  spurctl audit --nodes 'gpu[001-128]' --inventory inv.jsonl\n"
    "  spurctl audit -w 'gpu[001-128]' --collect --kind active-elsewhere --action reclaim\n"
    "  spurctl audit --collect --format prometheus -o /var/lib/node_exporter/spurctl.prom\n"
    "  spurctl audit --collect --watch",
)
@opt.connected()
@opt.with_holdings()
def audit(
    ctx: typer.Context,
    nodes: opt.NodesOpt = None,
    exclude: opt.ExcludeOpt = None,
    snapshot: opt.AuditSnapshotOpt = None,
    watermark: opt.AuditWatermarkOpt = None,
    show_all: opt.AuditShowAllOpt = False,
    per_node: opt.AuditPerNodeOpt = False,
    no_header: opt.NoHeaderOpt = False,
    fmt: opt.AuditFormatOpt = AuditFormat.TABLE,
    as_json: opt.JsonOpt = False,
    watch: opt.AuditWatchOpt = False,
    interval: opt.AuditIntervalOpt = None,
    rounds: opt.AuditRoundsOpt = None,
    kind: opt.AuditKindOpt = None,
    action: opt.AuditActionOpt = None,
    output: opt.AuditOutputOpt = None,
    journal_path: opt.AuditJournalOpt = None,
    ack_version: opt.AckVersionOpt = None,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> None:
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
    from dataclasses import replace
    from functools import partial

    from spurctl.act.journal import default_path
    from spurctl.render.audit import FindingFilter
    from spurctl.render.audit_command import show_audit, watch_on_screen
    from spurctl.usecases import audit as use_case

    fmt = opt.with_json(ctx, fmt, as_json)
    src = holdings.sources(nodes, snapshot, exclude)
    ack = opt.ack_version(ctx, ack_version)
    journal = journal_path or default_path()
    only = FindingFilter(tuple(dict.fromkeys(kind or ())), tuple(dict.fromkeys(action or ())))
    use_case.check_flags(
        src, fmt, watch=watch, filtered=only.active, output=output, interval=interval,
        rounds=rounds,
    )  # fmt: skip
    if no_header and (watch or fmt != AuditFormat.TABLE):
        fail("--no-header is for the table: drop --watch and --format (or drop --no-header)")
    connection = None if snapshot is not None else conn.connect()
    if watch:
        # A live view redrawn in place has no room for a progress bar under it.
        src = replace(src, progress=False) if sys.stdout.isatty() else src
        every = use_case.WATCH_INTERVAL if interval is None else interval
        rounds_of = partial(
            use_case.watch_rounds, src, connection, watermark=watermark,
            include_healthy=show_all, journal=journal, interval=every, rounds=rounds,
        )  # fmt: skip
        flags = opt.view_flags(holdings, conn)
        raise typer.Exit(
            watch_on_screen(rounds_of, fold=not per_node, ack=ack, reclaim_flags=flags)
        )
    report, inputs = use_case.run_audit(
        src, connection, watermark=watermark, include_healthy=show_all, journal=journal
    )
    heap.keep_until_exit(report, inputs)
    show_audit(report, fmt, only, output, fold=not per_node, ack=ack, header=not no_header)
    raise typer.Exit(ExitStatus.ACTION_NEEDED if report.needs_action else ExitStatus.OK)


# -- nodes -----------------------------------------------------------------------


@app.command(
    epilog="\b\nExamples:\n  spurctl nodes --inventory inventories.jsonl\n"
    "  spurctl nodes -w 'gpu[001-128]' -x gpu017 --collect --format csv",
)
@opt.connected()
@opt.with_holdings()
def nodes(
    ctx: typer.Context,
    nodes: opt.NodesOpt = None,
    exclude: opt.ExcludeOpt = None,
    snapshot: opt.AuditSnapshotOpt = None,
    fmt: opt.NodesFormatOpt = NodesFormat.TABLE,
    as_json: opt.JsonOpt = False,
    no_header: opt.NoHeaderOpt = False,
    ack_version: opt.AckVersionOpt = None,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> None:
    """One line per node (as sinfo -N): its state, jobs and agent.

    Per node: the controller's state, the active jobs the controller places
    there, the job ids its inventory holds, its agent (answered, no-spurd,
    unreachable, not-inventoried) and how old its inventory is; then the nodes
    of each agent status as folded hostlists. Read as `audit` reads them (the
    same --inventory/--collect and controller options). Exit 0; 2 on errors.
    """
    from spurctl.render.nodes import render, screen_notes
    from spurctl.usecases.nodes import run_nodes

    fmt = opt.with_json(ctx, fmt, as_json)
    ack = opt.ack_version(ctx, ack_version)
    src = holdings.sources(nodes, snapshot, exclude)
    if no_header and fmt != NodesFormat.TABLE:
        fail("--no-header is for the table: drop --format (or drop --no-header)")
    listing = run_nodes(src, None if snapshot is not None else conn.connect())
    if no_header:
        from spurctl.render.terminal import warn_lines

        warn_lines(screen_notes(listing, ack))
    sys.stdout.write(render(listing, fmt, header=not no_header, ack=ack))


# -- explain ---------------------------------------------------------------------


@app.command(
    epilog="\b\nExamples:\n  spurctl explain gpu003 --inventory inventories.jsonl\n"
    "  spurctl explain gpu003 4711 --collect --format json",
)
@opt.connected(agents=True)
@opt.with_holdings()
def explain(
    ctx: typer.Context,
    node: opt.ExplainNodeArg,
    job: opt.ExplainJobArg = None,
    fmt: opt.ExplainFormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    journal_path: opt.AuditJournalOpt = None,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> None:
    """One node's decision, or one holding's, step by step.

    The controller's record, the node's evidence, the watermark and where it came
    from, which arm of Spur's reclaim predicate applies, every spurctl guard that
    stands over it, the finding as `audit` gives it, and exactly what `reclaim
    --node NODE` would send to which agent. Exit 0; 2 when neither the controller
    nor any inventory knows NODE.
    """
    from spurctl.act.journal import default_path
    from spurctl.render.explain import render
    from spurctl.usecases.explain import run_explain

    fmt = opt.with_json(ctx, fmt, as_json)
    journal = journal_path or default_path()
    names = opt.next_command("nodes", flags=opt.view_flags(holdings, conn))
    src = holdings.sources(None)
    doc = run_explain(node, job, src, conn.connect(), journal=journal, names_command=names)
    from spurctl.render.terminal import terminal_width

    sys.stdout.write(render(doc, fmt, width=terminal_width()))


# -- reclaim ---------------------------------------------------------------------


@app.command(
    epilog="\b\nExamples:\n  spurctl reclaim --node gpu017 --collect --dry-run\n"
    "  spurctl reclaim -w 'gpu[003-008]' --collect",
)
@opt.connected(agents=True)
@opt.with_holdings()
def reclaim(
    ctx: typer.Context,
    node: opt.ReclaimNodeOpt = None,
    exclude: opt.ExcludeOpt = None,
    job: opt.ReclaimJobOpt = None,
    dry_run: opt.ReclaimDryRunOpt = False,
    output: opt.ReclaimPlanOutputOpt = None,
    plan_file: opt.ReclaimPlanOpt = None,
    yes: opt.ReclaimYesOpt = False,
    journal_path: opt.ReclaimJournalOpt = None,
    settle: opt.ReclaimSettleOpt = DEFAULT_SETTLE_S,
    verify_inventory: opt.ReclaimVerifyInventoryOpt = False,
    concurrency: opt.ReclaimConcurrencyOpt = DEFAULT_CONCURRENCY,
    max_inventory_age: opt.ReclaimMaxInventoryAgeOpt = DEFAULT_MAX_INVENTORY_AGE_S,
    fmt: opt.ReclaimFormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
    ack_version: opt.AckVersionOpt = None,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> None:
    """Cancel the stranded holdings of these nodes, safely.

    Acts on the reclaimable findings of --node (or --nodes, -w: one option)
    only: each is re-checked against the controller just before its cancel is
    sent, journaled, and cancelled on that node alone (the agent's CancelJob
    with signal 0). Sent is not freed: the agent answers Ok even for a job it
    does not track, so a cancel counts as done only once a re-collect of its
    node (--collect, --verify-inventory) shows the job gone; otherwise the run
    prints the command that confirms it and exits 1.
    """
    from spurctl.render import reclaim as shown
    from spurctl.render.common import write_output
    from spurctl.sources.plan_file import load_plan
    from spurctl.usecases.reclaim import plan_document
    from spurctl.usecases.reclaim import reclaim as use_case

    fmt = opt.with_json(ctx, fmt, as_json)
    ack = opt.ack_version(ctx, ack_version)
    if output is not None and not dry_run:
        fail("-o saves the plan of a dry run: add --dry-run (then apply it with --plan FILE)")
    saved = None
    if plan_file is not None:
        if node or job:
            fail("--plan names its own nodes and jobs: drop --node/--job, or drop --plan")
        if dry_run:
            fail("--plan applies a saved plan: drop --dry-run, or drop --plan")
        saved = load_plan(plan_file)
        hostlist = saved.nodes
    else:
        hostlist = opt.one_hostlist(node or [])
    connection = conn.connect()
    # What the plan points at, for what these nodes hold and for the names the controller
    # knows: commands that read this very view.
    flags = opt.view_flags(holdings, conn)
    view_command = opt.next_command("audit", "--nodes", hostlist, flags=flags, exclude=exclude)
    done = use_case(
        hostlist,
        holdings.sources(hostlist, exclude=exclude),
        connection,
        show_plan=lambda prepared: shown.show_plan(prepared, fmt, ack, view_command),
        ask=shown.ask if sys.stdin.isatty() else None,
        jobs=job,
        journal_path=journal_path,
        max_inventory_age_s=max_inventory_age,
        dry_run=dry_run,
        yes=yes,
        settle=settle,
        concurrency=concurrency,
        verify_inventory=verify_inventory,
        saved=saved,
        names_command=opt.next_command("nodes", flags=flags),
        on_settle=shown.settling,
    )
    if output is not None:
        write_output(shown.plan_text(plan_document(done.prepared, hostlist)), output)
    shown.show_reclaimed(
        done, fmt, confirm_flags=opt.confirm_flags(holdings, conn), settle_s=settle
    )
    if done.error is not None:
        fail(done.error)
    raise typer.Exit(done.exit_status)


# -- journal ---------------------------------------------------------------------


@app.command(
    "journal",
    epilog="\b\nExamples:\n  spurctl journal --last 5\n  spurctl journal --run 20261202T1447\n"
    "  spurctl journal --node 'gpu[003-008]' --since 2h",
)
def journal_command(
    ctx: typer.Context,
    journal_path: opt.JournalFileOpt = None,
    last: opt.JournalLastOpt = 20,
    run: opt.JournalRunOpt = None,
    node: opt.JournalNodeOpt = None,
    exclude: opt.ExcludeOpt = None,
    since: opt.JournalSinceOpt = None,
    fmt: opt.JournalFormatOpt = ReclaimFormat.TABLE,
    as_json: opt.JsonOpt = False,
) -> None:
    """The runs reclaim and node-release journaled, newest first.

    Per run: its operator, when it began, the nodes, and how many cancels were
    sent (and of those, unconfirmed: no re-collect journaled the job gone),
    skipped and failed, and every intent without an outcome (an interrupted
    run: that cancel may or may not have gone out; check the node). A torn line
    is reported on stderr and skipped. --node (and -x) keeps the runs that touched
    those nodes, each counted for them alone; --since TIME (ISO 8601, or 2h, 30m
    back from now) the runs with a record since then. Exit 0, also when nothing has been
    journaled yet (that is said in one line): the journal is a record to read,
    not a check; exit 2 when it cannot be read or --run names no run.
    """
    from spurctl.act.journal import default_path
    from spurctl.render.journal import missing_sentence, print_one, print_runs
    from spurctl.usecases import journal_runs

    fmt = opt.with_json(ctx, fmt, as_json)
    if node is not None:
        from spurctl.hostlist import parse_scope

        parse_scope(node)  # a bad hostlist is a usage error before the journal is read
    opt.excluded(exclude)
    only = journal_runs.JournalFilter(node, exclude, since)
    view = journal_runs.filtered(journal_runs.load(journal_path or default_path()), only)
    if run is not None:
        if not view.exists:
            fail(missing_sentence(view))
        print_one(view, journal_runs.select(view.runs, run), fmt=fmt)
        return
    if not view.exists and fmt == "json":
        print(f"spurctl: {missing_sentence(view)}", file=sys.stderr)
    print_runs(view, view.runs[:last], fmt=fmt)


# -- checklist -------------------------------------------------------------------

checklist_app = typer.Typer(
    name="checklist",
    help="Operational checklists built from the live cluster.",
    epilog="\b\nExample:\n  spurctl checklist post-wipe --collect -o recycle.md",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(checklist_app)


@checklist_app.command("post-wipe")
@opt.connected()
@opt.with_holdings()
def checklist_post_wipe(
    ctx: typer.Context,
    nodes: opt.ChecklistNodesOpt = None,
    exclude: opt.ExcludeOpt = None,
    watermark: opt.ChecklistWatermarkOpt = None,
    verify: opt.ChecklistVerifyOpt = False,
    fmt: opt.ChecklistFormatOpt = ChecklistFormat.MARKDOWN,
    as_json: opt.JsonOpt = False,
    output: opt.ChecklistOutputOpt = None,
    ack_version: opt.AckVersionOpt = None,
    holdings: opt.HoldingOptions = opt.HoldingOptions(),
    conn: opt.ConnectionOptions = opt.ConnectionOptions(),
) -> None:
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
    from spurctl.render.checklist import print_on_terminal, render
    from spurctl.usecases.checklist import run_post_wipe

    fmt = opt.with_json(ctx, fmt, as_json)
    ack = opt.ack_version(ctx, ack_version)
    # Markdown unless it is for eyes: asked for by --format, or written to -o or a pipe.
    asked = getattr(ctx.get_parameter_source("fmt"), "name", "DEFAULT") == "COMMANDLINE"
    on_screen = not asked and not as_json and output is None and sys.stdout.isatty()
    src = holdings.sources(nodes, exclude=exclude)
    # The commands it prints collect and read as this run did.
    read = opt.controller_flags(conn) + (
        ["--watermark", str(watermark)] if watermark is not None else []
    )
    result = run_post_wipe(
        src, conn.connect(), watermark=watermark, verify=verify,
        collect_flags=opt.collect_flags(holdings), read_flags=read,
    )  # fmt: skip
    if on_screen:
        print_on_terminal(result, ack=ack)
    else:
        write_output(render(result, fmt), output)
    raise typer.Exit(ExitStatus.OK if result.ok else ExitStatus.ACTION_NEEDED)


# -- node inventory and collection -------------------------------------------------


@app.command("node-inventory")
def node_inventory(
    cgroup_root: opt.NodeInventoryCgroupRootOpt = None,
    proc_root: opt.NodeInventoryProcRootOpt = Path("/proc"),
    hostname: opt.NodeInventoryHostnameOpt = None,
    output: opt.NodeInventoryOutputOpt = None,
    state_dir: Annotated[
        Path,
        typer.Option(
            "--state-dir",
            help="spurd's state directory, whose runtime/ holds the spurstepd session "
            "descriptors (Spur #754); the one each live spurstepd names is read too.",
            metavar="DIR",
        ),
    ] = STATE_DIR,
) -> None:
    """What this node holds, as one JSON line.

    Prints a spurctl.inventory/v1 document. Run it on the compute node as
    root: other users' processes are unreadable otherwise.

    \b
    Example:
      spurctl node-inventory -o /tmp/inventory.json
    """
    from spurctl.render.collect import no_agent_running, unreadable_environments
    from spurctl.sources.documents import dump_json, inventory_to_dict
    from spurctl.sources.node_scan import scan_this_node

    inventory, denied = scan_this_node(cgroup_root, proc_root, hostname, state_dir=state_dir)
    if denied:
        print(unreadable_environments(denied, as_root=os.geteuid() == 0), file=sys.stderr)
    if inventory.agent_checked and inventory.agent is None:
        print(no_agent_running(inventory, str(proc_root)), file=sys.stderr)
    write_output(dump_json(inventory_to_dict(inventory), indent=None) + "\n", output)


@app.command("collect")
def collect_command(
    ctx: typer.Context,
    nodes: opt.CollectNodesOpt,
    exclude: opt.ExcludeOpt = None,
    command: opt.CollectCommandOpt = DEFAULT_COMMAND,
    fanout: opt.CollectFanoutOpt = 64,
    node_timeout: opt.CollectNodeTimeoutOpt = None,
    timeout: opt.CollectOldTimeoutOpt = None,
    output: opt.CollectOutputOpt = None,
    topology: opt.CollectTopologyOpt = None,
    remote_command: opt.RemoteCommandOpt = DEFAULT_REMOTE_COMMAND,
    ssh: opt.SshOpt = None,
    ship_scanner: opt.ShipScannerOpt = False,
) -> None:
    """Gather many nodes' inventories in parallel.

    Writes JSON Lines, one inventory per node. Runs --command once per node
    (%h is the node name), or with --topology runs --remote-command on every
    node through ClusterShell's gateways. A node that fails, times out, prints
    no valid inventory or sits behind a gateway that failed gets a record with
    "error" set. Exit 0 when every node answered, 1 when any failed.

    \b
    Example:
      spurctl collect --nodes 'gpu[001-128]' -o inventories.jsonl
      spurctl collect -w 'gpu[0001-8000]' --topology /etc/clustershell/topology.conf
      spurctl collect -w 'gpu[001-128]' --ship-scanner   # nodes without spurctl
    """
    from spurctl.hostlist import loose_key, parse_scope
    from spurctl.render.collect import summarize
    from spurctl.sources.collect import collect
    from spurctl.sources.documents import dump_json, inventory_to_dict

    limit = opt.node_timeout(node_timeout, timeout)
    # The same defaults, checks and command as an audit's --collect: one way to read them.
    command = opt.collect_command(ctx, command, topology)
    src = opt.HoldingOptions(
        None, True, command, fanout, topology, remote_command, ssh, ship_scanner
    ).sources(nodes, exclude=exclude)
    left_out = {loose_key(n) for n in opt.excluded(exclude)}
    targets = sorted(n for n in parse_scope(nodes) if loose_key(n) not in left_out)
    if not targets:
        fail(f"-x {exclude} leaves out every node of --nodes {nodes}: nothing to collect")
    results = collect(
        targets, command=src.command, fanout=src.fanout, timeout=limit,
        tree=src.tree, ship_scanner=src.ship_scanner,
    )  # fmt: skip
    write_output(
        "".join(dump_json(inventory_to_dict(inv), indent=None) + "\n" for inv in results),
        output,
    )
    print(summarize(results), file=sys.stderr)
    if any(inv.error is not None for inv in results):
        raise typer.Exit(ExitStatus.ACTION_NEEDED)


app.command(repair.NAME, epilog=repair.EPILOG)(repair.command)
app.command(drain.NAME, epilog=drain.EPILOG)(drain.command)
app.command(resume.NAME, epilog=resume.EPILOG)(resume.command)

# -- demo ------------------------------------------------------------------------


@app.command()
def demo(
    serve: opt.DemoServeOpt = False,
    scenario: opt.DemoScenarioOpt = opt.DemoScenario.INCIDENT,
) -> None:
    """Audit and reclaim a simulated cluster, end to end.

    Starts a simulated Spur cluster (spurctld plus one spurd per node) on
    127.0.0.1, loaded with the PR #623 incident, and walks through audit,
    reclaim --dry-run, reclaim and audit again with the real code. No setup,
    no root; its files live in a temp dir removed on exit.

    \b
    Examples:
      spurctl demo
      spurctl demo --serve    # then point spurctl at it by hand
      spurctl demo --serve --scenario post-wipe
    """
    from spurctl.demo import command

    command(keep_up=serve, scenario=scenario.value)


def main() -> None:
    """Console entry point: one clear line and exit 2 for every operator error."""
    args = sys.argv[1:]
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    if debug:
        # `spurctl audit --debug` means what `spurctl --debug audit` does.
        args = ["--debug", *(a for a in args[:end] if a != "--debug"), *args[end:]]
    else:
        # grpc's C core logs handshake and connection trouble to stderr itself; the
        # error line says it in the operator's words (set before grpc is imported).
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    sink.install()  # every line spurctl writes, redacted (render/sink.py)
    if "_SPURCTL_COMPLETE" in os.environ:
        # The scripts in completions/ call back here; Typer registers its shells only
        # when it adds its own --install-completion, which spurctl leaves out.
        from typer.completion import completion_init

        completion_init()
    try:
        code = app(args=args, standalone_mode=False)
    except (KeyboardInterrupt, Exception) as exc:  # one line, never a bare traceback
        from spurctl.render.terminal import report

        sys.exit(report(exc, debug=_state["debug"]))
    # Without standalone mode Typer returns typer.Exit's code, or what the command returned.
    heap.exit_now(code if isinstance(code, int) else ExitStatus.OK)


# -- node-release ----------------------------------------------------------------


@app.command("node-release")
def node_release(
    job: opt.NodeReleaseJobOpt,
    started_at: opt.NodeReleaseStartedAtOpt,
    dry_run: opt.NodeReleaseDryRunOpt = False,
    grace: opt.NodeReleaseGraceOpt = 10.0,
    cgroup_root: opt.NodeReleaseCgroupRootOpt = None,
    proc_root: opt.NodeReleaseProcRootOpt = Path("/proc"),
    journal_path: opt.NodeReleaseJournalOpt = None,
) -> None:
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
    from spurctl.act import journal
    from spurctl.act.node_release import run

    done = run(
        job,
        opt.started_at(started_at),
        dry_run=dry_run,
        grace_s=grace,
        cgroup_root=cgroup_root,
        proc_root=proc_root,
        journal_path=journal_path or journal.default_path(),
        out=print,
    )
    raise typer.Exit(ExitStatus.OK if done is None or done.complete else ExitStatus.ACTION_NEEDED)
