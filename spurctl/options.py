"""The option groups every command shares, declared once: scope, output, connection, holdings.

A command module (spurctl/commands/) lists its own options and stacks the groups
it needs: `@scoped()` hands it one parsed `Scope` (-w/--nodes/--node and -x),
`@connected()` one `ConnectionOptions` (resolved with spur.conf and the
environment only when the command needs a controller), `@with_holdings()` one
`HoldingOptions` (where the agents' holdings come from). The output options (-o,
--format/--json, --no-header, --ack-version) are declared here and named by the
commands that print. The flag builders at the end turn the groups back into the
argv words a printed next command carries.
"""

from __future__ import annotations

import enum
import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from spurctl.defaults import DEFAULT_COMMAND, DEFAULT_LOCK_WAIT_S, DEFAULT_REMOTE_COMMAND
from spurctl.errors import SpurctlError
from spurctl.option_defaults import SOURCE_OPTIONS, configured
from spurctl.option_values import DAY_S, as_flags, note_implied, number_option
from spurctl.option_values import ChangeOptions as ChangeOptions
from spurctl.option_values import journal_at as journal_at
from spurctl.output_words import output_file, output_path
from spurctl.render.common import choose
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.user_config import context_flags

if TYPE_CHECKING:
    from spurctl.sources.settings import Connection
    from spurctl.sources.tree import Tree

# Where --help lists each group's options.
CONNECTION = "Connection"
HOLDINGS = "Holdings"
SCOPE = "Nodes"
OUTPUT = "Output"

Command = TypeVar("Command", bound=Callable[..., int | None])
_CTX = "ctx"
Group = TypeVar("Group")


def _option_group(
    param: str,
    options: list[tuple[str, Any, Any]],
    build: Callable[..., Group],
    *,
    first: bool = False,
    in_place: bool = False,
) -> Callable[[Command], Command]:
    """Add `options` to a command's own, handed to it as one `param` built by `build`.

    Typer reads the signature given here (the command's options, then these; with
    `first`, these first; with `in_place`, these where the command declares `param`);
    the command receives `build(**those options)` instead. Groups stack.
    """

    def decorate(command: Command) -> Command:
        own = inspect.signature(command, eval_str=True)
        hints = typing.get_type_hints(command, include_extras=True)
        kept = [p for name, p in own.parameters.items() if name != param]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
            for name, a, d in options
        ]
        # Typer hands one Context to a command: the group reads it (where each value
        # came from) and passes it on when the command, or a group under it, takes it.
        passes_ctx = _CTX in own.parameters
        context = inspect.Parameter(_CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> int | None:
            ctx = kwargs[_CTX] if passes_ctx else kwargs.pop(_CTX)
            given = {name: kwargs.pop(name) for name, _, _ in options}
            values = configured(ctx, given, options)
            note_implied(ctx, given, values)
            group = build(**values)
            return command(**{param: group}, **kwargs)

        mine = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept]
        if not passes_ctx:
            mine.insert(0, context)
        if in_place:
            at = list(own.parameters).index(param) + (not passes_ctx)
            params = mine[:at] + added + mine[at:]
        else:
            params = added + mine if first else mine + added
        if first and passes_ctx:  # the Context leads whatever the order
            params.sort(key=lambda p: p.name != _CTX)
        wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            **{n: h for n, h in hints.items() if n not in (param, "return")},
            **{name: a for name, a, _ in options},
            _CTX: typer.Context,
            "return": int | None,
        }
        del wrapper.__wrapped__  # Typer must read the signature above, not the command's
        return typing.cast(Command, wrapper)

    return decorate


# -- scope: -w/--nodes/--node and -x, one Scope -----------------------------------------


def nodes_annotation(help_text: str) -> Any:
    return Annotated[
        list[str] | None,
        typer.Option(
            "-w",
            "--nodes",
            "--node",
            help=help_text + " Slurm hostlist (gpu[001-128,200]) or ClusterShell @group; "
            "repeatable: the union.",
            metavar="HOSTLIST",
            show_default=False,
            rich_help_panel=SCOPE,
        ),
    ]


# -x goes wherever -w does (as sinfo, clush and pdsh take it).
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-x",
        "--exclude",
        help="Leave these nodes out (hostlist or @group, either of a node's names; "
        "repeatable): never collected, audited or acted on.",
        metavar="HOSTLIST",
        show_default=False,
        rich_help_panel=SCOPE,
    ),
]


