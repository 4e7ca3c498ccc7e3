"""When the evidence says a finding's state began: a stranded holding's age is the
job's, not the watch's.

A watch first sees a holding when it starts, which may be days after the job ended:
how long spurctl has looked is not how long the GPUs have been stranded. Each finding
is dated by the best evidence the audit read for it:

- terminal-held: the job's end time, from the controller;
- active-elsewhere: the start of the job's current run, on the nodes it moved to;
- any other holding: the held run's start on the node (its inventory), else when
  that inventory was collected (the holding was there at least since then).

A finding about the node itself (a phantom or excess allocation, a name mismatch, an
agent that did not answer, a node no inventory speaks for) and a job the node lost
carry no time: the evidence says when it was seen, never since when it has been so,
and a collect's attempt time would only restate when the audit looked. Neither does
anything on a node whose clock runs ahead (clock-ahead): its times cannot be trusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from spurctl.model import ControllerView, Finding, Inventory, Job, Kind, SinceEvidence

# Dated by the controller's record of the job, when it has the time.
_BY_JOB = {
    Kind.TERMINAL_HELD: SinceEvidence.JOB_END,
    Kind.ACTIVE_ELSEWHERE: SinceEvidence.JOB_START,
}


def dated(
    findings: Iterable[Finding],
    view: ControllerView,
    inventories: Mapping[str, Inventory],
    confirmed: Mapping[int, Job | None],
) -> list[Finding]:
    """`findings`, in order, each with `since` and `since_evidence` set where evidence
    dates it (unchanged otherwise)."""
    findings = list(findings)
    ahead = {f.node for f in findings if f.kind is Kind.CLOCK_AHEAD}
    out = []
    for f in findings:
        since = None if f.node in ahead else onset(f, view, inventories.get(f.node), confirmed)
        if since is not None:
            f = f.dated(*since)
        out.append(f)
    return out


def onset(
    f: Finding,
    view: ControllerView,
    inv: Inventory | None,
    confirmed: Mapping[int, Job | None],
) -> tuple[datetime, SinceEvidence] | None:
    """When the evidence says `f`'s state began, and which evidence; None when none does."""
    if f.job_id is None:  # about the node itself
        return None
    if f.kind in _BY_JOB:
        job = view.jobs.get(f.job_id) or confirmed.get(f.job_id)
        if job is not None:
            moment = job.end_time if f.kind is Kind.TERMINAL_HELD else job.start_time
            if moment is not None:
                return moment, _BY_JOB[f.kind]
    held = [h for h in inv.held if h.job_id == f.job_id] if inv is not None else []
    if not held:  # the node does not hold it (lost-on-node): nothing dates the loss
        return None
    started = [h.started_at for h in held if h.started_at is not None]
    if started:
        return min(started), SinceEvidence.RUN_START
    assert inv is not None
    if inv.collected_at is None:
        return None
    return inv.collected_at, SinceEvidence.INVENTORY
