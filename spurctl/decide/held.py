"""One holding under judgement, and what stops a reclaim verdict on it.

`Held` carries the holding, the controller's job and what the inventory says of
its node; `Held.finding` makes the finding, and turns a reclaim into investigate
when something stands in the way (a loose name, a clock ahead, no agent, no
start time on a tracked id, job id 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from spurctl.decide.actions import ACTIONS
from spurctl.decide.reasons import duration
from spurctl.model import Action, Finding, Holding, Job, Kind


@dataclass(slots=True)  # not frozen: built once per holding, and frozen init costs
class Held:
    """One holding on `holder`, judged as held on controller node `node`.

    `job` is the controller's record (from GetJob when `asked`); `loose_match`
    says why `holder` only loosely matches `node`, None when the names agree;
    `age` is the inventory's age (see Finding.inventory_age_s).
    """

    node: str
    holder: str
    holding: Holding
    job: Job | None
    asked: bool
    loose_match: str | None
    age: float | None = None
    ahead: float | None = None  # seconds the inventory is dated ahead (clock-ahead)
    no_agent: bool = False  # the scan found no spurd on the node (agent-not-running)

    def finding(self, kind: Kind, reason: str, action: Action | None = None) -> Finding:
        action = ACTIONS[kind] if action is None else action
        if action is Action.RECLAIM:
            doubt = _reclaim_doubt(self, kind)
            if doubt is not None:
                action = Action.INVESTIGATE
                reason = f"{reason}; not reclaimed: {doubt}"
        job, h = self.job, self.holding
        return Finding(
            node=self.holder,
            job_id=h.job_id,
            kind=kind,
            action=action,
            reason=reason,
            live=h.live,
            controller_state=job.state.name if job is not None else None,
            allocated_nodes=(job.nodelist or None) if job is not None else None,
            gpus=h.gpus,
            pids=h.pids,
            inventory_age_s=self.age,
        )


def _reclaim_doubt(held: Held, kind: Kind) -> str | None:
    """Why a holding the controller would reclaim is only investigated; None when nothing
    stands in the way.

    A loose name: Spur compares names exactly, so the controller misjudges this
    node's runs until the names agree. A run judged under the controller's name
    (SPUR_TARGET_NODE) that differs from the inventory's: reclaim's last re-check
    compares the inventory's name, so `active-elsewhere` (the one name-dependent
    arm) is not reclaimed there. No start time on a tracked id: after a
    controller wipe the id may have been reissued, and only the run's start time
    (compared with the job's submit time) tells the old run from the new job.
    """
    if held.holding.job_id == 0:
        # Spur's counter starts at first_job_id (1 by default): id 0 is no run it issued
        # (docs/spur-facts.md "Job ids").
        return (
            "Spur never issues job id 0 (its counter starts at first_job_id, 1 by default), "
            "so this is no run the controller knows; find out what created it"
        )
    if held.loose_match is not None:
        return held.loose_match
    if held.ahead is not None:
        return (
            f"{held.holder}'s inventory is dated {duration(held.ahead)} ahead of this audit's "
            "clock, so when it was taken is unknown (clock-ahead); fix the node's clock and "
            "re-collect it"
        )
    if held.no_agent:
        # An agent cancel goes to spurd, which is not there to act on it.
        return (
            f"no spurd was running on {held.holder} when its inventory was taken "
            "(agent-not-running), so no agent cancel can reach this run; start spurd "
            "and re-collect"
        )
    if kind is Kind.ACTIVE_ELSEWHERE and held.node != held.holder:
        # Judged under the controller's name (SPUR_TARGET_NODE), but reclaim re-checks
        # the job against the inventory's name just before the send: a requeue onto
        # this very node would still read as elsewhere there.
        return (
            f"reclaim re-checks job {held.holding.job_id} against the name {held.holder} "
            f"reports, which no nodelist naming {held.node} matches, so a requeue onto "
            f"{held.node} could not be told from a stale run at the last moment"
        )
    if held.job is not None and held.holding.started_at is None:
        return (
            f"{held.holder}'s inventory records no start time for this run, so an id "
            "reissued after a controller wipe cannot be ruled out; re-collect it with "
            "`spurctl node-inventory`, which records start times"
        )
    return None
