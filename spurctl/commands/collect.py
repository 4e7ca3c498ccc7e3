"""spurctl collect: gather many nodes' inventories in parallel."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus, SpurctlError
from spurctl.option_defaults import configured
from spurctl.scope import Scope
from spurctl.sources.collect import DEFAULT_COMMAND
from spurctl.sources.tree import DEFAULT_REMOTE_COMMAND

NAME = "collect"
EPILOG = None

CommandOpt = Annotated[
    str,
    opt.command_option(
        "Command run locally once per node, %h replaced by the node name; "
        "it must print the node's inventory."
    ),
]
FanoutOpt = Annotated[
    int,
    opt.fanout_option(
        "How many commands run at once (with --topology: on each gateway, and here "
        "for nodes reached directly)."
    ),
]
TopologyOpt = Annotated[
    Path | None,
    opt.topology_option(
        "Reach the nodes through gateways: run --remote-command on every node through "
        "the gateways this file routes to it (spurctl's relay; ClusterShell's topology.conf "
        "format, first route from this host's short name). Never read unless named: "
        "/etc/clustershell/topology.conf is not used by default, and without --topology "
        "every node is reached from this host with --command."
    ),
]
# collect's --timeout was its per-node limit; everywhere else --timeout is the RPC deadline.
OldTimeoutOpt = Annotated[
    float | None,
    opt.timeout_option("Deprecated: the old name of --node-timeout."),
]
OutputOpt = Annotated[Path | None, opt.output_option("Write JSON Lines here, not stdout.")]
NodeTimeoutOpt = Annotated[
    float | None,
    opt.node_timeout_option("Seconds a node's command may run before it is killed."),
]


MISSING_NODES = "missing option --nodes: name the nodes to collect with -w HOSTLIST"


@dataclass(frozen=True, slots=True)
class CollectRequest:
    """One collect as asked: options only, every mix of them that cannot mean anything
    refused when it is built (SpurctlError), before config.toml, the topology or any node
    is read. The holdings' options (--command, --topology, ...) are checked where every
    command checks them (options.HoldingOptions.sources)."""

    scope: Scope
    node_timeout_s: float | None = None
    # collect's --timeout: the old name of --node-timeout, taken with a warning.
    old_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.scope.everything:
            raise SpurctlError(MISSING_NODES)
        if self.old_timeout_s is not None and self.node_timeout_s is not None:
            raise SpurctlError(
                "collect's --timeout is the old name of --node-timeout; give --node-timeout only"
            )

    @property
    def limit(self) -> float:
        """How long each node's command may run: --node-timeout, its old name, the default."""
        given = self.node_timeout_s if self.old_timeout_s is None else self.old_timeout_s
        return opt.COLLECT_NODE_TIMEOUT_S if given is None else given


def configured_command(ctx: typer.Context, given: str, topology: Path | None) -> str:
    """--command, else config.toml's collect_command (as for --collect)."""
    chosen = configured(
        ctx, {"command": given, "topology": topology}, [("command", CommandOpt, DEFAULT_COMMAND)]
    )
    return typing.cast(str, chosen["command"])


@opt.scoped("The nodes to collect (required).")
def command(
    ctx: typer.Context,
    command: CommandOpt = DEFAULT_COMMAND,
    fanout: FanoutOpt = 64,
    node_timeout_s: NodeTimeoutOpt = None,
    timeout: OldTimeoutOpt = None,
    output: OutputOpt = None,
    topology: TopologyOpt = None,
    remote_command: opt.RemoteCommandOpt = DEFAULT_REMOTE_COMMAND,
    ssh: opt.SshOpt = None,
    ship_scanner: opt.ShipScannerOpt = False,
    controller: opt.ControllerOpt = None,
    conf: opt.ConfOpt = None,
    scope: Scope = Scope(),
) -> int:
    """Gather many nodes' inventories in parallel.

    Writes JSON Lines, one inventory per node. Runs --command once per node
    (%h is the node name), or with --topology runs --remote-command on every
    node through the gateways (spurctl's relay). A node that fails, times out, prints
    no valid inventory or sits behind a gateway that failed gets a record with
    "error" set. Each record names the controller and cluster it was told
    (--controller, spur.conf), and a reclaim against another refuses it.
    Exit 0 when every node answered, 1 when any failed.

    \b
    Example:
      spurctl collect --nodes 'gpu[001-128]' -o inventories.jsonl
      spurctl collect -w 'gpu[0001-8000]' --topology /etc/clustershell/topology.conf
      spurctl collect -w 'gpu[001-128]' --ship-scanner   # nodes without spurctl
    """
    from spurctl.render.collect import show_collected
    from spurctl.sources.cluster_binding import stamped
    from spurctl.sources.collect import collect
    from spurctl.sources.inventory_document import inventory_lines
    from spurctl.sources.settings import told

    request = CollectRequest(scope, node_timeout_s, timeout)
    if request.old_timeout_s is not None:
        from spurctl.errors import warn

        warn(
            "collect --timeout is the old name of --node-timeout (each node's limit; in every "
            "other command --timeout is the RPC deadline): use --node-timeout"
        )
    limit = request.limit
    # The same defaults, checks and command as an audit's --collect: one way to read them.
    holdings = opt.HoldingOptions(
        None, True, configured_command(ctx, command, topology), fanout, topology,
        remote_command, ssh, ship_scanner, limit,
    )  # fmt: skip
    src = holdings.sources(request.scope)
    named = configured(
        ctx, {"controller": controller, "conf": conf},
        [("controller", opt.ControllerOpt, None), ("conf", opt.ConfOpt, None)],
    )  # fmt: skip
    # Recorded: a reclaim elsewhere refuses these.
    binding = told(named["controller"], named["conf"])
    results = collect(
        request.scope.targets(()), command=src.command, fanout=src.fanout, timeout=limit,
        tree=src.tree, ship_scanner=src.ship_scanner,
    )  # fmt: skip
    show_collected(inventory_lines(stamped(inv, binding) for inv in results), results, output)
    return ExitStatus.ACTION_NEEDED if any(i.error is not None for i in results) else ExitStatus.OK
