"""The journal is an append-only, fsynced, faithful record of every cancel."""

import json
from pathlib import Path

from spurctl.act.journal import Journal, unresolved
from spurctl.errors import register_secret


def test_intent_and_outcome_are_appended_in_order(tmp_path: Path) -> None:
    path = tmp_path / "j" / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 4711, "active-elsewhere")
        j.outcome("gpu017", 4711, "active-elsewhere", "sent", "agent accepted")
    with Journal(path) as j:  # a second run appends, never rewrites
        j.intent("gpu018", 9, "terminal-held")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["event"] for r in records] == ["intent", "outcome", "intent"]
    assert records[1]["result"] == "sent" and records[1]["detail"] == "agent accepted"
    for r in records:
        assert set(r) >= {"event", "at", "operator", "node", "job_id", "kind"}
        assert r["at"].endswith("Z")


def test_an_intent_without_outcome_is_unresolved(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 1, "terminal-held")
        j.outcome("gpu017", 1, "terminal-held", "sent", "ok")
        j.intent("gpu017", 2, "terminal-held")
    with path.open("a") as fh:
        fh.write('{"event": "outcome", "node": "gpu0')  # torn line from a crash
    open_ = unresolved(path)
    assert [(u.node, u.job_id) for u in open_] == [("gpu017", 2)]


def test_no_secret_reaches_the_journal(tmp_path: Path) -> None:
    register_secret("s3cr3t-cluster-key")
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.outcome("gpu017", 1, "terminal-held", "failed", "agent said s3cr3t-cluster-key bad")
    text = path.read_text()
    assert "s3cr3t-cluster-key" not in text
    assert "<redacted>" in text
