"""decide/drains.py resume_plan: a node spurctl drained that went DOWN (its heartbeat lost)
is listed whatever its state, and lifted only with a clean, fresh audit whose inventory
shows spurd running; a DOWN Spur or an admin set is not resume's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spurctl.decide.drains import resume_plan
from spurctl.decide.owner import Ownership
from spurctl.holdings import AgentProcess, Inventory
from spurctl.model import Node, NodeState

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
R = "spurctl: agent-orphan job 4950 (spurctl explain gpu012)"
OWNED = Ownership({"gpu012": frozenset({R})}, since={("gpu012", R): NOW - timedelta(hours=1)})


def plan(node: Node, inv: Inventory) -> tuple[list[str], list[str]]:
    changes, left = resume_plan(
        [node.name], {node.name: node}, [], {node.name: inv}, now=NOW, max_age_s=600,
        owned=OWNED,
    )  # fmt: skip
    return [c.node for c in changes], [f"{x.node}: {x.why}" for x in left]


def inventory(*, agent: bool, checked: bool = True) -> Inventory:
    spurd = AgentProcess(2201, NOW - timedelta(minutes=5)) if agent else None
    return Inventory("gpu012", NOW, "scan", agent=spurd, agent_checked=checked)


def test_spurctls_drain_gone_down_is_lifted_when_clean_and_spurd_runs_no_other_down() -> None:
    down = Node("gpu012", NodeState.DOWN, R)
    assert plan(down, inventory(agent=True)) == (["gpu012"], [])
    for reason in ("Not responding", "ops: PSU"):  # Spur's own DOWN, an admin's: not resume's
        assert plan(Node("gpu012", NodeState.DOWN, reason), inventory(agent=True)) == (
            [],
            [f"gpu012: gpu012 is DOWN ({reason!r}), not by spurctl: resume never lifts it"],
        )


def test_it_stays_while_no_spurd_runs_or_the_inventory_does_not_say() -> None:
    down = Node("gpu012", NodeState.DOWN, R)
    since = "gpu012: stays DOWN since spurctl's drain of 2026-12-05T07:00:00Z (heartbeat lost): "
    assert plan(down, inventory(agent=False)) == (
        [],
        [since + "its inventory finds no spurd running; start spurd, then resume"],
    )
    _, left = plan(down, inventory(agent=False, checked=False))
    assert left[0].startswith(since + "its inventory does not say whether spurd runs")
