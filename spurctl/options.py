"""The Typer options the commands share: how to reach the cluster, where holdings come from.

Declared once here; each command in cli.py lists the ones it takes. The
connection options are added to a command by `@connected()` and reach it as
one `ConnectionOptions`, resolved with spur.conf and the environment only
when the command needs a controller.
"""

from __future__ import annotations

import enum
import functools
import inspect
import math
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from spurctl.errors import SpurctlError
from spurctl.model import MAX_JOB_ID, Action, Kind
from spurctl.render.common import (
    AuditFormat,
    ChecklistFormat,
    NodesFormat,
    ReclaimFormat,
    choose,
)
from spurctl.sources.collect import DEFAULT_COMMAND
from spurctl.sources.inventories import Sources
from spurctl.sources.tree import DEFAULT_REMOTE_COMMAND, Tree

if TYPE_CHECKING:
    from spurctl.sources.settings import Connection

# -- numbers: every numeric option is parsed by one of these -------------------------

# The parsers every numeric option uses; tests/unit/test_option_numbers.py checks that
# no option of any command takes a number any other way.
NUMBER_PARSERS: set[Callable[..., Any]] = set()
# Upper bounds where nothing else bounds a number: a day for a wait, and Linux's own
# limits for ports.
DAY_S = 86_400.0


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _range_text(low: float, high: float | None) -> str:
    return f"of at least {_plain(low)}" if high is None else f"from {_plain(low)} to {_plain(high)}"


def number(kind: type[int] | type[float], low: float, high: float | None = None) -> Any:
    """A parser for a numeric option: a finite `kind` from `low` to `high` (None: no
    bound), else a usage error naming the option and the range (exit 2)."""
    what = "whole number" if kind is int else "number"

    def parse(value: str | int | float) -> int | float:
        text = str(value).strip()
        try:
            parsed: int | float = int(text) if kind is int else float(text)
        except ValueError:
            raise typer.BadParameter(
                f"{text!r} is not a {what}; give a {what} {_range_text(low, high)}"
            ) from None
        if not math.isfinite(parsed):
            raise typer.BadParameter(
                f"{text!r} is not a finite number; give a {what} {_range_text(low, high)}"
            )
        if parsed < low or (high is not None and parsed > high):
            raise typer.BadParameter(
                f"{text} is out of range; give a {what} {_range_text(low, high)}"
            )
        return parsed

    NUMBER_PARSERS.add(parse)
    return parse


def number_option(
    *names: str, kind: type[int] | type[float], low: float, high: float | None = None, **kw: Any
) -> Any:
    """typer.Option for a number, parsed by `number` (its range shown in --help)."""
    help_text = kw.pop("help", "")
    shown = f"[{_range_text(low, high)}]"
    return typer.Option(*names, parser=number(kind, low, high), help=f"{help_text}  {shown}", **kw)


def job_id_parser() -> Any:
    """A Spur job id: a uint32 (docs/spur-facts.md "Job ids")."""
    return number(int, 0, MAX_JOB_ID)


# -- options several commands take: each declared once, its help the command's own -------


# Every name --format takes anywhere: `-o json` is the kubectl/squeue reflex for it.
FORMAT_NAMES = frozenset(
    c.value for choices in (AuditFormat, ReclaimFormat, ChecklistFormat) for c in choices
)


def _formats_of(ctx: typer.Context) -> list[str]:
    """The names this command's --format takes (its metavar, "[a|b]"), or none."""
    for param in ctx.command.params:
        if param.name == "fmt" and param.metavar:
            return param.metavar.strip("[]").split("|")
    return []


class _BareName(type(Path())):  # type: ignore[misc]
    """-o's argument as typed was a bare format name (`json`, not `./json`): pathlib
    forgets the `./`, so the parser marks it for the check that knows the command."""


def _output_path(text: str | Path) -> Path:
    typed = str(text)
    return _BareName(typed) if typed in FORMAT_NAMES else Path(typed)


def _output_file(ctx: typer.Context, value: Path | None) -> Path | None:
    """-o FILE, refused when FILE is a format's bare name and no such file exists:
    `-o json` would write the table to ./json. A path (`./json`) is a file."""
    if not isinstance(value, _BareName):
        return value
    name, value = str(value), Path(value)
    if value.exists():
        return value
    if name in _formats_of(ctx):
        raise SpurctlError(f"`-o` takes a file; did you mean `--format {name}`?")
    raise SpurctlError(
        f"`-o` takes a file, and {ctx.command_path} has no --format {name}; "
        f"to write a file named {name}, give `-o ./{name}`"
    )