def scoped(help_text: str = "Only these nodes.") -> Callable[[Command], Command]:
    """-w/--nodes/--node and -x, declared once; the command takes `scope: Scope`, parsed
    once here (a malformed hostlist, an unknown @group or a -x that leaves nothing is
    a usage error before anything is read)."""
    options = [("nodes", nodes_annotation(help_text), None), ("exclude", ExcludeOpt, None)]
    return _option_group("scope", options, Scope.parse, first=True)


# -- output: -o, --format/--json, --no-header, --ack-version -----------------------------


def output_option(help_text: str) -> Any:
    return typer.Option(
        "-o",
        "--output",
        help=help_text,
        metavar="FILE",
        parser=output_path,
        callback=output_file,
        rich_help_panel=OUTPUT,
    )


Format = TypeVar("Format", bound=enum.StrEnum)


def format_option(choices: type[Format], command: str, what: str) -> Any:
    """--format as one of `choices`: validated (one line naming the choices) and completed."""

    def parse(value: str | Format) -> Format:
        try:
            return choose(choices, str(value), command)
        except SpurctlError as exc:
            raise typer.BadParameter(str(exc)) from None

    return typer.Option(
        "--format",
        help=f"How to print {what}.",
        parser=parse,
        autocompletion=lambda: [c.value for c in choices],
        metavar="[" + "|".join(c.value for c in choices) + "]",
        rich_help_panel=OUTPUT,
    )


JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="Short for --format json (as sinfo's and squeue's).", rich_help_panel=OUTPUT
    ),
]


def with_json(ctx: typer.Context, fmt: Format, as_json: bool) -> Format:
    """--format, or json with --json; --json beside a --format naming another format
    is a usage error."""
    if not as_json:
        return fmt
    json_format = type(fmt)("json")
    given = getattr(ctx.get_parameter_source("fmt"), "name", "DEFAULT") == "COMMANDLINE"
    if given and fmt != json_format:
        raise SpurctlError(f"--json is --format json, and --format {fmt} was given too; give one")
    return json_format


NoHeaderOpt = Annotated[
    bool,
    typer.Option(
        "--no-header",
        "-h",
        help="Print the table's rows alone, one per line (as sinfo -h and squeue -h): no "
        "column heading, summary or hostlists; notes go to stderr. --help is the help.",
        rich_help_panel=OUTPUT,
    ),
]
AckVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--ack-version",
        envvar="SPURCTL_ACK_VERSION",
        show_envvar=True,
        help="The controller version whose note you have read (e.g. 0.8.0): screens "
        "(explain's too) leave the note out while the controller reports that version. "
        "JSON notes and Markdown documents keep it. Config file key: ack_version.",
        show_default=False,
        metavar="VERSION",
        rich_help_panel=OUTPUT,
    ),
]
_ACK_OPTIONS: list[tuple[str, Any, Any]] = [("ack_version", AckVersionOpt, None)]


def ack_version(ctx: typer.Context, given: str | None) -> str | None:
    """--ack-version, else SPURCTL_ACK_VERSION, else config.toml's ack_version."""
    return typing.cast(
        str | None, configured(ctx, {"ack_version": given}, _ACK_OPTIONS)["ack_version"]
    )


def journal_option(help_text: str) -> Any:
    """--journal FILE on every command that takes it, refused as the journal itself would
    refuse it (a directory, a link to nothing or someone else's) before anything runs."""
    return typer.Option("--journal", help=help_text, metavar="FILE", callback=journal_file)


# -- changing: --dry-run, --yes, --journal, and a saved plan's -o and --plan -------------

DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the plan; send nothing.")]
YesOpt = Annotated[bool, typer.Option("--yes", help="Do not prompt.")]
LockWaitOpt = Annotated[
    float,
    number_option(
        "--lock-wait",
        kind=float,
        low=0,
        high=DAY_S,
        help="Wait this long for the journal's lock (an autopilot holds it while a round "
        "acts; 0: refuse at once), saying what it waits for.",
        metavar="SECONDS",
        show_default="60",
    ),
]


def changing(
    journal_help: str, *, output_help: str | None = None, plan_help: str | None = None
) -> Callable[[Command], Command]:
    """--dry-run, (-o, --plan,) --yes, --journal and --lock-wait, declared once; the command takes
    `change: ChangeOptions` and lists them in --help where it declares that parameter."""
    options: list[tuple[str, Any, Any]] = [("dry_run", DryRunOpt, False)]
    if output_help is not None:
        options.append(("output", Annotated[Path | None, output_option(output_help)], None))
    if plan_help is not None:
        plan = typer.Option("--plan", help=plan_help, metavar="FILE", show_default=False)
        options.append(("plan_file", Annotated[Path | None, plan], None))
    options += [
        ("yes", YesOpt, False),
        ("journal_path", Annotated[Path | None, journal_option(journal_help)], None),
        ("lock_wait_s", LockWaitOpt, DEFAULT_LOCK_WAIT_S),
    ]
    return _option_group("change", options, ChangeOptions, in_place=True)


