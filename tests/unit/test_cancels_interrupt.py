"""A Ctrl-C that lands while the send loop hands out its nodes leaves no worker behind
and no node unaccounted for.

ThreadPoolExecutor.submit starts a worker thread and only then records it: a
KeyboardInterrupt raised in between (the worker's first re-check may be under way by
then) left a running worker the pool did not know and so never waited for. `execute`
then returned while that worker went on to journal into a closed journal, and its
intent stayed open. One raised between two submits left the nodes not yet handed out
in neither the outcomes nor the not-attempted list. The loop now holds the stop
signals until every node is queued, so a Ctrl-C lands just after, every worker waited
for and every node either attempted or listed as not attempted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from spurctl.act.cancels import execute
from spurctl.act.journal import Journal
from spurctl.decide.plan import Entry, Result
from spurctl.model import Action, Finding, Job, Kind
from spurctl.sources.journal_records import unresolved


class _CtrlCOnRecheck:
    """Untracked ids; the first re-check is where the operator presses Ctrl-C: sent to
    the main thread, or (`to_process`) to the process, as a terminal sends it, which the
    kernel may hand to any thread that does not block it (gRPC's, here `bystander`)."""

    def __init__(self, to_process: bool = False) -> None:
        self.cancels: list[int] = []
        self._pressed = False
        self._to_process = to_process

    def get_job(self, job_id: int) -> Job | None:
        if not self._pressed:
            self._pressed = True
            if self._to_process:
                os.kill(os.getpid(), signal.SIGINT)
            else:
                ident = threading.main_thread().ident
                assert ident is not None
                signal.pthread_kill(ident, signal.SIGINT)
            time.sleep(2.0)  # the answer comes back well after the Ctrl-C
        return None


@contextlib.contextmanager
def bystander() -> Any:
    """A thread started before the send loop, with no signal blocked, as gRPC's are."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait, args=(30,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=10)

    def cancel(self, address: str, job_id: int) -> None:
        self.cancels.append(job_id)


def test_a_ctrl_c_while_the_first_worker_starts_waits_for_that_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Thread.start

    def slow_start(self: threading.Thread) -> None:
        started(self)
        if self.name.startswith("reclaim"):
            # The pool has started its worker but not yet recorded it: the worker's first
            # re-check, and the Ctrl-C it brings, land in here.
            time.sleep(1.0)

    monkeypatch.setattr(threading.Thread, "start", slow_start)
    finding = Finding("n1", 1, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM, "untracked")
    entries = [Entry(finding, "n1:6818")]
    fakes = _CtrlCOnRecheck()
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        run = execute(
            entries, jobs=fakes, agents=fakes, journal=journal, watermark=100, concurrency=1
        )

    # Seen once the worker was recorded: before the answer came, so nothing was sent.
    assert run.interrupted and fakes.cancels == []
    # The worker was waited for: its entry's outcome is in the run and in the journal.
    assert [(o.entry.job_id, o.result) for o in run.outcomes] == [(1, Result.SKIPPED)]
    events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    assert events == ["intent", "outcome"]
    assert unresolved(path) == []


@pytest.mark.parametrize("to_process", [False, True], ids=["main-thread", "process"])
def test_a_ctrl_c_between_two_nodes_handed_out_lists_the_rest_as_not_attempted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, to_process: bool
) -> None:
    submit = ThreadPoolExecutor.submit
    calls: list[int] = []

    def slow_submit(self: ThreadPoolExecutor, *args: Any, **kwargs: Any) -> Any:
        handed = submit(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.0)  # the first node's re-check, and its Ctrl-C, land before the next
        return handed

    monkeypatch.setattr(ThreadPoolExecutor, "submit", slow_submit)
    entries = [
        Entry(Finding(n, i, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM, "untracked"), f"{n}:1")
        for n, i in (("n1", 1), ("n2", 2), ("n3", 3))
    ]
    fakes = _CtrlCOnRecheck(to_process)
    path = tmp_path / "journal.jsonl"
    with bystander(), Journal(path) as journal:
        run = execute(
            entries, jobs=fakes, agents=fakes, journal=journal, watermark=100, concurrency=1
        )

    assert run.interrupted and fakes.cancels == []
    assert [(o.entry.job_id, o.result) for o in run.outcomes] == [(1, Result.SKIPPED)]
    assert [e.job_id for e in run.not_attempted] == [2, 3]
    events = [
        (json.loads(line)["event"], json.loads(line)["job_id"])
        for line in path.read_text().splitlines()
    ]
    assert events == [("intent", 1), ("outcome", 1)]
    assert unresolved(path) == []
