"""The audited view every use case starts from: read, confirmed, judged.

The steps, each explainable: read the controller (or a snapshot), read what the
agents hold, ask the controller about every held id its bulk answer left out
(only when that answer was incomplete), fix the watermark, classify. `run_audit`
is the whole of it. audit, reclaim, explain, nodes and the checklist all start
here: it sits below the use cases (docs/layout.md), which never import one another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.errors import SpurctlError
from spurctl.heap import gc_paused
from spurctl.holdings import Inventory, held_ids, inventories_by_node
from spurctl.model import (
    AuditReport,
    ControllerView,
    Finding,
    Job,
    Kind,
    Node,
    NodeAdminMetrics,
    Watermark,
    utcnow,
    watermark_for,
)
from spurctl.releases import spur_version_line, spur_version_note
from spurctl.sources.inventories import (
    Sources,
    gather_holdings,
    read_view_and_holdings,
)

if TYPE_CHECKING:
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.settings import Connection

# A live collect's per-node deadline: an ssh and a scan, far longer than one RPC.
COLLECT_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class AuditInputs:
    """Everything a decision was made from; saving these reproduces the audit."""

    view: ControllerView
    inventories: dict[str, Inventory]
    watermark: Watermark
    confirmed: dict[int, Job | None]
    scope: frozenset[str] | None
    offline: bool
    not_found_doubt: str | None = None
    # Whether the controller was read with a credential (Spur then scopes GetJobs to its
    # user); None when unknown (a saved snapshot does not record it).
    credential: bool | None = None
    # The inventories come from this audit's own --collect (after the view was read).
    collected: bool = False
    # When the inventories were in hand (collection ended, or the files were read), on
    # this host's clock: an inventory dated well after it is clock-ahead. None: the view's.
    now: datetime | None = None
    # Agent cancels reclaim's journal records, by (node, job id): see classify's `cancelled`.
    cancelled: Mapping[tuple[str, int], datetime] = field(default_factory=dict)
    # The nodes in scope that -x left out (spurctl/scope.py): not audited, noted.
    excluded: tuple[str, ...] = ()


def confirm_missing(
    view: ControllerView,
    held: Iterable[int],
    confirm: Callable[[Iterable[int]], Mapping[int, Job | None]],
    *,
    not_found_doubt: str | None,
) -> dict[int, Job | None]:
    """Ask GetJob about every held id the view lacks and cannot prove untracked.

    A complete full view, or an unscoped ask by id, needs no asking. A NOT_FOUND
    answer (None) is kept only when it proves the id untracked: with
    `not_found_doubt` set, it may hide another user's job, and the id is left
    unconfirmed.
    """
    lacking = view.lacking(held)
    missing = {i for i in lacking if not view.proves_untracked(i)}
    if not missing:
        return {}
    confirmed = dict(confirm(missing))
    if not_found_doubt is not None:
        return {i: j for i, j in confirmed.items() if j is not None}
    return confirmed


def gather(
    view: ControllerView,
    inventories: Iterable[Inventory],
    *,
    client: ControllerClient | None,
    watermark_flag: int | None = None,
    snapshot_watermark: Watermark | None = None,
    scope: frozenset[str] | None = None,
    not_found_doubt: str | None = None,
    collected: bool = False,
    held: frozenset[int] | None = None,
) -> AuditInputs:
    """Confirm what the bulk view could not, then fix the watermark.

    A complete view proves absence by itself. An incomplete one (a scoped
    credential) proves nothing: every held id it lacks is asked about with GetJob,
    and only NOT_FOUND counts as untracked. Offline (a snapshot) nothing can be
    asked, so those ids stay unverifiable. `held`: `held_ids(inventories)` when the
    caller has it; used only where no node repeats (else the latest inventory of a
    node is its only one, and the ids are those of the ones kept).
    """
    now = utcnow()  # the inventories are in hand: nothing honest is dated after this
    inventories = list(inventories)
    by_node = inventories_by_node(inventories)
    confirmed: dict[int, Job | None] = {}
    if client is not None:
        if held is None or len(by_node) != len(inventories):
            held = held_ids(by_node.values())
        if view.bounded:
            view = client.look_up(view, held)
        confirmed = confirm_missing(view, held, client.confirm, not_found_doubt=not_found_doubt)
    if watermark_flag is None and snapshot_watermark is not None:
        watermark = snapshot_watermark
    else:
        watermark = watermark_for(view, confirmed, flag=watermark_flag)
    return AuditInputs(
        view=view,
        inventories=by_node,
        watermark=watermark,
        confirmed=confirmed,
        scope=scope,
        offline=client is None,
        not_found_doubt=(
            not_found_doubt if client is not None and (view.bounded or not view.complete) else None
        ),
        now=now,
        credential=None if client is None else client.scoped,
        collected=collected,
    )


def audit(inputs: AuditInputs, *, include_healthy: bool = False) -> AuditReport:
    # Classifying converts the jobs the holdings name and the active ones, and makes a
    # finding for each discrepancy (a large cluster's ~10,000 not-inventoried nodes too),
    # then the notes and their dating read them: bulk data, built with the collector off.
    with gc_paused():
        return _judged(inputs, include_healthy)


def _judged(inputs: AuditInputs, include_healthy: bool) -> AuditReport:
    from spurctl.decide.classify import classify
    from spurctl.decide.onset import dated

    view = inputs.view
    result = classify(
        view,
        inputs.inventories,
        watermark=inputs.watermark.value,
        confirmed=inputs.confirmed,
        scope=inputs.scope,
        include_healthy=include_healthy,
        now=inputs.now,
        collected=inputs.collected,
        cancelled=inputs.cancelled,
    )
    notes: list[str] = []
    if not view.complete:
        how = (
            "held ids it lacks were checked one by one with GetJob; only NOT_FOUND counts "
            "as untracked"
            if not inputs.offline
            else "this is a saved snapshot, so GetJob cannot confirm anything: held ids "
            "it lacks are unverifiable and spared"
        )
        notes.append(
            f"controller view is INCOMPLETE: GetJobs returned {view.coverage()} "
            f"({_short(inputs)}); {how}."
        )
    notes.extend(view.read_notes)
    if inputs.excluded:
        from spurctl.scope import excluded_note

        notes.append(excluded_note(inputs.excluded))
    notes.extend(_coverage_notes(result.findings, view, collected=inputs.collected))
    if inputs.not_found_doubt:
        notes.append(f"NOT_FOUND is not proof here: {inputs.not_found_doubt}.")
    notes.extend(result.notes)
    old_spur = spur_version_note(view.version)
    if old_spur is not None:
        notes.append(old_spur)
    return AuditReport(
        controller_address=view.address,
        controller_version=view.version,
        taken_at=view.taken_at,
        watermark=inputs.watermark,
        view_complete=view.complete,
        jobs_seen=len(view.jobs),
        jobs_total=view.jobs_total,
        findings=dated(result.findings, view, inputs.inventories, inputs.confirmed),
        nodes_in_scope=result.nodes_in_scope,
        nodes_inventoried=result.nodes_inventoried,
        notes=notes,
        version_note=old_spur,
        version_line=spur_version_line(view.version),
    )


def _short(inputs: AuditInputs) -> str:
    """Why a view came back short, as far as the way it was read tells."""
    if inputs.credential is None:
        return (
            "a saved snapshot does not say whether it was read with a credential; with one, "
            "Spur scopes GetJobs to the credential's user, admins too"
        )
    if inputs.credential:
        return "Spur scopes GetJobs to the credential's user, admins too"
    # Without a credential GetJobs is unscoped: what remains is the read itself.
    return (
        "no credential was presented, so GetJobs was not scoped to a user: jobs that changed "
        "state while it was read, or answers too large to read (see the notes), left it short"
    )


def _have(items: Sequence[object]) -> str:
    return "has" if len(items) == 1 else "have"


def _were(items: Sequence[object]) -> str:
    return "was" if len(items) == 1 else "were"


def _are(items: Sequence[object]) -> str:
    return "is" if len(items) == 1 else "are"


def _coverage_notes(
    findings: Iterable[Finding], view: ControllerView, *, collected: bool = False
) -> list[str]:
    """What the not-inventoried findings add up to, said before the findings themselves."""
    from spurctl.decide.reasons import plural
    from spurctl.hostlist import fold

    findings = list(findings)
    known: list[str] = []
    unknown: list[str] = []
    nodes = view.nodes
    for f in findings:
        if f.kind is Kind.NOT_INVENTORIED:
            (known if f.node in nodes else unknown).append(f.node)
    notes = []
    if known:
        notes.append(
            f"{plural(len(known), 'node')} in scope {_have(known)} no inventory and "
            f"{_were(known)} not audited: "
            f"{fold(known)} "
            + (
                "(this audit's --collect brought no inventory naming them)."
                if collected
                else f"(collect {'it' if len(known) == 1 else 'them'}, or use --collect)."
            )
        )
    if unknown:
        notes.append(
            f"{plural(len(unknown), 'node')} in scope {_are(unknown)} unknown to the controller "
            f"and {_have(unknown)} no "
            f"inventory: {fold(unknown)} (check the --nodes hostlist)."
        )
    unreachable = [f.node for f in findings if f.kind is Kind.AGENT_UNREACHABLE]
    failed: list[str] = []
    if unreachable:  # the view's loose keys only then: 20,000 names in a large cluster
        from spurctl.hostlist import loose_key

        keys = {loose_key(n) for n in view.nodes}
        failed = [n for n in unreachable if loose_key(n) not in keys]
    if failed:
        notes.append(
            f"{plural(len(failed), 'node')} in scope {_are(failed)} unknown to the controller "
            f"and could not be inventoried: {fold(failed)} (check the --nodes hostlist)."
        )
    return notes


def run_audit(
    src: Sources,
    conn: Connection | None,
    *,
    watermark: int | None = None,
    include_healthy: bool = False,
    journal: Path | None = None,
    cancelled: Mapping[tuple[str, int], datetime] | None = None,
    client: ControllerClient | None = None,
) -> tuple[AuditReport, AuditInputs]:
    """`spurctl audit` once: the view (live, or `src.snapshot`), the inventories, the findings.

    `conn` may be None only for a snapshot audit, which talks to no controller.
    `journal`: reclaim's journal, read for the agent cancels already sent (a holding
    with no process gets one at most); None reads none. `cancelled`: those cancels,
    when the caller has read the journal already. `client`: the caller's open
    controller client, used instead of a new one (a reclaim asks one client for its
    plan and its re-checks).
    """
    scope = src.scope.named
    left_out: tuple[str, ...] = ()

    def leave_out(view: ControllerView, holdings: list[Inventory]) -> list[Inventory]:
        # -x: its nodes' inventories go before anything is asked about what they hold.
        nonlocal scope, left_out
        if not src.scope.excluded:
            return holdings
        kept = src.scope.exclude_from(view.nodes, holdings, scope)
        scope, left_out = kept.scope, kept.left_out
        return kept.inventories

    if src.snapshot is not None:
        from spurctl.sources.snapshot_document import read_snapshot

        view, saved_watermark = read_snapshot(src.snapshot)
        holdings = leave_out(view, gather_holdings(src, view.nodes))
        inputs = gather(
            view,
            holdings,
            client=None,
            watermark_flag=watermark,
            snapshot_watermark=saved_watermark,
            scope=scope,
            collected=src.collect,
        )
    else:
        from spurctl.sources.controller import ControllerClient

        if conn is None:
            raise SpurctlError("a live audit needs a controller connection")
        with nullcontext(client) if client is not None else ControllerClient(conn) as asked:
            held: frozenset[int] | None = None  # the inventories' ids, when the read has them
            if src.inventory and not src.collect:
                view, holdings, held = read_view_and_holdings(asked, src.inventory)
            else:
                view = asked.view()
                holdings = gather_holdings(src, view.nodes)
            read = holdings
            holdings = leave_out(view, holdings)
            inputs = gather(
                view,
                holdings,
                client=asked,
                watermark_flag=watermark,
                scope=scope,
                not_found_doubt=conn.not_found_doubt(),
                collected=src.collect,
                held=held if holdings is read else None,  # -x left some out: theirs go too
            )
    if left_out:
        from dataclasses import replace

        inputs = replace(inputs, excluded=left_out)
    if cancelled is None and journal is not None and journal.is_file():
        # (cancels_sent reads no journal that is not a file: the reader is not imported)
        from spurctl.sources.journal_records import cancels_sent, cluster_of

        cancelled = cancels_sent(journal, cluster=cluster_of(conn))
    if cancelled is not None:
        from dataclasses import replace

        inputs = replace(inputs, cancelled=cancelled)
    report = audit(inputs, include_healthy=include_healthy)
    report.cluster = None if conn is None else conn.cluster
    if journal is not None:
        report.node_admin = _node_admin(journal, inputs, conn)
        admin = report.node_admin
        if admin.down or admin.lost:  # else no note: the drain planner is not imported (~7 ms)
            from spurctl.decide.drains import down_notes

            report.notes.extend(down_notes(admin, inputs.view.version))
    return report, inputs


def refuse_another_cluster(inputs: AuditInputs, conn: Connection, what: str) -> None:
    """Stop `what` (the repair, the drain, the resume) before anything is sent when the agent
    map or the inventories name another cluster than the controller read, by what collect
    was told or by what the nodes' own spurd says (issue 50.4); reclaim and explain ask
    the same through sources/send_targets.py and decide/send_guards.py."""
    from spurctl.decide.send_guards import binding_refusal
    from spurctl.sources.send_targets import Targets, bindings

    map_why, inventory_why = bindings(inputs.inventories, conn, what=what)
    refused = binding_refusal(
        Targets(agent_map_mismatch=map_why, inventory_mismatch=inventory_why), what
    )
    if refused is not None:
        raise SpurctlError(refused)


def _node_admin(journal: Path, inputs: AuditInputs, conn: Connection | None) -> NodeAdminMetrics:
    """What spurctl's drains, repairs and resumes left, from its journal and this view."""
    if not journal.is_file():
        return NodeAdminMetrics()  # nothing recorded: what admin_metrics makes of no records
    from spurctl.decide.drains import admin_metrics
    from spurctl.sources.journal_records import run_records

    found = run_records(journal, conn, warn=lambda _: None)  # said once
    scope = inputs.scope

    def node(name: str) -> Node | None:
        return inputs.view.nodes.get(name) if scope is None or name in scope else None

    from spurctl.releases import replaces_hold_reason
    from spurctl.sources.settings import credential_uid

    version = inputs.view.version
    lost_release = version if replaces_hold_reason(version) else None
    uid = None if conn is None else credential_uid(conn)
    return admin_metrics(found, node, uid, lost_release)
