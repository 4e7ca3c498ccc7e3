"""The spurctl command line: parse options, call the library, pick a renderer.

Heavy modules (grpc, protobuf, ClusterShell) are imported inside the commands
that use them, so `spurctl --help` and `--version` stay fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from spurctl import __version__
from spurctl.collect import DEFAULT_COMMAND
from spurctl.errors import SpurctlError

app = typer.Typer(
    name="spurctl",
    help="Keep a Spur GPU cluster honest: audit what node agents hold against the "
    "controller, and reclaim stranded allocations safely.",
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


def main() -> None:
    """Console entry point: one clear line and exit 2 for every operator error."""
    try:
        app()
    except SpurctlError as exc:
        if _state["debug"]:
            import traceback

            traceback.print_exc()
        print(f"spurctl: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("spurctl: interrupted", file=sys.stderr)
        sys.exit(130)


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

    from spurctl.documents import dump_json, inventory_to_dict
    from spurctl.node_scan import scan

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
    _write_text(output, dump_json(inventory_to_dict(inventory), indent=None) + "\n")


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
    from spurctl.collect import collect, summarize
    from spurctl.documents import dump_json, inventory_to_dict

    names = _expand_hostlist(nodes)
    results = collect(names, command=command, fanout=fanout, timeout=timeout)
    _write_text(
        output,
        "".join(dump_json(inventory_to_dict(inv), indent=None) + "\n" for inv in results),
    )
    print(summarize(results), file=sys.stderr)
    if any(inv.error is not None for inv in results):
        raise typer.Exit(1)


def _expand_hostlist(hostlist: str) -> list[str]:
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    from spurctl.collect import is_safe_node_name

    try:
        names = list(NodeSet(hostlist))
    except NodeSetException as exc:
        raise SpurctlError(f"--nodes: bad hostlist {hostlist!r}: {exc}") from None
    if not names:
        raise SpurctlError(f"--nodes: {hostlist!r} names no node")
    unsafe = [n for n in names if not is_safe_node_name(n)]
    if unsafe:
        raise SpurctlError(
            f"--nodes: {unsafe[0]!r} is not a host name (letters, digits, '.', '-', '_')"
        )
    return names


def _write_text(path: Path | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        path.write_text(text)
    except OSError as exc:
        raise SpurctlError(f"cannot write {path}: {exc.strerror or exc}") from None
