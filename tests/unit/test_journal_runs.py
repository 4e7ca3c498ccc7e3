"""Journal records carry a schema and a run id; the journal reads back as runs.

(Through the real CLI against the simulated cluster: e2e/test_journal_command_e2e.py.)
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from spurctl.act.journal import Journal, journal_lock
from spurctl.errors import SpurctlError
from spurctl.render.journal import document, print_one, print_runs
from spurctl.sources.journal_records import SCHEMA, unresolved
from spurctl.usecases.journal_runs import LEGACY_GAP_S, load, select, summarize


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _legacy(event: str, at: str, node: str, job: int, operator: str = "ops", **more: Any) -> str:
    rec = {"event": event, "at": at, "operator": operator, "node": node, "job_id": job}
    rec.update(kind="active-elsewhere", **more)
    return json.dumps(rec)


def test_every_record_carries_the_schema_and_its_runs_id(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu003", 1, "active-elsewhere")
        j.outcome("gpu003", 1, "active-elsewhere", "sent", "ok")
    with Journal(path) as j:  # another run (a node-release opens one Journal per run)
        j.intent("gpu004", 2, "agent-orphan")
    records = _records(path)
    assert all(r["schema"] == SCHEMA == "spurctl.journal/v1" for r in records)
    assert records[0]["run"] == records[1]["run"] != records[2]["run"]
    assert all(r["run"] for r in records)


def test_one_lock_hold_is_one_run_whatever_journals_write_it(tmp_path: Path) -> None:
    # A reclaim sends through one Journal and journals its re-collect's failures
    # through another, both under one journal_lock: one run.
    path = tmp_path / "journal.jsonl"
    with journal_lock(path):
        with Journal(path) as j:
            j.intent("gpu003", 1, "active-elsewhere")
            j.outcome("gpu003", 1, "active-elsewhere", "sent", "ok")
        with Journal(path) as j:
            j.outcome("gpu003", 1, "active-elsewhere", "failed", "still held", confirmed=False)
    with Journal(path) as j:
        j.intent("gpu009", 9, "active-elsewhere")
    runs = {r["run"] for r in _records(path)[:3]}
    assert len(runs) == 1
    assert _records(path)[3]["run"] not in runs
    [later, first] = summarize(_records(path))
    # The re-collect's failed replaced the sent before it.
    assert (first.sent, first.failed, first.no_outcome) == (0, 1, [])
    assert later.interrupted and later.no_outcome[0].node == "gpu009"


def test_closing_an_earlier_runs_intent_keeps_that_run_and_names_the_closer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu003", 4711, "active-elsewhere")  # interrupted: no outcome
        j.intent("gpu004", 4712, "active-elsewhere")
        j.outcome("gpu004", 4712, "active-elsewhere", "sent", "ok")
    earlier = unresolved(path)
    assert [u.run for u in earlier] == [_records(path)[0]["run"]]
    with Journal(path) as j:
        for u in j.still_open(earlier):
            j.outcome(u.node, u.job_id, u.kind, "failed", "unknown: check the node")
        j.intent("gpu005", 4715, "active-elsewhere")
        j.outcome("gpu005", 4715, "active-elsewhere", "skipped", "requeued")
    records = _records(path)
    closing = records[3]
    assert closing["run"] == records[0]["run"]
    assert closing["recorded_by"] == records[4]["run"] != records[0]["run"]
    assert unresolved(path) == []
    [newest, oldest] = summarize(records)
    assert (newest.skipped, newest.failed, newest.no_outcome) == (1, 0, [])
    assert oldest.interrupted and oldest.sent == 1 and oldest.unconfirmed == 1
    [gone] = oldest.no_outcome
    assert (gone.node, gone.job_id, gone.closed_later) == ("gpu003", 4711, True)


def test_closing_a_record_from_before_run_ids_does_not_charge_the_new_run(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text(_legacy("intent", "2026-12-02T10:00:00Z", "gpu003", 4711) + "\n")
    with Journal(path) as j:
        for u in j.still_open(unresolved(path)):
            assert u.run is None
            j.outcome(u.node, u.job_id, u.kind, "failed", "unknown: check the node")
    [new, old] = summarize(_records(path))
    assert old.legacy and old.run == "legacy-2026-12-02T10:00:00Z-ops"
    assert [(u.node, u.closed_later) for u in old.no_outcome] == [("gpu003", True)]
    assert (new.failed, new.intents, new.no_outcome) == (0, 0, [])


def test_records_without_run_ids_group_by_operator_gap_and_repeated_intent() -> None:
    lines = [
        _legacy("intent", "2026-12-02T10:00:00Z", "gpu003", 1),
        _legacy("outcome", "2026-12-02T10:00:01Z", "gpu003", 1, result="sent", detail=""),
        _legacy("intent", "2026-12-02T10:00:02Z", "gpu004", 2),
        _legacy("outcome", "2026-12-02T10:00:03Z", "gpu004", 2, result="skipped", detail=""),
        # another operator
        _legacy("intent", "2026-12-02T10:00:04Z", "gpu003", 1, operator="kim"),
        _legacy("outcome", "2026-12-02T10:00:05Z", "gpu003", 1, "kim", result="failed", detail=""),
        # kim again, the same intent repeated: a second attempt, a second run
        _legacy("intent", "2026-12-02T10:00:06Z", "gpu003", 1, operator="kim"),
        # kim much later
        _legacy("intent", "2026-12-02T10:05:59Z", "gpu009", 3, operator="kim"),
    ]
    assert LEGACY_GAP_S < 353  # the last intent comes 353 s after the one before
    runs = summarize(json.loads(line) for line in lines)
    assert [r.run for r in runs][::-1] == [
        "legacy-2026-12-02T10:00:00Z-ops",
        "legacy-2026-12-02T10:00:04Z-kim",
        "legacy-2026-12-02T10:00:06Z-kim",
        "legacy-2026-12-02T10:05:59Z-kim",
    ]
    first = runs[-1]
    assert (first.sent, first.skipped, first.nodes, first.operators) == (
        1,
        1,
        ["gpu003", "gpu004"],
        ["ops"],
    )
    assert runs[-2].failed == 1
    assert [len(r.no_outcome) for r in runs] == [1, 1, 0, 0]


def test_a_confirmed_or_released_outcome_is_not_unconfirmed() -> None:
    base = {"run": "r1", "at": "2026-12-02T10:00:00Z", "operator": "ops", "kind": "k"}
    recs = [
        {**base, "event": "intent", "node": "gpu001", "job_id": 1},
        {**base, "event": "outcome", "node": "gpu001", "job_id": 1, "result": "sent"},
        {**base, "event": "intent", "node": "gpu002", "job_id": 2},
        {**base, "event": "outcome", "node": "gpu002", "job_id": 2, "result": "sent"},
        {
            **base,
            "event": "outcome",
            "node": "gpu002",
            "job_id": 2,
            "result": "sent",
            "confirmed": True,
        },
        {**base, "event": "intent", "node": "gpu003", "job_id": 3},
        {**base, "event": "outcome", "node": "gpu003", "job_id": 3, "result": "released"},
    ]
    [run] = summarize(recs)
    assert (run.sent, run.confirmed, run.unconfirmed, run.intents) == (3, 2, 1, 3)


def test_load_skips_a_torn_line_with_a_warning_and_a_missing_journal_is_no_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    warnings: list[str] = []
    missing = load(path, warnings.append)
    assert (missing.exists, missing.runs, warnings) == (False, [], [])
    path.write_text(_legacy("intent", "2026-12-02T10:00:00Z", "gpu003", 1) + '\n{"event": "outc\n')
    view = load(path, warnings.append)
    assert view.exists and len(view.runs) == 1 and view.unreadable == 1
    [warning] = warnings
    assert warning.startswith(f"journal {path} line 2: unreadable record skipped (")
    with pytest.raises(SpurctlError, match="not a regular file"):
        load(tmp_path)


def test_select_takes_an_id_or_a_prefix_naming_one_run() -> None:
    base = {"at": "2026-12-02T10:00:00Z", "operator": "ops", "kind": "k", "event": "intent"}
    runs = summarize(
        [
            {**base, "run": "20261202T100000-aaaaaa", "node": "gpu001", "job_id": 1},
            {**base, "run": "20261202T100000-aaaaab", "node": "gpu002", "job_id": 2},
            {**base, "run": "20261202T110000-cccccc", "node": "gpu003", "job_id": 3},
        ]
    )
    assert select(runs, "20261202T11").nodes == ["gpu003"]
    assert select(runs, "20261202T100000-aaaaab").nodes == ["gpu002"]
    with pytest.raises(SpurctlError, match="2 runs start with it"):
        select(runs, "20261202T1000")
    with pytest.raises(SpurctlError, match="no such run"):
        select(runs, "nope")


def test_the_table_names_every_interrupted_intent_and_json_is_the_runs_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "journal.jsonl"
    path.write_text(
        "\n".join(
            [
                _legacy("intent", "2026-12-02T10:00:00Z", "gpu003", 4711),
                _legacy("intent", "2026-12-02T10:00:01Z", "gpu004", 4712),
                _legacy("outcome", "2026-12-02T10:00:02Z", "gpu004", 4712, result="sent"),
            ]
        )
        + "\n"
    )
    view = load(path)
    out = io.StringIO()
    print_runs(view, view.runs, fmt="table", file=out)
    text = out.getvalue()
    assert "2026-12-02 10:00" in text and "gpu[003-004]" in text
    assert "1 sent (1 unconfirmed), 1 without an outcome" in text
    assert "INTERRUPTED: run legacy-2026-12-02T10:00:00Z-ops left 1 intent without" in text
    assert "job 4711 on gpu003" in text
    doc = document(view, view.runs)
    assert doc["schema"] == "spurctl.journal-runs/v1" and doc["exists"] is True
    [run] = doc["runs"]
    assert (run["nodes"], run["sent"], run["unconfirmed"], run["interrupted"]) == (
        "gpu[003-004]",
        1,
        1,
        True,
    )
    assert run["no_outcome"] == [
        {
            "node": "gpu003",
            "job_id": 4711,
            "kind": "active-elsewhere",
            "command": "reclaim",
            "step": None,
            "at": "2026-12-02T10:00:00Z",
            "closed_later": False,
        }
    ]
    one = io.StringIO()
    print_one(view, view.runs[0], fmt="json", file=one)
    assert len(json.loads(one.getvalue())["runs"][0]["records"]) == 3


def test_a_run_a_signal_stopped_reads_interrupted_and_its_stop_records_pair_with_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spurctl.sources.journal_records import cancels_sent

    path = tmp_path / "j.jsonl"
    with journal_lock(path), Journal(path) as j:
        j.intent("gpu003", 4711, "active-elsewhere")
        j.outcome("gpu003", 4711, "active-elsewhere", "sent", "accepted")
        j.interrupted("gpu004", 4712, "active-elsewhere", "SIGINT", "not sent", sent=False)
        j.interrupted("gpu005", 4712, "active-elsewhere", "SIGINT", "not sent", sent=False)
    # Readers that pair intents with outcomes pass the stop records by.
    assert unresolved(path) == []
    assert set(cancels_sent(path)) == {("gpu003", 4711)}
    (run,) = load(path).runs
    assert run.interrupted and run.stopped_by == "SIGINT" and run.not_sent == 2
    assert (run.intents, run.sent, run.unconfirmed, run.no_outcome) == (1, 1, 1, [])
    assert run.nodes == ["gpu003"]  # the nodes it touched
    view = load(path)
    out = io.StringIO()
    monkeypatch.setenv("COLUMNS", "200")  # the outcomes on one line
    print_runs(view, view.runs, fmt="table", file=out)
    assert "1 sent (1 unconfirmed), 2 not sent, interrupted (SIGINT)" in out.getvalue()
    assert "without an outcome" not in out.getvalue()
    doc = document(view, view.runs)["runs"][0]
    assert (doc["interrupted"], doc["stopped_by"], doc["not_sent"]) == (True, "SIGINT", 2)
