"""Whether a node's phantom charge may be rebuilt, and what a repair must put back.

Spur has one path that clears a charge no job owns (docs/spur-facts.md, "Phantom
charges and node administration"): remove the node's record (DeregisterNode,
force=false) and let its spurd register a fresh one at its next heartbeat. The
fresh record drops more than the charge: an admin's labels and any drain with its
reason. So a repair drains the node first (spurctl's own reason), re-reads it, and
refuses whenever the charge may be real in substance (an active job lists the node,
or has no placement spurctl can read and so may be there; or an inventory holds a
run: zeroing the charge of a busy node would make it a dispatch-reject loop),
whenever the evidence is old or does not show spurd running (only spurd's heartbeat
brings the node back), and whenever the cluster may keep a removed node out (a
WireGuard mesh or k0s prunes its peer; a join token may have expired). Nothing
vouches beyond what it names: only the inventory under the node's own name can show
it safe to remove; one under a name that matches it only loosely can only refuse.
Every refusal is one line naming what it saw. Pure: the use case brings the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from spurctl.decide.health import is_health_check_drain
from spurctl.decide.owner import Ownership, Seen
from spurctl.decide.reasons import duration, plural
from spurctl.hostlist import loose_key, placement_unread, ranges
from spurctl.model import Allocation, Finding, Inventory, Job, Kind, Node, NodeState

# Every drain spurctl sets starts so (repair, drain); resume lifts no other.
SPURCTL_PREFIX = "spurctl:"
REPAIR_PREFIX = "spurctl: phantom allocation"
# States a node a repair may drain is in: up, or drained (the hold to put back).
_UP = (NodeState.IDLE, NodeState.MIXED, NodeState.ALLOCATED)
HOLDS = (NodeState.DRAIN, NodeState.DRAINING)


def is_repair_drain(reason: str) -> bool:
    """Whether a reason reads as a repair's; whether it is spurctl's is decide/owner.py's."""
    return reason.startswith(REPAIR_PREFIX)


def charge_text(alloc: Allocation) -> str:
    """'8 CPUs, 65536 MB of memory, GPUs 0-1': what a node's allocation holds."""
    parts = []
    if alloc.cpus:
        parts.append(plural(alloc.cpus, "CPU"))
    if alloc.memory_mb:
        parts.append(f"{alloc.memory_mb} MB of memory")
    for gres, devices in sorted(alloc.devices.items()):
        ids = [d.device_id for d in devices if d.count]
        if ids:
            name = "GPU" if gres == "gpu" else gres
            parts.append(f"{name}{'s' if len(ids) > 1 else ''} {ranges(ids)}")
    return ", ".join(parts) or "nothing"


def charge_record(alloc: Allocation) -> dict[str, Any]:
    """The charge as plain data (a saved plan, the journal): compared whole."""
    return {
        "cpus": alloc.cpus,
        "memory_mb": alloc.memory_mb,
        "devices": {
            gres: [[d.device_id, d.count] for d in devices]
            for gres, devices in sorted(alloc.devices.items())
            if devices
        },
    }


def repair_reason(alloc: Allocation) -> str:
    """The reason of a repair's own drain: `spurctl: phantom allocation 8 CPUs, GPUs 0-1`."""
    return f"{REPAIR_PREFIX} {charge_text(alloc)}"


@dataclass(frozen=True, slots=True)
class Hold:
    """A drain someone else set (state and reason), which re-registration drops."""

    state: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"state": self.state, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Target:
    """A node to repair: its charge as seen, and what re-registration will drop that must be
    put back (admin labels, someone else's hold)."""

    node: str
    charge: Allocation
    labels: Mapping[str, str] = field(default_factory=dict)
    hold: Hold | None = None
    # The run whose repair of this node stopped part way, when this one takes it up.
    resumes: str | None = None
    # The record is already gone (an earlier run removed it): wait for it to come back.
    removed: bool = False
    # The node as the plan saw it: spurctl's drain goes out only while it still is so.
    seen: Seen | None = None

    @property
    def reason(self) -> str:
        return repair_reason(self.charge)

    def restore(self) -> dict[str, Any]:
        """What the journal records, so that a later run can put it back."""
        return {
            "labels": dict(self.labels),
            "hold": self.hold.as_dict() if self.hold else None,
            "charge": charge_record(self.charge),
            "charge_text": charge_text(self.charge),
        }


@dataclass(frozen=True, slots=True)
class Refusal:
    node: str
    why: str


