"""The spurctl command line: parse options, call the library, pick a renderer.

Heavy modules (grpc, protobuf, ClusterShell) are imported inside the commands
that use them, so `spurctl --help` and `--version` stay fast.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from spurctl import __version__
from spurctl.errors import SpurctlError, redact
from spurctl.reclaim import DEFAULT_CONCURRENCY
from spurctl.sources.collect import DEFAULT_COMMAND

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from spurctl.audit import AuditInputs
    from spurctl.model import AuditReport, Inventory
    from spurctl.sources.settings import Connection

app = typer.Typer(
    name="spurctl",
    help="Audit Spur node agents against the controller; reclaim what is stranded.\n\n"
    "Keep a Spur GPU cluster honest: compare what every node agent holds with the "
    "controller's view, explain each discrepancy, and reclaim stranded allocations safely.",
    epilog="\b\nExample:\n  spurctl audit --nodes 'gpu[001-128]' --collect",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state = {"debug": False}


def _version_callback(value: bool) -> None:
    if value:
        print(f"spurctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show a traceback on errors (secrets stay redacted).")
    ] = False,
) -> None:
    _state["debug"] = debug


def fail(message: str) -> NoReturn:
    raise SpurctlError(message)


# -- connection options shared by every command that talks to the cluster -----

ControllerOpt = Annotated[
    str | None,
    typer.Option(
        "--controller",
        envvar="SPUR_CONTROLLER_ADDR",
        help="Controller URL(s), comma-separated for HA.",
        show_envvar=True,
    ),
]
ConfOpt = Annotated[
    Path | None,
    typer.Option("--conf", envvar="SPUR_CONF", help="spur.conf (TOML).", show_envvar=True),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="SPUR_AUTH_TOKEN",
        help="Bearer token (JWT); default ~/.spur/token if mode 0600.",
        show_envvar=True,
        show_default=False,
    ),
]
JwtKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--jwt-key-file",
        envvar="SPUR_JWT_KEY_FILE",
        help="Cluster key file; mints the agent credential for reclaims.",
        show_envvar=True,
    ),
]
AgentPortOpt = Annotated[
    int | None, typer.Option("--agent-port", help="Agent port (default spur.conf, else 6818).")
]
AgentMapOpt = Annotated[
    Path | None,
    typer.Option("--agent-map", help='JSON/TOML object: node name -> "host:port".'),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Deadline of every RPC, seconds.", min=0.001)
]
TlsCaOpt = Annotated[
    Path | None, typer.Option("--tls-ca", help="CA bundle for https:// controller URLs.")
]


def connection(
    *,
    controller: str | None,
    conf: Path | None,
    token: str | None,
    jwt_key_file: Path | None = None,
    agent_port: int | None = None,
    agent_map: Path | None = None,
    timeout: float = 10.0,
    tls_ca: Path | None = None,
) -> Connection:
    from spurctl.sources.settings import connect_settings

    return connect_settings(
        controller=controller,
        conf_path=conf,
        token=token,
        jwt_key_file=jwt_key_file,
        agent_port=agent_port,
        agent_map=agent_map,
        timeout=timeout,
        tls_ca=tls_ca,
    )


def write_output(text: str, output: Path | None) -> None:
    """Write to FILE atomically (never a half-written document), or stdout."""
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        return
    import os
    import tempfile

    directory = output.parent if str(output.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{output.name}.")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, output)
    except OSError as exc:
        raise SpurctlError(f"cannot write {output}: {exc.strerror or exc}") from None


# -- snapshot --------------------------------------------------------------------


@app.command(
    epilog="\b\nExample:\n  spurctl snapshot -o /var/tmp/spur-before-upgrade.json",
)
def snapshot(
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to save the snapshot.")],
    controller: ControllerOpt = None,
    conf: ConfOpt = None,
    token: TokenOpt = None,
    timeout: TimeoutOpt = 10.0,
    tls_ca: TlsCaOpt = None,
) -> None:
    """Save the controller's view for offline audits.

    Jobs, nodes, watermark and completeness, as one spurctl.snapshot/v1
    document; `spurctl audit --snapshot FILE` reaches the same findings from it.
    """
    from spurctl.model import Watermark, WatermarkSource
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.documents import dump_json, snapshot_to_dict

    conn = connection(controller=controller, conf=conf, token=token, timeout=timeout, tls_ca=tls_ca)
    with ControllerClient(conn) as client:
        view = client.view()
    watermark = Watermark(view.estimated_watermark(), WatermarkSource.ESTIMATED)
    write_output(dump_json(snapshot_to_dict(view, watermark)) + "\n", output)
    state = "complete" if view.complete else f"INCOMPLETE ({len(view.jobs)} of {view.jobs_total})"
    print(
        f"saved {len(view.jobs):,} jobs and {len(view.nodes):,} nodes from {view.address} "
        f"(view {state}) to {output}",
        file=sys.stderr,
    )


# -- audit -----------------------------------------------------------------------

NodesOpt = Annotated[
    str | None,
    typer.Option("--nodes", help="Limit to these nodes (Slurm hostlist, e.g. gpu[001-128,200])."),
]
InventoryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--inventory",
        help="Inventory file, directory of files, or - (JSON or JSON Lines). Repeatable.",
    ),
]
CollectOpt = Annotated[
    bool, typer.Option("--collect", help="Gather inventories live (see `spurctl collect`).")
]
CommandOpt = Annotated[
    str,
    typer.Option(
        "--command",
        help="With --collect: command run per node, %h = node name.",
    ),
]
FanoutOpt = Annotated[int, typer.Option("--fanout", help="With --collect: nodes at once.", min=1)]
FormatOpt = Annotated[
    str, typer.Option("--format", help="table, json, csv, markdown or prometheus.")
]


@dataclass
class Sources:
    """Where an audit's two halves come from, as the operator chose them."""

    nodes: str | None
    inventory: list[str] | None
    collect: bool
    command: str
    fanout: int
    snapshot: Path | None = None
    # None: a progress bar when stderr is a terminal; a live watch view turns it off.
    progress: bool | None = None


