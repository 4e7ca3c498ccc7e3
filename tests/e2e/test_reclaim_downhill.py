"""A reclaim goes downhill, each step once (#41.5): one controller client serves its audit
and every re-check, the journal is read once and opened once, however many records
the run writes (intents, outcomes, and what the re-collect showed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spurctl.act import journal as journal_module
from spurctl.sources import controller
from spurctl.sources import journal_records as journal_reading
from spurctl_sim import SimCluster
from tests.cli import run_cli
from tests.e2e.test_reclaim_confirm import NODES, SENT, files, kept_fresh, node_command
from tests.reclaim import cancelled, journal_records


def _counting(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, seen: Counter[str], key: str
) -> None:
    """Count in `seen[key]` every call of `owner.name`."""
    original: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen[key] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def test_one_controller_client_and_one_journal_serve_a_whole_verified_run(
    incident_cluster: tuple[SimCluster, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = incident_cluster[0]
    plan_from, live = files(sim, tmp_path)
    journal = tmp_path / "j.jsonl"
    with journal_module.Journal(journal) as earlier:  # an earlier run's cancel elsewhere
        earlier.intent("gpu020", 4000, "terminal-held")
        earlier.outcome("gpu020", 4000, "terminal-held", "sent", "accepted")
    seen: Counter[str] = Counter()
    _counting(monkeypatch, controller.ControllerClient, "__init__", seen, "controller clients")
    _counting(monkeypatch, journal_module.Journal, "__init__", seen, "journals opened")
    _counting(monkeypatch, journal_reading, "records", seen, "journal reads")
    with kept_fresh(sim, live):
        run = run_cli(
            "reclaim", "--controller", sim.controller_address, "--node", NODES,
            "--inventory", str(plan_from), "--command", node_command(tmp_path, live),
            "--agent-map", str(tmp_path / "agents.json"), "--journal", str(journal),
            "--verify-inventory", "--settle", "10", "--yes",
            home=tmp_path / "home",
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr  # sent, and confirmed by the nodes
    assert sorted(cancelled(sim)) == sorted(SENT)
    records = journal_records(journal)
    # Each entry's intent, its outcome, and what the re-collect showed: one run, one file.
    mine = records[2:]
    assert len(mine) == 3 * len(SENT) and len({r["run"] for r in mine}) == 1
    assert seen == {"controller clients": 1, "journals opened": 1, "journal reads": 1}, seen
