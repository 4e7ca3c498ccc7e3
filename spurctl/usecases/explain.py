"""`spurctl explain NODE [JOB]` as a library call: one node's (or one holding's) decision.

Runs the same audit as `spurctl audit` (run_audit) and then lays out, step by
step, what that decision was made from: the controller's record, the node's
evidence, the watermark, the arm of Spur's reclaim predicate, the spurctl guards
that changed the outcome, the finding, and what `reclaim --node NODE` would send.
Nothing here decides anew: the finding is the audit's, the arm is
`controller_decision`, the name matching is the classifier's (`judged_as`).
The result is one `spurctl.explain/v1` document (plain data); render/explain.py
prints it as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from spurctl import hostlist
from spurctl.decide.causes import admin_down
from spurctl.decide.classify import controller_decision
from spurctl.decide.freshness import CLOCK_AHEAD_S, STALE_INVENTORY_S, inventory_age
from spurctl.decide.glance import controller_job
from spurctl.decide.health import spare_reason
from spurctl.decide.node_names import given_hostname, judged_as
from spurctl.decide.plan import plan, stale_reason
from spurctl.defaults import NAMES_COMMAND
from spurctl.errors import SpurctlError
from spurctl.model import (
    Action,
    AuditReport,
    Finding,
    Holding,
    Inventory,
    Job,
    Kind,
    Node,
    NodeAdminMetrics,
    format_time,
    utcnow,
)
from spurctl.scope import Scope
from spurctl.sources.inventory_extras import refusal_to_dict, session_to_dict

if TYPE_CHECKING:
    from pathlib import Path

    from spurctl.audit_view import AuditInputs
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection

SCHEMA = "spurctl.explain/v1"

# Spur's is_reclaimable, arm by arm (docs/spur-facts.md), as controller_decision returns it.
ARMS: dict[Kind, str] = {
    Kind.TERMINAL_HELD: "arm 1: the job is tracked and terminal: reclaim",
    Kind.ACTIVE_ELSEWHERE: "arm 2: the job is active and allocated to other nodes: reclaim",
    Kind.MID_COMMIT: "arm 3: the job is active with no allocated nodes yet: spare",
    Kind.NOT_STARTED: "arm 4: the job is tracked and not started: spare",
    Kind.HEALTHY: "arm 5: the job is active and allocated on this node: spare",
    Kind.BELOW_WATERMARK_UNKNOWN: "arm 6: the job is untracked and below the watermark: reclaim",
    Kind.ABOVE_WATERMARK_UNKNOWN: (
        "arm 7: the job is untracked and at or above the watermark: spare"
    ),
}


def cannot_see(node: str) -> list[str]:
    """What no inventory of `node` can show, whatever it holds (docs/node-evidence.md,
    "What spurctl cannot see"): said with every explanation, so that "holds nothing"
    is never read as "nothing runs there"."""
    return [
        f"an SSH session into {node} that carries no SPUR_JOB_ID and sits in no job cgroup "
        "(Spur #799) is no job's: spurctl neither counts nor stops it, and it keeps its GPU "
        "access after the job is cancelled and the node is handed out again; check the "
        "node's GPU device users (e.g. `fuser -v /dev/kfd /dev/dri/renderD*`)",
        f"an allocation-only entry in {node}'s spurd (an interactive srun/salloc allocation, "
        "the Spur #580 class) leaves no process, cgroup or spool, so no inventory shows it: "
        "the node can look free and still refuse every dispatch; only spurd's own state "
        "(its log, the controller's heartbeat reclaim) tells",
    ]


@dataclass(frozen=True, slots=True)
class Located:
    """NODE resolved: the controller's node (or None) and the inventory that speaks for it."""

    controller_name: str | None
    node: Node | None
    inventory: Inventory | None


