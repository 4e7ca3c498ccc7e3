"""`--journal` that names no file, or reaches its file through a link spurctl cannot
trust, is one usage line and exit 2 on every command that takes it, before anything is
read, sent or created (issue 48.6: `repair --journal /` was an internal error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import dead_url, one_line_error, run_cli
from tests.e2e.test_repair_e2e import Phantom, p, repair, untouched

__all__ = ["p"]  # the fixture, imported for the repair test

# Each command that takes --journal, with what else it needs to get that far.
COMMANDS = {
    "reclaim": ["reclaim", "--node", "gpu001", "--yes"],
    "repair": ["repair", "--node", "gpu001", "--yes"],
    "drain": ["drain", "--node", "gpu001", "--yes"],
    "resume": ["resume", "--node", "gpu001", "--yes"],
    "node-release": ["node-release", "--job", "4711", "--started-at", "2026-12-01T14:02:11Z"],
    "journal": ["journal"],
    "audit": ["audit", "--node", "gpu001"],
    "explain": ["explain", "gpu001"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_root_directory_as_journal_is_one_line_on_every_command(
    command: str, tmp_path: Path
) -> None:
    argv = [*COMMANDS[command], "--journal", "/"]
    if command != "node-release" and command != "journal":
        argv += ["--controller", dead_url()]
    one_line_error(run_cli(*argv, home=tmp_path), "journal / is a directory, not a regular file")


@pytest.mark.parametrize("command", ["reclaim", "drain", "journal"])
def test_a_journal_behind_a_link_to_nothing_is_refused_and_nothing_is_created(
    command: str, tmp_path: Path
) -> None:
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere" / "cron.d")
    journal = tmp_path / "state" / "journal.jsonl"
    argv = [*COMMANDS[command], "--journal", str(journal)]
    if command != "journal":
        argv += ["--controller", dead_url()]
    one_line_error(run_cli(*argv, home=tmp_path / "home"), "a link to", "does not exist")
    assert not (tmp_path / "elsewhere").exists()


def test_repair_with_the_root_directory_as_journal_sends_nothing(p: Phantom) -> None:
    before = p.sim.node("gpu009")
    run = repair(p, "--yes", "--journal", "/")  # the later --journal is the one used
    one_line_error(run, "journal / is a directory, not a regular file", "--journal FILE")
    untouched(p, before)
