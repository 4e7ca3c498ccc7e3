"""Repair's restore window, judged purely: which journaled repairs a node is still owed a
put-back for (taken up whatever job charges it now), and how a charge after the put-back
is said."""

from __future__ import annotations

from typing import Any

import pytest

from spurctl.decide.repair import landed_sentence, repair_progress
from spurctl.model import Allocation, Job, JobState


def _rec(step: str, event: str, result: str | None = None, **extra: Any) -> dict[str, Any]:
    rec = {"action": "repair", "node": "gpu009", "run": "r1", "step": step, "event": event}
    return {**rec, **({"result": result} if result else {}), **extra}


RESTORE = {"labels": {"pool": "reserved"}, "hold": {"state": "DRAIN", "reason": "ops: x"}}
REMOVED = [
    _rec("drain", "intent", restore=RESTORE),
    _rec("drain", "outcome", "sent"),
    _rec("deregister", "intent"),
    _rec("deregister", "outcome", "sent"),
]


BACK = _rec("return", "outcome", "sent")


@pytest.mark.parametrize(
    "tail",
    [
        [BACK],  # stopped right after it came back
        [BACK, _rec("redrain", "intent")],
        [BACK, _rec("labels", "intent"), _rec("labels", "outcome", "failed")],
        [BACK, _rec("labels", "outcome", "sent"), _rec("verify", "outcome", "owed")],
    ],
)
def test_a_node_back_and_not_given_all_it_is_owed_is_still_owed(tail: list[dict[str, Any]]) -> None:
    [p] = repair_progress([*REMOVED, *tail]).values()
    assert p.owes and p.removed
    assert (p.hold and p.hold.reason, dict(p.labels)) == ("ops: x", {"pool": "reserved"})


def test_a_node_not_back_or_finished_owes_no_put_back_yet() -> None:
    assert not repair_progress(REMOVED)["gpu009"].owes  # not back: the wait decides
    done = [*REMOVED, _rec("return", "outcome", "sent"), _rec("done", "outcome", "sent")]
    assert repair_progress(done) == {}
    # A charge no job lists after the put-back: a phantom still there, not a put-back owed.
    failed = [*REMOVED, _rec("return", "outcome", "sent"), _rec("verify", "outcome", "failed")]
    assert not repair_progress(failed)["gpu009"].owes


def test_a_charge_after_the_put_back_names_the_jobs_that_landed_or_says_why_it_is_a_doubt() -> None:
    charge = Allocation(cpus=32, memory_mb=262144)
    job = Job(5121, JobState.RUNNING, "gpu009", user="grace", partition="batch")
    assert landed_sentence(charge, [job]) == (
        "job 5121 (RUNNING, user grace, partition batch) landed on it "
        "(is charged 32 CPUs, 262144 MB of memory)"
    )
    assert "no active job lists it: the phantom charge is still there" in landed_sentence(
        charge, []
    )
    assert "a job may have landed there (its jobs could not be read)" in landed_sentence(
        charge, None
    )
