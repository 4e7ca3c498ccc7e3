"""What vouches for a repair (issue 48, item 4): only the node's own inventory; a loosely
named one can only refuse; a job whose placement cannot be read may be anywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spurctl.decide.repair import evidence_refusal, loose_inventories
from spurctl.holdings import AgentProcess, Holding, Inventory
from spurctl.hostlist import placement_unread

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
AGENT = AgentProcess(2201, NOW - timedelta(days=3))


def inv(
    node: str, *held: Holding, target_node: str | None = None, agent_hostname: str | None = None
) -> Inventory:
    """A fresh inventory of `node` showing spurd running."""
    return Inventory(
        node, NOW, "test", held=held, agent=AGENT, agent_checked=True,
        target_node=target_node, agent_hostname=agent_hostname,
    )  # fmt: skip


def test_a_placement_is_unread_when_blank_or_not_a_list_spurctl_parses() -> None:
    assert placement_unread("") and placement_unread("  ") and placement_unread(" , ")
    assert placement_unread("gpu[0") and placement_unread("gpu009],gpu010")  # #643's stray ]
    assert not placement_unread("gpu009") and not placement_unread(" gpu009 ")
    assert not placement_unread("gpu[008-010]") and not placement_unread("gpu[001-1000]")


def test_loose_inventories_are_every_other_name_that_matches_loosely() -> None:
    exact = inv("gpu009")
    fqdn = inv("gpu009.site-b")
    upper = inv("GPU009")
    by_target = inv("node-17", target_node="gpu009")
    by_agent = inv("node-18", agent_hostname="GPU009.example")
    other = inv("gpu010")
    found = loose_inventories("gpu009", [exact, fqdn, upper, by_target, by_agent, other])
    assert [i.node for i in found] == ["gpu009.site-b", "GPU009", "node-17", "node-18"]


def test_only_the_exact_inventory_vouches_and_a_loose_one_only_refuses() -> None:
    clean_twin = inv("gpu009.site-b")
    assert evidence_refusal("gpu009", inv("gpu009"), NOW, 600) is None
    assert evidence_refusal("gpu009", inv("gpu009"), NOW, 600, [clean_twin]) is None
    assert evidence_refusal("gpu009", None, NOW, 600, [clean_twin]) == (
        "no inventory under the controller's name gpu009; gpu009.site-b matches it only "
        "loosely, which cannot vouch for it: collect gpu009 under its own name "
        "(node-inventory --hostname gpu009), then repair"
    )
    busy = inv("GPU009", Holding(5300, pids=(9101, 9102)))
    why = evidence_refusal("gpu009", inv("gpu009"), NOW, 600, [clean_twin, busy])
    assert why is not None and why.startswith(
        "GPU009's inventory, a name that matches gpu009 only loosely, holds job 5300, "
        "2 processes: it may be gpu009's"
    )
    failed = Inventory("gpu009.site-b", NOW, "collect", error="ssh: timed out")
    why = evidence_refusal("gpu009", inv("gpu009"), NOW, 600, [failed])
    assert why is not None and "could not be inventoried (ssh: timed out)" in why
