"""`audit --watch` runs each round's audit in a child process (spurctl.heap.in_child):
the round's child starts with what an audit imports, and the watch process itself
never reads the controller."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest

import spurctl.usecases.audit as use_case
from spurctl import heap
from spurctl.model import AuditReport
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl_sim import SimCluster
from tests.cli import clean_env
from tests.unit.test_watch import TERMINAL, report

# What an audit would import on first use, had the watch not imported it once.
HEAVY = ("spurctl.", "grpc", "google.", "ClusterShell")

ROUND_AFTER_IMPORTS = """
import json, sys
import spurctl.usecases.audit as use_case
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import Connection

src = Sources(Scope(), [sys.argv[2]], False, "", 1)
use_case.round_imports(src)
before = set(sys.modules)
report, evidence, _ = use_case._watch_round(
    src, Connection(controllers=(sys.argv[1],), timeout=5.0), first=True,
    watermark=None, include_healthy=False, journal=None,
)
assert report.findings and evidence
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_after_the_watchs_imports_a_round_imports_nothing_heavy(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    run = subprocess.run(
        [sys.executable, "-c", ROUND_AFTER_IMPORTS, sim.controller_address, str(inventory)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    imported = json.loads(run.stdout)
    heavy = [m for m in imported if m.startswith(HEAVY)]
    assert heavy == [], heavy


WATCH_RECORDING_WHO_READS = """
import os, sys
from pathlib import Path
import spurctl.sources.controller as controller
import spurctl.usecases.audit as use_case
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import Connection

opened = controller.ControllerClient.__init__
readers = Path(sys.argv[3])

def recording(self, conn):  # which process opens the controller client
    with readers.open("a") as out:
        out.write(f"{os.getpid()}\\n")
    opened(self, conn)

controller.ControllerClient.__init__ = recording
src = Sources(Scope(), [sys.argv[2]], False, "", 1)
conn = Connection(controllers=(sys.argv[1],), timeout=5.0)
rounds = list(use_case.watch_rounds(src, conn, interval=0.01, rounds=3))
assert [r.number for r in rounds] == [1, 2, 3], rounds
assert all(r.error is None and r.report.findings for r in rounds), rounds
print(os.getpid())
"""


def test_each_round_reads_the_controller_in_its_own_child_never_in_the_watch(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inv.jsonl")
    readers = tmp_path / "readers"
    run = subprocess.run(
        [sys.executable, "-c", WATCH_RECORDING_WHO_READS, sim.controller_address,
         str(inventory), str(readers)],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path / "home"),
        timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    watch = int(run.stdout)
    pids = [int(line) for line in readers.read_text().split()]
    assert len(pids) == 3 and len(set(pids)) == 3  # a fresh child each round
    assert watch not in pids


# -- a watch behind its schedule starts the next round's audit while it draws ----------------


class StampedAudit:
    """run_audit's stand-in, run in each round's child: it notes its pid and when it
    started (the monotonic clock is the machine's, the same in every process), then
    takes `takes` seconds (`later`, if given, after the first round)."""

    def __init__(self, log: Path, takes: float, later: float | None = None) -> None:
        self.log, self.takes, self.later = log, takes, later

    def __call__(self, *_: object, **__: object) -> tuple[AuditReport, object]:
        first = not self.stamps()
        with self.log.open("a") as out:
            out.write(f"{os.getpid()} {time.monotonic()}\n")
        time.sleep(self.takes if first or self.later is None else self.later)
        return report([TERMINAL]), SimpleNamespace(inventories={}, view=SimpleNamespace(clock=None))

    def stamps(self) -> list[tuple[int, float]]:
        if not self.log.exists():
            return []
        return [(int(p), float(t)) for p, t in (line.split() for line in self.log.open())]


SRC = Sources(scope=Scope(), inventory=["inv.jsonl"], collect=False, command="", fanout=1)


def test_behind_schedule_the_next_audit_runs_while_a_round_is_drawn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    audit = StampedAudit(tmp_path / "stamps", takes=0.3)
    monkeypatch.setattr(use_case, "run_audit", audit)
    drawn: list[tuple[float, float]] = []
    rounds = use_case.watch_rounds(SRC, None, interval=0.01, rounds=3)
    with closing(rounds):
        states = []
        for state in rounds:
            begun = time.monotonic()
            time.sleep(0.5)  # a slow drawing
            drawn.append((begun, time.monotonic()))
            states.append(state)

    stamps = audit.stamps()
    assert [s.number for s in states] == [1, 2, 3]
    assert len(stamps) == 3 and len({pid for pid, _ in stamps}) == 3
    # Rounds 2 and 3 began before the previous round's drawing ended.
    assert stamps[1][1] < drawn[0][1] and stamps[2][1] < drawn[1][1]
    # A round's time is when its audit started, not when the drawing before it ended.
    gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(states)]
    started = [b - a for (_, a), (_, b) in itertools.pairwise(stamps)]
    assert all(abs(g - s) < 0.2 for g, s in zip(gaps, started, strict=True)), (gaps, started)


def test_on_schedule_no_round_starts_before_it_is_due(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    audit = StampedAudit(tmp_path / "stamps", takes=0.05)
    monkeypatch.setattr(use_case, "run_audit", audit)
    began = time.monotonic()
    with closing(use_case.watch_rounds(SRC, None, interval=0.6, rounds=3)) as rounds:
        states = list(rounds)

    # Each child stamps when it runs, which a loaded machine may delay: compared with
    # one another, a late first stamp would look like an early second round. Round k
    # is due k intervals after the watch began, at the earliest.
    starts = [t for _, t in audit.stamps()]
    assert len(states) == 3
    assert all(t - began >= k * 0.6 - 0.01 for k, t in enumerate(starts)), (began, starts)


def test_closing_the_watch_stops_the_round_started_ahead(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    audit = StampedAudit(tmp_path / "stamps", takes=0.2, later=30.0)
    monkeypatch.setattr(use_case, "run_audit", audit)
    rounds = use_case.watch_rounds(SRC, None, interval=0.01, rounds=5)
    assert next(rounds).number == 1
    deadline = time.monotonic() + 10
    while len(audit.stamps()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    (ahead, _) = audit.stamps()[1]  # round 2's audit, under way in its child
    closed = time.monotonic()
    rounds.close()

    assert time.monotonic() - closed < heap.CHILD_UNWIND_S
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(ahead, 0)
