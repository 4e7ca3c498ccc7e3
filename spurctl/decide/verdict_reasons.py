"""Why a holding gets the verdict it gets, in an operator's words.

The sentences behind the controller's own verdicts on a tracked job
(terminal-held, active-elsewhere, mid-commit, not-started, healthy) and the
verdicts spurctl gives where the controller's cannot be trusted: a job missing
from a partial view, a nodelist that cannot be read, or one that does not parse
as naming the node while its text does.
"""

from __future__ import annotations

from datetime import datetime

from spurctl.decide.held import Held
from spurctl.decide.reasons import evidence, when
from spurctl.model import Action, ControllerView, Finding, Job, Kind


def named_in_nodelist_text(held: Held, job: Job) -> Finding:
    j = held.holding.job_id
    return held.finding(
        Kind.UNVERIFIABLE,
        f"job {j} is {job.state.name} on {job.nodelist!r}, which does not parse as including "
        f"{held.node} but whose text names it, so this may be the job's own run; "
        f"{held.holder} holds it {evidence(held.holding)}",
        action=Action.INVESTIGATE,
    )


def missing_from_partial_view(held: Held, view: ControllerView) -> Finding:
    # Absent from a partial view (e.g. GetJobs scoped to the caller) proves nothing:
    # the job may be another user's live run.
    j = held.holding.job_id
    return held.finding(
        Kind.UNVERIFIABLE,
        f"job {j} is missing from the controller's incomplete view "
        f"({view.coverage()}) and GetJob did not confirm "
        f"it untracked; spared while {held.holder} holds it {evidence(held.holding)}",
    )


def unreadable_nodelist(held: Held, job: Job) -> Finding:
    j = held.holding.job_id
    return held.finding(
        Kind.UNVERIFIABLE,
        f"job {j} is {job.state.name} but its nodelist {job.nodelist!r} cannot be read, "
        f"so whether {held.node} belongs to it is unknown; {held.holder} holds it "
        f"{evidence(held.holding)}",
        action=Action.INVESTIGATE,
    )


def tracked_reason(kind: Kind, held: Held, job: Job, *, now: datetime) -> str:
    """Why a holding of a job the controller tracks is what the controller decides."""
    j, holder, state, ev = held.holding.job_id, held.holder, job.state.name, evidence(held.holding)
    since = f" (since {when(job.start_time, now)})" if job.start_time else ""
    if kind is Kind.TERMINAL_HELD:
        ended = f" at {when(job.end_time, now)}" if job.end_time else ""
        return f"job {j} ended {state}{ended}; {holder} still holds it {ev}"
    if kind is Kind.ACTIVE_ELSEWHERE:
        return f"job {j} is {state} on {job.nodelist}{since}; {holder} still holds it {ev}"
    if kind is Kind.MID_COMMIT:
        why = (
            "GetJob returned no nodelist (redacted for this caller, or not committed yet)"
            if held.asked
            else "its nodelist is not recorded yet (state and allocation commit separately)"
        )
        return f"job {j} is {state} but {why}; spared while {holder} holds it {ev}"
    if kind is Kind.NOT_STARTED:
        return (
            f"job {j} is {state} and may be mid-dispatch to {held.node}; "
            f"spared while {holder} holds it {ev}"
        )
    return f"job {j} is {state} on {job.nodelist}{since} and {holder} holds it {ev}"