def journal_file(value: Path | None) -> Path | None:
    if value is not None:
        from spurctl.sources.journal_records import check_path

        check_path(value)
    return value


# -- connection: how to reach the cluster --------------------------------------------


def timeout_option(help_text: str) -> Any:
    return number_option(
        "--timeout",
        kind=float,
        low=0.001,
        high=DAY_S,
        help=help_text,
        metavar="SECONDS",
        rich_help_panel=CONNECTION,
    )


ControllerOpt = Annotated[
    str | None,
    typer.Option(
        "--controller",
        envvar="SPUR_CONTROLLER_ADDR",
        help="Controller URL(s), comma-separated for HA.",
        show_envvar=True,
        metavar="URL",
        rich_help_panel=CONNECTION,
    ),
]
ConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--conf",
        envvar="SPUR_CONF",
        help="spur.conf (TOML).",
        show_envvar=True,
        metavar="FILE",
        rich_help_panel=CONNECTION,
    ),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="SPUR_AUTH_TOKEN",
        help="Bearer token (JWT); default ~/.spur/token if mode 0600.",
        show_envvar=True,
        show_default=False,
        metavar="TOKEN",
        rich_help_panel=CONNECTION,
    ),
]
JwtKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--jwt-key-file",
        envvar="SPUR_JWT_KEY_FILE",
        help="Cluster key file; mints the agent credential for reclaims.",
        show_envvar=True,
        metavar="FILE",
        rich_help_panel=CONNECTION,
    ),
]
AgentPortOpt = Annotated[
    int | None,
    number_option(
        "--agent-port",
        kind=int,
        low=1,
        high=65535,
        help="Port of the fallback agent address NODE:PORT, for a node --agent-map does not "
        "list (default: spur.conf [network] agent_port, else 6818). A guess: spurd listens "
        "on its own --listen (default 6818) and no Spur code reads agent_port.",
        show_default=False,
        metavar="PORT",
        rich_help_panel=CONNECTION,
    ),
]
AgentMapOpt = Annotated[
    Path | None,
    typer.Option(
        "--agent-map",
        envvar="SPUR_AGENT_MAP",
        show_envvar=True,
        help='JSON/TOML object: node name -> "host:port", the address each spurd registered '
        "(its --listen). The exact source of agent addresses; a node it lacks falls back to "
        "NODE:--agent-port, and the plan names such nodes.",
        metavar="FILE",
        rich_help_panel=CONNECTION,
    ),
]
TimeoutOpt = Annotated[float, timeout_option("Deadline of every RPC, seconds.")]
TlsCaOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-ca",
        help="CA bundle for https:// controller URLs.",
        metavar="FILE",
        rich_help_panel=CONNECTION,
    ),
]


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """The connection options as typed; `connect()` resolves them with spur.conf and the env."""

    controller: str | None = None
    conf: Path | None = None
    token: str | None = None
    timeout: float = 10.0
    tls_ca: Path | None = None
    jwt_key_file: Path | None = None
    agent_port: int | None = None
    agent_map: Path | None = None

    def connect(self) -> Connection:
        from spurctl.sources.settings import cluster_for, connect_settings

        return connect_settings(
            controller=self.controller,
            conf_path=self.conf,
            token=self.token,
            jwt_key_file=self.jwt_key_file,
            agent_port=self.agent_port,
            agent_map=self.agent_map,
            timeout=self.timeout,
            tls_ca=self.tls_ca,
            cluster=cluster_for(self.controller),
        )


# (name, type, default) in the order --help lists them; the agent ones only for reclaim.
_CONTROLLER_OPTIONS: list[tuple[str, Any, Any]] = [
    ("controller", ControllerOpt, None),
    ("conf", ConfOpt, None),
    ("token", TokenOpt, None),
]
_AGENT_OPTIONS: list[tuple[str, Any, Any]] = [
    ("jwt_key_file", JwtKeyOpt, None),
    ("agent_port", AgentPortOpt, None),
    ("agent_map", AgentMapOpt, None),
]
_TRANSPORT_OPTIONS: list[tuple[str, Any, Any]] = [
    ("timeout", TimeoutOpt, 10.0),
    ("tls_ca", TlsCaOpt, None),
]