def rejoin_refusal(
    conf_path: str | None,
    *,
    wg_enabled: bool,
    k0s_enabled: bool,
    admission: str,
    unreadable: str | None,
    checked: bool,
) -> str | None:
    """Why no node of this cluster may be removed: it may never come back. None when
    spur.conf says it will, or the operator checked (`checked`) what spur.conf cannot tell."""
    if conf_path is not None and unreadable is None:
        if wg_enabled or k0s_enabled:
            what = "[network] wg_enabled = true" if wg_enabled else "[cluster] enabled = true (k0s)"
            return (
                f"refusing to repair, nothing sent: {conf_path} says {what}; removing a node "
                "prunes its WireGuard mesh peer (Spur #771/#784), which can keep it from "
                "registering again: rebuild the charge by hand, with the mesh in view"
            )
        if admission == "token" and not checked:
            return (
                f"refusing to repair, nothing sent: {conf_path} says [admission] mode = "
                '"token": a removed node registers again only with a join token the '
                "controller still accepts, and spur.conf cannot tell whether the nodes' "
                "tokens have expired; check them (`spur token list`), then pass --rejoin-checked"
            )
        return None
    if checked:
        return None
    why = (
        "no spur.conf was read (pass --conf, or set SPUR_CONF)"
        if conf_path is None
        else f"{conf_path} could not be read for it: {unreadable}"
    )
    return (
        f"refusing to repair, nothing sent: {why}, so spurctl cannot tell whether a removed "
        "node registers again (a WireGuard mesh or k0s prunes its peer, a join token may have "
        "expired); check, then pass --rejoin-checked"
    )


def unchecked_rejoin(refused: str, *, mesh: bool) -> str:
    """A dry run's word on rejoining where a real run would be refused (`refused`): the plan
    is still shown, saying what sending will need (`mesh`: nothing will do)."""
    why = refused.removeprefix("refusing to repair, nothing sent: ")
    if mesh:
        return f"REFUSED (a real run sends nothing): {why}"
    return f"NOT CHECKED (sending will need --conf or --rejoin-checked): {why}"


def _jobs_refusal(node: str, jobs: Sequence[Job], since: str = "") -> str:
    """Why the active jobs `jobs` (active_jobs_on: listing `node`, or with no placement
    spurctl can read) keep `node` from a repair, the ones that list it first."""
    ordered = sorted(jobs, key=lambda j: placement_unread(j.nodelist))
    first = ordered[0]
    more = f" (and {plural(len(jobs) - 1, 'more job')})" if len(jobs) > 1 else ""
    if placement_unread(first.nodelist):
        shown = f"nodelist {first.nodelist!r}" if first.nodelist.strip() else "no nodelist"
        return (
            f"job {first.job_id} {first.state.name} has {shown}{since}, a placement spurctl "
            f"cannot read{more}: it may be on {node} and hold that charge; repair once its "
            "placement is recorded"
        )
    return (
        f"job {first.job_id} {first.state.name} lists {node}{more}{since}: the charge is real "
        "in substance (removing the node would make a busy node a dispatch-reject loop); "
        "nothing to repair"
    )


def loose_inventories(node: str, inventories: Iterable[Inventory]) -> list[Inventory]:
    """The inventories other than `node`'s own whose names match it only loosely (case,
    domain): its node name, host name, spurd's --hostname, or the SPUR_TARGET_NODE its
    job processes carry. Such an inventory may be this node's, or another node's: it can
    only ever keep a repair from going ahead, never vouch for one."""
    key = loose_key(node)

    def names(inv: Inventory) -> tuple[str | None, ...]:
        return (inv.node, inv.hostname, inv.agent_hostname, inv.target_node, *inv.target_nodes)

    return [
        inv
        for inv in inventories
        if inv.node != node and any(n and loose_key(n) == key for n in names(inv))
    ]


def _held_sentence(inv: Inventory) -> str:
    h = inv.held[0]
    more = f" (and {plural(len(inv.held) - 1, 'more holding')})" if len(inv.held) > 1 else ""
    live = f", {plural(len(h.pids), 'process', 'processes')}" if h.pids else ""
    return f"holds job {h.job_id}{live}{more}"


