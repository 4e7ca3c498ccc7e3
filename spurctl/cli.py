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
