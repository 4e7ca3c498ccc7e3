"""Which nodes `spurctl drain` drains, and which `spurctl resume` puts back in service.

A node that holds what spurctl cannot free right now (a live run the audit can
only investigate, a cancel that failed or was never confirmed, an agent orphan
awaiting `spurctl node-release`) keeps taking dispatches the node then rejects:
draining it stops the scheduler bouncing jobs off it (before Spur #584's cooldown,
and where that cooldown is leader-local). The drain's reason says `spurctl:`, the
finding and where to read it, e.g. `spurctl: agent-orphan job 4711 (spurctl
explain gpu017)`. Only spurctl's own drains (decide/owner.py: exactly a reason its
journal records it setting there) are ever lifted, and only from a node whose fresh
audit is clean; a drain or DOWN for any other reason (an admin's, a health check's, a
spurctl reason someone amended) is never touched. Pure: the use case brings the audit and the
journal's records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spurctl.decide.budget import DEFAULT_COOLDOWN_S, cooling
from spurctl.decide.health import is_health_check_drain
from spurctl.decide.lost_reason import (
    LOST_KIND,
    NOT_RESPONDING,
    keeps_reason_line,
    lost_drain,
    lost_line,
)
from spurctl.decide.owner import Ownership, Seen, down_since
from spurctl.decide.reasons import duration
from spurctl.decide.repair import HOLDS, SPURCTL_PREFIX, is_repair_drain
from spurctl.hostlist import loose_key
from spurctl.model import (
    Action,
    Finding,
    Inventory,
    Kind,
    Node,
    NodeAdminMetrics,
    NodeState,
    format_time,
)

# Kinds reclaim sends an agent cancel for (act/journal.py AGENT_CANCEL_KINDS).
_CANCELLED_KINDS = frozenset({"terminal-held", "active-elsewhere", "below-watermark-unknown"})
# Waiting for `spurctl node-release` on the node: no agent cancel frees these.
_NODE_RELEASE = (Kind.AGENT_ORPHAN, Kind.LEFTOVER)
_OUT_OF_SERVICE = (*HOLDS, NodeState.DOWN)
# Why a node spurctl drained stays DOWN once its heartbeat is back (docs/spur-facts.md).
LOCKED_DOWN = (
    "Spur keeps a drained node whose heartbeat was lost DOWN, locked, until someone lifts it"
)


@dataclass(frozen=True, slots=True)
class NodeChange:
    """One node to drain (with spurctl's reason) or resume (lifting spurctl's `reason`)."""

    node: str
    reason: str
    kind: str
    job_id: int = 0
    # The node as the plan saw it: the call goes out only while it still is so.
    seen: Seen | None = None


@dataclass(frozen=True, slots=True)
class Left:
    """A node in scope left as it is, and why."""

    node: str
    why: str
    # A spurctl drain that stays, the node not clean (resume): still needs action.
    kept: bool = False


def cancel_states(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """For each (node, job) reclaim cancelled, whether its last outcome left it `failed` or
    `unconfirmed` (sent, and no re-collect showed the job gone); confirmed ones are absent."""
    out: dict[tuple[str, int], str] = {}
    for rec in records:
        if rec.get("event") != "outcome" or rec.get("kind") not in _CANCELLED_KINDS:
            continue
        key = (str(rec.get("node")), int(rec.get("job_id") or 0))
        result = rec.get("result")
        if result == "failed":
            out[key] = "failed"
        elif result == "unconfirmed" or (result == "sent" and rec.get("confirmed") is not True):
            out[key] = "unconfirmed"
        elif result == "sent":
            out.pop(key, None)
    return out


def _on(name: str, findings: Iterable[Finding]) -> list[Finding]:
    """The findings on `name` or on a name that matches it only loosely (case, domain):
    enough to keep a drain (resume), never to set one (drain_plan)."""
    key = loose_key(name)
    return [f for f in findings if f.node == name or loose_key(f.node) == key]


def _loosely_held(name: str, held: Sequence[tuple[Finding, str]]) -> Left:
    """A node not drained: what spurctl cannot free is held only under a loose name."""
    first = held[0][0]
    more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
    return Left(
        name,
        f"{name} is not drained: {first.node}, a name that matches it only loosely, holds "
        f"{first.kind.value} job {first.job_id}{more}, which cannot vouch for draining {name}; "
        f"collect {name} under its own name",
    )


def _unfreeable(f: Finding, cancels: Mapping[tuple[str, int], str]) -> str | None:
    """How `f` holds what spurctl cannot free right now (a phrase for the reason), or None."""
    if f.job_id is None:
        return None
    if f.kind in _NODE_RELEASE:
        return ""
    if f.action is Action.INVESTIGATE and f.live:
        return ""
    if f.action is Action.RECLAIM:
        state = cancels.get((f.node, f.job_id))
        if state is not None:
            return f", cancel {state}"
    return None


def drain_reason(node: str, held: Sequence[tuple[Finding, str]]) -> str:
    """`spurctl: agent-orphan job 4711 (spurctl explain gpu017)`, naming the first finding."""
    first, how = held[0]
    more = f" and {len(held) - 1} more" if len(held) > 1 else ""
    what = f"{first.kind.value} job {first.job_id}{how}{more}"
    return f"{SPURCTL_PREFIX} {what} (spurctl explain {node})"


def shows_change(node: Node | None, *, drain: bool, reason: str) -> bool:
    """Whether a node read back after an UpdateNode shows it: drained with spurctl's
    `reason`, or (resume) back in service and not DOWN. A node no longer listed does not."""
    if node is None:
        return False
    if drain:
        return node.state in HOLDS and node.state_reason == reason
    return node.state not in HOLDS and node.state is not NodeState.DOWN


def drain_plan(
    scope: Iterable[str],
    nodes: Mapping[str, Node],
    findings: Sequence[Finding],
    cancels: Mapping[tuple[str, int], str],
    owned: Ownership,
    *,
    resumed: Mapping[str, datetime] | None = None,
    now: datetime | None = None,
    cooldown_s: float = DEFAULT_COOLDOWN_S,
    alone: bool | None = None,
    lost_release: str | None = None,
) -> tuple[list[NodeChange], list[Left]]:
    """The nodes to drain, and those left as they are (with why); `resumed`: when spurctl
    last resumed each node (decide/budget.py `cooling`, against `now`). `alone`: whether
    the operator named the node alone (None: the scope has one node), which the cooldown
    yields to. `lost_release`: the controller's version where a heartbeat timeout
    replaces a drain's reason (decide/lost_reason.py), else None."""
    drain: list[NodeChange] = []
    left: list[Left] = []
    names = sorted(scope)
    order = {k: i for i, k in enumerate((Kind.AGENT_ORPHAN, Kind.LEFTOVER))}
    for name in names:
        node = nodes.get(name)
        found = [
            (f, how) for f in _on(name, findings) if (how := _unfreeable(f, cancels)) is not None
        ]
        found.sort(key=lambda pair: (order.get(pair[0].kind, len(order)), pair[0].live is not True))
        # Loose matching only spares: a drain is set on what the node's own name holds.
        held = [(f, how) for f, how in found if f.node == name]
        if not held:
            if found:
                left.append(_loosely_held(name, found))
            continue
        lost = None if node is None or lost_release is None else lost_drain(node, owned)
        if node is None:
            left.append(Left(name, f"{name} is not a node the controller has: nothing to drain"))
        elif lost is not None and lost_release is not None:
            # Out of service by spurctl's own drain, whose reason Spur replaced: said as
            # audit says it, with the one command that lifts it.
            left.append(Left(name, lost_line(name, lost[1], lost_release)))
        elif is_health_check_drain(node.state_reason):
            left.append(
                Left(
                    name, f"{name} is held by a health check ({node.state_reason!r}): never touched"
                )
            )
        elif node.state is NodeState.DOWN and owned.owns(node):
            left.append(
                Left(
                    name,
                    f"{name} is {owned.out_words(node)}: `spurctl resume` lifts it once its "
                    "audit is clean and its spurd answers",
                )
            )
        elif node.state in _OUT_OF_SERVICE and owned.owns(node):
            left.append(Left(name, f"{name} is already {owned.out_words(node)}"))
        elif node.state in _OUT_OF_SERVICE and owned.looks_owned(node):
            left.append(
                Left(name, f"{name} is already {node.state.name} and {owned.why_not(node)}: "
                     "someone else's, left alone")
            )  # fmt: skip
        elif node.state in _OUT_OF_SERVICE:
            why = f" ({node.state_reason!r})" if node.state_reason else ""
            left.append(
                Left(
                    name, f"{name} is already {node.state.name} for another reason{why}: left alone"
                )
            )
        elif (
            cool := None
            if resumed is None or now is None
            else cooling(
                name, resumed, now=now, cooldown_s=cooldown_s,
                named_alone=len(names) == 1 if alone is None else alone,
                verb="drain",
            )
        ) is not None:  # fmt: skip
            left.append(Left(name, cool, kept=True))
        else:
            first = held[0][0]
            drain.append(
                NodeChange(
                    name, drain_reason(name, held), first.kind.value, first.job_id or 0,
                    Seen.of(node),
                )
            )  # fmt: skip
    return drain, left


