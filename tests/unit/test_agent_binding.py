"""sources/cluster_binding.agent_binding: the cluster a node-release record is stamped with."""

from __future__ import annotations

from spurctl.model import Inventory
from spurctl.sources.cluster_binding import Binding, agent_binding


def _inv(controller: str | None, cluster: str | None) -> Inventory:
    return Inventory("gpu1", None, "scan", agent_controller=controller, agent_cluster=cluster)


def test_the_nodes_spurd_names_its_controllers_and_cluster() -> None:
    got = agent_binding(_inv("http://ctl-a:6817,http://ctl-b:6817", "prod"))
    assert got == Binding(("http://ctl-a:6817", "http://ctl-b:6817"), "prod")


def test_a_spurd_saying_nothing_stamps_nothing() -> None:
    assert not agent_binding(_inv(None, None))


def test_a_controller_no_url_list_can_be_is_left_out() -> None:
    assert agent_binding(_inv("::not a url::", "prod")) == Binding((), "prod")
