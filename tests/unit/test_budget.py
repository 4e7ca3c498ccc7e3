"""decide/budget.py: the blast-radius cap (spurctl's nodes out of service, counted over
every node the controller lists, this run's included) and the cooldown after a resume;
option_values.parse_max_unavailable reads `--max-unavailable N|P%`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import typer

from spurctl.decide.budget import (
    DEFAULT_MAX_UNAVAILABLE,
    MaxUnavailable,
    cooling,
    out_by_spurctl,
    over_budget,
    resumed_at,
)
from spurctl.decide.owner import Ownership
from spurctl.model import Node, NodeState
from spurctl.option_values import parse_max_unavailable

T0 = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


def fleet(n: int, **out: tuple[NodeState, str]) -> dict[str, Node]:
    nodes = {f"gpu{i:03d}": Node(f"gpu{i:03d}", NodeState.IDLE) for i in range(1, n + 1)}
    for name, (state, reason) in out.items():
        nodes[name] = Node(name, state, reason)
    return nodes


def mine(*names: str) -> Ownership:
    return Ownership({n: frozenset({f"spurctl: x ({n})"}) for n in names})


def test_the_default_cap_is_two_percent_of_the_controllers_nodes_and_never_below_one() -> None:
    assert [DEFAULT_MAX_UNAVAILABLE.cap(n) for n in (1, 24, 49, 50, 100, 1000)] == [
        1, 1, 1, 1, 2, 20,
    ]  # fmt: skip
    assert MaxUnavailable(count=0).cap(1000) == 0
    assert str(DEFAULT_MAX_UNAVAILABLE) == "2%" and str(MaxUnavailable(count=5)) == "5"


@pytest.mark.parametrize(
    ("text", "value"),
    [("5", MaxUnavailable(count=5)), ("0", MaxUnavailable(count=0)),
     ("2%", MaxUnavailable(percent=2.0)), (" 12.5% ", MaxUnavailable(percent=12.5)),
     ("100%", MaxUnavailable(percent=100.0))],
)  # fmt: skip
def test_max_unavailable_reads_a_count_or_a_percentage(text: str, value: MaxUnavailable) -> None:
    assert parse_max_unavailable(text) == value


@pytest.mark.parametrize("text", ["-1", "0%", "101%", "x", "2.5", "nan%", "%", ""])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="neither a number of nodes"):
        parse_max_unavailable(text)


def test_only_nodes_out_of_service_by_spurctls_own_reason_count() -> None:
    nodes = fleet(
        100,
        gpu001=(NodeState.DRAIN, "spurctl: x (gpu001)"),
        gpu002=(NodeState.DOWN, "spurctl: x (gpu002)"),  # its heartbeat lost since
        gpu003=(NodeState.DRAIN, "ops: bad DIMM"),  # an admin's
        gpu004=(NodeState.DRAIN, "spurctl: x (gpu004)"),  # never journaled: not ours
        gpu005=(NodeState.DOWN, "Not responding"),
    )
    owned = mine("gpu001", "gpu002", "gpu005")
    assert out_by_spurctl(nodes.values(), owned, reason_replaced=False) == ["gpu001", "gpu002"]
    assert (
        over_budget(nodes, owned, [], MaxUnavailable(count=2), "drain", reason_replaced=False)
        is None
    )
    # A node already out by spurctl's reason is not counted twice.
    assert (
        over_budget(
            nodes, owned, ["gpu001"], MaxUnavailable(count=2), "drain", reason_replaced=False
        )
        is None
    )
    why = over_budget(
        nodes, owned, ["gpu010", "gpu011"], MaxUnavailable(count=3), "drain", reason_replaced=False
    )
    assert why == (
        "refusing to drain, nothing sent: it would take 2 more nodes out of service "
        "(gpu[010-011]) beside the 2 already out of service by spurctl's reason "
        "(gpu[001-002]): 4, above --max-unavailable 3 (3 of the controller's 100 nodes); "
        "name fewer nodes, or pass a larger --max-unavailable"
    )
    assert (
        over_budget(
            nodes, owned, ["gpu010", "gpu011"], MaxUnavailable(count=4), "x", reason_replaced=False
        )
        is None
    )


def test_a_drain_whose_reason_v0_8_0_replaced_counts_where_the_release_does_that() -> None:
    """Spur v0.8.0 turns a drain of spurctl's whose heartbeat timed out into DOWN `Not
    responding`, keeping the lock (decide/lost_reason.py): no longer spurctl's reason, but
    out of service because of spurctl's drain, for ever. Only the journal tells it from
    Spur's own DOWN (gpu006, never drained by spurctl); a node registered again since the
    drain (gpu007) is a new record, not the one spurctl drained."""
    nodes = fleet(
        100,
        gpu001=(NodeState.DRAIN, "spurctl: x (gpu001)"),
        gpu005=(NodeState.DOWN, "Not responding"),
        gpu006=(NodeState.DOWN, "Not responding"),
        gpu007=(NodeState.DOWN, "Not responding"),
    )
    nodes["gpu007"] = Node("gpu007", NodeState.DOWN, "Not responding",
                           agent_start_time=T0 + timedelta(hours=1))  # fmt: skip
    drained = {n: frozenset({f"spurctl: x ({n})"}) for n in ("gpu001", "gpu005", "gpu007")}
    since = {(n, f"spurctl: x ({n})"): T0 for n in drained}
    owned = Ownership(drained, None, since)
    assert out_by_spurctl(nodes.values(), owned, reason_replaced=True) == ["gpu001", "gpu005"]
    # Where the release keeps a drain's reason (#624), such a DOWN is not spurctl's drain.
    assert out_by_spurctl(nodes.values(), owned, reason_replaced=False) == ["gpu001"]
    limit = MaxUnavailable(count=2)
    assert over_budget(nodes, owned, ["gpu010"], limit, "drain", reason_replaced=False) is None
    why = over_budget(nodes, owned, ["gpu010"], limit, "drain", reason_replaced=True)
    assert why == (
        "refusing to drain, nothing sent: it would take 1 more node out of service (gpu010) "
        "beside the 2 already out of service by spurctl's reason (gpu[001,005]; gpu005 DOWN "
        "'Not responding' since spurctl's drain): 3, above --max-unavailable 2 (2 of the "
        "controller's 100 nodes); name fewer nodes, or pass a larger --max-unavailable"
    )


def rec(node: str, at: datetime, result: str = "sent", **more: Any) -> dict[str, Any]:
    return {"action": "resume", "step": "resume", "event": "outcome", "node": node,
            "result": result, "at": at.isoformat().replace("+00:00", "Z"), **more}  # fmt: skip


def test_the_cooldown_runs_from_the_last_resume_sent_and_a_node_named_alone_is_exempt() -> None:
    found = [
        rec("gpu001", T0),
        rec("gpu001", T0 + timedelta(minutes=3)),
        rec("gpu002", T0, result="failed"),
        {**rec("gpu003", T0), "action": "drain", "step": "drain"},
    ]
    resumed = resumed_at(found)
    assert resumed == {"gpu001": T0 + timedelta(minutes=3)}
    kw: dict[str, Any] = {"cooldown_s": 600.0, "named_alone": False, "verb": "drain"}
    why = cooling("gpu001", resumed, now=T0 + timedelta(minutes=12), **kw)
    assert why == (
        "spurctl resumed gpu001 at 2026-12-05T08:03:00Z: not drained again by spurctl before "
        "2026-12-05T08:13:00Z (--cooldown), unless named alone (`spurctl drain -w gpu001`)"
    )
    assert cooling("gpu001", resumed, now=T0 + timedelta(minutes=13), **kw) is None
    assert cooling("gpu002", resumed, now=T0, **kw) is None
    alone = {**kw, "named_alone": True}
    assert cooling("gpu001", resumed, now=T0 + timedelta(minutes=4), **alone) is None
