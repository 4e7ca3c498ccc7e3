"""Through the real CLI: what a reclaim says when it sends nothing, when it waits, and
when it is stopped (issue 28, item 8).

- declining or Ctrl-C at the prompt says "nothing sent";
- the re-collect's wait says on stderr what it waits for and how long at most;
- after a stop, one summary whose counts agree with the UNCONFIRMED line under it;
- `spurctl journal` marks the stopped run interrupted;
- a dry run's table ends with "DRY RUN: nothing sent".
"""

from __future__ import annotations

import json
import queue
import re
import signal
import time
from pathlib import Path

from spurctl_sim import SimCluster, incident, node_line
from tests.cli import (
    answer_on_a_terminal,
    cli_process,
    lines_of,
    run_cli,
    wait_for,
)
from tests.reclaim import PLANNED, cancelled, journal_records, outcomes, reclaim_args

SUMMARY = re.compile(r"^(\d+) planned: (\d+) sent(?: \((\d+) unconfirmed\))?, ", re.M)
UNCONFIRMED = re.compile(r"UNCONFIRMED: (\d+) sent cancels? not shown freed")


def _files(sim: SimCluster, tmp_path: Path) -> tuple[Path, Path, Path]:
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    agent_map = tmp_path / "agents.json"
    agent_map.write_text(json.dumps(sim.agent_map()))
    return inventory, agent_map, tmp_path / "journal.jsonl"


def test_declining_or_ctrl_c_at_the_prompt_says_nothing_sent(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal)
    args.remove("--yes")
    # No, then Ctrl-C through the terminal's line discipline, each typed at once: a prompt
    # built on input() lost a Ctrl-C landing between the prompt's write and its read().
    for keys in (b"n\r", b"\x03"):
        status, seen = answer_on_a_terminal(args, tmp_path / "home", keys)
        assert status == 1, seen
        assert b"nothing sent" in seen and b"Traceback" not in seen, seen
    assert sim.cancels == [] and not journal.exists()


def _journal_json(journal: Path, home: Path) -> dict[str, object]:
    shown = run_cli("journal", "--journal", str(journal), "--format", "json", home=home)
    assert shown.returncode == 0, shown.stderr
    (run,) = json.loads(shown.stdout)["runs"]
    assert isinstance(run, dict)
    return run


def test_ctrl_c_mid_run_gives_one_summary_whose_counts_agree_and_the_journal_says_interrupted(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=0.4) as sim:
        inventory, agent_map, journal = _files(sim, tmp_path)
        args = reclaim_args(sim, inventory, agent_map, journal)
        with cli_process(*args, "--concurrency", "1", home=tmp_path / "home") as proc:
            wait_for(lambda: journal.exists() and bool(outcomes(journal)))
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1, err
        assert "Traceback" not in err and "spurctl: interrupted" not in err
        sent = len(cancelled(sim))
        assert 1 <= sent < len(PLANNED)

    # One count line, and the cancels that went out counted once, as sent. (A Ctrl-C that
    # lands during an entry's re-check skips that entry: it never went out.)
    (summary,) = SUMMARY.findall(out)
    assert summary == (str(len(PLANNED)), str(sent), str(sent)), out
    skipped = len(outcomes(journal, "skipped"))
    not_sent = len(PLANNED - outcomes(journal))
    assert (
        f", {skipped} skipped, 0 failed, {not_sent} not sent (interrupted). Stopped by SIGINT."
        in out
    )
    assert UNCONFIRMED.findall(out) == [str(sent)]
    assert out.count("sent, unconfirmed") == sent

    # The journal reads the run back as interrupted, with what it never sent.
    run = _journal_json(journal, tmp_path / "home")
    assert run["interrupted"] is True and run["stopped_by"] == "SIGINT"
    assert (run["sent"], run["not_sent"], run["no_outcome"]) == (sent, not_sent, [])
    stops = [r for r in journal_records(journal) if r["event"] == "interrupted"]
    assert {(r["node"], r["job_id"]) for r in stops if r["sent"] is False} == PLANNED - outcomes(
        journal
    )
    table = run_cli("journal", "--journal", str(journal), home=tmp_path / "home")
    (row,) = [line for line in table.stdout.splitlines() if "interrupted" in line]
    assert f"{sent} sent ({sent} unconfirmed)" in row and f"{not_sent} not sent" in row
    assert "interrupted (SIGINT)" in row
    one = run_cli(
        "journal", "--journal", str(journal), "--run", str(run["run"]), home=tmp_path / "home"
    )
    assert "interrupted (SIGINT)" in one.stdout.splitlines()[0]
    assert f"INTERRUPTED: the run was stopped by SIGINT: {not_sent} cancels not sent" in one.stdout


def test_the_settle_wait_says_what_it_waits_for_and_a_ctrl_c_in_it_keeps_the_counts_agreeing(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    # The nodes are "collected" from the plan's own inventory file: they never free the
    # jobs, so the wait runs to --settle unless stopped.
    args = [
        *reclaim_args(sim, inventory, agent_map, journal, node="gpu[003-004]"),
        "--command", node_line.command(inventory), "--verify-inventory", "--settle", "30",
    ]  # fmt: skip
    with cli_process(*args, home=tmp_path / "home") as proc:
        assert proc.stderr is not None and proc.stdout is not None
        errors = lines_of(proc.stderr)
        deadline = time.monotonic() + 30
        said = ""
        while "waiting" not in said:
            left = deadline - time.monotonic()
            assert left > 0, "no line about the wait on stderr"
            try:
                said = errors.get(timeout=left)
            except queue.Empty:
                continue
            assert said, "stderr closed before the wait was said"
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()
        proc.wait(timeout=30)
    assert proc.returncode == 1
    assert said.strip() == (
        "spurctl: waiting up to 30 s (--settle) for gpu[003-004] to free jobs 4711, 4712; "
        "Ctrl-C stops the wait and leaves them unconfirmed ..."
    )
    # Never "0 sent ... 2 unconfirmed" beside "2 sent cancels": one summary that agrees.
    assert SUMMARY.findall(out) == [("2", "2", "2")], out
    assert "2 planned: 2 sent (2 unconfirmed), 0 skipped, 0 failed. Stopped by SIGINT." in out
    assert UNCONFIRMED.findall(out) == ["2"]
    assert out.count("sent, unconfirmed") == 2 and "stopped by SIGINT" in out

    run = _journal_json(journal, tmp_path / "home")
    assert run["interrupted"] is True and run["stopped_by"] == "SIGINT"
    assert (run["sent"], run["unconfirmed"], run["not_sent"]) == (2, 2, 0)


def test_a_dry_run_table_ends_with_dry_run_nothing_sent(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    for node in ("gpu[003-008,012-013]", "gpu001"):  # a plan, and nothing to reclaim
        args = reclaim_args(sim, inventory, agent_map, journal, node=node)
        dry = run_cli(*args, "--dry-run", home=tmp_path / "home")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines()[-1] == "DRY RUN: nothing sent", dry.stdout
    dry = run_cli(*args, "--dry-run", "--format", "json", home=tmp_path / "home")
    assert "DRY RUN" not in dry.stdout + dry.stderr
    json.loads(dry.stdout)
    assert sim.cancels == [] and not journal.exists()
