"""reclaim.execute keeps a faithful journal, whatever agents, the controller or Ctrl-C do.

The property test drives execute() with random plans against a fake Canceller and
JobSource (the Protocols in spurctl.act.cancels) that fail, change their answers and
stop at random, and checks the journal against what was really sent:

- every `sent` outcome is exactly one cancel call that returned, and back;
- every cancel call found its intent already in the journal, with no outcome yet;
- no cancel went out unless the re-check of the answer just fetched passed;
- every entry is either journaled (one intent, one outcome) or not attempted at all.

The interrupt tests deliver a real SIGINT to the main thread while a worker is
mid-send or mid-re-check, as a Ctrl-C on a terminal would.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spurctl.act.agents import AgentError
from spurctl.act.cancels import execute
from spurctl.act.journal import Journal
from spurctl.decide.actions import ACTIONS
from spurctl.decide.classify import controller_decision
from spurctl.decide.plan import Entry, Result, recheck
from spurctl.errors import SpurctlError, register_secret
from spurctl.model import Action, Finding, Job, JobState, Kind
from spurctl.sources.journal_records import unresolved

WATERMARK = 100
NODES = ("n1", "n2", "n3", "n4")
RECLAIM_KINDS = frozenset(k for k, a in ACTIONS.items() if a is Action.RECLAIM)
Key = tuple[str, int]
Answer = Job | None | Exception


def entry(node: str, job_id: int, kind: Kind) -> Entry:
    finding = Finding(node, job_id, kind, Action.RECLAIM, f"test: {kind.value}")
    return Entry(finding, f"{node}:6818")


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@contextmanager
def journal_file() -> Iterator[Path]:
    # Every record is fsynced: on tmpfs that costs nothing, so hypothesis can run many plans.
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as d:
        yield Path(d) / "journal.jsonl"


class Fakes:
    """JobSource and Canceller in one: answers from a script, checks every cancel as it lands."""

    def __init__(
        self,
        journal: Path,
        planned: dict[Key, Kind],
        answers: dict[int, list[Answer]],
        agent_fails: dict[str, Exception],
        stop: threading.Event,
        stop_after: int | None,
    ) -> None:
        self.journal = journal
        self.planned = planned
        self.answers = answers
        self.agent_fails = agent_fails
        self.stop = stop
        self.stop_after = stop_after
        self.lock = threading.Lock()
        self.asked: Counter[int] = Counter()
        self.last_answer = threading.local()
        self.calls: list[Key] = []
        self.returned: list[Key] = []
        self.after_stop: list[Key] = []
        self.violations: list[str] = []

    def get_job(self, job_id: int) -> Job | None:
        with self.lock:
            n = self.asked[job_id]
            self.asked[job_id] += 1
        script = self.answers[job_id]
        answer = script[min(n, len(script) - 1)]
        self.last_answer.value = (job_id, answer)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def cancel(self, address: str, job_id: int) -> None:
        key = (address.rpartition(":")[0], job_id)
        with self.lock:
            self.calls.append(key)
            if self.stop.is_set():
                self.after_stop.append(key)
            # The intent is durable and still open when the cancel goes out.
            last_event = None
            for r in records(self.journal):
                if (r["node"], r["job_id"]) == key:
                    last_event = r["event"]
            if last_event != "intent":
                self.violations.append(f"{key}: cancel without an open intent")
            # This thread's latest GetJob answer is about this job and still qualifies it.
            asked = getattr(self.last_answer, "value", None)
            if (
                asked is None
                or asked[0] != job_id
                or isinstance(asked[1], Exception)
                or recheck(entry(*key, self.planned[key]), asked[1], WATERMARK) is not None
            ):
                self.violations.append(f"{key}: cancel without a passing re-check")
            if self.stop_after is not None and len(self.calls) >= self.stop_after:
                self.stop.set()
        failure = self.agent_fails.get(key[0])
        if failure is not None:
            raise failure
        with self.lock:
            self.returned.append(key)


# -- random plans ---------------------------------------------------------------------------------

nodelists = st.sets(st.sampled_from(NODES), max_size=3).map(lambda s: ",".join(sorted(s)))
job_shapes = st.none() | st.tuples(st.sampled_from(list(JobState)), nodelists)


def as_job(job_id: int, shape: tuple[JobState, str] | None) -> Job | None:
    return None if shape is None else Job(job_id=job_id, state=shape[0], nodelist=shape[1])


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    ids = draw(st.lists(st.integers(1, 2 * WATERMARK), min_size=1, max_size=8, unique=True))
    planned: dict[Key, Kind] = {}
    answers: dict[int, list[Answer]] = {}
    for job_id in ids:
        at_plan = as_job(job_id, draw(job_shapes))
        for node in sorted(draw(st.sets(st.sampled_from(NODES), min_size=1))):
            kind = controller_decision(node, at_plan, job_id, WATERMARK)
            if kind in RECLAIM_KINDS:
                planned[(node, job_id)] = kind
        # Each re-check gets the planned answer, a changed one (requeue, restart, ...) or an error.
        later: st.SearchStrategy[Answer] = st.one_of(
            st.just(at_plan),
            job_shapes.map(lambda shape, i=job_id: as_job(i, shape)),
            st.just(SpurctlError("the controller did not answer GetJob")),
        )
        answers[job_id] = draw(st.lists(later, min_size=1, max_size=4))
    fails = draw(st.sets(st.sampled_from(NODES), max_size=2))
    kinds_of_failure = [AgentError("agent unreachable"), RuntimeError("channel closed")]
    return {
        "planned": planned,
        "answers": answers,
        "agent_fails": {n: draw(st.sampled_from(kinds_of_failure)) for n in sorted(fails)},
        "concurrency": draw(st.integers(1, 4)),
        "stop_after": draw(st.none() | st.integers(1, 6)),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_the_journal_is_a_faithful_record_of_every_cancel_sent(plan: dict[str, Any]) -> None:
    planned: dict[Key, Kind] = plan["planned"]
    entries = [entry(node, job_id, kind) for (node, job_id), kind in sorted(planned.items())]
    stop = threading.Event()
    with journal_file() as path:
        fakes = Fakes(path, planned, plan["answers"], plan["agent_fails"], stop, plan["stop_after"])
        with Journal(path) as journal:
            run = execute(
                entries,
                jobs=fakes,
                agents=fakes,
                journal=journal,
                watermark=WATERMARK,
                concurrency=plan["concurrency"],
                stop=stop,
            )
        journaled = records(path)
        still_open = unresolved(path)

    assert fakes.violations == []
    # Each entry ends exactly once: with an outcome, or never attempted.
    outcome_of = {(o.entry.node, o.entry.job_id): o for o in run.outcomes}
    not_attempted = [(e.node, e.job_id) for e in run.not_attempted]
    assert len(outcome_of) == len(run.outcomes)
    assert sorted([*outcome_of, *not_attempted]) == sorted(planned)
    # The journal holds one intent then one outcome per attempted entry, nothing for the rest.
    by_key: dict[Key, list[dict[str, Any]]] = {}
    for r in journaled:
        by_key.setdefault((r["node"], r["job_id"]), []).append(r)
    assert set(by_key) == set(outcome_of)
    for key, (intent, outcome, *more) in by_key.items():
        assert more == [] and intent["event"] == "intent" and outcome["event"] == "outcome"
        assert outcome["result"] == outcome_of[key].result.value
    assert still_open == []
    # sent <=> exactly one cancel call that returned; failed <=> one that raised.
    sent = {k for k, o in outcome_of.items() if o.result is Result.SENT}
    failed = {k for k, o in outcome_of.items() if o.result is Result.FAILED}
    assert Counter(fakes.calls) == Counter(sent | failed)
    assert set(fakes.returned) == sent
    assert set(fakes.calls) - set(fakes.returned) == failed
    # A stop lets at most the sends already under way finish.
    assert len(fakes.after_stop) <= plan["concurrency"] - 1
    if plan["stop_after"] is None:
        assert not_attempted == []
    assert run.ok == (sent == set(planned))


# -- a real SIGINT in the middle of a send or a re-check --------------------------------------


def interrupt_main_thread() -> None:
    """What Ctrl-C does: SIGINT to the main thread, which is waiting on the workers."""
    ident = threading.main_thread().ident
    assert ident is not None
    signal.pthread_kill(ident, signal.SIGINT)


UNTRACKED = [
    entry(n, i, Kind.BELOW_WATERMARK_UNKNOWN)
    for n, i in [("n1", 1), ("n1", 2), ("n2", 3), ("n3", 4)]
]


class Scripted:
    """Untracked ids (GetJob: NOT_FOUND) and agents that take `send_s` per cancel."""

    def __init__(self, *, interrupt_on_send: bool = False, interrupt_on_recheck: bool = False):
        self.interrupt_on_send = interrupt_on_send
        self.interrupt_on_recheck = interrupt_on_recheck
        self.cancels: list[Key] = []

    def get_job(self, job_id: int) -> Job | None:
        if self.interrupt_on_recheck:
            self.interrupt_on_recheck = False
            interrupt_main_thread()
            # The answer arrives after the Ctrl-C; a second leaves the main thread, which
            # polls every 0.1 s, time to see it even on a loaded machine.
            time.sleep(1.0)
        return None

    def cancel(self, address: str, job_id: int) -> None:
        if self.interrupt_on_send:
            self.interrupt_on_send = False
            interrupt_main_thread()
            time.sleep(1.0)  # the send is in flight when the Ctrl-C lands (see above)
        self.cancels.append((address.rpartition(":")[0], job_id))


def run_interrupted(fakes: Scripted, path: Path, entries: Sequence[Entry]) -> Any:
    with Journal(path) as journal:
        return execute(
            entries, jobs=fakes, agents=fakes, journal=journal, watermark=WATERMARK, concurrency=1
        )


def test_ctrl_c_mid_send_lets_that_send_finish_and_journals_it(tmp_path: Path) -> None:
    fakes = Scripted(interrupt_on_send=True)
    path = tmp_path / "journal.jsonl"
    run = run_interrupted(fakes, path, UNTRACKED)

    assert run.interrupted and not run.ok
    assert fakes.cancels == [("n1", 1)]
    assert [(o.entry.node, o.entry.job_id, o.result) for o in run.outcomes] == [
        ("n1", 1, Result.SENT)
    ]
    assert [(e.node, e.job_id) for e in run.not_attempted] == [("n1", 2), ("n2", 3), ("n3", 4)]
    assert [(r["event"], r["job_id"]) for r in records(path)] == [("intent", 1), ("outcome", 1)]
    assert unresolved(path) == []


def test_ctrl_c_during_a_recheck_closes_that_intent_without_sending(tmp_path: Path) -> None:
    fakes = Scripted(interrupt_on_recheck=True)
    path = tmp_path / "journal.jsonl"
    run = run_interrupted(fakes, path, UNTRACKED)

    assert run.interrupted
    assert fakes.cancels == []
    (outcome,) = run.outcomes
    assert outcome.result is Result.SKIPPED
    assert outcome.detail == "interrupted before the cancel was sent"
    assert len(run.not_attempted) == 3
    assert unresolved(path) == []


class FullDisk(Journal):
    """A journal whose outcomes stop fitting on disk after `room` of them."""

    def __init__(self, path: Path, room: int) -> None:
        super().__init__(path)
        self.room = room

    def outcome(self, node: str, job_id: int, kind: str, result: str, detail: str) -> None:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= 1
        super().outcome(node, job_id, kind, result, detail)


class SlowAgents:
    def __init__(self) -> None:
        self.cancels: list[Key] = []
        self.lock = threading.Lock()

    def get_job(self, job_id: int) -> Job | None:
        return None

    def cancel(self, address: str, job_id: int) -> None:
        time.sleep(0.05)
        with self.lock:
            self.cancels.append((address.rpartition(":")[0], job_id))


def test_when_the_journal_cannot_be_written_no_further_cancel_goes_out(tmp_path: Path) -> None:
    entries = [
        entry(f"n{n}", 10 * n + i, Kind.BELOW_WATERMARK_UNKNOWN)
        for n in range(1, 7)
        for i in range(3)
    ]
    agents = SlowAgents()
    with FullDisk(tmp_path / "journal.jsonl", room=1) as journal, pytest.raises(OSError):
        execute(
            entries, jobs=agents, agents=agents, journal=journal, watermark=WATERMARK, concurrency=2
        )
    # The first outcome fit; the second send's did not, and the worker beside it could
    # finish at most the one send it had under way.
    assert 2 <= len(agents.cancels) <= 3
    assert len(agents.cancels) < len(entries)


def test_an_outcome_detail_never_carries_a_secret(tmp_path: Path) -> None:
    register_secret("agent-echoed-secret-7f3a")

    class Echoing(SlowAgents):
        def cancel(self, address: str, job_id: int) -> None:
            raise AgentError(f"agent {address}: bad credential agent-echoed-secret-7f3a")

    agents = Echoing()
    with Journal(tmp_path / "journal.jsonl") as journal:
        run = execute(
            UNTRACKED[:1], jobs=agents, agents=agents, journal=journal, watermark=WATERMARK
        )
    (outcome,) = run.outcomes
    assert outcome.result is Result.FAILED
    assert "agent-echoed-secret-7f3a" not in outcome.detail
    assert "agent-echoed-secret-7f3a" not in (tmp_path / "journal.jsonl").read_text()
