"""One reclaim's plan, decided once from what was read and resolved.

The use case reads (the journal, a fresh audit), resolves where each cancel would go
(sources/send_targets.py), and then asks here, once: which entries the plan holds,
whether it is refused whole (decide/send_guards.py), which entries will be skipped
for an old inventory, which --job ids matched nothing and which findings need a
person instead. Pure: the caller brings the report, the inventories, the resolved
targets and the clock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from spurctl.decide.plan import Entry, plan, stale_reason, unmatched_jobs
from spurctl.decide.send_guards import Reach, refusal
from spurctl.model import Action, AuditReport, Finding, Inventory

Key = tuple[str, int]


class Aim(Reach, Protocol):
    """Where each cancel would go (sources/send_targets.Targets)."""

    def address(self, node: str) -> str: ...
    def lacks(self, node: str) -> bool: ...


def selection(
    named: Iterable[str], view_nodes: Collection[str], inventories: Mapping[str, Inventory]
) -> tuple[set[str], list[str]]:
    """The nodes a plan of the `named` ones covers, and those of them the controller does
    not know (a typo would otherwise plan nothing and look like a clean node).

    An inventory whose job processes all name one controller node (SPUR_TARGET_NODE)
    speaks for that node: its findings sit under the name it reports, and either name
    selects them.
    """
    named = set(named)
    speaks_for = {
        name: inv.target_node
        for name, inv in inventories.items()
        if inv.target_node is not None and inv.target_node in view_nodes
    }
    unknown = sorted(n for n in named if n not in view_nodes and n not in speaks_for)
    selected = named | {name for name, target in speaks_for.items() if target in named}
    return selected, unknown


@dataclass(frozen=True, slots=True)
class Decided:
    """The plan and everything said about it before anything is sent."""

    entries: list[Entry]
    # Why the whole plan is refused (nothing may be sent), or None.
    refusal: str | None = None
    # Why each entry will be skipped for an old inventory, judged now.
    stale: dict[Key, str] = field(default_factory=dict)
    # --job ids no planned entry names.
    unmatched_jobs: list[int] = field(default_factory=list)
    # Planned nodes the agent map lacks: their address is the node:port default.
    fallback_nodes: list[str] = field(default_factory=list)
    # The findings on the selected nodes that need a person, not a cancel.
    investigate: list[Finding] = field(default_factory=list)


def decide(
    report: AuditReport,
    selected: Collection[str],
    job_ids: Sequence[int] | None,
    aim: Aim,
    legit: Mapping[int, Iterable[str]],
    inventories: Mapping[str, Inventory],
    view_nodes: Collection[str],
    watermark: int,
    now: datetime,
    max_inventory_age_s: float,
) -> Decided:
    """The plan of the selected nodes (and jobs), each entry addressed as `aim` resolved
    it, and whether it is refused whole (`legit`: each planned job's nodes)."""
    collected = {node: inv.collected_at for node, inv in inventories.items()}
    entries = plan(
        report, selected, job_ids, aim.address, collected_at=collected, fallback=aim.lacks
    )
    return Decided(
        entries,
        refusal(entries, aim, legit, inventories.values(), view_nodes, watermark),
        {
            (e.node, e.job_id): why
            for e in entries
            if (why := stale_reason(e, now, max_inventory_age_s)) is not None
        },
        unmatched_jobs(entries, job_ids),
        sorted({e.node for e in entries if e.fallback}),
        [f for f in report.findings if f.node in selected and f.action is Action.INVESTIGATE],
    )


def would_send(
    entries: Iterable[Entry], stale: Collection[Key], spared: Collection[Key] = ()
) -> bool:
    """Whether the real run would send a cancel: an entry planned and not already known
    to be skipped (an old inventory, a saved entry no longer planned)."""
    return any(
        (e.node, e.job_id) not in stale and (e.node, e.job_id) not in spared for e in entries
    )