def gather_holdings(src: Sources, view_nodes: Iterable[str], timeout: float) -> list[Inventory]:
    """Inventories from files or a live collect; exactly one of the two."""
    from spurctl.audit import load_inventories

    if src.collect and src.inventory:
        fail("use --inventory or --collect, not both")
    if src.inventory:
        return load_inventories(src.inventory)
    if src.collect:
        from spurctl.sources.collect import collect

        targets = _expand_hostlist(src.nodes) if src.nodes else sorted(view_nodes)
        return collect(
            targets,
            command=src.command,
            fanout=src.fanout,
            timeout=timeout,
            progress=src.progress,
        )
    fail(
        "no inventories: pass --inventory FILE|DIR|- or --collect "
        "(no Spur RPC lists what an agent holds)"
    )


def run_audit_sources(
    src: Sources, conn: Connection | None, *, watermark: int | None, include_healthy: bool
) -> tuple[AuditReport, AuditInputs]:
    from spurctl.audit import audit, gather
    from spurctl.hostlist import parse_scope

    scope = parse_scope(src.nodes) if src.nodes else None
    if src.snapshot is not None:
        from spurctl.sources.documents import read_snapshot

        view, saved_watermark = read_snapshot(src.snapshot)
        holdings = gather_holdings(src, view.nodes, 60.0)
        inputs = gather(
            view,
            holdings,
            client=None,
            watermark_flag=watermark,
            snapshot_watermark=saved_watermark,
            scope=scope,
        )
    else:
        from spurctl.audit import read_view_and_inventories
        from spurctl.sources.controller import ControllerClient

        assert conn is not None
        with ControllerClient(conn) as client:
            if src.inventory and not src.collect:
                view, holdings = read_view_and_inventories(client, src.inventory)
            else:
                view = client.view()
                holdings = gather_holdings(src, view.nodes, max(conn.timeout, 60.0))
            inputs = gather(
                view,
                holdings,
                client=client,
                watermark_flag=watermark,
                scope=scope,
                not_found_doubt=conn.not_found_doubt(),
            )
    return audit(inputs, include_healthy=include_healthy), inputs