def resume_plan(
    scope: Iterable[str],
    nodes: Mapping[str, Node],
    findings: Sequence[Finding],
    inventories: Mapping[str, Inventory],
    *,
    now: datetime,
    max_age_s: float,
    owned: Ownership,
    repairing: Iterable[str] = (),
    lost_release: str | None = None,
) -> tuple[list[NodeChange], list[Left]]:
    """The nodes whose spurctl drain may be lifted (a clean, fresh audit), and the others in
    scope with why they stay as they are; `lost_release`: the controller's version where a
    heartbeat timeout replaces a drain's reason (decide/lost_reason.py), else None."""
    resume: list[NodeChange] = []
    kept: list[Left] = []
    under_repair = set(repairing)
    for name in sorted(scope):
        node = nodes.get(name)
        if node is None:
            continue
        if node.state not in _OUT_OF_SERVICE and not (node.state_reason and owned.owns(node)):
            continue  # up, or DOWN/ERROR for no reason of spurctl's
        lost = None if lost_release is None else lost_drain(node, owned)
        if lost is not None and lost_release is not None:
            # Not spurctl's by the Ownership rule: only --lost-reason lifts it (said).
            kept.append(Left(name, lost_line(name, lost[1], lost_release), kept=True))
            continue
        if node.state is NodeState.DOWN and not owned.looks_owned(node):
            # Spur's own DOWN (not responding) or an admin's: not resume's, and said, so
            # a node named for resume is never passed over in silence.
            why = f" ({node.state_reason!r})" if node.state_reason else ""
            kept.append(Left(name, f"{name} is DOWN{why}, not by spurctl: resume never lifts it"))
            continue
        if owned.looks_owned(node) and not owned.owns(node):
            kept.append(
                Left(
                    name,
                    f"{name} is {node.state.name} and {owned.why_not(node)}: someone else's, "
                    "left alone",
                )
            )
            continue
        if not owned.owns(node):
            kept.append(
                Left(
                    name,
                    f"{name} is {node.state.name} by someone else ({node.state_reason!r}): "
                    "never touched",
                )
            )
            continue
        if node.state not in _OUT_OF_SERVICE:
            kept.append(
                Left(
                    name,
                    f"{name} is {node.state.name} with spurctl's reason "
                    f"({node.state_reason!r}): resume lifts only a drain or a DOWN; left as it is",
                    kept=True,
                )
            )
            continue
        down = node.state is NodeState.DOWN
        still = f"stays {owned.out_words(node)}" if down else "still drained"
        if is_repair_drain(node.state_reason) and name in under_repair:
            kept.append(
                Left(
                    name,
                    f"a repair of {name} is under way: finish it with "
                    f"`spurctl repair --node {name}`",
                    kept=True,
                )
            )
            continue
        unclean = _unclean(name, still, down, findings, inventories, now=now, max_age_s=max_age_s)
        if unclean is not None:
            kept.append(unclean)
            continue
        words = node.state_reason.split()
        kind = (
            words[1] if len(words) > 1 and words[1] in Kind._value2member_map_ else "spurctl-drain"
        )
        kind = Kind.PHANTOM_ALLOC.value if is_repair_drain(node.state_reason) else kind
        resume.append(NodeChange(name, node.state_reason, kind, seen=Seen.of(node)))
    return resume, kept


