"""`spurctl node-release`: whether a job's run on this node may be stopped from the node.

Pure: the node's fresh inventory and a few facts read beside it in, one refusal
sentence (or None) out. A release stops an *agent orphan*: a run that began
before the node's current spurd started; or removes a *leftover*: a job's trace
with no process left (an empty cgroup spurd's rmdir failed on), which no agent
cancel removes. spurd's running map does not survive a
restart while the run's processes and cgroup do (Spur #803), and its CancelJob
answers Ok for an id it does not track, doing nothing, so only the node can free
such a run. Anything else goes through `spurctl reclaim`, whose agent cancel is
re-checked against the controller.

spurd exposes no RPC listing its running map (GetNodeResources reports `used`
empty; the heartbeat's list goes only to the controller). The read-only evidence
that spurd tracks a run is therefore: the run began after the current spurd
started (a spurd launches what it tracks), or one of its processes is a child of
the current spurd (spurd forks every job it launches; after a restart the old
runs are re-parented away from the new one).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spurctl.decide import supervision
from spurctl.holdings import AgentProcess, Holding, Inventory, JobProcess
from spurctl.model import format_time

# --started-at matches the run's start time to within this: a clock tick is 10 ms, and
# an operator copying a report's time to the second must still match.
START_TOLERANCE = timedelta(seconds=1)


def held_run(inventory: Inventory, job_id: int) -> Holding | None:
    return next((h for h in inventory.held if h.job_id == job_id), None)


def refusal(
    inventory: Inventory,
    job_id: int,
    started_at: datetime,
    *,
    children_of_agent: Collection[int] = (),
) -> str | None:
    """Why job `job_id`'s run on this node must not be released now; None when it may.

    `inventory` is the node's scan taken immediately before acting; `children_of_agent`
    the job's processes whose parent is the current spurd.
    """
    node, j = inventory.node, job_id
    if len(inventory.agents) > 1:
        pids = ", ".join(str(a.pid) for a in inventory.agents)
        return (
            f"{len(inventory.agents)} top-level spurd processes run on {node} (pids {pids}), "
            f"so which one tracks job {j} cannot be told; stop the stale one and rerun "
            "(nothing released)"
        )
    holding = held_run(inventory, job_id)
    if holding is None:
        return (
            f"job {j} is not held on {node} (no cgroup, process or spool of it); nothing to release"
        )
    if holding.started_at is None:
        return (
            f"the start time of job {j}'s run on {node} cannot be read, so it cannot be "
            "matched with --started-at; nothing released"
        )
    if abs(holding.started_at - started_at) >= START_TOLERANCE:
        return (
            f"job {j}'s run on {node} started at {format_time(holding.started_at)}, not at "
            f"--started-at {format_time(started_at)}: another run holds the id now; "
            "re-audit before releasing (nothing released)"
        )
    if not holding.pids:
        # A leftover (an empty job cgroup, a spool directory): nothing runs, so nothing
        # is signalled, whichever spurd runs; a cgroup is removed only while empty.
        return None
    agent = inventory.agent
    if agent is None:
        return (
            f"no spurd process runs on {node}, so whether one would track job {j} cannot be "
            "told; start spurd (a spurd never tracks a run begun before it) and rerun"
        )
    if agent.started_at is None:
        return (
            f"the start time of spurd (pid {agent.pid}) on {node} cannot be read, so whether "
            f"it tracks job {j} cannot be told; nothing released"
        )
    if holding.started_at >= agent.started_at:
        return (
            f"job {j}'s run on {node} began at {format_time(holding.started_at)}, after its "
            f"spurd (pid {agent.pid}) started at {format_time(agent.started_at)}, so spurd "
            f"tracks it: it is not an agent orphan; use spurctl reclaim --node {node} --job {j}"
        )
    adopted = supervision.adopted(holding)
    if adopted is not None:
        return (
            f"job {j}'s run on {node} began before spurd, but {adopted}: it is not an agent "
            f"orphan; use spurctl reclaim --node {node} --job {j} (nothing released)"
        )
    tracked = set(children_of_agent) | set(holding.tracked_pids)
    if agent.pid in holding.pids or (tracked and tracked >= set(holding.pids)):
        which = agent.pid if agent.pid in holding.pids else min(tracked)
        return (
            f"process {which} of job {j} on {node} is spurd (pid {agent.pid}) or its child, "
            f"so spurd tracks it; use spurctl reclaim --node {node} --job {j}"
        )
    return None


@dataclass(slots=True)
class Selection:
    """Which of a job's processes a release signals, and why each other one is spared."""

    signalled: list[int] = field(default_factory=list)
    spared: dict[int, str] = field(default_factory=dict)


def select(
    job_id: int, procs: Mapping[int, JobProcess], agent: AgentProcess, *, own_pid: int
) -> Selection:
    """Sort the processes that name `job_id` (by cgroup or environment) into signalled
    and spared. Only a run that predates the current spurd is freed; a process of
    spurd's own run (after a graceful restart a requeued run shares the job's cgroup),
    of another job's cgroup, or of unknown age is left alone with its reason."""
    out = Selection()
    since = agent.started_at

    def predates(p: JobProcess) -> bool:
        return since is not None and p.started_at is not None and p.started_at < since

    for pid, p in sorted(procs.items()):
        if pid in (1, own_pid, agent.pid):
            out.spared[pid] = "pid 1, spurd or this command itself"
        elif p.cgroup_job is not None and p.cgroup_job != job_id:
            out.spared[pid] = (
                f"its SPUR_JOB_ID says job {p.env_job} but it sits in job {p.cgroup_job}'s "
                f"cgroup, and cgroup membership wins: it is job {p.cgroup_job}'s"
            )
        elif agent.pid in p.lineage:
            out.spared[pid] = (
                f"it descends from the current spurd (pid {agent.pid}): spurd's own run of the job"
            )
        elif p.started_at is None:
            out.spared[pid] = "its start time cannot be read"
        elif predates(p) or any(
            a in procs and a not in (1, agent.pid) and predates(procs[a]) for a in p.lineage
        ):
            out.signalled.append(pid)
        else:
            out.spared[pid] = (
                "it began after the current spurd started and descends from no process "
                "of the run that predates it, so whose it is cannot be told"
            )
    return out