def output_option(help_text: str) -> Any:
    return typer.Option(
        "-o",
        "--output",
        help=help_text,
        metavar="FILE",
        parser=_output_path,
        callback=_output_file,
    )


def journal_option(help_text: str) -> Any:
    return typer.Option("--journal", help=help_text, metavar="FILE")


def nodes_option(help_text: str, *also: str) -> Any:
    return typer.Option("-w", "--nodes", *also, help=help_text, metavar="HOSTLIST")


# -x goes wherever -w does (as sinfo, clush and pdsh take it): declared once, here.
ExcludeOpt = Annotated[
    str | None,
    typer.Option(
        "-x",
        "--exclude",
        help="Leave these nodes out (Slurm hostlist, either of a node's names): never "
        "collected, audited or reclaimed.",
        metavar="HOSTLIST",
        show_default=False,
    ),
]


def excluded(exclude: str | None) -> frozenset[str]:
    """-x's nodes, or the one line saying why its hostlist is not one."""
    if exclude is None:
        return frozenset()
    from spurctl.hostlist import parse_scope

    try:
        return parse_scope(exclude)
    except SpurctlError as exc:
        raise SpurctlError(f"-x/--exclude: {exc}") from None


def fanout_option(help_text: str) -> Any:
    return number_option("--fanout", kind=int, low=1, high=100_000, help=help_text, metavar="N")


def timeout_option(help_text: str) -> Any:
    return number_option(
        "--timeout", kind=float, low=0.001, high=DAY_S, help=help_text, metavar="SECONDS"
    )


def watermark_option(help_text: str) -> Any:
    return number_option(
        "--watermark", kind=int, low=1, high=MAX_JOB_ID, help=help_text, metavar="ID"
    )


def topology_option(help_text: str) -> Any:
    return typer.Option("--topology", help=help_text, show_default=False, metavar="FILE")


def command_option(help_text: str) -> Any:
    return typer.Option("--command", help=help_text, metavar="TEMPLATE")


def cgroup_root_option(help_text: str) -> Any:
    return typer.Option("--cgroup-root", help=help_text, show_default=False, metavar="DIR")


def proc_root_option(help_text: str) -> Any:
    return typer.Option("--proc-root", help=help_text, metavar="DIR")


def dry_run_option(help_text: str) -> Any:
    return typer.Option("--dry-run", help=help_text)


# -- connection options shared by every command that talks to the cluster -----

