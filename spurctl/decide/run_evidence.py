"""What the node's own evidence of a run says beyond the controller's verdict.

agent-orphan: a run none of whose processes descends from spurd, or a cgroup
holding pre-restart processes beside spurd's own run (`_agent_orphan` in
classify.py decides the rest of it, since it asks the controller's verdict);
leftover: a process-less trace an agent cancel was already sent for;
id-reuse-suspected: a run older than the job the controller has under its id.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from spurctl.decide import supervision
from spurctl.decide.held import Held
from spurctl.decide.reasons import join, when
from spurctl.model import Action, AgentProcess, Finding, Inventory, Job, Kind, format_time

# The journal's times are to the second: an inventory counts as taken after a cancel only
# from a second past the cancel's journaled time.
JOURNAL_RESOLUTION = timedelta(seconds=1)


def not_spurds(held: Held, finding: Finding, inv: Inventory) -> Finding:
    """agent-orphan for a live run none of whose processes descends from the node's spurd
    (the scan traced each one to pid 1); else `finding` unchanged.

    spurd forks every run it launches and tracks it until its last process exits, so
    a run with no process under it is not in its running map: its CancelJob would
    answer Ok and free nothing (docs/spur-facts.md, "The agent's CancelJob").
    """
    h, agent = held.holding, inv.agent
    if agent is None or not h.pids or h.tracked_pids or supervision.adopted(h):
        return finding
    pids = " ".join(str(p) for p in h.pids)
    return held.finding(
        Kind.AGENT_ORPHAN,
        f"{finding.reason}; but none of its processes ({pids}) descends from "
        f"{held.holder}'s spurd (pid {agent.pid}), which forks every run it launches, so "
        "spurd does not track this run and its CancelJob would answer Ok and free "
        f"nothing: no agent cancel is planned; find out what started them on {held.holder} "
        "and stop them there (node-release frees only runs begun before spurd started)",
    )


def shared_cgroup(
    held: Held, job: Job | None, agent: AgentProcess, command: str, *, now: datetime
) -> Finding:
    """agent-orphan for a job whose cgroup holds pre-restart processes beside the current
    spurd's own run (after a graceful restart a requeued run joins the old `job_<id>`
    cgroup: docs/spur-facts.md, "spurd's restarts, names and supervisors")."""
    h, j, holder = held.holding, held.holding.job_id, held.holder
    own = set(h.tracked_pids)
    old = " ".join(str(p) for p in h.pids if p not in own)
    mine = " ".join(str(p) for p in h.tracked_pids)
    said = (
        f"job {j} is {job.state.name}" + (f" on {job.nodelist}" if job.state.active else "")
        if job is not None
        else f"job {j} is untracked"
    )
    assert agent.started_at is not None and h.started_at is not None
    return held.finding(
        Kind.AGENT_ORPHAN,
        f"{said}; {holder}'s job {j} holds processes {old}, begun at {when(h.started_at, now)} "
        f"before its spurd (pid {agent.pid}) started at {when(agent.started_at, now)} (orphans "
        f"spurd no longer tracks, Spur #803), beside processes {mine} of the current spurd's "
        "own run of the job (a requeue after a graceful restart joins the same cgroup): no "
        "agent cancel is planned, since it carries no run attempt (Spur #592) and would stop "
        f"spurd's run while the orphans stay; free only the old processes with {command}, "
        "which leaves spurd's run alone",
    )


def leftover(
    held: Held, finding: Finding, sent: datetime, inv: Inventory, *, now: datetime
) -> Finding:
    """leftover: a holding with no process, planned for an agent cancel that was already
    sent (`sent`, from the journal) after its trace appeared; else `finding` unchanged.

    spurd's CancelJob acts only on a job in its running map, and a job leaves that map
    once its last process exits (the 2 s monitor); for any other id it only frees an
    allocation entry (docs/spur-facts.md, "The agent's CancelJob"). So one cancel is
    all a process-less trace can use: every further one answers Ok and frees nothing.
    """
    h = held.holding
    if finding.action is not Action.RECLAIM or h.pids:
        return finding
    if h.started_at is not None and sent + JOURNAL_RESOLUTION < h.started_at:
        return finding  # a newer trace than the one cancelled (the id ran here again)
    j, holder = h.job_id, held.holder
    shown = f"{join(h.traces)}, no process" if h.traces else "no process"
    command = (
        f"`spurctl node-release --job {j} --started-at {format_time(h.started_at)}` on {holder}"
        if h.started_at is not None
        else f"`spurctl node-release --job {j}` on {holder} (with the start time "
        "`spurctl node-inventory` reads there)"
    )
    cancel = f"an agent cancel of job {j} was journaled at {when(sent, now)}"
    if inv.collected_at is None or inv.collected_at < sent + JOURNAL_RESOLUTION:
        after = (
            f"{cancel}, after this inventory was taken; re-collect {holder} (--collect): "
            f"if it still shows them, free them with {command}"
        )
    else:
        after = (
            f"{holder} still shows job {j} ({shown}) after {cancel}; spurd's "
            "CancelJob acts only on jobs in its running map (a job with no process is "
            f"not), so another would free nothing: free what is left with {command}"
        )
    return held.finding(
        Kind.LEFTOVER,
        f"{finding.reason}; no agent cancel is planned: {after}",
    )


def id_reuse(held: Held, *, started: datetime, submitted: datetime, now: datetime) -> Finding:
    j = held.holding.job_id
    return held.finding(
        Kind.ID_REUSE_SUSPECTED,
        f"{held.holder} holds a run of job {j} started at {when(started, now)}, "
        f"before the controller's job {j} was submitted at "
        f"{when(submitted, now)}: the id was likely reissued after a controller wipe",
    )
