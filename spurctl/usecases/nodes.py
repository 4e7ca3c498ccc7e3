"""`spurctl nodes`: one line per node, as `sinfo -N` lists them, with what its agent holds.

Per node: the controller's state, the active jobs the controller places there,
the ids its inventory holds, whether its agent answered, and how old that
inventory is. The inputs are an audit's (`run_audit`): the same view, the same
inventories, the same -w/-x scope; `listing` itself is pure.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from spurctl import hostlist
from spurctl.errors import SpurctlError
from spurctl.model import AuditReport, ControllerView, Finding, Inventory, Kind, NodeState

if TYPE_CHECKING:
    from pathlib import Path

    from spurctl.audit_view import AuditInputs
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection


class AgentStatus(enum.StrEnum):
    """What the node's inventory says of its agent."""

    ANSWERED = "answered"  # inventoried; spurd running (or the document does not say)
    NO_SPURD = "no-spurd"  # inventoried, and the scan found no spurd (agent-not-running)
    UNREACHABLE = "unreachable"  # its collect failed (agent-unreachable)
    NOT_INVENTORIED = "not-inventoried"  # no inventory speaks for it


@dataclass(frozen=True, slots=True)
class NodeRow:
    node: str
    # The controller's NodeState name; None when the controller has no such node.
    state: str | None
    # Active jobs whose nodelist names the node, as the controller places them.
    jobs: tuple[int, ...]
    # The ids its inventory holds; None when no inventory answered for it.
    held: tuple[int, ...] | None
    agent: AgentStatus
    # The name the inventory reports, when it is not the controller's.
    inventory_node: str | None
    # Seconds from the inventory's collection to when the inventories were in hand.
    inventory_age_s: float | None
    error: str | None
    # The audit's findings on the node (under either of its names): how many of each
    # kind, in the contract's order of kinds.
    findings: tuple[tuple[Kind, int], ...] = ()
    # Why the controller holds it out of service (sinfo -R): the reason, who set it
    # (#860's reason_uid, where the controller sends it) and when (spurctl's own drains,
    # from its journal; the controller's reason_time is not on the wire spurctl reads).
    reason: str | None = None
    reason_uid: int | None = None
    reason_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class NodeListing:
    controller_address: str
    taken_at: datetime
    view_complete: bool
    rows: list[NodeRow]
    notes: list[str]
    # The controller-version note among `notes`, and its one-line form for a screen.
    controller_version: str = ""
    version_note: str | None = None
    version_line: str | None = None
    # `nodes --state`: the controller states the rows were chosen by (empty: every row),
    # and how many rows there were before.
    states: tuple[NodeState, ...] = ()
    total: int | None = None
    # The cluster's name (spur.conf's cluster_name, else the config file's).
    cluster: str | None = None

    def by_agent(self) -> dict[AgentStatus, list[str]]:
        """The nodes of each agent status (in AgentStatus order, only those that occur)."""
        out: dict[AgentStatus, list[str]] = {}
        for status in AgentStatus:
            names = [r.node for r in self.rows if r.agent is status]
            if names:
                out[status] = names
        return out


def _speaks_for(view: ControllerView, inventories: Iterable[Inventory]) -> dict[str, Inventory]:
    """Each inventory under the controller node it speaks for: its exact name, else the
    SPUR_TARGET_NODE its job processes carry, else the one controller node its name
    loosely matches; an inventory matching none stays under its own name. Where two
    speak for one node, the one reporting its exact name wins."""
    loose: dict[str, list[str]] = {}
    for name in view.nodes:
        loose.setdefault(hostlist.loose_key(name), []).append(name)
    out: dict[str, Inventory] = {}
    for inv in sorted(inventories, key=lambda i: i.node):
        if inv.node in view.nodes:
            name = inv.node
        elif inv.target_node is not None and inv.target_node in view.nodes:
            name = inv.target_node
        else:
            twins = loose.get(hostlist.loose_key(inv.node), [])
            name = twins[0] if len(twins) == 1 else inv.node
        prev = out.get(name)
        if prev is None or (inv.node == name and prev.node != name):
            out[name] = inv
    return out


def _jobs_on(view: ControllerView, names: set[str]) -> dict[str, list[int]]:
    """The active jobs the controller places on each of `names`; a nodelist that does
    not parse places nothing (the audit's notes name it)."""
    out: dict[str, list[int]] = {}
    limit = hostlist.nodelist_limit(len(view.nodes))
    for placed in view.active_placements():
        if not placed.nodelist:
            continue
        plain = hostlist.plain_name(placed.nodelist)
        if plain is not None:
            if plain in names:
                out.setdefault(plain, []).append(placed.job_id)
            continue
        try:
            on = hostlist.expand(placed.nodelist, limit)
        except SpurctlError:
            continue
        for name in on & names:
            out.setdefault(name, []).append(placed.job_id)
    return out


