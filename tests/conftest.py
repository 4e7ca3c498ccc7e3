"""Shared fixtures: the simulated clusters the end-to-end tests stand up.

Module-scoped clusters are shared by one module's tests only (a test that changes
one, such as draining a node, changes it for the tests after it in that module).
"""

from __future__ import annotations

import fcntl
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident
from tests.live import KEY


@pytest.fixture(autouse=True, scope="session")
def sigint_raises_keyboardinterrupt() -> Iterator[None]:
    """The in-process Ctrl-C tests need Python's own SIGINT handler, which Python does
    not install when started with SIGINT ignored (a background job, nohup): install it
    for the session then. Children get theirs back in tests/cli.py (default_sigint)."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    """A simulated cluster, fresh for each test (one starts in ~50 ms): the incident with
    every agent up, or what the test module's `make_sim()` builds (another scenario,
    auth, agents off), so a module says what it needs instead of defining its own."""
    make = getattr(request.module, "make_sim", None)
    with make() if make is not None else SimCluster(incident()) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def lone_controller() -> Iterator[SimCluster]:
    """The incident's controller without agents, answering anyone."""
    with SimCluster(incident(), agents=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def secured_controller() -> Iterator[SimCluster]:
    """The incident's controller without agents, demanding a credential signed with live.KEY."""
    with SimCluster(incident(), agents=False, auth="required", jwt_key=KEY) as cluster:
        yield cluster


@pytest.fixture
def incident_cluster(tmp_path: Path) -> Iterator[tuple[SimCluster, Path, Path]]:
    """The incident cluster with every agent up, its inventory file and its agent map."""
    with SimCluster(incident()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        yield sim, inventory, agent_map


# Tests that start a stand-in spurd on this host's real /proc: node-side code refuses
# to tell two top-level spurds apart (docs/node-evidence.md), so two such tests at
# once (the two xdist workers, or another checkout's run on this machine) would see
# each other's. One lock file on the host lets one run at a time.
STANDIN_SPURD_LOCK = Path("/tmp/spurctl-tests-standin-spurd.lock")
STANDIN_SPURD_WAIT_S = 600.0


@pytest.fixture
def one_standin_spurd() -> Iterator[None]:
    """Hold the host-wide stand-in spurd lock for one test (waited for, with a deadline)."""
    with STANDIN_SPURD_LOCK.open("a") as lock:
        deadline = time.monotonic() + STANDIN_SPURD_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another run held {STANDIN_SPURD_LOCK} for too long")
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
