"""spurctl demo: audit and reclaim a simulated cluster, end to end."""

from __future__ import annotations

import enum
from typing import Annotated

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus, SpurctlError

NAME = "demo"
EPILOG = None

# The simulator is a distribution of its own (sim/, spurctl-sim): an admin host's spurctl
# has none unless it is added (README.md, "Install on an admin host").
NO_SIMULATOR = (
    "spurctl demo needs the simulated cluster (spurctl-sim), which this spurctl was "
    "installed without: from a checkout, pip install ./sim; where pipx installed spurctl, "
    "pipx inject spurctl ./sim (or a spurctl_sim wheel: README.md, Install on an admin host)"
)


class DemoScenario(enum.StrEnum):
    INCIDENT = "incident"
    POST_WIPE = "post-wipe"


ScenarioOpt = Annotated[
    DemoScenario,
    typer.Option(
        "--scenario",
        help="With --serve: the cluster to serve: the PR #623 incident, or a controller "
        "whose state was wiped before the agents were recycled (for `checklist post-wipe`).",
        case_sensitive=False,
    ),
]

ServeOpt = Annotated[
    bool,
    typer.Option(
        "--serve",
        help="Skip the walkthrough: keep the cluster up until Ctrl-C and print the "
        "commands to try on it.",
    ),
]


def command(
    ctx: typer.Context,
    serve: ServeOpt = False,
    scenario: ScenarioOpt = DemoScenario.INCIDENT,
    ack_version: opt.AckVersionOpt = None,
) -> int:
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
    try:
        # Only here (tests/unit/test_layers.py): every other command runs without it.
        import spurctl_sim  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "spurctl_sim":  # the simulator is there but broken: show it
            raise
        raise SpurctlError(NO_SIMULATOR) from None
    from spurctl.demo import command as run_demo

    run_demo(keep_up=serve, scenario=scenario.value, ack=opt.ack_version(ctx, ack_version))
    return ExitStatus.OK
