"""A Ctrl-C that lands while the send loop starts a worker never leaves that worker behind.

ThreadPoolExecutor.submit starts a worker thread and only then records it: a
KeyboardInterrupt raised in between (the worker's first re-check may be under way by
then) left a running worker the pool did not know and so never waited for. `execute`
then returned while that worker went on to journal into a closed journal, and its
intent stayed open. The loop now holds the stop signals while it hands a worker its
nodes, so a Ctrl-C lands just after, with every worker accounted for.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest

from spurctl.act.cancels import execute
from spurctl.act.journal import Journal, unresolved
from spurctl.decide.plan import Entry, Result
from spurctl.model import Action, Finding, Job, Kind


class _CtrlCOnRecheck:
    """Untracked ids; the first re-check is where the operator presses Ctrl-C."""

    def __init__(self) -> None:
        self.cancels: list[int] = []
        self._pressed = False

    def get_job(self, job_id: int) -> Job | None:
        if not self._pressed:
            self._pressed = True
            ident = threading.main_thread().ident
            assert ident is not None
            signal.pthread_kill(ident, signal.SIGINT)
            time.sleep(2.0)  # the answer comes back well after the Ctrl-C
        return None

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