def evidence_refusal(
    node: str,
    inv: Inventory | None,
    now: datetime,
    max_age_s: float,
    loose: Sequence[Inventory] = (),
) -> str | None:
    """Why the evidence cannot vouch for repairing `node`. Only its exact-named inventory
    `inv` vouches (fresh, spurd running, holding nothing); `loose` (loose_inventories)
    can only refuse: one that holds something, or could not be read, may be this node's,
    and with no exact-named inventory, which of them speaks for it cannot be told."""
    for other in loose:
        if other.held:
            return (
                f"{other.node}'s inventory, a name that matches {node} only loosely, "
                f"{_held_sentence(other)}: it may be {node}'s, and the charge may be real in "
                "substance; free it, or collect each node under the controller's name"
            )
        if other.error:
            return (
                f"{other.node}, a name that matches {node} only loosely, could not be "
                f"inventoried ({other.error}): it may be {node} holding a run; collect it again"
            )
    if inv is None and loose:
        names = ", ".join(sorted(i.node for i in loose))
        verb = "matches" if len(loose) == 1 else "match"
        return (
            f"no inventory under the controller's name {node}; {names} {verb} it only "
            f"loosely, which cannot vouch for it: collect {node} under its own name "
            f"(node-inventory --hostname {node}), then repair"
        )
    if inv is None:
        return f"no inventory speaks for {node}: collect it (--collect), then repair"
    if inv.error:
        return f"{node} could not be inventoried ({inv.error}): collect it again, then repair"
    if inv.collected_at is None:
        return f"{node}'s inventory does not say when it was collected: collect it again"
    age = (now - inv.collected_at).total_seconds()
    if age > max_age_s:
        return (
            f"{node}'s inventory was collected {duration(age)} ago, longer than "
            f"--max-inventory-age {duration(max_age_s)}: collect it again, then repair"
        )
    if inv.held:
        return (
            f"{node} {_held_sentence(inv)}: the charge may be real in substance, and "
            "zeroing a busy node's charge makes it a dispatch-reject loop; free it first"
        )
    if inv.agent is None and inv.agent_checked:
        return (
            f"spurd is not running on {node} (its inventory found none): a removed node comes "
            "back only through its spurd's next heartbeat; start spurd there first"
        )
    if inv.agent is None:
        return (
            f"{node}'s inventory does not show spurd running (written before node-inventory "
            "recorded the agent, or more than one spurd runs): collect it with a current "
            "`spurctl node-inventory`"
        )
    return None


# The audit's findings that a node is charged beyond what its active jobs account for.
_CHARGE_FINDINGS = frozenset({Kind.PHANTOM_ALLOC, Kind.EXCESS_ALLOC})


def judge(
    node: Node,
    findings: Sequence[Finding],
    jobs: Sequence[Job],
    inv: Inventory | None,
    *,
    now: datetime,
    max_age_s: float,
    view_complete: bool,
    restore_hold: bool,
    owned: Ownership,
    pending: RepairProgress | None = None,
    loose: Sequence[Inventory] = (),
) -> Target | Refusal | None:
    """A node's repair, a refusal naming what was seen, or None (no phantom charge: none at
    all, or one its active jobs account for, as the audit found: nothing to do)."""
    name = node.name
    if is_health_check_drain(node.state_reason):
        return Refusal(
            name,
            f"{name} is {node.state.name} with reason {node.state_reason!r}, the health "
            "system's (Spur #836): spurctl never repairs a node a health check holds",
        )
    if node.alloc.empty:
        return None
    if not view_complete:
        return Refusal(
            name,
            f"the controller's job list is incomplete (GetJobs is scoped to the credential's "
            f"user), so {name}'s charge cannot be told from an unseen job's: repair with a "
            "complete view (no credential where the controller allows it)",
        )
    if jobs and not any(f.kind in _CHARGE_FINDINGS for f in findings):
        return None  # its active jobs account for its charge: no phantom charge
    if jobs:
        return Refusal(name, _jobs_refusal(name, jobs))
    if not any(f.kind is Kind.PHANTOM_ALLOC for f in findings):
        return Refusal(name, f"the audit finds no phantom allocation on {name}")
    why = evidence_refusal(name, inv, now, max_age_s, loose)
    if why is not None:
        return Refusal(name, why)
    hold: Hold | None = None
    labels: Mapping[str, str] = node.labels
    resumes = None
    if pending is not None and is_repair_drain(node.state_reason) and owned.owns(node):
        # Our own drain from a repair that stopped part way, exactly as spurctl set it:
        # what it recorded is what the node held before it. An amended one is another's.
        hold, labels, resumes = pending.hold, pending.labels, pending.run
    elif node.state in HOLDS:
        if not restore_hold:
            return Refusal(
                name,
                f"{name} is {node.state.name} with reason {node.state_reason!r}, someone "
                "else's: its fresh registration would drop that drain; pass --restore-drain "
                "to put it back (with its reason) after the repair, or leave the node",
            )
        hold = Hold(node.state.name, node.state_reason)
    elif node.state not in _UP:
        return Refusal(
            name,
            f"{name} is {node.state.name}"
            + (f" ({node.state_reason!r})" if node.state_reason else "")
            + ": a repair drains and removes a node that is up; bring it up first",
        )
    return Target(name, node.alloc, dict(labels), hold, resumes, seen=Seen.of(node))