def locate(name: str, inputs: AuditInputs, names_command: str = NAMES_COMMAND) -> Located:
    """The controller node and inventory `name` means, by either name; SpurctlError
    when neither the controller nor any inventory knows it."""
    view = inputs.view
    inv = inputs.inventories.get(name)
    if inv is None:
        for candidate in inputs.inventories.values():
            if judged_as(view.nodes, candidate)[0] == name:
                inv = candidate
                break
    controller_name: str | None = name if name in view.nodes else None
    if controller_name is None and inv is not None:
        judged = judged_as(view.nodes, inv)[0]
        controller_name = judged if judged in view.nodes else None
    if controller_name is None and (inv is None or inv.error is not None):
        raise SpurctlError(
            f"unknown node {name}: the controller has no such node and no inventory names it; "
            f"check the name with `{names_command}`"
        )
    node = view.nodes.get(controller_name) if controller_name is not None else None
    return Located(controller_name, node, inv)


def _job_doc(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "state": job.state.name,
        "nodelist": job.nodelist or None,
        "state_reason": job.state_reason or None,
        "user": job.user or None,
        "submit_time": format_time(job.submit_time),
        "start_time": format_time(job.start_time),
        "end_time": format_time(job.end_time),
    }


def controller_record(job_id: int, inputs: AuditInputs) -> dict[str, Any]:
    """What the controller says of `job_id`, and how: from the view, from GetJob, or
    proven untracked (and how), or not provable."""
    view = inputs.view
    job, asked = controller_job(view, inputs.confirmed, job_id)
    if job is not None:
        how = "GetJob (the bulk view lacked it)" if asked else "GetJobs"
        return {"tracked": True, "source": how, "job": _job_doc(job), "proof": None}
    if asked:
        proof = "GetJob answered NOT_FOUND"
    elif view.proves_untracked(job_id):
        proof = (
            "GetJobs did not return it when asked for it by id"
            if view.bounded
            else "absent from the complete view"
        )
    else:
        why = f"absent from the controller's incomplete view ({view.coverage()})"
        if inputs.not_found_doubt:
            why += f", and NOT_FOUND is not proof here: {inputs.not_found_doubt}"
        elif inputs.offline:
            why += ", and a saved snapshot cannot ask GetJob"
        return {"tracked": None, "source": None, "job": None, "proof": None, "unproven": why}
    return {"tracked": False, "source": None, "job": None, "proof": proof}


def _holding_doc(h: Holding) -> dict[str, Any]:
    return {
        "job_id": h.job_id,
        "attempt": h.attempt,
        "traces": list(h.traces),
        "pids": list(h.pids),
        "gpus": list(h.gpus),
        "cpus": h.cpus,
        "memory_mb": h.memory_mb,
        "started_at": format_time(h.started_at),
        # spurstepd sessions (Spur #754): pid + start ticks bind a process to a run.
        "sessions": [session_to_dict(s) for s in h.sessions],
    }


def _inventory_doc(inv: Inventory | None, inputs: AuditInputs) -> dict[str, Any] | None:
    if inv is None:
        return None
    age = inventory_age(inputs.view, inv)
    return {
        "node": inv.node,
        "hostname": inv.hostname,
        "target_node": inv.target_node,
        "source": inv.source,
        "error": inv.error,
        "collected_at": format_time(inv.collected_at),
        "age_s": age,
        "stale": age is not None and age > STALE_INVENTORY_S,
        "clock_ahead_s": _ahead(inv, inputs),
        "agent": (
            None
            if inv.agent is None
            else {"pid": inv.agent.pid, "started_at": format_time(inv.agent.started_at)}
        ),
        # The scan looked for spurd and found none (agent-not-running); False: not recorded.
        "agent_not_running": inv.agent_checked and inv.agent is None,
        # node-inventory was told a node name other than the host's own (--hostname).
        "hostname_given": inv.hostname is not None and inv.hostname != inv.node,
        "held": [h.job_id for h in inv.held],
    }


def _ahead(inv: Inventory, inputs: AuditInputs) -> float | None:
    """Seconds `inv` is dated after the moment the audit had its inventories, when more
    than CLOCK_AHEAD_S (the classifier's clock-ahead); else None."""
    now = inputs.now or inputs.view.taken_at
    if inv.collected_at is None:
        return None
    ahead = round((inv.collected_at - now).total_seconds(), 3)
    return ahead if ahead > CLOCK_AHEAD_S else None


