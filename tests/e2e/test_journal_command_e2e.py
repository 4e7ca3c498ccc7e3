"""Through the real CLI: `spurctl journal`, and reclaim saying where it journaled.

A reclaim of the simulated incident cluster writes the records; `spurctl journal`
reads them back as runs, newest first.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli
from tests.reclaim import PLANNED, RECLAIM_NODES, journal_records, reclaim_args

INCIDENT = tuple[SimCluster, Path, Path]


def _legacy_intent(node: str, job_id: int, at: str = "2026-12-02T10:00:00Z") -> str:
    """An intent as the first journaling reclaim wrote it: no schema, no run, (here) no outcome."""
    rec = {"event": "intent", "at": at, "operator": "ops", "node": node, "job_id": job_id}
    return json.dumps({**rec, "kind": "active-elsewhere"})


def test_reclaim_ends_with_its_journals_path_and_every_record_names_schema_and_run(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "j" / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal)
    table = run_cli(*args, home=tmp_path / "home")
    assert table.returncode == 1, table.stderr  # sent, unconfirmed
    assert table.stdout.rstrip("\n").splitlines()[-1] == f"Journal: {journal}"
    records = journal_records(journal)
    assert len(records) == 2 * len(PLANNED)
    assert {r["schema"] for r in records} == {"spurctl.journal/v1"}
    [run_id] = {r["run"] for r in records}

    as_json = run_cli(*args, "--format", "json", home=tmp_path / "home")
    assert json.loads(as_json.stdout)["journal"] == str(journal)
    again = journal_records(journal)[len(records) :]
    assert {r["run"] for r in again} != {run_id} and len({r["run"] for r in again}) == 1


def test_journal_shows_each_run_newest_first_and_an_interrupted_one_plainly(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    # An older run's intent that never got an outcome, then a torn line from its crash.
    journal.write_text(_legacy_intent("gpu003", 4711) + '\n{"event": "outc\n')
    os.chmod(journal, 0o600)
    home = tmp_path / "home"
    reclaimed = run_cli(*reclaim_args(sim, inventory, agent_map, journal), home=home)
    assert reclaimed.returncode == 1, reclaimed.stderr

    shown = run_cli("journal", "--journal", str(journal), home=home)
    assert shown.returncode == 0, shown.stderr
    assert f"journal {journal} line 2: unreadable record skipped" in shown.stderr
    assert "Traceback" not in shown.stderr
    out = shown.stdout
    lines = journal.read_text().splitlines()[2:]  # after the legacy intent and the torn line
    [run_id] = {json.loads(line)["run"] for line in lines}
    assert f"Journal {journal}: 2 runs (all, newest first)" in out
    # Newest first: this reclaim's row above the interrupted legacy run.
    assert out.index(run_id) < out.index("legacy-2026-12-02T10:00:00Z-ops")
    row = next(line for line in out.splitlines() if run_id in line)
    assert RECLAIM_NODES in row and f"{len(PLANNED)} sent ({len(PLANNED)} unconfirmed)" in row
    assert (
        "INTERRUPTED: run legacy-2026-12-02T10:00:00Z-ops left 1 intent without an outcome" in out
    )
    assert "job 4711 on gpu003 (active-elsewhere, intent 2026-12-02 10:00 UTC): check" in out
    assert "a later run closed it as unknown" in out

    doc = json.loads(run_cli("journal", "--journal", str(journal), "--format", "json").stdout)
    assert doc["schema"] == "spurctl.journal-runs/v1" and doc["unreadable_lines"] == 1
    newest, legacy = doc["runs"]
    assert (newest["run"], newest["nodes"], newest["sent"], newest["interrupted"]) == (
        run_id,
        RECLAIM_NODES,
        len(PLANNED),
        False,
    )
    # The closing "unknown" outcome belongs to the legacy run, not to the reclaim.
    assert newest["failed"] == 0 and newest["intents"] == len(PLANNED)
    assert legacy["interrupted"] and legacy["no_outcome"][0]["closed_later"] is True

    last = run_cli("journal", "--journal", str(journal), "--last", "1")
    assert "newest 1 of 2" in last.stdout and "legacy-" not in last.stdout
    assert "1 older run not shown: --last N" in last.stdout


def test_journal_run_shows_one_runs_records_and_a_wrong_id_is_one_line(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    home = tmp_path / "home"
    # No --journal anywhere: reclaim and journal agree on the default path.
    args = reclaim_args(sim, inventory, agent_map, tmp_path / "x")
    i = args.index("--journal")
    del args[i : i + 2]
    reclaimed = run_cli(*args, home=home)
    default = home / "state" / "spurctl" / "journal.jsonl"
    assert reclaimed.stdout.rstrip("\n").splitlines()[-1] == f"Journal: {default}"
    run_id = journal_records(default)[0]["run"]

    one = run_cli("journal", "--run", run_id[:-2], home=home)
    assert one.returncode == 0, one.stderr
    assert f"Run {run_id} (reclaim) by " in one.stdout
    assert f"{2 * len(PLANNED)} records" in one.stdout
    doc = json.loads(run_cli("journal", "--run", run_id, "--format", "json", home=home).stdout)
    assert len(doc["runs"][0]["records"]) == 2 * len(PLANNED)

    one_line_error(run_cli("journal", "--run", "nope", home=home), "--run nope", "no such run")


def test_journal_run_with_an_empty_id_is_a_usage_error_not_a_match_for_every_run(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    home = tmp_path / "home"
    journal = tmp_path / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal)
    assert run_cli(*args, home=home).returncode in (0, 1)
    for empty in ("", " "):
        proc = run_cli("journal", "--journal", str(journal), "--run", empty, home=home)
        one_line_error(proc, "--run takes a run's id")
        assert proc.stdout == ""


def test_no_journal_yet_is_one_line_and_exit_0(tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    shown = run_cli("journal", "--journal", str(missing))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"no reclaim has been journaled at {missing}\n"
    as_json = run_cli("journal", "--journal", str(missing), "--format", "json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout)["exists"] is False
    assert f"no reclaim has been journaled at {missing}" in as_json.stderr
    one_line_error(run_cli("journal", "--journal", str(tmp_path)), "not a regular file")
    one_line_error(run_cli("journal", "--last", "0"), "--last")


# -- the README's example is what the command prints ------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def _normalized(text: str) -> list[str]:
    """The output with what differs between runs (ids, times, operator, path) made constant."""
    text = re.sub(r"\d{8}T\d{6}-[0-9a-f]{6}", "RUN", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d( UTC)?", "WHEN", text)
    text = re.sub(r"^Journal \S+: ", "Journal PATH: ", text, flags=re.M)
    text = re.sub(r"http://127\.0\.0\.1:\d+", "http://ctl:6817", text)
    lines = [" ".join(line.replace("─", "").split()) for line in text.splitlines()]
    return [re.sub(r"(?<=WHEN )\S+ ", "OPERATOR ", line) for line in lines if line]


def test_the_readme_journal_example_is_real_output(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    text = README.read_text()
    command = "spurctl journal --last 5"
    assert f"```sh\n{command}\n```" in text
    shown = text.split(f"```sh\n{command}\n```", 1)[1].split("```text\n", 1)[1].split("```")[0]

    sim, inventory, agent_map = incident_cluster
    home = tmp_path / "home"
    journal = home / "state" / "spurctl" / "journal.jsonl"
    # A run killed (kill -9) right after its first intent, then the whole reclaim.
    run_cli(*reclaim_args(sim, inventory, agent_map, journal, node="gpu[003-005]"), home=home)
    journal.write_text(journal.read_text().splitlines()[0] + "\n")
    run_cli(*reclaim_args(sim, inventory, agent_map, journal), home=home)
    real = run_cli(*command.split()[1:], home=home, env={"COLUMNS": "120"})
    assert real.returncode == 0, real.stderr
    assert _normalized(real.stdout) == _normalized(shown), real.stdout