def connected(*, agents: bool = False) -> Callable[[Command], Command]:
    """The connection options, declared once; the command takes `conn: ConnectionOptions`."""
    options = [*_CONTROLLER_OPTIONS, *(_AGENT_OPTIONS if agents else []), *_TRANSPORT_OPTIONS]
    return _option_group("conn", options, ConnectionOptions)


# -- holdings: where the agents' holdings come from --------------------------------

COLLECT_NODE_TIMEOUT_S = 60.0


def topology_option(help_text: str) -> Any:
    return typer.Option(
        "--topology", help=help_text, show_default=False, metavar="FILE", rich_help_panel=HOLDINGS
    )


def command_option(help_text: str) -> Any:
    return typer.Option("--command", help=help_text, metavar="TEMPLATE", rich_help_panel=HOLDINGS)


def fanout_option(help_text: str) -> Any:
    return number_option(
        "--fanout",
        kind=int,
        low=1,
        high=100_000,
        help=help_text,
        metavar="N",
        rich_help_panel=HOLDINGS,
    )


def node_timeout_option(help_text: str) -> Any:
    return number_option(
        "--node-timeout",
        kind=float,
        low=0.001,
        high=DAY_S,
        help=f"{help_text}  [default: {COLLECT_NODE_TIMEOUT_S:g}]",
        show_default=False,
        metavar="SECONDS",
        rich_help_panel=HOLDINGS,
    )


InventoryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--inventory",
        help="Inventory file, directory of files, or - (JSON or JSON Lines). Repeatable.",
        metavar="FILE|DIR|-",
        rich_help_panel=HOLDINGS,
    ),
]
CollectOpt = Annotated[
    bool,
    typer.Option(
        "--collect",
        help="Gather inventories live (see `spurctl collect`).",
        rich_help_panel=HOLDINGS,
    ),
]
CommandOpt = Annotated[str, command_option("With --collect: command run per node, %h = node name.")]
FanoutOpt = Annotated[int, fanout_option("With --collect: nodes at once.")]
TopologyOpt = Annotated[
    Path | None,
    topology_option(
        "With --collect: reach the nodes through the gateways this ClusterShell "
        "topology.conf routes (see `spurctl collect --help`). Never read unless named."
    ),
]
RemoteCommandOpt = Annotated[
    str,
    typer.Option(
        "--remote-command",
        help="With --topology: the command each node runs; it must print the node's inventory.",
        metavar="COMMAND",
        rich_help_panel=HOLDINGS,
    ),
]
SshOpt = Annotated[
    str | None,
    typer.Option(
        "--ssh",
        help="With --topology: the ssh program spurctl's relays run, here and on the gateways "
        "(default: ssh from PATH).",
        show_default=False,
        metavar="PATH",
        rich_help_panel=HOLDINGS,
    ),
]
ShipScannerOpt = Annotated[
    bool,
    typer.Option(
        "--ship-scanner",
        help="Send the node scanner to each node's `python3 -` on ssh's standard input, "
        "so nodes need only Python 3.11+, not spurctl (default command: "
        "ssh -o BatchMode=yes %h python3 -; with --topology the gateways need only python3 too).",
        rich_help_panel=HOLDINGS,
    ),
]

NodeTimeoutOpt = Annotated[
    float,
    node_timeout_option("With --collect: seconds a node's command may run before it is killed."),
]


def tree_of(
    topology: Path | None, remote_command: str, ssh: str | None, command: str
) -> Tree | None:
    """The gateway tree the options ask for, or None; a mix that cannot mean anything
    (--remote-command or --ssh without --topology, --command with it) is refused."""
    if topology is None:
        given = {"--remote-command": remote_command != DEFAULT_REMOTE_COMMAND, "--ssh": ssh}
        for name, value in given.items():
            if value:
                raise SpurctlError(
                    f"{name} needs --topology (it is run through the gateways); "
                    "without gateways, give the whole local command with --command"
                )
        return None
    if command != DEFAULT_COMMAND:
        raise SpurctlError(
            "--command runs locally once per node and --topology runs --remote-command "
            "through the gateways; use --remote-command (and --ssh) with --topology"
        )
    from spurctl.sources.tree import Tree, check_tree  # only with gateways (--topology)

    tree = Tree(topology, remote_command, ssh)
    check_tree(tree)
    return tree


