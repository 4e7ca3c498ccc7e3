"""The classifier: what each holding and each node means, and what to do about it.

A pure function of plain data (no I/O, no clock but the view's). It first asks
what the controller itself would decide (`controller_decision`, Spur's
`is_reclaimable` after PR #623), then adds what the controller cannot see:
a partial view, node names that only loosely agree, ids reissued after a wipe,
jobs a node lost, and allocations no job explains. When in doubt it spares or
asks for investigation and says why; it never reclaims on inference alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from spurctl import hostlist
from spurctl.decide import causes, supervision
from spurctl.decide.reasons import amount, duration, evidence, join, repair_remedy, when
from spurctl.errors import SpurctlError
from spurctl.model import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    Action,
    AgentProcess,
    Allocation,
    ControllerView,
    Finding,
    Holding,
    Inventory,
    Job,
    JobGlance,
    Kind,
    Placement,
    format_time,
)

# docs/contract.md "Findings": each kind's action. What cannot be sure (a loose name, no
# start time on a tracked id, an unreadable nodelist) turns reclaim into investigate.
ACTIONS: Mapping[Kind, Action] = MappingProxyType(
    {
        Kind.TERMINAL_HELD: Action.RECLAIM,
        Kind.ACTIVE_ELSEWHERE: Action.RECLAIM,
        Kind.BELOW_WATERMARK_UNKNOWN: Action.RECLAIM,
        Kind.ABOVE_WATERMARK_UNKNOWN: Action.INVESTIGATE,
        Kind.UNVERIFIABLE: Action.SPARE,
        Kind.MID_COMMIT: Action.SPARE,
        Kind.NOT_STARTED: Action.SPARE,
        Kind.HEALTHY: Action.NONE,
        Kind.LOST_ON_NODE: Action.INVESTIGATE,
        Kind.PHANTOM_ALLOC: Action.INVESTIGATE,
        Kind.EXCESS_ALLOC: Action.INVESTIGATE,
        Kind.NAME_MISMATCH: Action.INVESTIGATE,
        Kind.ID_REUSE_SUSPECTED: Action.INVESTIGATE,
        Kind.AGENT_UNREACHABLE: Action.INVESTIGATE,
        Kind.AGENT_NOT_RUNNING: Action.INVESTIGATE,
        Kind.NOT_INVENTORIED: Action.INVESTIGATE,
        Kind.AGENT_ORPHAN: Action.INVESTIGATE,
        Kind.CLOCK_AHEAD: Action.INVESTIGATE,
        Kind.LEFTOVER: Action.INVESTIGATE,
    }
)
_ORDER = {Action.RECLAIM: 0, Action.INVESTIGATE: 1, Action.SPARE: 2, Action.NONE: 3}
_NOTHING_CONFIRMED: Mapping[int, Job | None] = MappingProxyType({})
_NO_CANCELS: Mapping[tuple[str, int], datetime] = MappingProxyType({})
# The journal's times are to the second: an inventory counts as taken after a cancel only
# from a second past the cancel's journaled time.
JOURNAL_RESOLUTION = timedelta(seconds=1)
# Spur agents heartbeat every 30 s: an inventory collected more than two heartbeats
# before the controller view may no longer show what the node holds.
STALE_INVENTORY_S = 60.0
# An inventory dated more than this after the audit's "now" comes from a node whose clock
# is ahead: its negative age would pass every staleness check (reclaim skips it too).
CLOCK_AHEAD_S = 60.0


@dataclass(slots=True)
class Classification:
    """The findings of one audit, the notes the operator must read first, and coverage."""

    findings: list[Finding]
    notes: list[str]
    nodes_in_scope: int
    nodes_inventoried: int


def controller_decision(node_name: str, job: Job | None, job_id: int, watermark: int) -> Kind:
    """What spurctld decides for `job_id` held on `node_name` (`job` None: untracked).

    Arm by arm, as Spur's is_reclaimable (docs/spur-facts.md). Names are compared exactly,
    as Spur does. Raises SpurctlError when an active job's nodelist cannot be parsed.
    """
    if job is None:
        # 6: terminal jobs age out of the controller's job map; below the next id it
        # would assign, absence means the run finished.
        if job_id < watermark:
            return Kind.BELOW_WATERMARK_UNKNOWN
        # 7: never issued by this controller: the agent follows a reset or another one.
        return Kind.ABOVE_WATERMARK_UNKNOWN
    state = job.state
    if state in TERMINAL_STATES:
        # 1: the run is over; the node keeps its reservation and rejects new dispatches.
        return Kind.TERMINAL_HELD
    if state in ACTIVE_STATES:
        # 3: state and allocation commit as two log entries; a job seen RUNNING with
        # no nodelist yet may be this node's own new run.
        if not job.nodelist:
            return Kind.MID_COMMIT
        # 5: held where the controller placed it.
        if hostlist.node_in(job.nodelist, node_name):
            return Kind.HEALTHY
        # 2: restarted elsewhere (e.g. after this node was evicted mid-run): the run
        # here is stale and holds devices the scheduler believes are free.
        return Kind.ACTIVE_ELSEWHERE
    # 4: PENDING, PREEMPTED, REQUEUED: it may be mid-dispatch to this very node.
    return Kind.NOT_STARTED


def classify(
    view: ControllerView,
    inventories: Mapping[str, Inventory],
    *,
    watermark: int,
    confirmed: Mapping[int, Job | None] = _NOTHING_CONFIRMED,
    scope: Collection[str] | None = None,
    include_healthy: bool = False,
    now: datetime | None = None,
    collected: bool = False,
    cancelled: Mapping[tuple[str, int], datetime] = _NO_CANCELS,
) -> Classification:
    """Classify every holding of every inventory in scope, then every node in scope.

    `confirmed` holds GetJob's answers for held ids missing from the view: a Job
    (possibly redacted, with an empty nodelist) or None for NOT_FOUND. `scope` is
    the node names to audit; None means every controller node and every inventory.
    `now` is when the inventories were in hand (None: the view's taken_at): one dated
    more than CLOCK_AHEAD_S after it is a clock-ahead finding, and nothing it holds
    is reclaimed. `collected`: the inventories come from this audit's own --collect,
    taken after the view was read (the hints then say so, never "use --collect").
    `cancelled` is when an agent cancel was last sent (or may have been: an
    interrupted send) for a job on a node, by (inventory node, job id), as
    reclaim's journal records it: a holding with no process gets one at most.
    """
    now = view.taken_at if now is None else now
    wanted = None if scope is None else frozenset(scope)
    names = _NameMatcher(view.nodes)
    findings: list[Finding] = []
    unreadable: dict[int, str] = {}
    scoped: set[str] = set(view.nodes if wanted is None else wanted)
    inventoried: set[str] = set()
    spoken_for: set[str] = set()  # loose keys of the names the inventories in scope speak for
    ages: dict[str, float] = {}  # inventory age by inventory node, where it was read
    held_by_exact_name: dict[str, Inventory] = {}
    exact_ages: dict[str, float | None] = {}  # their ages, read once per inventory
    empty: dict[str, float | None] = {}  # inventory nodes that hold nothing, with their age
    renamed: list[Inventory] = []  # taken with a --hostname other than the host's own name

    for inv in sorted(inventories.values(), key=lambda i: i.node):
        node, mismatch, heartbeat = names.controller_name(inv)
        if wanted is not None and node not in wanted and inv.node not in wanted:
            continue
        if node != inv.node:
            scoped.discard(inv.node)  # one node, named twice: count it once
        scoped.add(node)
        spoken_for.update((hostlist.loose_key(node), hostlist.loose_key(inv.node)))
        if inv.target_node is not None:
            spoken_for.add(hostlist.loose_key(inv.target_node))
        age = inventory_age(view, inv)
        if inv.error is not None:
            findings.append(
                _node_finding(inv.node, Kind.AGENT_UNREACHABLE, _unreachable(inv), age=age)
            )
            continue
        if age is not None:
            ages[inv.node] = age
        inventoried.add(node)
        if inv.hostname is not None and inv.hostname != inv.node:
            renamed.append(inv)
        ahead = _ahead(inv, now)
        if ahead is not None:
            findings.append(
                _node_finding(inv.node, Kind.CLOCK_AHEAD, _clock_ahead(inv, ahead, now), age=age)
            )
        if mismatch is None:
            if ahead is None:
                # lost-on-node weighs job start times against collected_at, which a
                # clock ahead makes meaningless.
                held_by_exact_name[node] = inv
            exact_ages[node] = age
            if heartbeat is not None:
                findings.append(_node_finding(inv.node, Kind.NAME_MISMATCH, heartbeat, age=age))
        else:
            findings.append(
                _node_finding(inv.node, Kind.NAME_MISMATCH, _mismatch_reason(mismatch), age=age)
            )
        if not inv.held:
            empty[inv.node] = age
        no_agent = inv.agent_checked and inv.agent is None
        if no_agent:
            findings.append(
                _node_finding(inv.node, Kind.AGENT_NOT_RUNNING, _agent_not_running(inv), age=age)
            )
        agent_started = None if inv.agent is None else inv.agent.started_at
        for holding in inv.held:
            if not include_healthy:
                glance = _controller_glance(view, confirmed, holding.job_id)
                if glance is not None and _plainly_healthy(
                    node, glance, holding.started_at, agent_started
                ):
                    continue  # most holdings: no finding, and none of the work below
            job, asked = _controller_job(view, confirmed, holding.job_id)
            held = _Held(node, inv.node, holding, job, asked, mismatch, age, ahead, no_agent)
            finding = _agent_orphan(held, inv, view=view, watermark=watermark) or _judge_holding(
                held, view=view, watermark=watermark, include_healthy=include_healthy
            )
            if finding is None:
                continue
            if inv.ancestry_read and finding.action is Action.RECLAIM:
                finding = _not_spurds(held, finding, inv)
            sent = cancelled.get((inv.node, holding.job_id))
            if sent is not None:
                finding = _leftover(held, finding, sent, inv, now=view.taken_at)
            extra = causes.overlay(finding.kind, finding.action, job, view.nodes.get(node), node)
            if extra is not None:  # a health check spared, an admin's DOWN named
                finding = held.finding(finding.kind, f"{finding.reason}; {extra[0]}", extra[1])
            if job is not None and finding.kind is Kind.UNVERIFIABLE:
                # The one unverifiable verdict on a job the controller has: its
                # nodelist could not be read.
                unreadable[job.job_id] = job.nodelist
            findings.append(finding)
    findings.extend(
        _not_inventoried(view, scoped, spoken_for, collected=collected)
    )  # sorted with the rest below

    notes: list[str] = []
    stale = _stale_inventories_note(ages, collected=collected)
    if stale is not None:
        notes.append(stale)
    if renamed:
        notes.append(_renamed_note(renamed))
    if view.complete:
        node_findings, unreadable_active = _node_findings(
            view, wanted, held_by_exact_name, exact_ages
        )
        findings.extend(node_findings)
        unreadable.update(unreadable_active)
    else:
        notes.append(
            f"controller view is incomplete ({view.coverage()}): "
            "phantom-alloc, excess-alloc and lost-on-node are withheld"
        )
    if include_healthy:
        # --all: a node that holds nothing and has no finding still gets its row.
        shown = {f.node for f in findings}
        findings.extend(
            _node_finding(
                name,
                Kind.HEALTHY,
                f"{name} holds no job"
                + (", and the controller runs none there" if view.complete else ""),
                age=age,
            )
            for name, age in empty.items()
            if name not in shown
        )
    notes.extend(
        f"job {job_id}'s nodelist {nodelist!r} is not a valid hostlist; "
        "its holdings are not reclaimed and its nodes' allocations are not explained by it"
        for job_id, nodelist in sorted(unreadable.items())
    )
    findings.sort(  # nodes as an operator reads them (gpu2 before gpu10), then urgency
        key=lambda f: (
            hostlist.natural_key(f.node),
            _ORDER[f.action],
            -1 if f.job_id is None else f.job_id,
            f.kind.value,
        )
    )
    return Classification(findings, notes, len(scoped), len(inventoried))


# -- single-holding questions, shared with `spurctl explain` ------------------------


def judged_as(nodes: Iterable[str], inv: Inventory) -> tuple[str, str | None, str | None]:
    """(the controller node `inv`'s holdings are judged as, why none of them may be
    reclaimed or None, why the node is still a name-mismatch or None): the classifier's
    own name matching, for one inventory."""
    return _NameMatcher(nodes).controller_name(inv)


def controller_job(
    view: ControllerView, confirmed: Mapping[int, Job | None], job_id: int
) -> tuple[Job | None, bool]:
    """The controller's job for a held id (None: untracked or unknown), and whether it
    came from GetJob (asked)."""
    return _controller_job(view, confirmed, job_id)


# -- holdings ----------------------------------------------------------------


def _controller_job(
    view: ControllerView, confirmed: Mapping[int, Job | None], job_id: int
) -> tuple[Job | None, bool]:
    """The controller's job for a held id, and whether it came from GetJob (asked)."""
    job = view.jobs.get(job_id)
    if job is None and job_id in confirmed:
        return confirmed[job_id], True
    return job, False


def _controller_glance(
    view: ControllerView, confirmed: Mapping[int, Job | None], job_id: int
) -> Job | JobGlance | None:
    """`_controller_job`'s job, or only its state, nodelist and submit time when that is
    all a live view has read of it yet: enough to tell a plainly healthy holding."""
    glance = view.glance(job_id)
    if glance is None:
        return confirmed.get(job_id)
    return glance


@dataclass(slots=True)  # not frozen: built once per holding, and frozen init costs
class _Held:
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


def _reclaim_doubt(held: _Held, kind: Kind) -> str | None:
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


def _plainly_healthy(
    node: str, job: Job | JobGlance, started: datetime | None, agent_started: datetime | None
) -> bool:
    """Whether the full judgement of a holding of `job` on controller node `node` (run
    started at `started`, on a node whose spurd started at `agent_started`) can only
    be healthy: `_agent_orphan` finds no run older than the agent, `_judge_holding`
    no reissued id, and `controller_decision` says HEALTHY (the job active, its
    nodelist naming `node`). Decided from those few fields, so that the tens of
    thousands of healthy holdings of a large cluster cost almost nothing; anything
    else, an unreadable nodelist included, takes the full path.
    """
    if job.state not in ACTIVE_STATES or not job.nodelist:
        return False
    if started is not None:
        if agent_started is not None and started < agent_started:
            return False
        submitted = job.submit_time
        if submitted is not None and started < submitted:
            return False
    try:
        return hostlist.node_in(job.nodelist, node)
    except SpurctlError:
        return False


def _judge_holding(
    held: _Held, *, view: ControllerView, watermark: int, include_healthy: bool
) -> Finding | None:
    """The finding for one holding; None for a healthy one unless `include_healthy`.

    Most holdings are healthy, and their reasons are not worth writing for a
    finding nobody will see.
    """
    job = held.job
    if job is None and not held.asked and not view.proves_untracked(held.holding.job_id):
        return _missing_from_partial_view(held, view)
    if job is None:
        return _untracked(held, watermark=watermark, by_id=view.bounded)
    started, submitted = held.holding.started_at, job.submit_time
    if started is not None and submitted is not None and started < submitted:
        # After a wipe the counter restarts and reissues ids: the controller's job is
        # another run than the one held here, and cancelling by id would hit the wrong one.
        return _id_reuse(held, started=started, submitted=submitted, now=view.taken_at)
    try:
        kind = controller_decision(held.node, job, held.holding.job_id, watermark)
    except SpurctlError:
        return _unreadable_nodelist(held, job)
    if kind is Kind.HEALTHY and not include_healthy:
        return None
    if kind is Kind.ACTIVE_ELSEWHERE and _nodelist_text_names(held, job):
        return _named_in_nodelist_text(held, job)
    return held.finding(kind, _tracked_reason(kind, held, job, now=view.taken_at))


# The verdicts an agent orphan overrides: those that would plan an agent cancel (it would
# answer Ok and free nothing), and healthy (a legitimate run the agent no longer tracks).
_ORPHAN_OVERRIDES = frozenset(
    {Kind.TERMINAL_HELD, Kind.ACTIVE_ELSEWHERE, Kind.BELOW_WATERMARK_UNKNOWN, Kind.HEALTHY}
)


def _agent_orphan(
    held: _Held, inv: Inventory, *, view: ControllerView, watermark: int
) -> Finding | None:
    """agent-orphan: a run that began before the node's current spurd started; else None.

    spurd's running map does not survive a restart while the run's processes and
    cgroup do (Spur #803), and its CancelJob answers Ok for an id it does not track,
    doing nothing. It overrides the reclaim verdicts and healthy; every other verdict
    (spare, id reuse, an unreadable nodelist) stands as it is.
    """
    started, agent = held.holding.started_at, inv.agent
    if started is None or agent is None or agent.started_at is None:
        return None
    if started >= agent.started_at:
        return None
    job, j = held.job, held.holding.job_id
    if job is None and not held.asked and not view.proves_untracked(j):
        return None
    if job is not None and job.submit_time is not None and started < job.submit_time:
        return None
    try:
        kind = controller_decision(held.node, job, j, watermark)
    except SpurctlError:
        return None
    if kind not in _ORPHAN_OVERRIDES or (
        job is not None and kind is Kind.ACTIVE_ELSEWHERE and _nodelist_text_names(held, job)
    ):
        return None
    now, holder = view.taken_at, held.holder
    command = f"`spurctl node-release --job {j} --started-at {format_time(started)}` on {holder}"
    lost = (
        f"{holder}'s run of job {j} {evidence(held.holding)} began at {when(started, now)}, "
        f"before its spurd (pid {agent.pid}) started at {when(agent.started_at, now)}, so "
        "spurd no longer tracks it (Spur #803) and its CancelJob would answer Ok and free nothing"
    )
    adopted = supervision.adopted(held.holding) is not None
    if adopted and kind is Kind.HEALTHY:
        return None
    if held.holding.tracked_pids:
        return _shared_cgroup(held, job, agent, command, now=now)
    if kind is Kind.HEALTHY:
        assert job is not None
        return held.finding(
            Kind.AGENT_ORPHAN,
            f"job {j} is {job.state.name} on {job.nodelist} as the controller says, but {lost}: "
            "the run is legitimate, so do not release it; once the job has ended, "
            f"free what is left with {command}",
        )
    why = (
        f"the controller has job {j} {job.state.name}"
        + (f" on {job.nodelist}" if job.state.active else "")
        if job is not None
        else f"job {j} is untracked below watermark {watermark}"
    )
    if adopted:  # its age proves no orphan (Spur #754)
        said = supervision.not_an_orphan(held.holding, holder, when(agent.started_at, now))
        return held.finding(kind, f"{why}; {said}", action=Action.INVESTIGATE)
    return held.finding(
        Kind.AGENT_ORPHAN,
        f"{why} and {lost}; no agent cancel is planned: free it with {command}",
    )


def _not_spurds(held: _Held, finding: Finding, inv: Inventory) -> Finding:
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


def _shared_cgroup(
    held: _Held, job: Job | None, agent: AgentProcess, command: str, *, now: datetime
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


def _leftover(
    held: _Held, finding: Finding, sent: datetime, inv: Inventory, *, now: datetime
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


def _nodelist_text_names(held: _Held, job: Job) -> bool:
    """Whether the job's nodelist text names this node as a token, whatever it parses to.

    A backstop under the hostlist parse: a nodelist whose spacing or syntax spurctl
    reads differently from Spur must never turn a node's own run into a stale one.
    """
    return hostlist.names_token(job.nodelist, held.node) or hostlist.names_token(
        job.nodelist, held.holder
    )


def _named_in_nodelist_text(held: _Held, job: Job) -> Finding:
    j = held.holding.job_id
    return held.finding(
        Kind.UNVERIFIABLE,
        f"job {j} is {job.state.name} on {job.nodelist!r}, which does not parse as including "
        f"{held.node} but whose text names it, so this may be the job's own run; "
        f"{held.holder} holds it {evidence(held.holding)}",
        action=Action.INVESTIGATE,
    )


def _missing_from_partial_view(held: _Held, view: ControllerView) -> Finding:
    # Absent from a partial view (e.g. GetJobs scoped to the caller) proves nothing:
    # the job may be another user's live run.
    j = held.holding.job_id
    return held.finding(
        Kind.UNVERIFIABLE,
        f"job {j} is missing from the controller's incomplete view "
        f"({view.coverage()}) and GetJob did not confirm "
        f"it untracked; spared while {held.holder} holds it {evidence(held.holding)}",
    )


def _untracked(held: _Held, *, watermark: int, by_id: bool = False) -> Finding:
    j, holder, ev = held.holding.job_id, held.holder, evidence(held.holding)
    kind = controller_decision(held.node, None, j, watermark)
    if kind is Kind.BELOW_WATERMARK_UNKNOWN:
        proof = (
            "GetJob answered NOT_FOUND"
            if held.asked
            else "GetJobs did not return it when asked for it by id"
            if by_id
            else "absent from the complete view"
        )
        return held.finding(
            kind,
            f"job {j} is below watermark {watermark} and untracked "
            f"({proof}); {holder} still holds it {ev}",
        )
    return held.finding(
        kind,
        f"job {j} is at or above watermark {watermark}, so this controller never "
        f"issued it; {holder} holds it {ev}, so its agent likely served a reset or "
        "different controller",
    )


def _id_reuse(held: _Held, *, started: datetime, submitted: datetime, now: datetime) -> Finding:
    j = held.holding.job_id
    return held.finding(
        Kind.ID_REUSE_SUSPECTED,
        f"{held.holder} holds a run of job {j} started at {when(started, now)}, "
        f"before the controller's job {j} was submitted at "
        f"{when(submitted, now)}: the id was likely reissued after a controller wipe",
    )


def _unreadable_nodelist(held: _Held, job: Job) -> Finding:
    j = held.holding.job_id
    return held.finding(
        Kind.UNVERIFIABLE,
        f"job {j} is {job.state.name} but its nodelist {job.nodelist!r} cannot be read, "
        f"so whether {held.node} belongs to it is unknown; {held.holder} holds it "
        f"{evidence(held.holding)}",
        action=Action.INVESTIGATE,
    )


def _tracked_reason(kind: Kind, held: _Held, job: Job, *, now: datetime) -> str:
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


# -- node names --------------------------------------------------------------


class _NameMatcher:
    """Maps an inventory's node name onto the controller's, exactly or loosely.

    Spur compares names exactly, so a loose match (case, short name vs FQDN) means
    the controller would misjudge this node's runs: it is reported, never trusted.
    """

    def __init__(self, nodes: Iterable[str]) -> None:
        self._exact = frozenset(nodes)
        self._loose_keys: dict[str, list[str]] | None = None  # built on the first loose match

    @property
    def _loose(self) -> dict[str, list[str]]:
        if self._loose_keys is None:
            loose: dict[str, list[str]] = {}
            for name in self._exact:
                loose.setdefault(hostlist.loose_key(name), []).append(name)
            for names in loose.values():
                names.sort()
            self._loose_keys = loose
        return self._loose_keys

    def controller_name(self, inv: Inventory) -> tuple[str, str | None, str | None]:
        """(the controller node to judge `inv`'s holdings as, why no holding there may be
        reclaimed or None, why the node is still a name-mismatch or None).

        SPUR_TARGET_NODE is the controller's own name for the node, carried by every
        job process spurd launches: when they all carry one name the controller has,
        that name is direct evidence, and the holdings are judged under it. Spur's
        heartbeat reclaim compares the name the agent reports (the inventory's node),
        so a differing one is still reported. Processes naming several nodes, or a
        node the controller does not have, leave the node unidentified: never reclaimed.
        """
        canonical, mismatch = self.match(inv.node)
        node = canonical or inv.node
        target = inv.target_node
        if target is None and len(inv.target_nodes) > 1:
            listed = ", ".join(repr(n) for n in inv.target_nodes)
            return (
                node,
                f"the job processes on {inv.node} name several controller nodes in "
                f"SPUR_TARGET_NODE ({listed}), so which node it is cannot be told",
                None,
            )
        if target is None:
            return node, mismatch, None
        if target not in self._exact:
            return (
                node,
                f"the job processes on {inv.node} name node {target!r} in SPUR_TARGET_NODE, "
                "which the controller does not have",
                None,
            )
        if target == inv.node:
            return target, None, None
        if canonical is not None and canonical != target:
            return (
                node,
                f"{inv.node}'s agent reports the name of controller node {canonical!r}, but its "
                f"job processes name {target!r} in SPUR_TARGET_NODE, so which node it is "
                "cannot be told",
                None,
            )
        return (
            target,
            None,
            f"{inv.node}'s job processes carry SPUR_TARGET_NODE {target!r}, the controller's "
            f"own name for it, so its holdings are judged as {target}; Spur's own reclaim "
            "compares the reported name exactly and misjudges this node's runs until they agree",
        )

    def match(self, name: str) -> tuple[str | None, str | None]:
        """(controller name or None, why the match is not exact or None)."""
        if name in self._exact:
            return name, None
        candidates = self._loose.get(hostlist.loose_key(name), [])
        if len(candidates) == 1:
            other = candidates[0]
            how = "by case" if other.lower() == name.lower() else "by short name"
            return other, f"inventory node {name!r} matches controller node {other!r} only {how}"
        if candidates:
            listed = ", ".join(repr(c) for c in candidates)
            return None, f"inventory node {name!r} loosely matches several nodes ({listed})"
        return None, f"inventory node {name!r} matches no controller node"


def _mismatch_reason(mismatch: str) -> str:
    return (
        f"{mismatch}; Spur compares node names exactly, so nothing held there is "
        "reclaimed until the names agree"
    )


def _ahead(inv: Inventory, now: datetime) -> float | None:
    """How many seconds `inv` is dated after `now`, when more than CLOCK_AHEAD_S; else None."""
    if inv.collected_at is None:
        return None
    ahead = (inv.collected_at - now).total_seconds()
    return ahead if ahead > CLOCK_AHEAD_S else None


def _clock_ahead(inv: Inventory, ahead: float, now: datetime) -> str:
    assert inv.collected_at is not None
    return (
        f"{inv.node}'s inventory is dated {format_time(inv.collected_at)}, {duration(ahead)} "
        f"after this audit's clock ({format_time(now)}; more than the "
        f"{CLOCK_AHEAD_S:.0f} s allowed): the node's clock is ahead, so how old its evidence "
        "is cannot be told and nothing it holds is reclaimed; fix its clock (NTP) and "
        "re-collect it"
    )


def _agent_not_running(inv: Inventory) -> str:
    """agent-not-running: the node answered, but its scan found no spurd process."""
    taken = f" at {format_time(inv.collected_at)}" if inv.collected_at else ""
    ids = [h.job_id for h in inv.held]
    what = (
        f"it holds job{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} and no agent "
        f"is there to cancel {'them' if len(ids) > 1 else 'it'}, so nothing on it is reclaimed"
        if ids
        else "it holds nothing, but it can neither run nor free a job until spurd runs"
    )
    return (
        f"no spurd process was running on {inv.node} when its inventory was taken{taken}"
        f"{given_hostname(inv)}: {what}; start spurd on it and re-collect"
    )


def _renamed_note(renamed: list[Inventory]) -> str:
    """Inventories that speak for a node other than the host they were taken on: each is
    judged as the node it names, so a wrong --hostname moves one node's holdings to another."""
    shown = ", ".join(f"{inv.node} (host {inv.hostname})" for inv in renamed[:3])
    more = f" and {len(renamed) - 3:,} more" if len(renamed) > 3 else ""
    many = len(renamed) > 1
    return (
        f"{len(renamed):,} inventor{'ies were' if many else 'y was'} taken with a "
        f"node-inventory --hostname other than the host's own name: {shown}{more}; "
        f"{'each is' if many else 'it is'} judged as the node named, so check that "
        "--hostname named the right node"
    )


def given_hostname(inv: Inventory) -> str:
    """' (scanned on host X with --hostname Y)' when node-inventory was told a node name
    other than the host's own; '' otherwise."""
    if inv.hostname is None or inv.hostname == inv.node:
        return ""
    return f" (scanned on host {inv.hostname} with --hostname {inv.node})"


def _unreachable(inv: Inventory) -> str:
    return f"{inv.node} could not be inventoried ({inv.error}); what it holds is unknown"


def _node_finding(
    node: str, kind: Kind, reason: str, job: Job | None = None, *, age: float | None = None
) -> Finding:
    return Finding(
        node=node,
        job_id=None if job is None else job.job_id,
        kind=kind,
        action=ACTIONS[kind],
        reason=reason,
        controller_state=None if job is None else job.state.name,
        allocated_nodes=None if job is None else job.nodelist,
        inventory_age_s=age,
    )


# -- coverage and freshness ----------------------------------------------------


def inventory_age(view: ControllerView, inv: Inventory | None) -> float | None:
    """Seconds from `inv`'s collection to the controller view (negative: collected after
    it); None without an inventory or its collection time."""
    if inv is None or inv.collected_at is None:
        return None
    return round((view.taken_at - inv.collected_at).total_seconds(), 3)


def _not_inventoried(
    view: ControllerView,
    scoped: Collection[str],
    spoken_for: Collection[str],
    *,
    collected: bool = False,
) -> list[Finding]:
    """A finding for each node in scope that no inventory speaks for (by exact or loose name).

    What such a node holds is unknown, so the audit cannot call it clean; and a name the
    controller does not know either is most likely a typo in --nodes (gpu[01-24] for
    gpu[001-024]), which must not pass for a clean audit of nothing.

    The controller's nodes come in the controller's order, usually the operator's
    (gpu2 before gpu10): the findings are sorted by node afterwards, and an ordered
    run of ten thousand of them sorts in one pass.
    """
    known = [name for name in view.nodes if name in scoped]
    unknown = (
        [name for name in scoped if name not in view.nodes] if len(known) < len(scoped) else []
    )
    fix = (
        "this audit's --collect brought no inventory naming it; run "
        "`spurctl collect --nodes {name}`, with this audit's --command or --topology if it "
        "had one, to see what its command printed"
        if collected
        else "collect it (spurctl collect --nodes {name}) or use --collect"
    )
    out = [
        _node_finding(
            name,
            Kind.NOT_INVENTORIED,
            f"no inventory speaks for {name}, so what its agent holds is unknown and it "
            f"was not audited; " + fix.format(name=name),
        )
        for name in known
        if hostlist.loose_key(name) not in spoken_for
    ]
    out.extend(
        _node_finding(
            name,
            Kind.NOT_INVENTORIED,
            f"the controller has no node {name} and no inventory speaks for it, so "
            "nothing was audited there; check the --nodes hostlist for a typo "
            "(e.g. gpu[01-24] for gpu[001-024])",
        )
        for name in unknown
        if hostlist.loose_key(name) not in spoken_for
    )
    return out


def _stale_inventories_note(ages: Mapping[str, float], *, collected: bool = False) -> str | None:
    """The note naming inventories collected more than two heartbeats before the view.

    The controller's view is of one moment; a node's holdings read long before it
    may have changed since (a run ended, a cancel landed), so decisions on them
    deserve a fresh collect.
    """
    stale = sorted(
        (n for n, age in ages.items() if age > STALE_INVENTORY_S), key=lambda n: -ages[n]
    )
    if not stale:
        return None
    shown = ", ".join(stale[:5]) + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
    count = f"{len(stale)} inventor{'y was' if len(stale) == 1 else 'ies were'}"
    span = (
        f"more than {STALE_INVENTORY_S:.0f} s (two agent heartbeats) before the controller "
        f"view, the oldest {duration(ages[stale[0]])} before ({shown})"
    )
    if collected:
        # This audit's own collect ran after the view was read: dated before it is a clock.
        dated = f"{len(stale)} inventor{'y is' if len(stale) == 1 else 'ies are'} dated"
        return (
            f"{dated} {span}, though this audit's --collect took them after reading the "
            "controller: those nodes' clocks are behind this host's by at least that much, "
            "so their start times and ages mislead; fix their clocks (NTP)"
        )
    return (
        f"{count} collected {span}: what those nodes hold may have changed since; "
        "re-collect them, or use --collect"
    )


# -- what only the full job list can tell --------------------------------------


def _node_findings(
    view: ControllerView,
    wanted: frozenset[str] | None,
    held_by_exact_name: Mapping[str, Inventory],
    ages: Mapping[str, float | None],
) -> tuple[list[Finding], dict[int, str]]:
    """lost-on-node, phantom-alloc and excess-alloc, and the active jobs whose nodelist
    cannot be read; only sound on a complete view.

    They run on the active jobs' placements; only a job a lost-on-node candidate
    names is read whole (for its start time, state and the finding)."""
    allocated = {
        name: alloc
        for name, alloc in view.node_allocations().items()
        if not alloc.empty and (wanted is None or name in wanted)
    }
    relevant = allocated.keys() | held_by_exact_name.keys()
    if not relevant:
        return [], {}
    jobs_on, unreadable = _active_jobs_by_node(view.active_placements(), relevant)
    out: list[Finding] = []
    for name, inv in held_by_exact_name.items():
        out.extend(_lost_on_node(name, inv, jobs_on.get(name, []), view=view, age=ages[name]))
    for name, alloc in allocated.items():
        finding = _explain_allocation(name, alloc, jobs_on.get(name, []), age=ages.get(name))
        if finding is not None:
            out.append(finding)
    return out, unreadable


def _lost_on_node(
    name: str,
    inv: Inventory,
    on_node: list[tuple[Placement, int]],
    *,
    view: ControllerView,
    age: float | None,
) -> list[Finding]:
    """The active jobs the controller places on `name` that its inventory (of age `age`)
    does not hold."""
    held = {h.job_id for h in inv.held}
    now = view.taken_at
    out: list[Finding] = []
    for placed, _ in on_node:
        if placed.job_id in held:
            continue
        job = view.jobs[placed.job_id]
        started = job.start_time
        # A run that began after the inventory was taken cannot be in it.
        if started and inv.collected_at and started >= inv.collected_at:
            continue
        since = f" since {when(started, now)}" if started else ""
        taken = f" taken at {when(inv.collected_at, now)}" if inv.collected_at else ""
        reason = (
            f"the controller has job {job.job_id} {job.state.name} on {name}{since}, "
            f"but {name}'s inventory{taken} does not hold it"
        ) + _two_names(inv)
        out.append(_node_finding(name, Kind.LOST_ON_NODE, reason, job, age=age))
    return out


def _two_names(inv: Inventory) -> str:
    """Why a node may lose jobs: spurd registers under `--hostname` but reports
    completions under the OS name, which the controller rejects (Spur #684)."""
    own, os_name = inv.agent_hostname, inv.hostname
    if own is None or os_name is None or own == os_name:
        return ""
    return (
        f"; its spurd runs with --hostname {own} while the host's name is {os_name}, and "
        "spurd reports completions under the host's name, which the controller rejects "
        "(Spur #684), so jobs that ended there stay active"
    )


def _active_jobs_by_node(
    placements: Iterable[Placement], relevant: set[str]
) -> tuple[dict[str, list[tuple[Placement, int]]], dict[int, str]]:
    """Active jobs listing each relevant node, each with the width of its nodelist, and
    the active jobs whose nodelist cannot be read.

    Only jobs with a nodelist are expanded, and a plain one-node list never is.
    """
    out: dict[str, list[tuple[Placement, int]]] = {}
    unreadable: dict[int, str] = {}
    for placed in placements:
        nodelist = placed.nodelist
        if not nodelist:
            continue
        name = hostlist.plain_name(nodelist)
        if name is not None:  # most jobs: one node, no set to build
            if name in relevant:
                on_node = out.get(name)
                if on_node is None:
                    out[name] = [(placed, 1)]
                else:
                    on_node.append((placed, 1))
            continue
        try:
            nodes = hostlist.expand(nodelist)
        except SpurctlError:
            unreadable[placed.job_id] = nodelist
            continue
        for name in nodes & relevant:
            out.setdefault(name, []).append((placed, len(nodes)))
    return out, unreadable


def _explain_allocation(
    name: str, alloc: Allocation, on_node: list[tuple[Placement, int]], *, age: float | None
) -> Finding | None:
    """phantom-alloc or excess-alloc: the active jobs on node `name` do not account for its
    allocation `alloc`."""
    have = (alloc.cpus, alloc.memory_mb, alloc.gpus)
    if not on_node:
        what = join(amount(v, dim) for dim, v in enumerate(have) if v) or "devices"
        return _node_finding(
            name,
            Kind.PHANTOM_ALLOC,
            f"{name} has {what} allocated but no active job lists it, "
            f"so the scheduler sees it busy and nothing frees it{repair_remedy(name)}",
            age=age,
        )
    # Spur's fallback splits a job evenly over its nodes; each share rounded up reads no excess.
    cpus = memory_mb = gpus = 0
    for placed, width in on_node:
        r = placed.resources
        if width == 1:
            cpus += r.cpus
            memory_mb += r.memory_mb
            gpus += r.gpus
        else:
            cpus += -(-r.cpus // width)
            memory_mb += -(-r.memory_mb // width)
            gpus += -(-r.gpus // width)
    if have[0] <= cpus and have[1] <= memory_mb and have[2] <= gpus:
        return None  # most nodes: their jobs account for all of it
    explained = (cpus, memory_mb, gpus)
    over = [dim for dim in range(3) if have[dim] > explained[dim]]
    ids = ", ".join(str(i) for i in sorted(j.job_id for j, _ in on_node))
    jobs = f"active jobs {ids} account" if len(on_node) > 1 else f"active job {ids} accounts"
    return _node_finding(
        name,
        Kind.EXCESS_ALLOC,
        f"{name} has {join(amount(have[d], d) for d in over)} allocated, but its "
        f"{jobs} for {join(amount(explained[d], d) for d in over)}",
        age=age,
    )
