"""The spurctl command line: parse options, call the library, pick a renderer.

Heavy modules (grpc, protobuf, ClusterShell) are imported inside the commands
that use them, so `spurctl --help` and `--version` stay fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from spurctl import __version__
from spurctl.errors import SpurctlError, redact

if TYPE_CHECKING:
    from spurctl.config import Connection

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
    from spurctl.config import connect_settings

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
    epilog="Example: spurctl snapshot -o /var/tmp/spur-$(date +%F).json",
)
def snapshot(
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to save the snapshot.")],
    controller: ControllerOpt = None,
    conf: ConfOpt = None,
    token: TokenOpt = None,
    timeout: TimeoutOpt = 10.0,
    tls_ca: TlsCaOpt = None,
) -> None:
    """Save the controller's view (jobs, nodes, watermark, completeness) for offline audits."""
    from spurctl.client import ControllerClient
    from spurctl.documents import dump_json, snapshot_to_dict
    from spurctl.model import Watermark, WatermarkSource

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


def main() -> None:
    """Console entry point: one clear line and exit 2 for every operator error."""
    try:
        app()
    except SpurctlError as exc:
        if _state["debug"]:
            import traceback

            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(f"spurctl: error: {redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("spurctl: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # an operator never gets a bare traceback without --debug
        if _state["debug"]:
            import traceback

            print(redact(traceback.format_exc()), file=sys.stderr, end="")
        print(
            f"spurctl: internal error: {type(exc).__name__}: {redact(str(exc))} "
            "(rerun with --debug for a traceback and report it)",
            file=sys.stderr,
        )
        sys.exit(2)
