"""One reclaim at a time per journal, from the plan on: a reclaim waiting at its prompt
already holds the journal's lock (#43.13).

A second reclaim on that journal refuses at once, naming the first's pid, instead of
planning, sending its cancels and journaling beside the first while the first's
operator reads the plan; a dry run still reads the journal without waiting.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import clean_env, on_a_terminal, one_line_error, read_terminal, run_cli, spurctl_argv
from tests.reclaim import cancelled, reclaim_args


def test_a_second_reclaim_refuses_while_the_first_waits_at_its_prompt(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal)
    asking = [a for a in args if a != "--yes"]
    meanwhile: dict[str, subprocess.CompletedProcess[str]] = {}
    first: dict[str, object] = {}

    def at_the_prompt(terminal: int) -> bytes:
        seen = read_terminal(terminal, lambda shown: b"[y/N]" in shown)
        assert b"[y/N]" in seen, seen
        # pty.fork's child leads its own session: the terminal's foreground group is it.
        first["pid"] = os.tcgetpgrp(terminal)
        # The first run shows its plan and asks; meanwhile another operator runs one too.
        # --lock-wait 0: refuse at once (the default waits up to 60 s for the lock).
        meanwhile["second"] = run_cli(*args, "--lock-wait", "0", home=tmp_path / "home2")
        meanwhile["dry"] = run_cli(*args, "--dry-run", home=tmp_path / "home3")
        first["cancels while asking"] = cancelled(sim)
        os.write(terminal, b"n\r")
        return read_terminal(terminal, lambda _: False, seen=seen)  # to the first's exit

    status, seen = on_a_terminal(
        spurctl_argv(*asking), clean_env(tmp_path / "home1"), at_the_prompt
    )
    assert status == 1 and b"nothing sent" in seen, seen
    line = one_line_error(meanwhile["second"], "in use", str(journal), "--journal")
    assert f"pid {first['pid']}" in line, line
    # Nothing went out while the first was asking, nor after it said no.
    assert first["cancels while asking"] == [] and cancelled(sim) == []
    assert not journal.exists()
    # A dry run never waits for the lock: it planned beside the asking run.
    dry = meanwhile["dry"]
    assert dry.returncode == 0, dry.stderr
    assert "Reclaim plan: 9 cancels" in dry.stdout
