"""Every command that changes a node or the controller treats SIGTERM and SIGHUP as Ctrl-C
(commands/help.ChangingCommand): a systemd stop or a closed ssh session part way through
then reports what was sent, as a Ctrl-C does, never ends the process without a word.
Commands that only read keep the signals' own actions."""

from __future__ import annotations

import typer

from spurctl.cli import app
from spurctl.commands.help import ChangingCommand

CHANGING = {"reclaim", "repair", "drain", "resume", "node-release"}


def test_every_command_that_changes_nodes_stops_on_sigterm_and_sighup_as_on_ctrl_c() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    changing = {name for name, cmd in root.commands.items() if isinstance(cmd, ChangingCommand)}
    assert changing == CHANGING
