"""`audit --watch` runs each round's audit in a child process (spurctl.heap.in_child):
the round's child starts with what an audit imports, and the watch process itself
never reads the controller."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spurctl.simcluster import SimCluster
from tests.cli import clean_env

# What an audit would import on first use, had the watch not imported it once.
HEAVY = ("spurctl.", "grpc", "google.", "ClusterShell")

ROUND_AFTER_IMPORTS = """
import json, sys
import spurctl.usecases.audit as use_case
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import Connection

src = Sources(None, [sys.argv[2]], False, "", 1)
use_case.round_imports(src)
before = set(sys.modules)
report, evidence = use_case._watch_round(
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
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import Connection

opened = controller.ControllerClient.__init__
readers = Path(sys.argv[3])

def recording(self, conn):  # which process opens the controller client
    with readers.open("a") as out:
        out.write(f"{os.getpid()}\\n")
    opened(self, conn)

controller.ControllerClient.__init__ = recording
src = Sources(None, [sys.argv[2]], False, "", 1)
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