@app.command(
    epilog="\b\nExamples:\n  spurctl audit --nodes 'gpu[001-128]' --inventory inv.jsonl\n"
    "  spurctl audit --collect --watch",
)
def audit(
    nodes: NodesOpt = None,
    inventory: InventoryOpt = None,
    collect: CollectOpt = False,
    command: CommandOpt = DEFAULT_COMMAND,
    fanout: FanoutOpt = 64,
    snapshot: Annotated[
        Path | None,
        typer.Option("--snapshot", help="Audit a saved controller snapshot instead of live."),
    ] = None,
    watermark: Annotated[
        int | None, typer.Option("--watermark", help="Override the estimated watermark.")
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list healthy rows.")] = False,
    fmt: FormatOpt = "table",
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Re-audit every --interval and show how long each finding has lasted; "
            "a reclaim finding that outlives two agent heartbeats (60 s) is STRANDED.",
        ),
    ] = False,
    interval: Annotated[
        float | None,
        typer.Option(
            "--interval",
            help="With --watch: seconds between rounds.  [default: 30, one heartbeat]",
            min=0.001,
            show_default=False,
        ),
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds", help="With --watch: stop after N rounds (for scripts and tests).", min=1
        ),
    ] = None,
    controller: ControllerOpt = None,
    conf: ConfOpt = None,
    token: TokenOpt = None,
    timeout: TimeoutOpt = 10.0,
    tls_ca: TlsCaOpt = None,
) -> None:
    """Compare the controller's view with what agents hold.

    Prints every finding with the reason for it. Exit 0: nothing needs action;
    1: findings need action (reclaim or investigate); 2: error.

    With --watch, re-audits every --interval and shows how long each finding has
    lasted; a reclaim finding that outlives two agent heartbeats (60 s) is
    STRANDED: the controller will not release it by itself.
    """
    from spurctl.render.audit import check_format, print_audit

    check_format(fmt)
    src = Sources(nodes, inventory, collect, command, fanout, snapshot)
    if watch:
        _check_watch(src, fmt)
    elif interval is not None or rounds is not None:
        fail("--interval and --rounds only apply with --watch")
    conn = None
    if snapshot is None:
        conn = connection(
            controller=controller, conf=conf, token=token, timeout=timeout, tls_ca=tls_ca
        )
    if watch:
        status = watch_audit(
            src,
            conn,
            watermark=watermark,
            include_healthy=show_all,
            interval=WATCH_INTERVAL if interval is None else interval,
            rounds=rounds,
        )
        raise typer.Exit(status)
    report, _ = run_audit_sources(src, conn, watermark=watermark, include_healthy=show_all)
    print_audit(report, fmt)
    raise typer.Exit(1 if report.needs_action else 0)


# -- audit --watch -----------------------------------------------------------------

WATCH_INTERVAL = 30.0  # one agent heartbeat: a round sooner rarely shows anything new


def _check_watch(src: Sources, fmt: str) -> None:
    if fmt != "table":
        fail(f"--watch draws a table; --format {fmt} is for one-shot audits (drop --watch)")
    if src.snapshot is not None:
        fail("--watch follows the live controller; a saved --snapshot never changes")
    if src.inventory and "-" in src.inventory:
        fail(
            "--watch re-reads the inventories every round and standard input (-) can be "
            "read only once: write them to a file (spurctl collect -o FILE)"
        )


