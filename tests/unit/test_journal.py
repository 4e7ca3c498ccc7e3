"""The journal is an append-only, fsynced, faithful record of every cancel.

Reclaim threads share the journal's fsyncs; none returns before its record is on disk.
(What reclaim writes to it whatever happens: test_reclaim_journal.py.)
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from spurctl.act import journal as journal_module
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


# -- group commit ------------------------------------------------------------------

THREADS = 16
PER_THREAD = 10


def test_concurrent_appends_share_fsyncs_and_each_returns_only_once_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.jsonl"
    durable_lines: list[int] = []  # lines in the file when each fsync began
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        lines = path.read_text().count("\n")
        time.sleep(0.005)  # a disk that takes its time, so appends pile up
        real_fsync(fd)
        durable_lines.append(lines)

    monkeypatch.setattr(journal_module.os, "fsync", slow_fsync)
    late: list[str] = []

    with Journal(path) as j:

        def worker(t: int) -> None:
            for i in range(PER_THREAD):
                job_id = t * 1000 + i
                j.intent(f"gpu{t:03d}", job_id, "terminal-held")
                # Our record must be within what some finished fsync covered.
                on_disk = path.read_text().splitlines()[: max(durable_lines, default=0)]
                if not any(json.loads(line)["job_id"] == job_id for line in on_disk):
                    late.append(f"{job_id} returned before an fsync covered it")

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
            assert not t.is_alive(), "an append never returned"

    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == THREADS * PER_THREAD
    assert sorted(r["job_id"] for r in records) == sorted(
        t * 1000 + i for t in range(THREADS) for i in range(PER_THREAD)
    )
    for t in range(THREADS):  # each thread's own records stay in its order
        mine = [r["job_id"] for r in records if r["node"] == f"gpu{t:03d}"]
        assert mine == sorted(mine)
    assert late == []
    assert len(durable_lines) < len(records), "no fsync was shared"
    assert max(durable_lines) == len(records)


def test_a_lone_append_is_fsynced_before_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(journal_module.os, "fsync", lambda fd: synced.append(fd))
    with Journal(tmp_path / "j.jsonl") as j:
        j.intent("gpu001", 1, "terminal-held")
        assert len(synced) == 1
        j.outcome("gpu001", 1, "terminal-held", "sent", "ok")
        assert len(synced) == 2