def _node_doc(
    name: str | None, node: Node | None, admin: NodeAdminMetrics | None = None, version: str = ""
) -> dict[str, Any] | None:
    """The controller's record of the node; `admin`: what spurctl's own drains left;
    `version`: the controller's."""
    if name is None or node is None:
        return None
    cause = admin_down(node)
    if admin is not None and name in admin.down:
        from spurctl.decide.drains import LOCKED_DOWN
        from spurctl.decide.owner import down_since

        cause = f"{down_since(admin.drained.get(name))}: {LOCKED_DOWN} (`spurctl resume -w {name}`)"
    if admin is not None and name in admin.lost:
        from spurctl.decide.lost_reason import lost_line

        cause = lost_line(name, admin.lost[name], version)
    a = node.alloc
    return {
        "name": name,
        "state": node.state.name,
        "state_reason": node.state_reason or None,
        "alloc": {"cpus": a.cpus, "memory_mb": a.memory_mb, "gpus": a.gpus},
        "agent_start_time": format_time(node.agent_start_time),
        "boot_time": format_time(node.boot_time),
        # What its state and reason show (an admin's DOWN, spurctl's drain DOWN), or null.
        "cause": cause,
    }


def finding_doc(f: Finding) -> dict[str, Any]:
    return {
        "node": f.node,
        "job_id": f.job_id,
        "kind": f.kind.value,
        "action": f.action.value,
        "reason": f.reason,
    }


def guards(
    h: Holding, inv: Inventory, judged: str, inputs: AuditInputs, job: Job | None, asked: bool
) -> list[dict[str, str]]:
    """Every spurctl guard that stands over this holding, from the classifier's inputs.

    These say what the guard saw; the outcome is the finding's (never recomputed).
    """
    view, out = inputs.view, []
    j = h.job_id

    def add(name: str, detail: str) -> None:
        out.append({"guard": name, "detail": detail})

    if not view.complete:
        add("incomplete-view", f"the controller's view is incomplete ({view.coverage()})")
    if job is None and not asked and not view.proves_untracked(j):
        add("unproven-absence", f"job {j} is absent but its absence proves nothing")
    if inputs.not_found_doubt and job is None:
        add("not-found-doubt", inputs.not_found_doubt)
    if j == 0:
        add("job-id-zero", "Spur never issues job id 0 (its counter starts at first_job_id)")
    _, loose, heartbeat = judged_as(view.nodes, inv)
    if loose is not None:
        add("loose-name", loose)
    elif heartbeat is not None:
        add("target-node", heartbeat)
    if (
        job is not None
        and h.started_at is not None
        and job.submit_time is not None
        and h.started_at < job.submit_time
    ):
        add(
            "id-reuse",
            f"the run started at {format_time(h.started_at)}, before job {j} was "
            f"submitted at {format_time(job.submit_time)}",
        )
    if job is not None and h.started_at is None:
        add("missing-started-at", f"{inv.node}'s inventory records no start time for this run")
    agent = inv.agent
    if (
        h.started_at is not None
        and agent is not None
        and agent.started_at is not None
        and h.started_at < agent.started_at
    ):
        add(
            "agent-orphan",
            f"the run began at {format_time(h.started_at)}, before spurd (pid {agent.pid}) "
            f"started at {format_time(agent.started_at)}",
        )
    spare = spare_reason(job, view.nodes.get(judged), judged)
    if spare is not None:
        add("health-check", spare)
    if inv.agent_checked and inv.agent is None:
        add(
            "agent-not-running",
            f"{inv.node}'s inventory records no running spurd"
            f"{given_hostname(inv)}: no agent cancel can reach this run",
        )
    sent = inputs.cancelled.get((inv.node, j))
    if sent is not None and not h.pids:
        add(
            "earlier-cancel",
            f"reclaim's journal records an agent cancel of job {j} on {inv.node} at "
            f"{format_time(sent)}, and no process of it runs: a holding with no process "
            "gets one agent cancel at most",
        )
    limit = hostlist.nodelist_limit(len(view.nodes))
    if job is not None and job.state.active and job.nodelist:
        try:
            hostlist.expand(job.nodelist, limit)
        except SpurctlError:
            add("unreadable-nodelist", f"job {j}'s nodelist {job.nodelist!r} cannot be read")
        else:
            if not hostlist.node_in(job.nodelist, judged, limit) and (
                hostlist.names_token(job.nodelist, judged)
                or hostlist.names_token(job.nodelist, inv.node)
            ):
                add("nodelist-text", f"job {j}'s nodelist text {job.nodelist!r} names this node")
    ahead = _ahead(inv, inputs)
    if ahead is not None:
        add(
            "clock-ahead",
            f"collected_at {format_time(inv.collected_at)} is {ahead:.0f} s after this audit's "
            f"clock (over {CLOCK_AHEAD_S:.0f} s): the node's clock is ahead; never reclaimed",
        )
    age = inventory_age(view, inv)
    if age is not None and age > STALE_INVENTORY_S:
        add(
            "stale-inventory",
            f"collected {age:.0f} s before the controller view (over {STALE_INVENTORY_S:.0f} s)",
        )
    return out