def _agent(inv: Inventory | None) -> AgentStatus:
    if inv is None:
        return AgentStatus.NOT_INVENTORIED
    if inv.error is not None:
        return AgentStatus.UNREACHABLE
    if inv.agent_checked and inv.agent is None:
        return AgentStatus.NO_SPURD
    return AgentStatus.ANSWERED


def listing(
    view: ControllerView,
    inventories: Mapping[str, Inventory],
    *,
    scope: Iterable[str] | None,
    now: datetime | None,
    notes: Iterable[str] = (),
) -> NodeListing:
    """One row per node in `scope` (None: every controller node and every inventory),
    in the order an operator reads them (gpu2 before gpu10)."""
    by_name = _speaks_for(view, inventories.values())
    if scope is None:
        names = set(view.nodes) | set(by_name)
    else:
        # A node named by the name its inventory reports is listed under the controller's.
        under = {inv.node: name for name, inv in by_name.items()}
        names = {n if n in view.nodes else under.get(n, n) for n in scope}
    jobs = _jobs_on(view, names)
    clock = now or view.taken_at
    rows = []
    for name in sorted(names, key=hostlist.natural_key):
        node = view.nodes.get(name)
        inv = by_name.get(name)
        answered = inv is not None and inv.error is None
        age = (
            None
            if inv is None or inv.collected_at is None
            else round((clock - inv.collected_at).total_seconds(), 3)
        )
        rows.append(
            NodeRow(
                node=name,
                state=None if node is None else node.state.name,
                jobs=tuple(sorted(jobs.get(name, ()))),
                held=tuple(h.job_id for h in inv.held) if answered and inv else None,
                agent=_agent(inv),
                inventory_node=inv.node if inv is not None and inv.node != name else None,
                inventory_age_s=age,
                error=None if inv is None else inv.error,
                reason=None if node is None else node.state_reason or None,
                reason_uid=None if node is None or not node.state_reason else node.reason_uid,
            )
        )
    return NodeListing(view.address, view.taken_at, view.complete, rows, list(notes))


def _findings_by_node(findings: Iterable[Finding]) -> dict[str, dict[Kind, int]]:
    out: dict[str, dict[Kind, int]] = {}
    for f in findings:
        kinds = out.setdefault(f.node, {})
        kinds[f.kind] = kinds.get(f.kind, 0) + 1
    return out


def with_findings(listed: NodeListing, findings: Iterable[Finding]) -> NodeListing:
    """Each row with the findings on its node, under the controller's name or the name
    its inventory reports (a finding names the inventory's node)."""
    from dataclasses import replace

    found = _findings_by_node(findings)
    rows = []
    for row in listed.rows:
        counts: dict[Kind, int] = {}
        for name in {row.node, row.inventory_node or row.node}:
            for kind, n in found.get(name, {}).items():
                counts[kind] = counts.get(kind, 0) + n
        rows.append(replace(row, findings=tuple((k, counts[k]) for k in Kind if k in counts)))
    return replace(listed, rows=rows)


def with_states(listed: NodeListing, states: Iterable[NodeState]) -> NodeListing:
    """Only the rows whose controller state is one of `states` (as sinfo -t); none
    given: every row. A node the controller does not know has no state: never chosen."""
    from dataclasses import replace

    wanted = tuple(dict.fromkeys(states))
    if not wanted:
        return listed
    names = {s.name for s in wanted}
    rows = [r for r in listed.rows if r.state in names]
    return replace(listed, rows=rows, states=wanted, total=len(listed.rows))


def from_audit(report: AuditReport, inputs: AuditInputs) -> NodeListing:
    """The listing of an audit's inputs, with the audit's notes (an incomplete view,
    nodes -x left out, nodes no inventory speaks for) and each node's findings."""
    from dataclasses import replace

    listed = listing(
        inputs.view, inputs.inventories, scope=inputs.scope, now=inputs.now, notes=report.notes
    )
    if report.node_admin is not None:  # when spurctl's own drains were set, by its journal
        drained = report.node_admin.drained
        rows = [replace(r, reason_since=drained.get(r.node)) for r in listed.rows]
        listed = replace(listed, rows=rows)
    return replace(
        with_findings(listed, report.findings),
        controller_version=report.controller_version,
        version_note=report.version_note,
        version_line=report.version_line,
        cluster=report.cluster,
    )


def run_nodes(
    src: Sources,
    conn: Connection | None,
    *,
    states: Iterable[NodeState] = (),
    journal: Path | None = None,
) -> NodeListing:
    """`spurctl nodes`: read the controller (or a snapshot) and the inventories as an
    audit does, then list them (only those in `states`, when given); `journal`: read as
    the audit reads it (spurctl's drains that went DOWN are said in the notes)."""
    from dataclasses import replace

    from spurctl.audit_view import run_audit

    if not src.inventory and not src.collect:  # as sinfo: the controller's columns alone
        src = replace(src, holdings_optional=True)
    report, inputs = run_audit(src, conn, journal=journal)
    return with_states(from_audit(report, inputs), states)