def recheck(
    target: Target,
    now_node: Node | None,
    jobs: Sequence[Job],
    inv: Inventory | None,
    *,
    now: datetime,
    max_age_s: float,
    loose: Sequence[Inventory] = (),
) -> tuple[str, bool] | None:
    """Why `target` must not be removed now, after spurctl's drain and the scheduler's
    tick, and whether spurctl's drain is still its own to lift; None to go on."""
    name = target.node
    if now_node is None:
        return f"{name} is gone from the controller since spurctl drained it", False
    if now_node.state not in HOLDS or now_node.state_reason != target.reason:
        return (
            f"{name} was changed since spurctl drained it (now {now_node.state.name}, reason "
            f"{now_node.state_reason!r}): left as it is",
            False,
        )
    if jobs:
        return _jobs_refusal(name, jobs, " since the plan"), True
    if now_node.alloc != target.charge:
        return (
            f"the charge changed since the view: it was {charge_text(target.charge)}, it is "
            f"{charge_text(now_node.alloc)}",
            True,
        )
    why = evidence_refusal(name, inv, now, max_age_s, loose)
    return (why, True) if why is not None else None


# DeregisterNode's refusal of a node a job runs on (spurctld cluster.rs `remove_node`); its
# FAILED_PRECONDITION carries every other `remove_node` error too (a Raft propose failure).
RUNNING_JOBS_REFUSAL = "has running jobs; use --force to evict them"


def refused_for_running_jobs(message: str) -> bool:
    """Whether DeregisterNode's FAILED_PRECONDITION is the running-jobs refusal, not a failure."""
    return RUNNING_JOBS_REFUSAL in message


def owed_text(hold: Hold | None, labels: Mapping[str, str]) -> str:
    """What a node is owed once it is back: its drain, its labels ('' for nothing)."""
    parts = [f"the drain {hold.reason!r}"] if hold is not None else []
    if labels:
        parts.append("labels " + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())))
    return " and ".join(parts)


def landed_sentence(alloc: Allocation, jobs: Sequence[Job] | None) -> str:
    """What a node back from its repair is charged with: the jobs that landed on it since it
    registered afresh (a fresh record starts with none), or why the charge is a doubt
    (`jobs` None: the active jobs could not be read)."""
    charged = f"is charged {charge_text(alloc)}"
    if jobs is None:
        return f"{charged}: a job may have landed there (its jobs could not be read); audit it"
    if not jobs:
        return (
            f"{charged} and no active job lists it: the phantom charge is still there (the "
            "old record may never have been removed); audit it"
        )
    named = ", ".join(
        f"{j.job_id} ({j.state.name}, user {j.user or '?'}, partition {j.partition or '?'})"
        for j in sorted(jobs, key=lambda j: j.job_id)
    )
    return f"job{'s' if len(jobs) > 1 else ''} {named} landed on it ({charged})"


def not_back_sentence(node: str, wait_s: float, unanswered: str | None) -> str:
    """Why a removed node is not back at the end of --wait (`unanswered`: the controller's
    last failure, when it was not answering then)."""
    if unanswered is not None:
        return f"{node} could not be read within {wait_s:g} s (--wait): {unanswered}"
    return (
        f"{node} did not register again within {wait_s:g} s (--wait): its spurd is not "
        "running, cannot reach the controller, or is refused (an expired join token)"
    )


def unrecorded_sentence(failure: str, unrecorded: Sequence[str], owed: Mapping[str, str]) -> str:
    """A run the journal failed: why, the calls that went out without their record, what
    is still owed (the command that settles it follows)."""
    failure = failure.split("; stopped before")[0]
    owing = "; ".join(f"{node}: {what}" for node, what in sorted(owed.items())) or "nothing"
    sent = ", ".join(unrecorded) or "nothing"
    return f"{failure}: sent without its record: {sent}; still owed: {owing}; settled by"


class SavedCharge(Protocol):
    """A saved plan's target (sources/repair_plan.SavedTarget): the charge it was planned for."""

    @property
    def node(self) -> str: ...
    @property
    def charge(self) -> Mapping[str, Any]: ...
    @property
    def charge_text(self) -> str: ...


