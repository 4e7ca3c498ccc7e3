"""The classifier: what each holding and each node means, and what to do about it.

A pure function of plain data (no I/O, no clock but the view's). It first asks
what the controller itself would decide (`controller_decision`, Spur's
`is_reclaimable` after PR #623), then adds what the controller cannot see:
a partial view, node names that only loosely agree, ids reissued after a wipe,
jobs a node lost, and allocations no job explains. When in doubt it spares or
asks for investigation and says why; it never reclaims on inference alone.

Here: `classify` (every check, in the order it runs), `controller_decision`
(Spur's arms, one by one), and the judgement of one holding, which asks it:
`_judge_holding`, `_agent_orphan`, `_untracked`, and `_plainly_healthy`, the
shortcut that must agree with all of them. The rest lives beside it in decide/:

- actions.py          each kind's action (docs/contract.md "Findings"); a node's finding
- held.py             one holding under judgement, and what turns its reclaim into
                      investigate (a loose name, a clock ahead, no agent, no start
                      time on a tracked id, job id 0)
- verdict_reasons.py  the sentence behind each verdict on a tracked job, a job
                      missing from a partial view, an unreadable nodelist
- run_evidence.py     agent-orphan by ancestry or by a shared cgroup, leftover,
                      id-reuse-suspected
- glance.py           the controller's job for a held id, or a glance at it
- node_names.py       exact and loose name matching, SPUR_TARGET_NODE, --hostname
- freshness.py        stale inventories, clocks ahead (clock-ahead)
- node_checks.py      agent-unreachable, agent-not-running, not-inventoried,
                      lost-on-node, phantom-alloc, excess-alloc
- causes.py, supervision.py, health.py: an admin's DOWN, runs spurd adopts, health checks
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from spurctl import hostlist
from spurctl.decide import causes, supervision
from spurctl.decide.actions import node_finding
from spurctl.decide.freshness import (
    clock_ahead,
    inventory_age,
    seconds_ahead,
    stale_inventories_note,
)
from spurctl.decide.glance import controller_job, glances
from spurctl.decide.held import Held
from spurctl.decide.node_checks import (
    agent_not_running,
    full_view_findings,
    not_inventoried,
    unreachable,
)
from spurctl.decide.node_names import NameMatcher, mismatch_reason, renamed_note
from spurctl.decide.reasons import evidence, when
from spurctl.decide.run_evidence import id_reuse, leftover, not_spurds, shared_cgroup
from spurctl.decide.verdict_reasons import (
    missing_from_partial_view,
    named_in_nodelist_text,
    tracked_reason,
    unreadable_nodelist,
)
from spurctl.errors import SpurctlError
from spurctl.model import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    Action,
    ControllerView,
    Finding,
    Inventory,
    Job,
    JobGlance,
    Kind,
    format_time,
)

_ORDER = {Action.RECLAIM: 0, Action.INVESTIGATE: 1, Action.SPARE: 2, Action.NONE: 3}
_NOTHING_CONFIRMED: Mapping[int, Job | None] = MappingProxyType({})
_NO_CANCELS: Mapping[tuple[str, int], datetime] = MappingProxyType({})


@dataclass(slots=True)
class Classification:
    """The findings of one audit, the notes the operator must read first, and coverage."""

    findings: list[Finding]
    notes: list[str]
    nodes_in_scope: int
    nodes_inventoried: int


def controller_decision(
    node_name: str,
    job: Job | None,
    job_id: int,
    watermark: int,
    limit: int = hostlist.MAX_NODES,
) -> Kind:
    """What spurctld decides for `job_id` held on `node_name` (`job` None: untracked).

    Arm by arm, as Spur's is_reclaimable (docs/spur-facts.md). Names are compared exactly,
    as Spur does. Raises SpurctlError when an active job's nodelist cannot be read, or
    names more than `limit` nodes (hostlist.nodelist_limit).
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
        if hostlist.node_in(job.nodelist, node_name, limit):
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
    limit = hostlist.nodelist_limit(len(view.nodes))
    wanted = None if scope is None else frozenset(scope)
    names = NameMatcher(view.nodes)
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
    glance_of = glances(view, confirmed)
    glanced = view.kept_glances()  # most holdings' jobs, looked up without a call

    for inv in sorted(inventories.values(), key=lambda i: i.node):
        node, mismatch, heartbeat = names.controller_name(inv)
        if wanted is not None and node not in wanted and inv.node not in wanted:
            continue
        if node != inv.node:
            scoped.discard(inv.node)  # one node, named twice: count it once
            spoken_for.add(hostlist.loose_key(inv.node))
        scoped.add(node)
        spoken_for.add(hostlist.loose_key(node))
        if inv.target_node is not None and inv.target_node != node:  # else added just above
            spoken_for.add(hostlist.loose_key(inv.target_node))
        age = inventory_age(view, inv)
        if inv.error is not None:
            # A name the controller does not know, not even loosely, is said to be one: a
            # typo in --nodes fails its collect too, and ssh's error alone hides why.
            unknown = names.match(inv.node)[0] is None and inv.target_node is None
            why = unreachable(inv, unknown=unknown)
            findings.append(node_finding(inv.node, Kind.AGENT_UNREACHABLE, why, age=age))
            continue
        if age is not None:
            ages[inv.node] = age
        inventoried.add(node)
        if inv.hostname is not None and inv.hostname != inv.node:
            renamed.append(inv)
        ahead = seconds_ahead(inv, now)
        if ahead is not None:
            findings.append(
                node_finding(inv.node, Kind.CLOCK_AHEAD, clock_ahead(inv, ahead, now), age=age)
            )
        if mismatch is None:
            if ahead is None:
                # lost-on-node weighs job start times against collected_at, which a
                # clock ahead makes meaningless.
                held_by_exact_name[node] = inv
            exact_ages[node] = age
            if heartbeat is not None:
                findings.append(node_finding(inv.node, Kind.NAME_MISMATCH, heartbeat, age=age))
        else:
            findings.append(
                node_finding(inv.node, Kind.NAME_MISMATCH, mismatch_reason(mismatch), age=age)
            )
        if not inv.held:
            empty[inv.node] = age
        no_agent = inv.agent_checked and inv.agent is None
        if no_agent:
            findings.append(
                node_finding(inv.node, Kind.AGENT_NOT_RUNNING, agent_not_running(inv), age=age)
            )
        agent_started = None if inv.agent is None else inv.agent.started_at
        for holding in inv.held:
            if not include_healthy:
                glance: Job | JobGlance | None = glanced.get(holding.job_id)
                if glance is None:
                    glance = glance_of(holding.job_id)
                if glance is not None and _plainly_healthy(
                    node, glance, holding.started_at, agent_started, limit
                ):
                    continue  # most holdings: no finding, and none of the work below
            job, asked = controller_job(view, confirmed, holding.job_id)
            held = Held(node, inv.node, holding, job, asked, mismatch, age, ahead, no_agent)
            finding = _agent_orphan(
                held, inv, view=view, watermark=watermark, limit=limit
            ) or _judge_holding(
                held, view=view, watermark=watermark, limit=limit, include_healthy=include_healthy
            )
            if finding is None:
                continue
            if inv.ancestry_read and finding.action is Action.RECLAIM:
                finding = not_spurds(held, finding, inv)
            sent = cancelled.get((inv.node, holding.job_id))
            if sent is not None:
                finding = leftover(held, finding, sent, inv, now=view.taken_at)
            extra = causes.overlay(finding.kind, finding.action, job, view.nodes.get(node), node)
            if extra is not None:  # a health check spared, an admin's DOWN named
                finding = held.finding(finding.kind, f"{finding.reason}; {extra[0]}", extra[1])
            if job is not None and finding.kind is Kind.UNVERIFIABLE:
                # The one unverifiable verdict on a job the controller has: its
                # nodelist could not be read.
                unreadable[job.job_id] = job.nodelist
            findings.append(finding)
    findings.extend(
        not_inventoried(view, scoped, spoken_for, collected=collected)
    )  # sorted with the rest below

    notes: list[str] = []
    stale = stale_inventories_note(ages, collected=collected)
    if stale is not None:
        notes.append(stale)
    if renamed:
        notes.append(renamed_note(renamed))
    if view.complete:
        node_findings, unreadable_active = full_view_findings(
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
            node_finding(
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
        unreadable_note(job_id, nodelist, limit) for job_id, nodelist in sorted(unreadable.items())
    )
    findings.sort(  # nodes as an operator reads them (gpu2 before gpu10), then urgency
        key=lambda f: (
            hostlist.natural_key(f.node),
            _ORDER[f.action],
            -1 if f.job_id is None else f.job_id,
            f.kind,  # a StrEnum: compares as its value, without reading `.value` per finding
        )
    )
    return Classification(findings, notes, len(scoped), len(inventoried))


# -- one holding: the controller's verdict, and what overrides it ------------------


def unreadable_note(job_id: int, nodelist: str, limit: int) -> str:
    """The audit's note on an active job whose nodelist is not read (bad, or too long)."""
    try:
        hostlist.expand(nodelist, limit)
        why = "cannot be read"  # read by now: its holdings were judged before it changed
    except hostlist.UnreadableNodelist as exc:
        why = exc.why
    return (
        f"job {job_id}'s nodelist {nodelist!r} {why}; the job may run on any node, so its "
        "holdings are not reclaimed and no node's allocation is called phantom or excess "
        "while it is active"
    )


def _plainly_healthy(
    node: str,
    job: Job | JobGlance,
    started: datetime | None,
    agent_started: datetime | None,
    limit: int = hostlist.MAX_NODES,
) -> bool:
    """Whether the full judgement of a holding of `job` on controller node `node` (run
    started at `started`, on a node whose spurd started at `agent_started`) can only
    be healthy: `_agent_orphan` finds no run older than the agent, `_judge_holding`
    no reissued id, and `controller_decision` says HEALTHY (the job active, its
    nodelist naming `node`). Decided from those few fields, so that the tens of
    thousands of healthy holdings of a large cluster cost almost nothing; anything
    else, an unreadable nodelist included, takes the full path.
    """
    nodelist = job.nodelist
    if job.state not in ACTIVE_STATES or not nodelist:
        return False
    if started is not None:
        if agent_started is not None and started < agent_started:
            return False
        submitted = job.submit_time
        if submitted is not None and started < submitted:
            return False
    if "[" not in nodelist and "," not in nodelist:  # hostlist.node_in's one-node list,
        return nodelist.strip(hostlist.WHITESPACE) == node  # inlined: most holdings' jobs
    try:
        return hostlist.node_in(nodelist, node, limit)
    except SpurctlError:
        return False


def _judge_holding(
    held: Held, *, view: ControllerView, watermark: int, limit: int, include_healthy: bool
) -> Finding | None:
    """The finding for one holding; None for a healthy one unless `include_healthy`.

    Most holdings are healthy, and their reasons are not worth writing for a
    finding nobody will see.
    """
    job = held.job
    if job is None and not held.asked and not view.proves_untracked(held.holding.job_id):
        return missing_from_partial_view(held, view)
    if job is None:
        return _untracked(held, watermark=watermark, by_id=view.bounded)
    started, submitted = held.holding.started_at, job.submit_time
    if started is not None and submitted is not None and started < submitted:
        # After a wipe the counter restarts and reissues ids: the controller's job is
        # another run than the one held here, and cancelling by id would hit the wrong one.
        return id_reuse(held, started=started, submitted=submitted, now=view.taken_at)
    try:
        kind = controller_decision(held.node, job, held.holding.job_id, watermark, limit)
    except SpurctlError:
        return unreadable_nodelist(held, job)
    if kind is Kind.HEALTHY and not include_healthy:
        return None
    if kind is Kind.ACTIVE_ELSEWHERE and _nodelist_text_names(held, job):
        return named_in_nodelist_text(held, job)
    return held.finding(kind, tracked_reason(kind, held, job, now=view.taken_at))


# The verdicts an agent orphan overrides: those that would plan an agent cancel (it would
# answer Ok and free nothing), and healthy (a legitimate run the agent no longer tracks).
_ORPHAN_OVERRIDES = frozenset(
    {Kind.TERMINAL_HELD, Kind.ACTIVE_ELSEWHERE, Kind.BELOW_WATERMARK_UNKNOWN, Kind.HEALTHY}
)


def _agent_orphan(
    held: Held, inv: Inventory, *, view: ControllerView, watermark: int, limit: int
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
        kind = controller_decision(held.node, job, j, watermark, limit)
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
        return shared_cgroup(held, job, agent, command, now=now)
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


def _nodelist_text_names(held: Held, job: Job) -> bool:
    """Whether the job's nodelist text names this node as a token, whatever it parses to.

    A backstop under the hostlist parse: a nodelist whose spacing or syntax spurctl
    reads differently from Spur must never turn a node's own run into a stale one.
    """
    return hostlist.names_token(job.nodelist, held.node) or hostlist.names_token(
        job.nodelist, held.holder
    )


def _untracked(held: Held, *, watermark: int, by_id: bool = False) -> Finding:
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