def watch_audit(
    src: Sources,
    conn: Connection | None,
    *,
    watermark: int | None,
    include_healthy: bool,
    interval: float,
    rounds: int | None,
) -> int:
    """Audit every `interval` seconds until Ctrl-C or `rounds`; return the last round's status.

    A terminal gets one view redrawn in place, anything else one plain block
    per round. A failing first round is an error (exit 2); a later one is shown
    and the watch goes on, since a controller failover or a half re-collected
    file is exactly what a watch should ride out.
    """
    from dataclasses import replace

    from spurctl.decide.tracker import Tracker, WatchRound, every
    from spurctl.model import utcnow
    from spurctl.render.watch import render_watch_round, watch_renderable

    tty = sys.stdout.isatty()
    src = replace(src, progress=False) if tty else src
    tracker = Tracker()
    state: WatchRound | None = None

    def audit_round(number: int) -> WatchRound:
        try:
            report, inputs = run_audit_sources(
                src, conn, watermark=watermark, include_healthy=include_healthy
            )
        except SpurctlError as exc:
            if state is None:
                raise
            return replace(state, number=number, at=utcnow(), error=redact(str(exc)))
        evidence = {node: inv.collected_at for node, inv in inputs.inventories.items()}
        tracked = tracker.update(report.findings, report.taken_at, evidence_at=evidence)
        return WatchRound(number, report.taken_at, interval, report, tracked, number)

    def rounds_of(show: Callable[[WatchRound], None], before: Callable[[], None]) -> None:
        nonlocal state
        for number in every(interval, rounds):
            if number > 1:
                before()
            state = audit_round(number)
            show(state)

    try:
        if tty:
            from rich.console import Console
            from rich.live import Live

            console = Console(highlight=False, emoji=False, markup=False)
            with Live(console=console, auto_refresh=False) as live:

                def draw(s: WatchRound) -> None:
                    live.update(watch_renderable(s, live=True), refresh=True)

                def running() -> None:
                    if state is not None:
                        live.update(watch_renderable(state, live=True, running=True), refresh=True)

                try:
                    rounds_of(draw, running)
                finally:
                    if state is not None:
                        # Leave the last round on screen, not "round N+1 running".
                        live.update(watch_renderable(state), refresh=True)
        else:

            def block(s: WatchRound) -> None:
                sys.stdout.write(("\n" if s.number > 1 else "") + render_watch_round(s))
                sys.stdout.flush()

            rounds_of(block, lambda: None)
    except KeyboardInterrupt:
        if state is None:
            raise
    assert state is not None
    if state.error is not None:
        fail(f"the last round failed: {state.error}")
    return state.exit_status


# -- reclaim ---------------------------------------------------------------------