def arm(judged: str, job_id: int, inputs: AuditInputs) -> dict[str, Any]:
    """Which arm of Spur's reclaim predicate applies, or why none can be named."""
    view = inputs.view
    job, asked = controller_job(view, inputs.confirmed, job_id)
    if job is None and not asked and not view.proves_untracked(job_id):
        return {
            "kind": None,
            "text": "none can be named: whether the controller tracks it is unknown",
        }
    try:
        limit = hostlist.nodelist_limit(len(view.nodes))
        kind = controller_decision(judged, job, job_id, inputs.watermark.value, limit)
    except SpurctlError as exc:
        return {"kind": None, "text": f"none can be named: {exc}"}
    return {"kind": kind.value, "text": ARMS[kind], "judged_as": judged}


def would_send(
    finding: Finding | None,
    report: AuditReport,
    inputs: AuditInputs,
    conn: Connection | None,
    max_inventory_age_s: float,
    now: datetime,
) -> dict[str, Any]:
    """What `reclaim --node NODE` would send for this finding, or why nothing (judged at
    `now`, as reclaim judges its inventory's age)."""
    if finding is None or finding.job_id is None:
        return {"send": False, "why": "there is no finding to act on"}
    if finding.action is not Action.RECLAIM:
        return {
            "send": False,
            "why": f"the finding's action is {finding.action.value}, and reclaim sends only "
            "for reclaim findings",
        }
    if conn is None:
        return {"send": False, "why": "no controller connection (a snapshot): reclaim needs one"}
    collected = {n: inv.collected_at for n, inv in inputs.inventories.items()}
    (entry,) = plan(
        report,
        [finding.node],
        [finding.job_id],
        conn.agent_address,
        collected_at=collected,
        fallback=conn.agent_map_lacks,
    )
    doc: dict[str, Any] = {
        "send": True,
        "endpoint": entry.address,
        "endpoint_from": "agent map"
        if not entry.fallback
        else "guessed: node:port, not in --agent-map"
        if conn.agent_map
        else "guessed: node:port, no --agent-map",
        "agent_fallback": entry.fallback,
        "request": f"AgentCancelJob(job_id={entry.job_id}, signal=0)",
        "recheck": (
            f"just before the send, a fresh GetJob must still read as {finding.kind.value}"
        ),
        "why": None,
    }
    from spurctl.decide.send_guards import legit_nodes, refusal
    from spurctl.sources.send_targets import resolve_targets

    # The very checks reclaim makes before it sends: a plan it refuses sends nothing.
    legit = legit_nodes(
        [entry.job_id], lambda j: inputs.view.jobs.get(j) or inputs.confirmed.get(j)
    )
    targets = resolve_targets([entry.node], legit, inputs.inventories, conn)
    refused = refusal(
        [entry], targets, legit, inputs.inventories.values(), inputs.view.nodes,
        inputs.watermark.value,
    )  # fmt: skip
    stale = stale_reason(entry, now, max_inventory_age_s)
    if refused is not None or stale is not None:
        doc.update(send=False, why=refused or stale)
    return doc


