"""Repair's restore window (issue 50 item 1), against the simulated cluster.

A node DeregisterNode removed registers again as `Node::new`: IDLE, no drain, only its
agent's labels, the default partition when no admin label names its own; the scheduler
places a pending job on it at its next tick (here: the moment it registers). So what the
node is owed goes back first thing, the hold before the labels, then its charge is judged
from a fresh read; a job that landed in the window is named. A hold or labels that could
not be put back are said in one line (exit 1), journaled as owed, and the next
`spurctl repair --node NODE` puts them back, whatever landed on the node meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.model import JobState, NodeState
from spurctl.proto import slurm_pb2 as pb
from tests.cli import run_cli, wait_for
from tests.e2e.restore_window import WAITING, WAITING_SHARE, window
from tests.e2e.test_repair_e2e import Phantom, phantom, repair, steps, update

HOLD = "ops: bad DIMM"


@pytest.fixture
def w(tmp_path: Path) -> Iterator[Phantom]:
    """gpu009 with its phantom charge, drained by an admin for maintenance and labelled
    into the `reserved` partition; job 5121 waits in the default partition `batch`."""
    with phantom(tmp_path, window()) as cluster:
        update(
            cluster, name="gpu009", state=pb.NODE_DRAIN, reason=HOLD, labels={"pool": "reserved"}
        )
        assert cluster.sim.node("gpu009").partitions == ("reserved",)
        yield cluster


def _line(out: str, node: str = "gpu009") -> str:
    """The node's result line (after the plan's)."""
    result = out[out.find("Repair result:") :]
    return next((x for x in result.splitlines() if x.startswith(f"  {node}  ")), "")


def test_a_job_landing_in_the_window_leaves_the_node_drained_and_in_its_partition(
    w: Phantom,
) -> None:
    proc = repair(w, "--yes", "--restore-drain")

    job = w.sim.job(WAITING)
    assert job is not None and (job.state, job.nodelist) == (JobState.RUNNING, "gpu009")
    node = w.sim.node("gpu009")
    assert (node.state, node.state_reason) == (NodeState.DRAINING, HOLD), node
    assert (node.labels.get("pool"), node.partitions) == ("reserved", ("reserved",)), node
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Repair result: 1 repaired (1 with a job landed), 0 refused" in proc.stdout
    assert _line(proc.stdout) == (
        f"  gpu009  landed: gpu009 registered again and job {WAITING} (RUNNING, user grace, "
        f"partition batch) landed on it (is charged {WAITING_SHARE}); put back the drain "
        f"'{HOLD}' and labels pool=reserved: it landed before they went back; see that it "
        "belongs there (spurctl explain gpu009)"
    ), proc.stdout
    # The hold first, then the labels, then the charge judged; the repair is over.
    assert steps(w)[4:] == [
        ("return", "outcome", "sent"),
        ("redrain", "intent", None),
        ("redrain", "outcome", "sent"),
        ("labels", "intent", None),
        ("labels", "outcome", "sent"),
        ("done", "outcome", "sent"),
    ]
    again = repair(w, "--yes", "--restore-drain")
    assert "no phantom charge, nothing to repair" in again.stdout, again.stdout


@pytest.mark.parametrize(
    ("refused", "owed", "kept"),
    [
        ("labels", "labels pool=reserved", "the drain 'ops: bad DIMM'"),
        ("state", "the drain 'ops: bad DIMM'", "labels pool=reserved"),
    ],
)
def test_a_hold_or_labels_the_controller_refuses_are_said_owed_and_the_next_repair_puts_them_back(
    w: Phantom, refused: str, owed: str, kept: str
) -> None:
    # Refused from the moment the node is removed (spurctl's own drain went through): its
    # registration is held back until the fault is in place.
    w.sim.state.refuse_registration("gpu009", "held back until the fault is set")

    def fault() -> None:
        wait_for(lambda: bool(w.sim.state.deregistrations), timeout=30)
        w.sim.state.update_failure[refused] = "raft propose failed: not committed"
        del w.sim.state.registration_refused["gpu009"]

    thread = threading.Thread(target=fault, daemon=True)
    thread.start()
    proc = repair(w, "--yes", "--restore-drain")
    thread.join(timeout=30)

    node = w.sim.node("gpu009")
    if refused == "labels":  # the hold went back although the labels did not
        assert (node.state_reason, node.labels.get("pool")) == (HOLD, None), node
    else:
        assert (node.state_reason, node.labels.get("pool")) == ("", "reserved"), node
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = _line(proc.stdout)
    assert line.startswith(
        f"  gpu009  failed: gpu009 registered again; put back {kept}; could not put back {owed}: "
    ), proc.stdout
    assert "raft propose failed: not committed" in line, line
    assert f"job {WAITING} (RUNNING, user grace, partition batch) landed on it" in line, line
    assert line.endswith(f"owed: {owed} (the journal keeps it)"), line
    assert "    spurctl repair --node gpu009 " in proc.stdout, proc.stdout
    assert steps(w)[-1] == ("verify", "outcome", "owed")
    journal = run_cli("journal", "--journal", str(w.journal), home=w.home)
    assert "stopped with the node back, owed what its fresh record lacks of: the drain" in (
        journal.stdout
    ), journal.stdout
    assert "spurctl repair --node gpu009" in journal.stdout, journal.stdout

    w.sim.state.update_failure.clear()
    again = repair(w, "--yes")  # no --restore-drain: the journal says what is owed
    assert again.returncode == 1, again.stdout + again.stderr  # job 5121 still runs there
    assert _line(again.stdout).startswith(
        f"  gpu009  landed: gpu009 registered again and job {WAITING}"
    ), again.stdout
    node = w.sim.node("gpu009")
    assert (node.state, node.state_reason) == (NodeState.DRAINING, HOLD), node
    assert (node.labels.get("pool"), node.partitions) == ("reserved", ("reserved",)), node
    assert steps(w)[-1] == ("done", "outcome", "sent")