@dataclass(frozen=True, slots=True)
class HoldingOptions:
    """Where the agents' holdings come from: inventory files, or a live collect."""

    inventory: list[str] | None = None
    collect: bool = False
    command: str = DEFAULT_COMMAND
    fanout: int = 64
    topology: Path | None = None
    remote_command: str = DEFAULT_REMOTE_COMMAND
    ssh: str | None = None
    ship_scanner: bool = False
    node_timeout: float = COLLECT_NODE_TIMEOUT_S

    def sources(self, scope: Scope, snapshot: Path | None = None) -> Sources:
        """The sources for `scope`, the gateway tree checked first: a topology ClusterShell
        could not route from this host is a usage error before anything is read."""
        tree = tree_of(self.topology, self.remote_command, self.ssh, self.command)
        command = self.command
        if self.ship_scanner and command == DEFAULT_COMMAND:
            from spurctl.node.shipped_scan import SHIP_COMMAND

            command = SHIP_COMMAND
        return Sources(
            scope, self.inventory, self.collect, command, self.fanout, snapshot, tree=tree,
            ship_scanner=self.ship_scanner, node_timeout=self.node_timeout,
        )  # fmt: skip


_HOLDING_OPTIONS: list[tuple[str, Any, Any]] = [
    ("inventory", InventoryOpt, None),
    ("collect", CollectOpt, False),
    ("command", CommandOpt, DEFAULT_COMMAND),
    ("fanout", FanoutOpt, 64),
    ("topology", TopologyOpt, None),
    ("remote_command", RemoteCommandOpt, DEFAULT_REMOTE_COMMAND),
    ("ssh", SshOpt, None),
    ("ship_scanner", ShipScannerOpt, False),
    ("node_timeout", NodeTimeoutOpt, COLLECT_NODE_TIMEOUT_S),
]


def with_holdings() -> Callable[[Command], Command]:
    """--inventory, --collect, --command, --fanout, --topology, --remote-command,
    --ssh and --ship-scanner, declared once; the command takes `holdings: HoldingOptions`."""
    return _option_group("holdings", _HOLDING_OPTIONS, HoldingOptions)


# -- the groups back as argv: what a printed next command carries -------------------


def collect_flags(holdings: HoldingOptions) -> list[str]:
    """The collect options given (--command, --fanout, --topology, ...), as `spurctl
    collect` takes them: for a printed collect that must reach the nodes as this did."""
    return as_flags(holdings, [o for o in _HOLDING_OPTIONS if o[0] not in SOURCE_OPTIONS])


def controller_flags(conn: ConnectionOptions) -> list[str]:
    """The context, controller and transport options in use (never --token: no secret),
    for a printed command that must read the controller this command read."""
    options = [*_CONTROLLER_OPTIONS, *_TRANSPORT_OPTIONS]
    return context_flags() + as_flags(conn, [o for o in options if o[0] != "token"])


def confirm_flags(holdings: HoldingOptions, conn: ConnectionOptions) -> list[str]:
    """What `spurctl audit --collect` needs to collect and read the controller as this
    command did: the collect and controller options given (never --token: no secret)."""
    return collect_flags(holdings) + controller_flags(conn)


def view_flags(holdings: HoldingOptions, conn: ConnectionOptions) -> list[str]:
    """The options that produced this view (holdings, the collect ones only when it collected,
    and controller; never --token), for a printed next command to read the same view."""
    read = [o for o in _HOLDING_OPTIONS if holdings.collect or o[0] in SOURCE_OPTIONS]
    return as_flags(holdings, read) + controller_flags(conn)


def next_command(*words: str, flags: Sequence[str] = (), exclude: str | None = None) -> str:
    """A spurctl command for the operator to paste: `words`, then -x EXCLUDE when this
    view excluded nodes, then `flags`; shell-quoted."""
    import shlex

    return shlex.join(["spurctl", *words, *(["-x", exclude] if exclude else []), *flags])


# -- the view: which controller state a command reads ---------------------------------


def watermark_option(help_text: str) -> Any:
    from spurctl.model import MAX_JOB_ID

    return number_option(
        "--watermark", kind=int, low=1, high=MAX_JOB_ID, help=help_text, metavar="ID"
    )


SnapshotOpt = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        help="Read a saved controller snapshot (spurctl snapshot -o FILE) instead of the live "
        "controller.",
        metavar="FILE",
    ),
]
HistoryJournalOpt = Annotated[
    Path | None,
    journal_option(
        "Reclaim's journal, read for the agent cancels already sent: a holding with no "
        "process gets one at most, then it is a leftover (default "
        "the config file's journal, else "
        "$XDG_STATE_HOME/spurctl/journal.jsonl)."
    ),
]