def explain(
    name: str,
    job_id: int | None,
    report: AuditReport,
    inputs: AuditInputs,
    conn: Connection | None,
    *,
    max_inventory_age_s: float = 600.0,
    now: datetime | None = None,
    names_command: str = NAMES_COMMAND,
    view_flags: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The spurctl.explain/v1 document for NODE (and JOB); `names_command` lists the
    controller's node names, for a NODE that none of the inputs knows; `view_flags` (the
    options that made this view, opt.view_flags): the commands for what reclaim cannot
    free on it (decide/next_steps.py), live views only."""
    where = locate(name, inputs, names_command)
    inv = where.inventory
    names = {name, *(n for n in (where.controller_name,) if n)}
    if inv is not None:
        names.add(inv.node)
    findings = [f for f in report.findings if f.node in names]
    wm = inputs.watermark
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "node": name,
        "controller_node": _node_doc(
            where.controller_name, where.node, report.node_admin, report.controller_version
        ),
        "controller": {
            "cluster": report.cluster,
            "address": report.controller_address,
            "version": report.controller_version,
            "taken_at": format_time(report.taken_at),
            "view_complete": report.view_complete,
        },
        "inventory": _inventory_doc(inv, inputs),
        "watermark": {"value": wm.value, "source": wm.source.value},
        "findings": [finding_doc(f) for f in findings],
        "notes": list(report.notes),
        "cannot_see": cannot_see(where.controller_name or name),
    }
    if view_flags is not None and conn is not None:
        from spurctl.decide.next_steps import beyond_reclaim

        mine = [f for f in findings if job_id is None or f.job_id == job_id]
        doc["next_steps"] = [
            {"argv": list(s.argv), "why": s.why} for s in beyond_reclaim(mine, view_flags)
        ]
    if job_id is None:
        return doc
    held = None if inv is None else next((h for h in inv.held if h.job_id == job_id), None)
    record = controller_record(job_id, inputs)
    doc["job"] = {"job_id": job_id, "held": held is not None, "controller": record}
    if held is None or inv is None:
        return doc
    judged = judged_as(inputs.view.nodes, inv)[0]
    job, asked = controller_job(inputs.view, inputs.confirmed, job_id)
    finding = next((f for f in findings if f.job_id == job_id), None)
    refused = [refusal_to_dict(r) for r in inv.session_refusals if r.job_id == job_id]
    doc["job"].update(
        evidence={**_holding_doc(held), "session_refusals": refused},
        arm=arm(judged, job_id, inputs),
        guards=guards(held, inv, judged, inputs, job, asked),
        finding=None if finding is None else finding_doc(finding),
        reclaim=would_send(finding, report, inputs, conn, max_inventory_age_s, now or utcnow()),
    )
    return doc


def run_explain(
    name: str,
    job_id: int | None,
    src: Sources,
    conn: Connection | None,
    *,
    journal: Path | None = None,
    names_command: str = NAMES_COMMAND,
    view_flags: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Audit (every holding, healthy ones too) and explain NODE (and JOB); `journal` as
    run_audit's; `view_flags` as explain's."""
    from dataclasses import replace

    from spurctl.audit_view import run_audit

    if not name or any(c in name for c in "[], "):
        raise SpurctlError(f"explain takes one node name, not a hostlist: {name!r}")
    if src.collect:
        # Collect only this node: its findings need no other node's inventory.
        src = replace(src, scope=Scope.parse(name))
    report, inputs = run_audit(src, conn, include_healthy=True, journal=journal)
    doc = explain(
        name, job_id, report, inputs, conn, names_command=names_command, view_flags=view_flags
    )
    job = doc.get("job")
    if job is not None and not job["held"] and job["controller"]["job"] is None and conn:
        # Not held here and not in the view: ask the controller by id.
        from spurctl.sources.controller import ControllerClient

        assert job_id is not None
        with ControllerClient(conn) as client:
            answer = client.get_job(job_id)
        job["controller"] = (
            {"tracked": True, "source": "GetJob", "job": _job_doc(answer), "proof": None}
            if answer is not None
            else {
                "tracked": False if not conn.not_found_doubt() else None,
                "source": None,
                "job": None,
                "proof": "GetJob answered NOT_FOUND",
            }
        )
    return doc