def _unclean(
    name: str,
    still: str,
    down: bool,
    findings: Sequence[Finding],
    inventories: Mapping[str, Inventory],
    *,
    now: datetime,
    max_age_s: float,
) -> Left | None:
    """Why a node spurctl may lift (`still`: how it stays, as a phrase) is not clean yet
    (a finding needing action, an inventory not fresh, no spurd on a DOWN node); None
    when it is."""
    needing = [f for f in _on(name, findings) if f.needs_action]
    if needing:
        f = needing[0]
        job = f" job {f.job_id}" if f.job_id is not None else ""
        return Left(name, f"{still}: {f.kind.value}{job}: {f.reason}", kept=True)
    inv = inventories.get(name)
    age = None if inv is None or inv.collected_at is None else (now - inv.collected_at)
    seconds = None if age is None else age.total_seconds()
    if seconds is None or seconds > max_age_s:
        said = "no collection time" if seconds is None else f"collected {duration(seconds)} ago"
        return Left(
            name,
            f"{still}: its inventory is not fresh ({said}, --max-inventory-age "
            f"{duration(max_age_s)}): collect it again",
            kept=True,
        )
    assert inv is not None  # fresh, so there is one
    if down and inv.agent is None:
        # Lifted with no spurd running, the node would only go DOWN again at the next
        # health check, and nothing would have looked at it since: it stays.
        said = (
            "its inventory finds no spurd running"
            if inv.agent_checked
            else "its inventory does not say whether spurd runs (collect it with a "
            "current spurctl node-inventory)"
        )
        return Left(name, f"{still}: {said}; start spurd, then resume", kept=True)
    return None


