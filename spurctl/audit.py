"""`spurctl audit` as a library call: sources in, an AuditReport out.

The steps, each explainable: read the controller (or a snapshot), read what the
agents hold, ask the controller about every held id its bulk answer left out
(only when that answer was incomplete), fix the watermark, classify.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.errors import SpurctlError
from spurctl.gcpause import gc_paused
from spurctl.hostlist import loose_key
from spurctl.model import (
    AuditReport,
    ControllerView,
    Inventory,
    Job,
    Watermark,
    inventories_by_node,
    watermark_for,
)
from spurctl.sources.documents import parse_inventory_text

if TYPE_CHECKING:
    from spurctl.sources.controller import ControllerClient

INVENTORY_SUFFIXES = (".json", ".jsonl", ".ndjson")


def load_inventories(sources: Sequence[str]) -> list[Inventory]:
    """Inventories from files, directories of files, or '-' (stdin); JSON or JSON Lines."""
    with gc_paused():
        return _load_inventories(sources)


def _load_inventories(sources: Sequence[str]) -> list[Inventory]:
    out: list[Inventory] = []
    for source in sources:
        if source == "-":
            out.extend(parse_inventory_text(sys.stdin.read(), name="<stdin>"))
            continue
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in INVENTORY_SUFFIXES)
            if not files:
                raise SpurctlError(
                    f"--inventory {path} holds no .json or .jsonl files; "
                    "write them with `spurctl collect -o FILE`"
                )
        elif path.exists():
            files = [path]
        else:
            raise SpurctlError(f"--inventory {path}: no such file or directory")
        for f in files:
            try:
                text = f.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise SpurctlError(f"cannot read inventory {f}: {exc}") from None
            out.extend(parse_inventory_text(text, name=str(f)))
    return out


def read_view_and_inventories(
    client: ControllerClient, sources: Sequence[str]
) -> tuple[ControllerView, list[Inventory]]:
    """The controller's view and the inventory files, read at the same time.

    Neither depends on the other, and while the controller builds and sends a
    large answer this process would otherwise sit idle: parsing the inventories
    meanwhile takes most of their cost off the audit's wall time. A controller
    failure is reported first, as if the view had been read first. The view is
    read on a daemon thread, so Ctrl-C returns at once instead of waiting for a
    slow controller (closing the client then cancels the call).
    """
    outcome: list[ControllerView | BaseException] = []
    done = threading.Event()

    def read_view() -> None:
        try:
            outcome.append(client.view())
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=read_view, name="controller-view", daemon=True).start()

    def view() -> ControllerView:
        done.wait()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    try:
        inventories = load_inventories(sources)
    except Exception:
        view()
        raise
    return view(), inventories


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


def held_ids_missing(view: ControllerView, inventories: Iterable[Inventory]) -> set[int]:
    return {h.job_id for inv in inventories for h in inv.held if h.job_id not in view.jobs}


def gather(
    view: ControllerView,
    inventories: Iterable[Inventory],
    *,
    client: ControllerClient | None,
    watermark_flag: int | None = None,
    snapshot_watermark: Watermark | None = None,
    scope: frozenset[str] | None = None,
    not_found_doubt: str | None = None,
) -> AuditInputs:
    """Confirm what the bulk view could not, then fix the watermark.

    A complete view proves absence by itself. An incomplete one (a scoped
    credential) proves nothing: every held id it lacks is asked about with GetJob,
    and only NOT_FOUND counts as untracked. Offline (a snapshot) nothing can be
    asked, so those ids stay unverifiable.
    """
    by_node = inventories_by_node(inventories)
    confirmed: dict[int, Job | None] = {}
    if not view.complete and client is not None:
        missing = held_ids_missing(view, by_node.values())
        if missing:
            confirmed = client.confirm(missing)
            if not_found_doubt is not None:
                confirmed = {i: j for i, j in confirmed.items() if j is not None}
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
        not_found_doubt=not_found_doubt if client is not None and not view.complete else None,
    )


def not_inventoried(inputs: AuditInputs) -> list[str]:
    """Controller nodes in scope that no inventory speaks for (by exact or loose name)."""
    scope = inputs.scope if inputs.scope is not None else inputs.view.nodes.keys()
    have = {loose_key(name) for name in inputs.inventories}
    return sorted(n for n in scope if n in inputs.view.nodes and loose_key(n) not in have)


def audit(inputs: AuditInputs, *, include_healthy: bool = False) -> AuditReport:
    from spurctl.decide.classify import classify

    view = inputs.view
    # Classifying converts the jobs the holdings name and the active ones.
    with gc_paused():
        result = classify(
            view,
            inputs.inventories,
            watermark=inputs.watermark.value,
            confirmed=inputs.confirmed,
            scope=inputs.scope,
            include_healthy=include_healthy,
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
            f"controller view is INCOMPLETE: GetJobs returned {len(view.jobs):,} of "
            f"{view.jobs_total:,} jobs (Spur scopes GetJobs to the credential's user, admins "
            f"too); {how}."
        )
    missing = not_inventoried(inputs)
    if missing:
        from spurctl.hostlist import fold

        notes.append(
            f"{len(missing):,} node(s) in scope have no inventory and were not audited: "
            f"{fold(missing)} (collect them, or use --collect)."
        )
    if inputs.not_found_doubt:
        notes.append(f"NOT_FOUND is not proof here: {inputs.not_found_doubt}.")
    notes.extend(result.notes)
    return AuditReport(
        controller_address=view.address,
        controller_version=view.version,
        taken_at=view.taken_at,
        watermark=inputs.watermark,
        view_complete=view.complete,
        jobs_seen=len(view.jobs),
        jobs_total=view.jobs_total,
        findings=result.findings,
        nodes_in_scope=result.nodes_in_scope,
        nodes_inventoried=result.nodes_inventoried,
        notes=notes,
    )
