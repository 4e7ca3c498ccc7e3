"""The optional parts of an inventory document: what `spurctl node-inventory` adds.

Written only when known, so an older document reads back unchanged and a document
from an older scan lacks them; inventory_document.py reads them (and inventory_refusals.py
names what is wrong).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from spurctl.holdings import Holding, Inventory, Session, SessionBinding, SessionRefusal
from spurctl.model import MAX_JOB_ID, format_time

_Count = Annotated[int, msgspec.Meta(ge=0)]
_U32 = Annotated[int, msgspec.Meta(ge=0, le=MAX_JOB_ID)]


def holding_extras_to_dict(h: Holding) -> dict[str, Any]:
    """`attempt`, `traces`, `tracked_pids`, `supervisors`, `sessions`."""
    out: dict[str, Any] = {}
    if h.attempt is not None:
        out["attempt"] = h.attempt
    if h.traces:
        out["traces"] = list(h.traces)
    if h.tracked_pids:
        out["tracked_pids"] = list(h.tracked_pids)
    if h.supervisors:
        out["supervisors"] = list(h.supervisors)
    if h.sessions:
        out["sessions"] = [session_to_dict(s) for s in h.sessions]
    return out


def session_to_dict(s: Session) -> dict[str, Any]:
    out: dict[str, Any] = {
        "attempt": s.attempt,
        "step": s.step,
        "supervisor": s.supervisor,
        "binding": str(s.binding),  # the shipped scanner's is a plain str
    }
    if s.why:
        out["why"] = s.why
    if s.workload is not None:
        out["workload"] = s.workload
    if s.cgroup:
        out["cgroup"] = s.cgroup
    return out


def refusal_to_dict(r: SessionRefusal) -> dict[str, Any]:
    out: dict[str, Any] = {"path": r.path, "why": r.why}
    for key in ("job_id", "attempt", "step"):
        if getattr(r, key) is not None:
            out[key] = getattr(r, key)
    return out


def inventory_extras_to_dict(inv: Inventory) -> dict[str, Any]:
    """`agent`, `hostname`, `target_node(s)`, ..., `session_refusals`.

    `agent` is written (null when no spurd runs) only when the scan looked for
    it, so "none runs" stays apart from "an older document that does not say".
    """
    out: dict[str, Any] = {}
    if inv.agent_checked:
        out["agent"] = (
            None
            if inv.agent is None
            else {"pid": inv.agent.pid, "started_at": format_time(inv.agent.started_at)}
        )
    if inv.hostname is not None:
        out["hostname"] = inv.hostname
    if inv.agent_checked or inv.target_node is not None:
        out["target_node"] = inv.target_node
    if inv.target_nodes:
        out["target_nodes"] = list(inv.target_nodes)
    if inv.agents:
        out["agents"] = [
            {"pid": a.pid, "started_at": format_time(a.started_at)} for a in inv.agents
        ]
    named = {"agent_hostname": inv.agent_hostname, "controller": inv.controller}
    out.update((k, v) for k, v in {**named, "cluster": inv.cluster}.items() if v is not None)
    if inv.ancestry_read:
        out["ancestry_read"] = True
    if inv.session_refusals:
        out["session_refusals"] = [refusal_to_dict(r) for r in inv.session_refusals]
    said = {"controller": inv.agent_controller, "cluster": inv.agent_cluster}
    if any(v is not None for v in said.values()):
        out["agent_config"] = {k: v for k, v in said.items() if v is not None}
    return out


# -- reading them back (inventory_document.py's strict decode) ---------------------------


class SessionDoc(msgspec.Struct, gc=False):
    attempt: _U32
    step: _U32
    supervisor: _Count
    binding: SessionBinding
    why: str = ""
    workload: _Count | None = None
    cgroup: str = ""


class RefusalDoc(msgspec.Struct, gc=False):
    path: str
    why: str
    job_id: _U32 | None = None
    attempt: _U32 | None = None
    step: _U32 | None = None


def sessions(docs: tuple[SessionDoc, ...] | None) -> tuple[Session, ...]:
    return tuple(
        Session(d.attempt, d.step, d.supervisor, d.binding, d.why, d.workload, d.cgroup)
        for d in docs or ()
    )


def refusals(docs: tuple[RefusalDoc, ...] | None) -> tuple[SessionRefusal, ...]:
    return tuple(SessionRefusal(d.path, d.why, d.job_id, d.attempt, d.step) for d in docs or ())
