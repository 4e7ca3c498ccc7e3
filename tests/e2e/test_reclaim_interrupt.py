"""Interruptions, met through the real CLI against a simulated cluster.

What an operator can rely on: a Ctrl-C never loses the record of a cancel that
went out, a Ctrl-C at the prompt sends nothing, and a cancel cut off by a crash
is reported on the next run.
"""

from __future__ import annotations

import json
import signal
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from spurctl.sources.journal_records import unresolved
from spurctl_sim import SimCluster, incident
from tests.cli import (
    cli_process,
    run_cli,
    wait_for,
)
from tests.reclaim import PLANNED, cancelled, journal_records, outcomes, reclaim_args


def reclaim(
    sim: SimCluster, inventory: Path, agent_map: Path, journal: Path, home: Path
) -> AbstractContextManager[subprocess.Popen[str]]:
    args = reclaim_args(sim, inventory, agent_map, journal)
    return cli_process(*args, "--concurrency", "1", "--format", "json", home=home)


def test_ctrl_c_stops_before_the_next_send_and_the_journal_matches_what_the_agents_got(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=0.4) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        journal = tmp_path / "journal.jsonl"
        with reclaim(sim, inventory, agent_map, journal, tmp_path / "home") as proc:
            wait_for(lambda: journal.exists() and bool(outcomes(journal)))
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=30)

        assert proc.returncode == 1, stderr
        assert "Traceback" not in stderr
        sent = outcomes(journal, "sent")
        assert sorted(cancelled(sim)) == sorted(sent)  # exactly, no more and no less
        assert 1 <= len(sent) < len(PLANNED)
        assert unresolved(journal) == []  # every intent has its outcome
        doc = json.loads(stdout)
        assert doc["summary"]["interrupted"] is True
        not_sent = {(e["node"], e["job_id"]) for e in doc["not_attempted"]}
        assert not_sent and not_sent.isdisjoint(sent)
        assert not_sent | outcomes(journal) == PLANNED


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_run_as_ctrl_c_does(
    tmp_path: Path, stop: signal.Signals
) -> None:
    with SimCluster(incident(), agent_latency=0.4) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        journal = tmp_path / "journal.jsonl"
        with reclaim(sim, inventory, agent_map, journal, tmp_path / "home") as proc:
            wait_for(lambda: journal.exists() and bool(outcomes(journal)))
            proc.send_signal(stop)
            stdout, stderr = proc.communicate(timeout=30)

        assert proc.returncode == 1, stderr
        assert "Traceback" not in stderr
        sent = outcomes(journal, "sent")
        assert sorted(cancelled(sim)) == sorted(sent)
        assert 1 <= len(sent) < len(PLANNED)
        assert unresolved(journal) == []
        doc = json.loads(stdout)
        assert doc["summary"]["interrupted"] is True
        assert doc["stopped_by"] == stop.name
        not_sent = {(e["node"], e["job_id"]) for e in doc["not_attempted"]}
        assert not_sent and not_sent | outcomes(journal) == PLANNED


def test_a_cancel_cut_off_by_a_crash_is_reported_as_unknown_on_the_next_run(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=1.5) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        journal = tmp_path / "journal.jsonl"
        with reclaim(sim, inventory, agent_map, journal, tmp_path / "home") as proc:
            # The first intent is journaled and its cancel is in flight (1.5 s): kill -9 now.
            wait_for(lambda: journal.exists() and journal.read_text().count('"intent"') == 1)
            proc.kill()
            proc.communicate(timeout=30)
        (open_intent,) = unresolved(journal)

        sim.agent_latency = 0.0
        args = reclaim_args(sim, inventory, agent_map, journal)
        dry = run_cli(*args, "--dry-run", home=tmp_path / "home")
        assert dry.returncode == 0, dry.stderr
        assert (
            f"unknown: check the node — job {open_intent.job_id} on {open_intent.node}"
            in dry.stdout
        )
        assert unresolved(journal) == [open_intent]  # a dry run records nothing

        real = run_cli(*args, "--format", "json", home=tmp_path / "home")
        assert "check the node" in real.stderr
        closing = next(
            r
            for r in journal_records(journal)
            if r["event"] == "outcome"
            and (r["node"], r["job_id"]) == (open_intent.node, open_intent.job_id)
        )
        assert closing["result"] == "failed" and "unknown" in closing["detail"]
        assert unresolved(journal) == []
