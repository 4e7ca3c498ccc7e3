"""The reclaim journal through the real CLI: one run at a time, private, never torn for good.

Two reclaims on one journal must not both send (the second
refuses, naming the first's pid); a torn line from a crash is reported and
skipped, by dry runs and real runs alike; the journal a run creates is 0600 in a
0700 directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spurctl_sim import SimCluster, incident
from tests.cli import cli_process, one_line_error, run_cli, wait_for
from tests.reclaim import PLANNED, cancelled, journal_records, reclaim_args


def _cluster_files(sim: SimCluster, tmp_path: Path) -> tuple[Path, Path]:
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    agent_map = tmp_path / "agents.json"
    agent_map.write_text(json.dumps(sim.agent_map()))
    return inventory, agent_map


def test_a_second_reclaim_on_the_same_journal_refuses_naming_the_first_runs_pid(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=2.0) as sim:
        inventory, agent_map = _cluster_files(sim, tmp_path)
        journal = tmp_path / "journal.jsonl"
        args = reclaim_args(sim, inventory, agent_map, journal)
        with cli_process(*args, "--concurrency", "1", home=tmp_path / "home1") as first:
            # The first run is sending: its first intent is journaled, its cancel in flight.
            wait_for(lambda: journal.exists() and '"intent"' in journal.read_text(), timeout=30)
            second = run_cli(*args, "--lock-wait", "0", home=tmp_path / "home2")
            sim.agent_latency = 0.0
            _, first_err = first.communicate(timeout=60)

        line = one_line_error(second, "in use", f"pid {first.pid}", str(journal))
        assert "--journal" in line
        assert first.returncode == 1, first_err  # sent, unconfirmed: nothing re-collected
        # Every planned cancel went out once, from the first run only.
        assert sorted(cancelled(sim)) == sorted(PLANNED)
        records = journal_records(journal)
        assert all("interrupted" not in r.get("detail", "") for r in records)
        assert len([r for r in records if r["event"] == "intent"]) == len(PLANNED)


def test_the_journal_a_reclaim_creates_is_private(tmp_path: Path) -> None:
    with SimCluster(incident()) as sim:
        inventory, agent_map = _cluster_files(sim, tmp_path)
        journal = tmp_path / "state" / "spurctl" / "journal.jsonl"
        proc = run_cli(*reclaim_args(sim, inventory, agent_map, journal), home=tmp_path / "home")
        assert proc.returncode == 1, proc.stderr  # sent, unconfirmed: nothing re-collected
    assert journal.stat().st_mode & 0o777 == 0o600
    assert journal.parent.stat().st_mode & 0o777 == 0o700


def test_a_torn_journal_line_is_reported_and_skipped_by_dry_and_real_runs(tmp_path: Path) -> None:
    with SimCluster(incident()) as sim:
        inventory, agent_map = _cluster_files(sim, tmp_path)
        journal = tmp_path / "journal.jsonl"
        # An interrupted run's intent, then torn records: a cut UTF-8 character, a
        # job id no JSON integer can be, and a half-written line with no newline.
        intent = {
            "event": "intent",
            "at": "2026-12-02T10:00:00Z",
            "operator": "ops",
            "node": "gpu003",
            "job_id": 4711,
            "kind": "active-elsewhere",
        }
        journal.write_bytes(
            json.dumps(intent).encode()
            + b"\n"
            + '{"event": "outcome", "detail": "caf\u00e9'.encode()[:-1]
            + b"\n"
            + b'{"event": "outcome", "node": "gpu003", "job_id": 1e400}\n'
            + b'{"event": "outcome", "node": "gpu0'
        )
        os.chmod(journal, 0o600)
        args = reclaim_args(sim, inventory, agent_map, journal)
        dry = run_cli(*args, "--dry-run", home=tmp_path / "home")
        assert dry.returncode == 0, dry.stderr
        assert "Traceback" not in dry.stderr and "internal error" not in dry.stderr
        for lineno in (2, 3, 4):
            assert f"journal {journal} line {lineno}: unreadable record skipped" in dry.stderr
        assert "unknown: check the node — job 4711 on gpu003" in dry.stdout
        assert cancelled(sim) == []

        real = run_cli(*args, "--format", "json", home=tmp_path / "home")
        assert real.returncode == 1, real.stderr  # sent, unconfirmed: nothing re-collected
        assert "internal error" not in real.stderr
        assert f"journal {journal} line 3: unreadable record skipped" in real.stderr
        json.loads(real.stdout)
        assert sorted(cancelled(sim)) == sorted(PLANNED)
    # The torn last line was ended before the run appended: every new record reads whole.
    lines = journal.read_bytes().split(b"\n")
    assert lines[3] == b'{"event": "outcome", "node": "gpu0'
    for raw in lines[4:]:
        if raw:
            json.loads(raw)


def test_a_second_reclaim_reaching_the_journal_through_a_symlink_refuses_with_the_first_pid(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=2.0) as sim:
        inventory, agent_map = _cluster_files(sim, tmp_path)
        journal = tmp_path / "ops" / "journal.jsonl"
        link = tmp_path / "mine" / "journal.jsonl"
        link.parent.mkdir()
        link.symlink_to(journal)  # created by the first run, reached through this link
        first_args = reclaim_args(sim, inventory, agent_map, journal)
        with cli_process(*first_args, "--concurrency", "1", home=tmp_path / "home1") as first:
            wait_for(lambda: journal.exists() and '"intent"' in journal.read_text(), timeout=30)
            second = run_cli(
                *reclaim_args(sim, inventory, agent_map, link),
                "--lock-wait",
                "0",
                home=tmp_path / "home2",
            )
            sim.agent_latency = 0.0
            _, first_err = first.communicate(timeout=60)

        one_line_error(second, "in use", f"pid {first.pid}", str(link))
        assert first.returncode == 1, first_err
        # Each planned cancel went out once, and nothing wrote into the first run's records.
        assert sorted(cancelled(sim)) == sorted(PLANNED)
        records = journal_records(journal)
        assert len([r for r in records if r["event"] == "intent"]) == len(PLANNED)
        assert {r["run"] for r in records} == {records[0]["run"]}
        assert all("interrupted" not in json.dumps(r) for r in records)
        assert not (tmp_path / "mine" / "journal.jsonl.lock").exists()


def test_a_journal_option_naming_a_file_that_is_no_journal_is_refused_and_nothing_sent(
    tmp_path: Path,
) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with SimCluster(incident()) as sim:
        inventory, agent_map = _cluster_files(sim, tmp_path)
        run = run_cli(*reclaim_args(sim, inventory, agent_map, passwd), home=tmp_path / "home")
        one_line_error(run, str(passwd), "not a spurctl journal", "--journal")
        assert cancelled(sim) == []
        listed = run_cli("journal", "--journal", str(passwd), home=tmp_path / "home")
        one_line_error(listed, "not a spurctl journal")
    assert passwd.read_text() == "root:x:0:0:root:/root:/bin/bash\n"
    assert not (tmp_path / "passwd.lock").exists()