def narrowed_to_saved(
    targets: Sequence[Target], refusals: Sequence[Refusal], uncharged: Sequence[str],
    saved: Iterable[SavedCharge],
) -> tuple[list[Target], list[Refusal], list[str]]:  # fmt: skip
    """A fresh plan narrowed to the saved plan's nodes; a target whose charge is no longer
    the saved one is refused."""
    wanted = {t.node: t for t in saved}
    kept, refused = [], [r for r in refusals if r.node in wanted]
    for t in targets:
        was = wanted.get(t.node)
        if was is None:
            continue
        if not t.removed and charge_record(t.charge) != was.charge:
            refused.append(
                Refusal(
                    t.node,
                    f"the charge changed since the saved plan: it was {was.charge_text}, it "
                    f"is {charge_text(t.charge)}",
                )
            )
            continue
        kept.append(t)
    return kept, refused, [n for n in uncharged if n in wanted]


def labels_to_restore(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """The labels the old record had that the fresh one lacks or holds otherwise: an
    admin's (spurd registers its own)."""
    return {k: v for k, v in before.items() if after.get(k) != v}


# -- what the journal says of earlier repairs ------------------------------------------


@dataclass(frozen=True, slots=True)
class RepairProgress:
    """A repair a run began and no run finished: where it stopped and what it recorded."""

    node: str
    run: str
    step: str
    event: str
    result: str | None
    # Whether a DeregisterNode may have gone out (its intent, and no definite refusal).
    removed: bool
    labels: Mapping[str, str]
    hold: Hold | None
    charge_text: str
    at: str
    # Back, and stopped before (or failing) a put-back: its fresh record's charge is a job's.
    owes: bool = False


# Where a repair stops with the node back and what it is owed not all put back.
_OWING = {("return", "sent"), ("labels", "failed"), ("redrain", "failed"), ("verify", "owed")}

# A repair is over once one of these (step, result) outcomes is journaled; `skipped`: the
# node had changed since the plan (act/node_admin.py), so it was left to whoever changed it.
_FINISHED = {
    ("done", "sent"),
    ("undrain", "sent"),
    ("drain", "failed-definite"),
    *((step, "skipped") for step in ("drain", "undrain", "deregister", "labels", "redrain")),
}


def repair_progress(records: Iterable[Mapping[str, Any]]) -> dict[str, RepairProgress]:
    """Every node whose last repair the journal shows begun and not finished."""
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for rec in records:
        if rec.get("action") != "repair":
            continue
        node = str(rec.get("node"))
        if rec.get("step") == "drain" and rec.get("event") == "intent":
            by_node[node] = []  # a new repair of the node starts here
        by_node.setdefault(node, []).append(rec)
    out: dict[str, RepairProgress] = {}
    for node, recs in by_node.items():
        if not recs:
            continue
        last = recs[-1]
        result = last.get("result")
        detail = str(last.get("detail") or "")
        key = (str(last.get("step")), str(result))
        if last.get("step") == "drain" and result == "failed" and not detail.startswith("unknown:"):
            key = ("drain", "failed-definite")
        if last.get("event") == "outcome" and key in _FINISHED:
            continue
        removed = False
        restore: Mapping[str, Any] = {}
        for rec in recs:
            if isinstance(rec.get("restore"), Mapping) and not restore:
                restore = rec["restore"]
            if rec.get("step") == "deregister":
                if rec.get("event") == "intent":
                    removed = True
                elif rec.get("result") == "failed" and not str(rec.get("detail")).startswith(
                    "unknown:"
                ):
                    removed = False
        hold = restore.get("hold") if isinstance(restore.get("hold"), Mapping) else None
        labels = restore.get("labels") if isinstance(restore.get("labels"), Mapping) else {}
        out[node] = RepairProgress(
            node=node,
            run=str(last.get("run")),
            step=str(last.get("step")),
            event=str(last.get("event")),
            result=None if result is None else str(result),
            removed=removed,
            labels={str(k): str(v) for k, v in (labels or {}).items()},
            hold=Hold(str(hold.get("state")), str(hold.get("reason"))) if hold else None,
            charge_text=str(restore.get("charge_text") or "unknown"),
            at=str(last.get("at")),
            owes=removed and (key in _OWING or last.get("step") in ("labels", "redrain")),
        )
    return out


def stopped_sentence(p: RepairProgress) -> str:
    """Where a repair stopped, for `spurctl journal` and the next repair run."""
    if p.owes:
        owed = owed_text(p.hold, p.labels) or "nothing but the journal's record"
        where = f"with the node back, owed what its fresh record lacks of: {owed}"
    elif p.removed:
        where = (
            "after DeregisterNode: the controller has no record of the node until its spurd "
            "registers again"
        )
    else:
        where = f"at its {p.step} step ({p.event}{', ' + p.result if p.result else ''})"
    return f"the repair of {p.node} (run {p.run}, charge {p.charge_text}) stopped {where}"
