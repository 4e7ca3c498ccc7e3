"""One cluster, not two: the pure parts. What a file names, whether it is the view's
cluster, and when inventories cannot belong to the controller at all."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.decide.cluster_check import far_above, foreign_inventories
from spurctl.errors import SpurctlError
from spurctl.model import Holding, Inventory
from spurctl.sources.agent_endpoints import endpoint
from spurctl.sources.cluster_binding import Binding, mismatch, same_controller, stamped
from spurctl.sources.inventory_document import inventory_to_dict, parse_inventory_text
from spurctl.sources.settings import read_agent_map

AT = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def dns(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    return lambda address: endpoint(address, lambda host, port: table.get(host, []))


def test_two_urls_name_one_controller_when_their_endpoints_meet() -> None:
    resolve = dns({"ctl1": ["10.0.0.1"], "ctl1.example": ["10.0.0.1"], "ctl2": ["10.0.0.2"]})
    assert same_controller(["http://ctl1.example:6817"], ["http://ctl1:6817"], resolve)
    assert not same_controller(["http://ctl1:6817"], ["http://ctl1:7000"], resolve)
    assert not same_controller(["http://ctl2:6817"], ["http://ctl1:6817"], resolve)
    # HA: any of the file's controllers among any of the view's.
    assert same_controller(["http://ctl2:6817", "http://ctl1:6817"], ["http://ctl1:6817"], resolve)


def test_a_binding_must_name_the_views_controller_and_cluster() -> None:
    resolve = dns({"a": ["10.0.0.1"], "b": ["10.0.0.2"]})
    view = ["http://b:6817"]
    assert mismatch(Binding(("http://b:6817",), "gpu-b"), view, "gpu-b", resolve) is None
    why = mismatch(Binding(("http://a:6817",)), view, "gpu-b", resolve)
    assert why is not None and "http://a:6817" in why and "http://b:6817" in why
    why = mismatch(Binding(cluster="gpu-a"), view, "gpu-b", resolve)
    assert why is not None and "'gpu-a'" in why and "'gpu-b'" in why
    # A cluster name nothing can check against: not taken on trust.
    why = mismatch(Binding(cluster="gpu-a"), view, None, resolve)
    assert why is not None and "--conf" in why
    assert mismatch(Binding(("http://b:6817",), "gpu-a"), view, None, resolve) is None


def test_a_nodes_own_cluster_name_is_weighed_only_against_a_view_that_names_one() -> None:
    # Every node's spur.conf names its cluster, meant to bind a file or not (issue 50.4).
    resolve = dns({"a": ["10.0.0.1"], "b": ["10.0.0.2"]})
    view = ["http://b:6817"]
    said = Binding(cluster="gpu-a")
    assert mismatch(said, view, None, resolve, unnamed_view=True) is None
    why = mismatch(said, view, "gpu-b", resolve, unnamed_view=True)
    assert why is not None and "'gpu-a'" in why and "'gpu-b'" in why
    why = mismatch(Binding(("http://a:6817",)), view, None, resolve, unnamed_view=True)
    assert why is not None and "http://a:6817" in why and "http://b:6817" in why


def test_an_agent_map_names_its_cluster_beside_its_nodes(tmp_path: Path) -> None:
    path = tmp_path / "agents.json"
    path.write_text(
        json.dumps(
            {
                "controller": "http://ctl1:6817,ctl2",
                "cluster": "gpu-a",
                "gpu001": "10.0.0.1:6818",
            }
        )
    )
    agents, binding = read_agent_map(path)
    assert agents == {"gpu001": "10.0.0.1:6818"}
    assert binding == Binding(("http://ctl1:6817", "http://ctl2:6817"), "gpu-a")
    # Nodes named `controller` and `cluster` with agent addresses are nodes.
    path.write_text(json.dumps({"controller": "10.0.0.9:6818", "cluster": "10.0.0.8:6818"}))
    agents, binding = read_agent_map(path)
    assert len(agents) == 2 and not binding
    path.write_text(json.dumps({"controller": "ftp://x:1"}))
    with pytest.raises(SpurctlError, match="controller"):
        read_agent_map(path)


def test_collect_records_what_it_was_told_and_an_old_file_still_reads() -> None:
    inv = Inventory(node="gpu001", collected_at=AT, source="cgroup+proc")
    doc = inventory_to_dict(stamped(inv, Binding(("http://ctl:6817",), "gpu-a")))
    assert (doc["controller"], doc["cluster"]) == ("http://ctl:6817", "gpu-a")
    (back,) = parse_inventory_text(json.dumps(doc), name="x")
    assert (back.controller, back.cluster) == ("http://ctl:6817", "gpu-a")
    assert "controller" not in inventory_to_dict(stamped(inv, Binding()))
    (old,) = parse_inventory_text(json.dumps(inventory_to_dict(inv)), name="x")
    assert old.controller is None and old.cluster is None


def inv(node: str, *ids: int) -> Inventory:
    return Inventory(node, AT, "cgroup+proc", held=tuple(Holding(i) for i in ids))


NAMES = [f"gpu{i:03d}" for i in range(1, 9)]


def test_inventories_of_nodes_this_controller_does_not_know_are_another_clusters() -> None:
    mostly_strangers = [inv("gpu001", 10), *(inv(f"cpu{i}", 10) for i in range(3))]
    why = foreign_inventories(mostly_strangers, NAMES, 100)
    assert why is not None and "3 of the 4 inventoried nodes" in why and "cpu[0-2]" in why
    # Loose names and the node the job processes name count as known.
    known = [inv("GPU001.cluster", 10), Inventory("n1", AT, "x", target_node="gpu002")]
    assert foreign_inventories([*known, inv("cpu0")], NAMES, 100) is None


def test_ids_far_above_the_watermark_on_most_nodes_are_another_controllers() -> None:
    far = far_above(5121)
    assert far == 6121 and far_above(50_000) == 55_000
    half = [inv("gpu001", far), inv("gpu002", 7000, 12), inv("gpu003", 12), inv("gpu004", 13)]
    assert foreign_inventories([*half, inv("gpu005")], NAMES, 5121) is None  # half is not most
    why = foreign_inventories([*half, inv("gpu005", 9000)], NAMES, 5121)
    assert why is not None and "3 of the 5 inventoried nodes that hold jobs" in why
    assert "gpu[001-002,005]" in why and "at or above 6121" in why
    # Just above it (jobs submitted while an audit collects) is not far.
    near = [inv(n, 5121 + 999) for n in NAMES]
    assert foreign_inventories(near, NAMES, 5121) is None
    # A node that could not be inventoried is no evidence either way.
    failed = Inventory("gpu001", AT, "collect", error="ssh: timeout")
    assert foreign_inventories([failed], NAMES, 5121) is None