def lost_reason_plan(
    scope: Iterable[str],
    nodes: Mapping[str, Node],
    findings: Sequence[Finding],
    inventories: Mapping[str, Inventory],
    *,
    now: datetime,
    max_age_s: float,
    owned: Ownership,
    lost_release: str | None,
    version: str,
) -> tuple[list[NodeChange], list[Left]]:
    """`resume --lost-reason`: each node in scope lifted only when a heartbeat timeout
    replaced spurctl's drain on it (decide/lost_reason.py; `lost_release`: the controller's
    version where its release does that, else None), its audit is clean and its spurd
    runs; every other node refused with what was seen. The call goes out only while the
    node is still DOWN `Not responding` (Seen)."""
    resume: list[NodeChange] = []
    refused: list[Left] = []
    for name in sorted(scope):
        node = nodes.get(name)
        if lost_release is None:
            refused.append(Left(name, keeps_reason_line(name, version), kept=True))
            continue
        if node is None:
            refused.append(Left(name, f"{name} is not lifted: the controller has no such node"))
            continue
        lost = lost_drain(node, owned)
        if lost is None:
            refused.append(Left(name, _not_lost(node, owned), kept=True))
            continue
        reason, at = lost
        still = (
            f"{name} is not lifted (DOWN 'Not responding' since spurctl's drain of "
            f"{format_time(at)}, whose reason Spur replaced)"
        )
        unclean = _unclean(name, still, True, findings, inventories, now=now, max_age_s=max_age_s)
        if unclean is not None:
            refused.append(unclean)
            continue
        resume.append(NodeChange(name, reason, LOST_KIND, seen=Seen.of(node)))
    return resume, refused