@app.command(
    epilog="\b\nExample:\n  spurctl reclaim --node gpu017 --collect --dry-run",
)
def reclaim(
    node: Annotated[
        str, typer.Option("--node", help="Nodes to act on (Slurm hostlist, e.g. gpu[017,020]).")
    ],
    job: Annotated[
        list[int] | None, typer.Option("--job", help="Only these job ids. Repeatable.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan; send nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not prompt.")] = False,
    inventory: InventoryOpt = None,
    collect: CollectOpt = False,
    command: CommandOpt = DEFAULT_COMMAND,
    fanout: FanoutOpt = 64,
    journal_path: Annotated[
        Path | None,
        typer.Option(
            "--journal", help="Journal file (default $XDG_STATE_HOME/spurctl/journal.jsonl)."
        ),
    ] = None,
    settle: Annotated[
        float,
        typer.Option(
            "--settle", help="With --collect: seconds to wait before re-collecting.", min=0
        ),
    ] = 5.0,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Nodes cancelled at once.", min=1)
    ] = DEFAULT_CONCURRENCY,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    controller: ControllerOpt = None,
    conf: ConfOpt = None,
    token: TokenOpt = None,
    jwt_key_file: JwtKeyOpt = None,
    agent_port: AgentPortOpt = None,
    agent_map: AgentMapOpt = None,
    timeout: TimeoutOpt = 10.0,
    tls_ca: TlsCaOpt = None,
) -> None:
    """Cancel the stranded holdings of these nodes, safely.

    Acts on the reclaimable findings of --node only: each is re-checked against
    the controller just before its cancel is sent, journaled, and cancelled on
    that node alone (the agent's CancelJob with signal 0).
    """
    from spurctl import reclaim as rc
    from spurctl.act.journal import Journal, default_path
    from spurctl.hostlist import parse_scope
    from spurctl.render.reclaim import print_plan, print_run, print_unresolved

    if fmt not in ("table", "json"):
        fail(f"unknown format {fmt!r} for reclaim; use table or json")
    scope = parse_scope(node)
    conn = connection(
        controller=controller,
        conf=conf,
        token=token,
        jwt_key_file=jwt_key_file,
        agent_port=agent_port,
        agent_map=agent_map,
        timeout=timeout,
        tls_ca=tls_ca,
    )
    src = Sources(node, inventory, collect, command, fanout)
    report, inputs = run_audit_sources(src, conn, watermark=None, include_healthy=False)
    unknown_nodes = sorted(n for n in scope if n not in inputs.view.nodes)
    if unknown_nodes:
        fail(
            f"unknown node(s) {', '.join(unknown_nodes[:5])}: the controller has no such node; "
            "check the names with `spurctl audit --all`"
        )
    entries = rc.plan(report, scope, job, conn.agent_address)
    path = journal_path or default_path()
    from spurctl.act.journal import unresolved

    stale = unresolved(path)
    if fmt == "table":
        print_unresolved(stale)
        print_plan(entries, report)
    else:  # stdout is the JSON document; the warning still has to reach the operator
        print_unresolved(stale, file=sys.stderr)
    if dry_run:
        if fmt == "json":
            print_run(None, entries, report, fmt="json", dry_run=True)
        raise typer.Exit(0)
    if not entries:
        if fmt == "json":
            print_run(rc.ReclaimRun(), entries, report, fmt="json")
        raise typer.Exit(0)
    if conn.jwt_key is None and (conn.conf.auth_mode or "").lower() == "required":
        fail(
            "spur.conf says [auth] mode = required but no cluster key is configured: pass "
            "--jwt-key-file, set SPUR_JWT_KEY_FILE, or set [auth] jwt_key"
        )
    if not yes:
        live = sum(1 for e in entries if e.finding.live)
        if not sys.stdin.isatty():
            fail("refusing to reclaim without --yes: standard input is not a terminal")
        question = (
            f"Send {len(entries)} cancel(s) to {len({e.node for e in entries})} node(s), "
            f"killing {live} live run(s)?"
        )
        if not typer.confirm(question, default=False):
            print("nothing sent", file=sys.stderr)
            raise typer.Exit(1)
    run = rc.send(
        entries,
        conn,
        journal_path=path,
        watermark=inputs.watermark.value,
        concurrency=concurrency,
        unresolved=stale,
    )
    # After a Ctrl-C the operator wants the summary now, not a settle and a re-collect.
    if collect and not run.interrupted and any(o.result is rc.Result.SENT for o in run.outcomes):
        import time

        from spurctl.sources.collect import collect as collect_nodes

        time.sleep(settle)
        touched = sorted({o.entry.node for o in run.outcomes if o.result is rc.Result.SENT})
        again = collect_nodes(touched, command=command, fanout=fanout, timeout=60.0)
        held_now = {inv.node: {h.job_id for h in inv.held} for inv in again if not inv.error}
        still_held = rc.verify(run, held_now, settle)
        with Journal(path) as journal:
            for o in still_held:
                journal.outcome(
                    o.entry.node,
                    o.entry.job_id,
                    o.entry.finding.kind.value,
                    o.result.value,
                    o.detail,
                )
    print_run(run, entries, report, fmt=fmt)
    raise typer.Exit(0 if run.ok else 1)


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
def checklist_post_wipe(
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes",
            help="Nodes to check (Slurm hostlist). With --verify: the nodes the first run said "
            "to recycle, as its verify command lists them (required).",
        ),
    ] = None,
    inventory: InventoryOpt = None,
    collect: CollectOpt = False,
    command: CommandOpt = DEFAULT_COMMAND,
    fanout: FanoutOpt = 64,
    watermark: Annotated[
        int | None,
        typer.Option(
            "--watermark",
            help="The controller's next job id, if known (default: max tracked id + 1, "
            "at least spur.conf's first_job_id).",
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Re-read the controller and the --nodes' inventories and tick every step "
            "that now holds.",
        ),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", help="markdown or json.")] = "markdown",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
    controller: ControllerOpt = None,
    conf: ConfOpt = None,
    token: TokenOpt = None,
    timeout: TimeoutOpt = 10.0,
    tls_ca: TlsCaOpt = None,
) -> None:
    """Which agents to recycle after a controller wipe, and how.

    Every node still holding a pre-wipe run (an id the wiped controller did not
    issue, or has since reissued to another run) must be recycled before
    submissions resume. Markdown (checkboxes, to paste into an incident document) or --format json
    (spurctl.checklist/v1). --verify re-reads the controller and the inventories of the
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
    from spurctl.checklist import post_wipe
    from spurctl.hostlist import parse_scope
    from spurctl.render.checklist import check_format, render
    from spurctl.sources.controller import ControllerClient

    check_format(fmt)
    if verify and not nodes:
        fail(
            "--verify needs --nodes: the nodes the first run said to recycle "
            "(its verify command lists them)"
        )
    scope = parse_scope(nodes) if nodes else None
    conn = connection(controller=controller, conf=conf, token=token, timeout=timeout, tls_ca=tls_ca)
    src = Sources(nodes, inventory, collect, command, fanout)
    with ControllerClient(conn) as client:
        view = client.view()
        holdings = gather_holdings(src, view.nodes, max(conn.timeout, 60.0))
        result = post_wipe(
            view,
            holdings,
            confirm=client.confirm,
            scope=scope,
            watermark_flag=watermark,
            first_job_id=conn.conf.first_job_id,
            verify=verify,
        )
    write_output(render(result, fmt), output)
    raise typer.Exit(0 if result.ok else 1)


# -- node inventory and collection -------------------------------------------------


@app.command("node-inventory")
def node_inventory(
    cgroup_root: Annotated[
        Path, typer.Option("--cgroup-root", help="spurd's cgroup v2 root; absent is fine.")
    ] = Path("/sys/fs/cgroup/spur"),
    proc_root: Annotated[Path, typer.Option("--proc-root", help="The node's /proc.")] = Path(
        "/proc"
    ),
    hostname: Annotated[
        str | None,
        typer.Option(
            "--hostname",
            help="Node name to report (default: this host's name, as spurd registers it).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the document here, not stdout.")
    ] = None,
) -> None:
    """What this node holds, as one JSON line.

    Prints a spurctl.inventory/v1 document. Run it on the compute node as
    root: other users' processes are unreadable otherwise.

    \b
    Example:
      spurctl node-inventory -o /tmp/inventory.json
    """
    import socket

    from spurctl.sources.documents import dump_json, inventory_to_dict
    from spurctl.sources.node_scan import scan

    denied = 0

    def on_skip(path: Path, exc: Exception) -> None:
        nonlocal denied
        if isinstance(exc, PermissionError) and path.name == "environ":
            denied += 1

    # spurd registers under gethostname() unless started with --hostname.
    inventory = scan(cgroup_root, proc_root, hostname or socket.gethostname(), on_skip=on_skip)
    if denied:
        print(
            f"spurctl: warning: the environment of {denied} process(es) could not be read "
            "(permission denied); jobs only they belong to are missing. Run as root.",
            file=sys.stderr,
        )
    write_output(dump_json(inventory_to_dict(inventory), indent=None) + "\n", output)


@app.command("collect")
def collect_command(
    nodes: Annotated[
        str,
        typer.Option("--nodes", help="Hostlist of the nodes, e.g. gpu[001-128,200]."),
    ],
    command: Annotated[
        str,
        typer.Option(
            "--command",
            help="Command run locally once per node, %h replaced by the node name; "
            "it must print the node's inventory.",
        ),
    ] = DEFAULT_COMMAND,
    fanout: Annotated[
        int, typer.Option("--fanout", help="How many commands run at once.", min=1)
    ] = 64,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", help="Seconds a node's command may run before it is killed.", min=0.001
        ),
    ] = 60.0,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write JSON Lines here, not stdout.")
    ] = None,
) -> None:
    """Gather many nodes' inventories in parallel.

    Writes JSON Lines, one inventory per node. Runs --command once per node
    (%h is the node name). A node that fails, times out or prints no valid
    inventory gets a record with "error" set. Exit 0 when every node
    answered, 1 when any failed.

    \b
    Example:
      spurctl collect --nodes 'gpu[001-128]' -o inventories.jsonl
    """
    from spurctl.sources.collect import collect, summarize
    from spurctl.sources.documents import dump_json, inventory_to_dict

    names = _expand_hostlist(nodes)
    results = collect(names, command=command, fanout=fanout, timeout=timeout)
    write_output(
        "".join(dump_json(inventory_to_dict(inv), indent=None) + "\n" for inv in results),
        output,
    )
    print(summarize(results), file=sys.stderr)
    if any(inv.error is not None for inv in results):
        raise typer.Exit(1)


def _expand_hostlist(hostlist: str) -> list[str]:
    from spurctl.hostlist import parse_scope
    from spurctl.sources.collect import is_safe_node_name

    names = sorted(parse_scope(hostlist))
    unsafe = [n for n in names if not is_safe_node_name(n)]
    if unsafe:
        raise SpurctlError(
            f"--nodes: {unsafe[0]!r} is not a host name (letters, digits, '.', '-', '_')"
        )
    return names


# -- demo ------------------------------------------------------------------------


@app.command()
def demo(
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Skip the walkthrough: keep the incident cluster up until Ctrl-C and print "
            "how to point spurctl at it.",
        ),
    ] = False,
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
    """
    from spurctl import demo as walkthrough

    if serve:
        walkthrough.serve()
        return
    if not walkthrough.run().ok:
        fail("the demo did not close the loop (see above); rerun with --debug and report it")