ControllerOpt = Annotated[
    str | None,
    typer.Option(
        "--controller",
        envvar="SPUR_CONTROLLER_ADDR",
        help="Controller URL(s), comma-separated for HA.",
        show_envvar=True,
        metavar="URL",
    ),
]
ConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--conf", envvar="SPUR_CONF", help="spur.conf (TOML).", show_envvar=True, metavar="FILE"
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
    ),
]
TimeoutOpt = Annotated[float, timeout_option("Deadline of every RPC, seconds.")]
TlsCaOpt = Annotated[
    Path | None,
    typer.Option("--tls-ca", help="CA bundle for https:// controller URLs.", metavar="FILE"),
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
        from spurctl.sources.settings import connect_settings

        return connect_settings(
            controller=self.controller,
            conf_path=self.conf,
            token=self.token,
            jwt_key_file=self.jwt_key_file,
            agent_port=self.agent_port,
            agent_map=self.agent_map,
            timeout=self.timeout,
            tls_ca=self.tls_ca,
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

# -- the operator's defaults: option > environment variable > config file > built-in -----

# Option name -> the config.toml key (sources/user_config.py) that may set it.
CONFIG_KEYS = {
    "controller": "controller",
    "agent_map": "agent_map",
    "inventory": "inventory",
    "collect": "collect",
    "command": "collect_command",
    "ack_version": "ack_version",
}
# Where holdings come from is one choice: either option on the command line
# overrides both of the file's.
_SOURCE_OPTIONS = ("inventory", "collect")


def _declared(annotated: Any) -> tuple[str, str | None]:
    info = typing.get_args(annotated)[1]
    flag = next(n for n in (info.default, *info.param_decls) if str(n).startswith("--"))
    envvar = info.envvar if isinstance(info.envvar, str) else None
    return str(flag), envvar


def _shown(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    return str(value)


def configured(
    ctx: typer.Context, given: dict[str, Any], options: list[tuple[str, Any, Any]]
) -> dict[str, Any]:
    """`given` with each option the operator left unset taken from config.toml when the
    file sets it; under --debug, one stderr line per such option saying where its
    value came from."""
    from spurctl.sources import user_config

    keyed = [(name, annotated) for name, annotated, _ in options if name in CONFIG_KEYS]
    if not keyed:
        return given
    config = user_config.load()
    source = {name: getattr(ctx.get_parameter_source(name), "name", "DEFAULT") for name, _ in keyed}
    source_given = any(source.get(n, "DEFAULT") != "DEFAULT" for n in _SOURCE_OPTIONS)
    out = dict(given)
    told: list[str] = []
    for name, annotated in keyed:
        flag, envvar = _declared(annotated)
        from_file = getattr(config, CONFIG_KEYS[name])
        if source[name] == "COMMANDLINE":
            origin = "command line"
        elif source[name] == "ENVIRONMENT":
            origin = f"environment variable {envvar}"
        elif name == "command" and given.get("topology") is not None:
            origin = "built-in default (--topology runs --remote-command instead)"
        elif from_file is not None and not (name in _SOURCE_OPTIONS and source_given):
            out[name] = from_file
            origin = f"config file {config.path}"
        elif name in _SOURCE_OPTIONS and source_given and from_file is not None:
            origin = f"built-in default (the command line chose the source over {config.path})"
        else:
            origin = "built-in default"
        if name == "controller" and out[name] is None:
            origin += " (spur.conf [controller] hosts if it lists any, else http://localhost:6817)"
        told.append(f"{flag} = {_shown(out[name])} (from {origin})")
    if ctx.find_root().params.get("debug"):
        from spurctl.render.terminal import debug_lines

        debug_lines(told)
    return out


Command = TypeVar("Command", bound=Callable[..., Any])
_CTX = "ctx"
Group = TypeVar("Group")


def _option_group(
    param: str, options: list[tuple[str, Any, Any]], build: Callable[..., Group]
) -> Callable[[Command], Command]:
    """Add `options` to a command's own, handed to it as one `param` built by `build`.

    Typer reads the signature given here (the command's options, then these);
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
        if not passes_ctx:
            added.insert(
                0, inspect.Parameter(_CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
            )

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            ctx = kwargs[_CTX] if passes_ctx else kwargs.pop(_CTX)
            given = {name: kwargs.pop(name) for name, _, _ in options}
            group = build(**configured(ctx, given, options))
            return command(**{param: group}, **kwargs)  # a command's exit status, if it returns one

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept] + added
        wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            **{n: h for n, h in hints.items() if n not in (param, "return")},
            **{name: a for name, a, _ in options},
            _CTX: typer.Context,
            "return": hints.get("return"),
        }
        del wrapper.__wrapped__  # Typer must read the signature above, not the command's
        return typing.cast(Command, wrapper)

    return decorate


def connected(*, agents: bool = False) -> Callable[[Command], Command]:
    """The connection options, declared once; the command takes `conn: ConnectionOptions`."""
    options = [*_CONTROLLER_OPTIONS, *(_AGENT_OPTIONS if agents else []), *_TRANSPORT_OPTIONS]
    return _option_group("conn", options, ConnectionOptions)


# -- where an audit's holdings come from, and how to print it -------------------

NodesOpt = Annotated[
    str | None,
    nodes_option(
        "Limit to these nodes (Slurm hostlist, e.g. gpu[001-128,200]); --node is the same "
        "option, as for reclaim.",
        "--node",
    ),
]
InventoryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--inventory",
        help="Inventory file, directory of files, or - (JSON or JSON Lines). Repeatable.",
        metavar="FILE|DIR|-",
    ),
]
CollectOpt = Annotated[
    bool, typer.Option("--collect", help="Gather inventories live (see `spurctl collect`).")
]
CommandOpt = Annotated[str, command_option("With --collect: command run per node, %h = node name.")]
FanoutOpt = Annotated[int, fanout_option("With --collect: nodes at once.")]
TopologyOpt = Annotated[
    Path | None,
    topology_option(
        "With --collect: reach the nodes through the ClusterShell gateways this "
        "topology.conf routes (see `spurctl collect --help`). Never read unless named."
    ),
]
RemoteCommandOpt = Annotated[
    str,
    typer.Option(
        "--remote-command",
        help="With --topology: the command each node runs; it must print the node's inventory.",
        metavar="COMMAND",
    ),
]
SshOpt = Annotated[
    str | None,
    typer.Option(
        "--ssh",
        help="With --topology: the ssh program ClusterShell runs, here and on the gateways "
        "(default: ssh from PATH).",
        show_default=False,
        metavar="PATH",
    ),
]
CollectTopologyOpt = Annotated[
    Path | None,
    topology_option(
        "Reach the nodes through ClusterShell gateways: run --remote-command on every "
        "node through the gateways this file routes to it (ClusterShell's topology.conf "
        "format, first route from this host's short name). Never read unless named: "
        "/etc/clustershell/topology.conf is not used by default, and without --topology "
        "every node is reached from this host with --command."
    ),
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
                    f"{name} needs --topology (it is run through ClusterShell's gateways); "
                    "without gateways, give the whole local command with --command"
                )
        return None
    if command != DEFAULT_COMMAND:
        raise SpurctlError(
            "--command runs locally once per node and --topology runs --remote-command "
            "through the gateways; use --remote-command (and --ssh) with --topology"
        )
    from spurctl.sources.tree import check_tree

    tree = Tree(topology, remote_command, ssh)
    check_tree(tree)
    return tree


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
    )


AuditFormatOpt = Annotated[AuditFormat, format_option(AuditFormat, "audit", "the findings")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Short for --format json (as sinfo's and squeue's).")
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


NodesFormatOpt = Annotated[
    NodesFormat, format_option(NodesFormat, "nodes", "the nodes (json: spurctl.nodes/v1)")
]

Choice = TypeVar("Choice", Kind, Action)


def choice_option(choices: type[Choice], name: str, what: str, help_text: str) -> Any:
    """A repeatable option taking one of `choices`: validated (one line naming them all)
    and completed from the prefix typed."""
    values = [c.value for c in choices]

    def parse(value: str | Choice) -> Choice:
        try:
            return choices(str(value).strip().lower())
        except ValueError:
            raise typer.BadParameter(
                f"unknown {what} {str(value)!r}; use one of {', '.join(values)}"
            ) from None

    def complete(incomplete: str) -> list[str]:
        return [v for v in values if v.startswith((incomplete or "").lower())]

    return typer.Option(
        name,
        help=help_text,
        parser=parse,
        autocompletion=complete,
        metavar=what.split()[-1].upper(),
        show_default=False,
    )


AuditKindOpt = Annotated[
    list[Kind] | None,
    choice_option(
        Kind,
        "--kind",
        "finding kind",
        "Show only findings of this kind (repeatable; the summary and the exit status "
        "still count every finding). Kinds: " + ", ".join(k.value for k in Kind) + ".",
    ),
]
AuditActionOpt = Annotated[
    list[Action] | None,
    choice_option(
        Action,
        "--action",
        "action",
        "Show only findings with this action (repeatable; with --kind, both must match). "
        "Actions: " + ", ".join(a.value for a in Action) + ".",
    ),
]
AuditOutputOpt = Annotated[
    Path | None,
    output_option(
        "Write the report here instead of stdout: to a temporary file beside it, "
        "renamed over it once whole (as node_exporter's textfile collector expects), so "
        "an error leaves the file as it was."
    ),
]


# -- each command's own options -------------------------------------------------


def _print_version(value: bool) -> None:
    if value:
        from spurctl import __version__

        print(f"spurctl {__version__}")
        raise typer.Exit()


VersionOpt = Annotated[
    bool,
    typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version."),
]
DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="Show a traceback on errors (secrets stay redacted), and on stderr where each "
        "default came from: option, environment, config file or built-in.",
    ),
]
AckVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--ack-version",
        envvar="SPURCTL_ACK_VERSION",
        show_envvar=True,
        help="The controller version whose note you have read (e.g. 0.8.0): the screen "
        "drops its one line while the controller reports that version. explain and JSON "
        "notes keep the whole note. Config file key: ack_version.",
        show_default=False,
        metavar="VERSION",
    ),
]
_ACK_OPTIONS: list[tuple[str, Any, Any]] = [("ack_version", AckVersionOpt, None)]


def ack_version(ctx: typer.Context, given: str | None) -> str | None:
    """--ack-version, else SPURCTL_ACK_VERSION, else config.toml's ack_version."""
    return typing.cast(
        str | None, configured(ctx, {"ack_version": given}, _ACK_OPTIONS)["ack_version"]
    )


SnapshotOutputOpt = Annotated[Path, output_option("Where to save the snapshot.")]
ExplainNodeArg = Annotated[
    str, typer.Argument(metavar="NODE", help="The node (either of its names).")
]
ExplainJobArg = Annotated[
    int | None,
    typer.Argument(metavar="[JOB]", help="One job the node holds.", parser=job_id_parser()),
]
ExplainFormatOpt = Annotated[
    ReclaimFormat,
    format_option(ReclaimFormat, "explain", "the decision (json: spurctl.explain/v1)"),
]
JournalFileOpt = Annotated[
    Path | None,
    journal_option("Journal file (default $XDG_STATE_HOME/spurctl/journal.jsonl, as reclaim)."),
]
JournalLastOpt = Annotated[
    int, number_option("--last", kind=int, low=1, metavar="N", help="Show the newest N runs.")
]
JournalRunOpt = Annotated[
    str | None,
    typer.Option("--run", metavar="ID", help="Show one run (its id, or the start of it) in full."),
]
JournalNodeOpt = Annotated[
    str | None,
    typer.Option(
        "--node",
        "--nodes",
        "-w",
        help="Only what runs did on these nodes (Slurm hostlist): each run's counts are "
        "those of these nodes.",
        metavar="HOSTLIST",
        show_default=False,
    ),
]


def since_time(value: str | datetime) -> datetime:
    """--since as a time: RFC 3339 / ISO 8601 (naive is UTC), or a span back from now
    ('2h', '30m', '90s', '2d'); a usage error naming both forms otherwise."""
    if isinstance(value, datetime):
        return value
    from spurctl.model import parse_time, utcnow

    text = value.strip()
    if text[-1:].lower() in _DURATION_UNITS:
        return utcnow() - timedelta(seconds=parse_duration(text))
    try:
        when = parse_time(text)
    except ValueError:
        when = None
    if when is None:
        raise typer.BadParameter(
            f"{value!r} is neither a time (ISO 8601, e.g. 2026-12-02T14:00:00Z) nor a span "
            "back from now (e.g. 2h, 30m, 2d)"
        )
    return when


JournalSinceOpt = Annotated[
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
JournalFormatOpt = Annotated[
    ReclaimFormat,
    format_option(ReclaimFormat, "journal", "the runs (json: spurctl.journal-runs/v1)"),
]

AuditSnapshotOpt = Annotated[
    Path | None,
    typer.Option(
        "--snapshot", help="Audit a saved controller snapshot instead of live.", metavar="FILE"
    ),
]
AuditWatermarkOpt = Annotated[int | None, watermark_option("Override the estimated watermark.")]
AuditShowAllOpt = Annotated[bool, typer.Option("--all", help="Also list healthy rows.")]
NoHeaderOpt = Annotated[
    bool,
    typer.Option(
        "--no-header",
        "-h",
        help="Print the table's rows alone, one per line (as sinfo -h and squeue -h): no "
        "column heading, summary or hostlists; notes go to stderr. --help is the help.",
    ),
]
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
ReclaimNodeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--node",
        "--nodes",
        "-w",
        help="Nodes to act on (Slurm hostlist, e.g. gpu[017,020]); --nodes and -w are the "
        "same option. Give it once.",
        metavar="HOSTLIST",
        show_default=False,
    ),
]


def one_hostlist(given: list[str]) -> str:
    """reclaim's --node/--nodes/-w, given once; given twice is a usage error naming the
    one hostlist that covers them all (a reclaim never guesses which was meant)."""
    if len(given) == 1:
        return given[0]
    if not given:
        raise SpurctlError(
            "missing option --node: name the nodes to act on with --node HOSTLIST (or "
            "--nodes, -w), or apply a saved plan with --plan FILE; see `spurctl reclaim --help`"
        )
    from spurctl.hostlist import fold, parse_scope

    try:
        joined = f" --node '{fold(n for h in given for n in sorted(parse_scope(h)))}'"
    except SpurctlError:
        joined = " one hostlist"
    raise SpurctlError(
        f"the nodes were given {len(given)} times ({', '.join(given)}); --node, --nodes and "
        f"-w are one option: to act on all of them, give{joined}"
    )


ReclaimJobOpt = Annotated[
    list[int] | None,
    typer.Option(
        "--job", parser=job_id_parser(), help="Only these job ids. Repeatable.", metavar="ID"
    ),
]
ReclaimDryRunOpt = Annotated[bool, dry_run_option("Print the plan; send nothing.")]
ReclaimPlanOutputOpt = Annotated[
    Path | None,
    output_option("With --dry-run: save the plan here, for `spurctl reclaim --plan FILE`."),
]
ReclaimPlanOpt = Annotated[
    Path | None,
    typer.Option(
        "--plan",
        help="Send only the entries of this saved plan (reclaim --dry-run -o FILE), each "
        "re-checked; refused when older than --max-inventory-age or from another controller.",
        metavar="FILE",
        show_default=False,
    ),
]
ReclaimYesOpt = Annotated[bool, typer.Option("--yes", help="Do not prompt.")]
ReclaimJournalOpt = Annotated[
    Path | None, journal_option("Journal file (default $XDG_STATE_HOME/spurctl/journal.jsonl).")
]
AuditJournalOpt = Annotated[
    Path | None,
    journal_option(
        "Reclaim's journal, read for the agent cancels already sent: a holding with no "
        "process gets one at most, then it is a leftover (default "
        "$XDG_STATE_HOME/spurctl/journal.jsonl)."
    ),
]
ReclaimSettleOpt = Annotated[
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
ReclaimVerifyInventoryOpt = Annotated[
    bool,
    typer.Option(
        "--verify-inventory",
        help="After --settle, re-collect the touched nodes (with --command and --fanout, "
        "even when the plan came from --inventory files) and confirm each cancel from the "
        "node: the agent answers Ok even for a job it does not track. --collect does this "
        "too. Without either, sent cancels are reported unconfirmed (exit 1).",
    ),
]
ReclaimConcurrencyOpt = Annotated[
    int,
    number_option(
        "--concurrency", kind=int, low=1, high=100_000, help="Nodes cancelled at once.", metavar="N"
    ),
]
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str | float) -> float:
    """'90s', '10m', '1h', '2d' or plain seconds -> seconds; a usage error otherwise."""
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip().lower()
        unit = _DURATION_UNITS.get(text[-1:]) if text else None
        number = text[:-1] if unit is not None else text
        try:
            seconds = float(number) * (unit or 1.0)
        except ValueError:
            raise typer.BadParameter(
                f"{value!r} is not a duration; write it like 90s, 10m or 1h"
            ) from None
    if not seconds > 0 or seconds == float("inf"):
        raise typer.BadParameter(f"{value!r} must be a positive duration, e.g. 10m")
    return seconds


NUMBER_PARSERS.add(parse_duration)


ReclaimMaxInventoryAgeOpt = Annotated[
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
ReclaimFormatOpt = Annotated[
    ReclaimFormat, format_option(ReclaimFormat, "reclaim", "the plan and outcomes")
]
ChecklistNodesOpt = Annotated[
    str | None,
    nodes_option(
        "Nodes to check (Slurm hostlist). With --verify: the nodes the first run said "
        "to recycle, as its verify command lists them (required)."
    ),
]
ChecklistWatermarkOpt = Annotated[
    int | None,
    watermark_option(
        "The controller's next job id, if known (default: max tracked id + 1, "
        "at least spur.conf's first_job_id)."
    ),
]
ChecklistVerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Re-read the controller and the --nodes' inventories and tick every step "
        "that now holds.",
    ),
]
ChecklistFormatOpt = Annotated[
    ChecklistFormat, format_option(ChecklistFormat, "checklist", "the checklist")
]
ChecklistOutputOpt = Annotated[Path | None, output_option("Write here instead of stdout.")]
NodeInventoryCgroupRootOpt = Annotated[
    Path | None,
    cgroup_root_option(
        "Read job cgroups (job_<id>, job_<id>_<attempt>) only under this directory; "
        "absent is fine. Default: found. On the cgroup v2 mount (from /proc/self/mountinfo), "
        "walking up from spurd's own cgroup (/proc/<spurd pid>/cgroup, for a root systemd "
        "delegates) and from this command's, every ancestor named 'spur', with a 'spur' "
        "child, or holding job_* directories; then 'spur' at the top of the mount and "
        "/sys/fs/cgroup/spur (Spur main's fixed root). All found are read."
    ),
]
NodeInventoryProcRootOpt = Annotated[Path, proc_root_option("The node's /proc.")]
NodeInventoryHostnameOpt = Annotated[
    str | None,
    typer.Option(
        "--hostname",
        help="Node name to report (default: this host's name, as spurd registers it).",
        show_default=False,
        metavar="NAME",
    ),
]
NodeInventoryOutputOpt = Annotated[
    Path | None, output_option("Write the document here, not stdout.")
]
CollectNodesOpt = Annotated[str, nodes_option("Hostlist of the nodes, e.g. gpu[001-128,200].")]
CollectCommandOpt = Annotated[
    str,
    command_option(
        "Command run locally once per node, %h replaced by the node name; "
        "it must print the node's inventory."
    ),
]
ShipScannerOpt = Annotated[
    bool,
    typer.Option(
        "--ship-scanner",
        help="Send the node scanner to each node's `python3 -` on ssh's standard input, "
        "so nodes need only Python 3.11+, not spurctl (default command: "
        "ssh -o BatchMode=yes %h python3 -; with --topology the gateways need only "
        "python3 too).",
    ),
]
CollectFanoutOpt = Annotated[
    int,
    fanout_option(
        "How many commands run at once (with --topology: on each gateway, and here "
        "for nodes reached directly)."
    ),
]
COLLECT_NODE_TIMEOUT_S = 60.0
CollectNodeTimeoutOpt = Annotated[
    float | None,
    number_option(
        "--node-timeout",
        kind=float,
        low=0.001,
        high=DAY_S,
        help="Seconds a node's command may run before it is killed.  [default: 60]",
        show_default=False,
        metavar="SECONDS",
    ),
]
# collect's --timeout was its per-node limit; everywhere else --timeout is the RPC deadline.
CollectOldTimeoutOpt = Annotated[
    float | None,
    timeout_option("Deprecated: the old name of --node-timeout."),
]


def node_timeout(node_limit: float | None, old: float | None) -> float:
    """collect's --node-timeout, or its old spelling --timeout with one warning line."""
    if old is None:
        return COLLECT_NODE_TIMEOUT_S if node_limit is None else node_limit
    if node_limit is not None:
        raise SpurctlError(
            "collect's --timeout is the old name of --node-timeout; give --node-timeout only"
        )
    from spurctl.render.terminal import warning

    warning(
        "collect --timeout is the old name of --node-timeout (each node's limit; in every "
        "other command --timeout is the RPC deadline): use --node-timeout"
    )
    return old


def collect_command(ctx: typer.Context, given: str, topology: Path | None) -> str:
    """collect's --command, else config.toml's collect_command (as for --collect)."""
    chosen = configured(
        ctx,
        {"command": given, "topology": topology},
        [("command", CollectCommandOpt, DEFAULT_COMMAND)],
    )
    return typing.cast(str, chosen["command"])


CollectOutputOpt = Annotated[Path | None, output_option("Write JSON Lines here, not stdout.")]


class DemoScenario(enum.StrEnum):
    INCIDENT = "incident"
    POST_WIPE = "post-wipe"


DemoScenarioOpt = Annotated[
    DemoScenario,
    typer.Option(
        "--scenario",
        help="With --serve: the cluster to serve: the PR #623 incident, or a controller "
        "whose state was wiped before the agents were recycled (for `checklist post-wipe`).",
        case_sensitive=False,
    ),
]
DemoServeOpt = Annotated[
    bool,
    typer.Option(
        "--serve",
        help="Skip the walkthrough: keep the cluster up until Ctrl-C and print the "
        "commands to try on it.",
    ),
]


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

    def sources(
        self, nodes: str | None, snapshot: Path | None = None, exclude: str | None = None
    ) -> Sources:
        """The sources, with `nodes`, `exclude` (-x) and the gateway tree checked first: an
        empty or malformed hostlist is a usage error before anything is read, never "every
        node", and so is a topology ClusterShell could not route from this host."""
        if nodes is not None:
            from spurctl.hostlist import parse_scope

            parse_scope(nodes)
        excluded(exclude)
        tree = tree_of(self.topology, self.remote_command, self.ssh, self.command)
        command = self.command
        if self.ship_scanner and command == DEFAULT_COMMAND:
            from spurctl.sources.shipped_scan import SHIP_COMMAND

            command = SHIP_COMMAND
        return Sources(
            nodes, self.inventory, self.collect, command, self.fanout, snapshot, tree=tree,
            ship_scanner=self.ship_scanner, exclude=exclude,
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
]


def with_holdings() -> Callable[[Command], Command]:
    """--inventory, --collect, --command, --fanout, --topology, --remote-command,
    --ssh and --ship-scanner, declared once; the command takes `holdings: HoldingOptions`."""
    return _option_group("holdings", _HOLDING_OPTIONS, HoldingOptions)


def _as_flags(group: object, options: list[tuple[str, Any, Any]]) -> list[str]:
    """The argv words that give each of `options` the value `group` holds, for those
    not at their default, read off the options' own declarations."""
    words: list[str] = []
    for name, annotated, default in options:
        value = getattr(group, name)
        if value == default:
            continue
        info = typing.get_args(annotated)[1]
        flag = next(n for n in (info.default, *info.param_decls) if str(n).startswith("--"))
        if isinstance(value, list):  # a repeatable option: once per value
            words += [w for v in value for w in (flag, str(v))]
        else:
            words += [flag] if value is True else [flag, str(value)]
    return words


def collect_flags(holdings: HoldingOptions) -> list[str]:
    """The collect options given (--command, --fanout, --topology, ...), as `spurctl
    collect` takes them: for a printed collect that must reach the nodes as this did."""
    return _as_flags(holdings, [o for o in _HOLDING_OPTIONS if o[0] not in _SOURCE_OPTIONS])


def controller_flags(conn: ConnectionOptions) -> list[str]:
    """The controller and transport options given (--controller, --conf, --timeout,
    --tls-ca; never --token: no secret), for a printed command that must read the
    controller this command read."""
    options = [*_CONTROLLER_OPTIONS, *_TRANSPORT_OPTIONS]
    return _as_flags(conn, [o for o in options if o[0] != "token"])


def confirm_flags(holdings: HoldingOptions, conn: ConnectionOptions) -> list[str]:
    """What `spurctl audit --collect` needs to collect and read the controller as this
    command did: the collect and controller options given (never --token: no secret)."""
    return collect_flags(holdings) + controller_flags(conn)


def view_flags(holdings: HoldingOptions, conn: ConnectionOptions) -> list[str]:
    """The options that produced this command's view (holdings and controller, never
    --token), for a printed next command that must read the same view when pasted."""
    return _as_flags(holdings, _HOLDING_OPTIONS) + controller_flags(conn)


def next_command(*words: str, flags: Sequence[str] = (), exclude: str | None = None) -> str:
    """A spurctl command for the operator to paste: `words`, then -x EXCLUDE when this
    view excluded nodes, then `flags`; shell-quoted."""
    import shlex

    return shlex.join(["spurctl", *words, *(["-x", exclude] if exclude else []), *flags])


# -- node-release ------------------------------------------------------------------

NodeReleaseJobOpt = Annotated[
    int,
    typer.Option(
        "--job",
        help="The job id whose run to stop on this node.",
        parser=job_id_parser(),
        metavar="ID",
    ),
]
NodeReleaseStartedAtOpt = Annotated[
    str,
    typer.Option(
        "--started-at",
        help="The run's start time (RFC 3339), as the agent-orphan finding gives it; "
        "the release refuses unless the run held now started then (within 1 s).",
        metavar="TIME",
    ),
]


def started_at(text: str) -> datetime:
    """--started-at as a time, or the one line saying it is not one."""
    from spurctl.model import parse_time

    try:
        when = parse_time(text)
    except ValueError:
        when = None
    if when is None:
        raise SpurctlError(
            f"--started-at {text!r} is not an RFC 3339 time (e.g. 2026-12-01T14:02:11Z)"
        )
    return when


NodeReleaseDryRunOpt = Annotated[
    bool, dry_run_option("Print what would be signalled; send nothing.")
]
NodeReleaseGraceOpt = Annotated[
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
NodeReleaseCgroupRootOpt = Annotated[
    Path | None,
    cgroup_root_option(
        "Look for the job's cgroups only under this directory. Default: found as "
        "node-inventory finds it (see `spurctl node-inventory --help`)."
    ),
]
NodeReleaseProcRootOpt = Annotated[
    Path,
    proc_root_option(
        "The node's /proc. A real release needs this system's own /proc "
        "(it signals by pid); another is only read, with --dry-run."
    ),
]
NodeReleaseJournalOpt = Annotated[
    Path | None,
    journal_option(
        "Journal file, shared with reclaim (default $XDG_STATE_HOME/spurctl/journal.jsonl)."
    ),
]