def _not_lost(node: Node, owned: Ownership) -> str:
    """Why --lost-reason does not lift `node`: what it saw."""
    said = f"is {node.state.name} with reason {node.state_reason!r}"
    if node.state is not NodeState.DOWN or node.state_reason != NOT_RESPONDING:
        also = ""
        if owned.owns(node):
            also = ", spurctl's own: plain `spurctl resume` handles it"
        elif node.state_reason:
            also = ", not spurctl's: never touched"
        return f"{node.name} is not lifted: it {said}, not DOWN 'Not responding'{also}"
    if not owned.reasons.get(node.name):
        return (
            f"{node.name} is not lifted: it {said}, and the journal records no drain of "
            "spurctl's on it still set (none sent, or lifted or removed since): Spur's own "
            "DOWN, not spurctl's"
        )
    return (
        f"{node.name} is not lifted: it {said}, and its controller record was registered "
        "after spurctl's drain (slurmd_start_time), so that drain is gone with the old record"
    )


# A repair's end, by the step its run journaled last (usecases/repair.py).
_REPAIR_ENDS = {
    ("done", "sent"): "repaired",
    ("return", "failed"): "not-back",
    ("undrain", "sent"): "refused",
    ("verify", "failed"): "failed",
    ("verify", "owed"): "failed",  # a hold or labels could not be put back
}


def admin_metrics(
    records: Iterable[Mapping[str, Any]],
    node: Callable[[str], Node | None],
    uid: int | None = None,
    lost_release: str | None = None,
) -> NodeAdminMetrics:
    """What spurctl's node administration did (counted over the journal, so the counts only
    grow) and the nodes the journal says spurctl drained that a drain of spurctl's still
    holds out of service (`node`: the view's record of a node, None outside it), each with
    the time of the last drain the journal records under the reason the node carries
    (`uid`: the one the controller records for spurctl's calls, Ownership); those among
    them DOWN (their heartbeat lost since) in `down`; in `lost`, those DOWN `Not
    responding` whose drain the heartbeat timeout replaced, where the controller's release
    does that (`lost_release`, its version: decide/lost_reason.py)."""
    records = list(records)
    owned = Ownership.of(records, uid)
    repairs: dict[str, int] = {}
    drains: dict[str, int] = {}
    resumes = 0
    drained: set[str] = set()
    for rec in records:
        action, step, event = rec.get("action"), rec.get("step"), rec.get("event")
        if action not in ("repair", "drain", "resume") or event != "outcome":
            continue
        result = str(rec.get("result"))
        end = _REPAIR_ENDS.get((str(step), result)) if action == "repair" else None
        if end is not None:
            repairs[end] = repairs.get(end, 0) + 1
        if step == "drain" and result == "sent":
            drains[str(action)] = drains.get(str(action), 0) + 1
            drained.add(str(rec.get("node")))
        if action == "resume" and result == "sent":
            resumes += 1
    held: dict[str, datetime | None] = {}
    down: list[str] = []
    lost: dict[str, datetime] = {}
    for name in sorted(drained):
        now = node(name)
        if now is not None and now.state in _OUT_OF_SERVICE and owned.owns(now):
            held[name] = owned.since.get((name, now.state_reason))
            if now.state is NodeState.DOWN:
                down.append(name)
        elif now is not None and lost_release is not None:
            replaced = lost_drain(now, owned)
            if replaced is not None:
                lost[name] = replaced[1]
    return NodeAdminMetrics(repairs, drains, resumes, held, tuple(down), lost)


def down_notes(metrics: NodeAdminMetrics, version: str) -> list[str]:
    """The audit's note on each node spurctl drained whose heartbeat was lost since: Spur
    keeps it DOWN, locked, until someone lifts it; no admin set that DOWN. `version`: the
    controller's, named where it replaced the drain's reason (`lost`)."""
    return [
        f"{name} is {down_since(metrics.drained.get(name))}: {LOCKED_DOWN}; `spurctl resume "
        f"-w {name}` lifts it once its audit is clean and its spurd answers"
        for name in metrics.down
    ] + [lost_line(name, at, version) for name, at in metrics.lost.items()]