def _usage_error(exc: Exception) -> str | None:
    """One line for a Click usage error (unknown option, missing or bad value), else None.

    Click's own report is three lines (usage, a hint, the error); the contract
    promises one. Typer vendors Click in recent versions and used Click itself before.
    """
    import importlib

    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            click_exceptions = importlib.import_module(module)
        except ImportError:
            continue
        if not isinstance(exc, click_exceptions.UsageError):
            return None
        no_args = getattr(click_exceptions, "NoArgsIsHelpError", None)
        if no_args is not None and isinstance(exc, no_args):
            exc.show()  # bare `spurctl`: the help is the answer
            return ""
        ctx = getattr(exc, "ctx", None)
        where = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
        return f"{exc.format_message().rstrip('.')}{where}"
    return None


def main() -> None:
    """Console entry point: one clear line and exit 2 for every operator error."""
    try:
        code = app(standalone_mode=False)
    except SpurctlError as exc:
        if _state["debug"]:
            import traceback

            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(f"spurctl: error: {redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("spurctl: interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.Abort:
        print("spurctl: aborted", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # an operator never gets a bare traceback without --debug
        usage = _usage_error(exc)
        if usage is not None:
            if usage:
                print(f"spurctl: error: {redact(usage)}", file=sys.stderr)
            sys.exit(2)
        if _state["debug"]:
            import traceback

            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(
            f"spurctl: internal error: {type(exc).__name__}: {redact(str(exc))} "
            "(rerun with --debug for a traceback and report it)",
            file=sys.stderr,
        )
        sys.exit(2)
    # Without standalone mode Typer returns typer.Exit's code, or what the command returned.
    sys.exit(code if isinstance(code, int) else 0)
