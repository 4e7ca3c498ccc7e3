"""What an autopilot round sends, through the manual commands' own act/ paths: reclaim's
`execute` (a fresh GetJob right before each cancel, one cancel per holding, journaled),
a repair's run (act/repair_run.run_within, one a round, within --tick and --wait) and
NodeAdmin (the node re-read right before each UpdateNode, journaled); and the intents a
killed autopilot left open, closed (fate unknown) before anything is sent.

The caller (usecases/autopilot.py) holds the journal's lock around each of these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.decide.autopilot import ORIGIN, Act, Choice
from spurctl.decide.autopilot_round import Done, Plans, change_of
from spurctl.decide.repair import Target
from spurctl.decide.send_guards import key_refusal
from spurctl.model import Kind
from spurctl.scope import Scope

if TYPE_CHECKING:
    from spurctl.act.node_admin import NodeAdmin
    from spurctl.audit_view import AuditInputs
    from spurctl.repair_view import RepairRequest
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import Connection


def settle(path: Path, conn: Connection, run: str | None = None) -> int:
    """Close the intents a killed run of this cluster left open (their fate unknown)
    before any send; how many were closed."""
    from spurctl.act.cancels import close_unresolved
    from spurctl.act.journal import Journal
    from spurctl.act.stops import stops_deferred
    from spurctl.sources.journal_records import cluster_of, history

    earlier = history(path, cluster=cluster_of(conn))
    if not earlier.unresolved:
        return 0
    with stops_deferred(), Journal(path, conn, run=run) as journal:
        journal.tags = {"origin": ORIGIN, "round": 0}
        still = journal.still_open(earlier.unresolved)
        close_unresolved(journal, still, [])
    return len(still)


def send(
    going: list[Choice],
    plans: Plans,
    asked: Mapping[str, RepairRequest | str],
    src: Sources,
    conn: Connection,
    inputs: AuditInputs,
    *,
    journal_path: Path,
    max_inventory_age_s: float,
    n: int,
    run: str | None = None,
) -> list[Done]:
    """Send round `n`'s chosen calls (`going`) through the manual commands' act/ paths;
    `asked`: each chosen repair's request (or why none could be made: skipped)."""
    from spurctl.act.agents import AgentPool
    from spurctl.act.cancels import JournalFailed, execute
    from spurctl.act.journal import Journal
    from spurctl.act.node_admin import ControllerWriter, JournalUnwritable, NodeAdmin
    from spurctl.act.node_changes import change_node
    from spurctl.act.stops import stops_deferred
    from spurctl.sources.controller import ControllerClient

    done: list[Done] = []
    reclaims = [c for c in going if c.candidate.act is Act.RECLAIM]
    repairs = [c for c in going if c.candidate.act is Act.REPAIR]
    nodes = [c for c in going if c.candidate.act in (Act.DRAIN, Act.RESUME)]
    with Journal(journal_path, conn, run=run) as journal, ControllerClient(conn) as client:
        journal.tags = {"origin": ORIGIN, "round": n}
        if reclaims:
            refused = key_refusal(conn.jwt_key is not None, conn.conf.auth_mode)
            entries = [plans.entries[(c.candidate.node, c.candidate.job_id)] for c in reclaims]
            if refused is not None:
                done += [Done("reclaim", e.node, e.job_id, e.finding.kind.value, "skipped",
                              refused) for e in entries]  # fmt: skip
            else:
                agents = AgentPool(jwt_key=conn.jwt_key, timeout=conn.timeout)
                try:
                    ran = execute(
                        entries, jobs=client, agents=agents, journal=journal,
                        watermark=inputs.watermark.value, not_found_doubt=conn.not_found_doubt(),
                        max_inventory_age_s=max_inventory_age_s,
                    )  # fmt: skip
                    outcomes = ran.outcomes
                except JournalFailed as exc:
                    outcomes = exc.run.outcomes
                finally:
                    agents.close()
                done += [Done("reclaim", o.entry.node, o.entry.job_id, o.entry.finding.kind.value,
                              o.result.value, o.detail) for o in outcomes]  # fmt: skip
        if not nodes and not repairs:
            return done
        with ControllerWriter(conn) as writer:
            admin = NodeAdmin(writer, journal)
            for c in repairs:  # one a round (decide/autopilot.choose)
                t = plans.repairs[c.candidate.node]
                done += _repair(t, asked[t.node], src, conn, inputs, admin, client)
                if any(d.result == "interrupted" for d in done):  # a stop: nothing more
                    return done
            for c in nodes:
                k = c.candidate
                change = change_of(k, plans, inputs.view.nodes)
                if isinstance(change, str):
                    done.append(Done(k.act.value, k.node, k.job_id, k.kind, "skipped", change))
                    continue
                said: list[tuple[bool, str]] = []
                try:
                    # The call and its journal outcome are never cut apart by a stop.
                    with stops_deferred():
                        said.append(change_node(admin, client, k.act is Act.DRAIN, change))
                except JournalUnwritable as exc:  # nothing more is sent; a sent call is said
                    result = "sent" if exc.sent else "failed"
                    done.append(Done(k.act.value, k.node, k.job_id, k.kind, result, str(exc)))
                    break
                except KeyboardInterrupt:  # the stop, deferred past this call: no more calls
                    stopped = True
                else:
                    stopped = False
                if said:
                    ok, detail = said[0]
                    result = (
                        "sent" if ok else "skipped" if detail.startswith("not sent") else "failed"
                    )
                    done.append(Done(k.act.value, k.node, k.job_id, k.kind, result, detail))
                if stopped:
                    break
    return done


def _repair(
    t: Target, asked: RepairRequest | str, src: Sources, conn: Connection, inputs: AuditInputs,
    admin: NodeAdmin, client: ControllerClient,
) -> list[Done]:  # fmt: skip
    """`t` repaired as `spurctl repair` does (act/repair_run.py), within --tick and --wait."""
    from spurctl.act.repair_run import Status, run_within
    from spurctl.repair_view import RepairPlan, rejoin_said

    if isinstance(asked, str):  # --inventory -: nothing to read again after the drain
        return [Done(Act.REPAIR.value, t.node, 0, Kind.PHANTOM_ALLOC.value, "skipped", asked)]
    rejoin, _ = rejoin_said(conn, asked.rejoin_checked, dry_run=True)
    view = inputs.view
    plan = RepairPlan(view.address, view.version, view.taken_at, t.node, [t], rejoin=rejoin,
                      tick_s=asked.tick_s, wait_s=asked.wait_s)  # fmt: skip
    result = {Status.REPAIRED: "sent", Status.LANDED: "sent", Status.REFUSED: "skipped",
              Status.NOT_BACK: "owed", Status.INTERRUPTED: "interrupted"}  # fmt: skip
    # The run reads the one node (the round's scope may be every node).
    one = dataclasses.replace(src, scope=Scope(frozenset({t.node})))
    return [
        Done(Act.REPAIR.value, r.node, 0, Kind.PHANTOM_ALLOC.value,
             result.get(r.status, "failed"), r.detail)
        for r in run_within(plan, asked, one, conn, admin, client)
    ]  # fmt: skip
