"""collect's command templates and its summary, checked without running a node's command."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from spurctl.model import Inventory
from spurctl.render.collect import summarize
from spurctl.sources.collect import DEFAULT_COMMAND, check_command, exec_form
from tests.cli import WORKTREE


@pytest.mark.parametrize(
    ("template", "runs_as"),
    [
        (DEFAULT_COMMAND, "exec " + DEFAULT_COMMAND),
        ("/opt/x/bin/inv --host=%h 'a b'", "exec /opt/x/bin/inv --host=%h 'a b'"),
        ("ssh %h spurctl node-inventory | tail -1", None),
        ("ssh %h spurctl node-inventory; true", None),
        ("ssh %h spurctl node-inventory 2>/dev/null", None),
        ("SSH_AUTH_SOCK= ssh %h spurctl node-inventory", None),
        ("exec ssh %h spurctl node-inventory", None),
        ("ssh %h 'unbalanced", None),
    ],
)
def test_a_simple_command_replaces_the_shell_so_the_timeout_kill_reaches_it(
    template: str, runs_as: str | None
) -> None:
    assert exec_form(template) == (runs_as or template)


@pytest.mark.parametrize("template", ["ssh %{h} x", "ssh %host x", "echo 100%% %h"])
def test_command_templates_clustershell_accepts_are_accepted(template: str) -> None:
    check_command(template)


def test_summary_folds_ok_and_failed_nodes_as_hostlists() -> None:
    def ok(n: str) -> Inventory:
        return Inventory(node=n, collected_at=None, source="proc")

    def bad(n: str, e: str) -> Inventory:
        return Inventory(node=n, collected_at=None, source="collect", error=e)

    results = [ok(f"gpu{i:03d}") for i in range(1, 39)] + [
        bad("gpu039", "no answer within 60 s; command killed"),
        bad("gpu040", "no answer within 60 s; command killed"),
        bad("gpu100", "command exited with status 255: ssh: connect to host gpu100: refused"),
    ]

    assert summarize(results).splitlines() == [
        "collected 38 of 41 nodes",
        "ok (38): gpu[001-038]",
        "failed (3): gpu[039-040,100]",
        "  gpu[039-040]: no answer within 60 s; command killed",
        "  gpu100: command exited with status 255: ssh: connect to host gpu100: refused",
    ]


def test_the_documented_gateway_topology_routes_every_node_through_a_gateway(
    tmp_path: Path,
) -> None:
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Propagation import PropagationTreeRouter
    from ClusterShell.Topology import TopologyParser

    doc = (WORKTREE / "docs" / "collecting.md").read_text()
    ini = doc.split("```ini\n", 1)[1].split("```", 1)[0]
    conf = tmp_path / "topology.conf"
    conf.write_text(textwrap.dedent(ini))

    tree = TopologyParser(str(conf)).tree("admin1")
    router = PropagationTreeRouter("admin1", tree)

    assert tree.leaf_node_count() == 512
    routed = NodeSet()
    for gateway, nodes in router.dispatch(NodeSet("gpu[001-512]")):
        assert gateway in NodeSet("gw[1-4]")
        routed.update(nodes)
    assert routed == NodeSet("gpu[001-512]")
