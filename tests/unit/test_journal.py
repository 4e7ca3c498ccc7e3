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
from spurctl.act.journal import Journal
from spurctl.errors import register_secret
from spurctl.sources.journal_records import unresolved


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


# -- a lock per journal, torn lines, private files ---------------------------------


def _held_by_other(path: Path, pid: int) -> int:
    """Take the journal's lock the way another process's run would: its own flock, its pid."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(journal_module.lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{pid}\n".encode())
    return fd


def test_a_journal_another_run_holds_is_refused_naming_its_pid(tmp_path: Path) -> None:
    from spurctl.errors import SpurctlError

    path = tmp_path / "journal.jsonl"
    fd = _held_by_other(path, 424242)
    try:
        with pytest.raises(SpurctlError, match=r"pid 424242") as err:
            Journal(path)
        assert "\n" not in str(err.value) and str(path) in str(err.value)
        assert not path.exists()  # refused before a byte was written
        with pytest.raises(SpurctlError, match=r"pid 424242"), journal_module.journal_lock(path):
            pass
    finally:
        os.close(fd)
    with Journal(path) as j:  # released: the next run goes ahead and records its pid
        j.intent("gpu017", 1, "terminal-held")
        assert journal_module.lock_path(path).read_text().strip() == str(os.getpid())


def test_the_lock_lasts_as_long_as_the_journal_and_is_reentrant_in_one_process(
    tmp_path: Path,
) -> None:
    import fcntl

    path = tmp_path / "journal.jsonl"

    def free() -> bool:
        fd = os.open(journal_module.lock_path(path), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        finally:
            os.close(fd)
        return True

    with journal_module.journal_lock(path):
        with Journal(path) as j:
            j.intent("gpu017", 1, "terminal-held")
        assert not free()  # the run's own lock outlives the first Journal
        with Journal(path) as j:
            j.outcome("gpu017", 1, "terminal-held", "sent", "ok")
        assert not free()
    assert free()
    # Reading never waits for the lock: a dry run beside a running reclaim.
    with Journal(path) as j:
        j.intent("gpu018", 2, "terminal-held")
        assert [(u.node, u.job_id) for u in unresolved(path)] == [("gpu018", 2)]


def test_the_journal_is_created_0600_in_a_0700_directory(tmp_path: Path) -> None:
    path = tmp_path / "state" / "spurctl" / "journal.jsonl"
    old = os.umask(0o022)
    try:
        with Journal(path) as j:
            j.intent("gpu017", 1, "terminal-held")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert journal_module.lock_path(path).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "torn",
    [
        '{"event": "outcome", "node": "gpu017", "job_id": 2, "detail": "caf\u00e9"}'.encode()[:-4],
        b'{"event": "outcome", "node": "gpu017", "job_id": 1e400}',
        b'{"event": "outcome", "node": "gpu017", "job_id": ' + b"9" * 5000 + b"}",
        b"\xff\xfe not json at all",
        b"[" * 100_000,
        b'{"event": "outcome", "node": "gpu017", "job_id": 4294967296}',
        b'["a list"]',
    ],
    ids=["cut-utf8", "1e400", "huge-int", "binary", "deep", "over-uint32", "not-object"],
)
def test_a_torn_line_is_reported_with_its_number_and_skipped(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 2, "terminal-held")
    with path.open("ab") as fh:
        fh.write(torn + b"\n")
    with Journal(path) as j:
        j.intent("gpu018", 3, "terminal-held")
    warnings: list[str] = []
    open_ = unresolved(path, warn=warnings.append)
    assert [(u.node, u.job_id) for u in open_] == [("gpu017", 2), ("gpu018", 3)]
    assert len(warnings) == 1 and f"{path} line 2" in warnings[0] and "\n" not in warnings[0]


def test_a_record_after_a_torn_last_line_starts_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 1, "terminal-held")
    with path.open("a") as fh:
        fh.write('{"event": "outcome", "node": "gpu0')  # a crash mid-record, no newline
    with Journal(path) as j:
        j.outcome("gpu017", 1, "terminal-held", "failed", "closed by the next run")
    warnings: list[str] = []
    assert unresolved(path, warn=warnings.append) == []
    assert len(warnings) == 1 and "line 2" in warnings[0]


def test_still_open_drops_intents_another_run_closed_since_they_were_read(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal(path) as j:
        j.intent("gpu017", 1, "terminal-held")
        j.intent("gpu018", 2, "terminal-held")
    read_early = unresolved(path)
    with Journal(path) as j:  # the other run finishes one of them
        j.outcome("gpu017", 1, "terminal-held", "sent", "ok")
    with Journal(path) as j:
        assert [(u.node, u.job_id) for u in j.still_open(read_early)] == [("gpu018", 2)]


def test_short_secrets_are_redacted_where_they_stand_alone() -> None:
    from spurctl.errors import redact

    register_secret("Q7")
    register_secret("xY9z")
    assert redact("Bearer Q7 refused") == "Bearer <redacted> refused"
    assert redact('{"key": "Q7"}') == '{"key": "<redacted>"}'
    assert redact("token=xY9z;") == "token=<redacted>;"
    assert redact("aQ7b stays") == "aQ7b stays"  # inside a longer word: not the secret


def test_a_record_belongs_to_a_cluster_when_everything_both_name_agrees() -> None:
    from spurctl.sources.cluster_binding import Binding
    from spurctl.sources.journal_records import belongs

    prod = Binding(("http://ctl-prod:6817",), "prod")
    assert belongs({"cluster": "prod", "controller": "http://ctl-prod:6817"}, prod)
    assert not belongs({"cluster": "lab", "controller": "http://ctl-prod:6817"}, prod)
    assert not belongs({"cluster": "prod", "controller": "http://ctl-lab:6817"}, prod)
    # HA: one controller in common is one cluster.
    assert belongs({"controller": "http://ctl-b:6817,http://ctl-prod:6817"}, prod)
    # What one side does not name is not held against it.
    assert belongs({"controller": "http://ctl-prod:6817"}, Binding((), "prod"))
    assert belongs({"cluster": "prod"}, Binding(("http://ctl-prod:6817",)))
    # A record from before records named a cluster counts for every cluster; a reader
    # that knows no cluster (a snapshot audit) reads every record.
    assert belongs({}, prod)
    assert belongs({"cluster": "lab"}, None)
