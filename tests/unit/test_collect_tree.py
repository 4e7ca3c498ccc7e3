"""collect --topology's pure parts: the options, the topology check, and how what the
tree relayed becomes one record per node (no process is started here)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from spurctl.cli import app
from spurctl.errors import SpurctlError
from spurctl.options import (
    ConnectionOptions,
    HoldingOptions,
    collect_flags,
    confirm_flags,
    controller_flags,
    next_command,
    tree_of,
    view_flags,
)
from spurctl.scope import Scope
from spurctl.sources.collect import DEFAULT_COMMAND, _relayed
from spurctl.sources.tree import (
    DEFAULT_REMOTE_COMMAND,
    Relayed,
    Tree,
    _load_topology,
    _spread,
    check_tree,
    root_name,
    shipped_plan,
)

INVENTORY = json.dumps(
    {
        "schema": "spurctl.inventory/v1",
        "node": "n1",
        "collected_at": "2026-12-02T10:00:00Z",
        "source": "cgroup+proc",
        "error": None,
        "held": [],
    }
).encode()


def topology(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topology.conf"
    path.write_text(text)
    return path


def test_a_gateway_failure_is_the_nodes_error_even_after_it_printed_a_valid_inventory() -> None:
    # What reached us before the gateway died is not the node's answer: an empty
    # inventory here would read as "holds nothing".
    got = Relayed(stdout=[INVENTORY], rc=0, via="gw2", gateway_error="gateway gw2 failed")
    inv = _relayed("n1", got, 60)
    assert inv.error == "gateway gw2 failed" and inv.held == () and inv.source == "collect"


def test_a_node_the_gateway_killed_at_its_timeout_names_the_gateway() -> None:
    inv = _relayed("n1", Relayed(rc=None, timed_out=True, via="gw1"), 2)
    assert inv.error == "no answer within 2 s; killed by gateway gw1"


def test_a_node_answering_through_a_gateway_is_its_inventory() -> None:
    inv = _relayed("n1", Relayed(stdout=[INVENTORY], rc=0, via="gw1"), 60)
    assert inv.error is None and inv.node == "n1" and inv.source == "cgroup+proc"


def test_a_node_whose_command_failed_behind_a_gateway_says_how() -> None:
    got = Relayed(stderr=[b"ssh: connect to host n1 port 22: No route to host"], rc=255, via="gw1")
    assert _relayed("n1", got, 60).error == (
        "command exited with status 255: ssh: connect to host n1 port 22: No route to host"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[routes]\nadmin-elsewhere: gw1\ngw1: n[1-4]\n", ["do not start at this host"]),
        ("garbage\n", ["not a", "topology"]),
        ("[routes]\n", ["not a usable topology"]),
    ],
)
def test_a_topology_clustershell_cannot_route_from_here_is_refused(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    with pytest.raises(SpurctlError) as caught:
        check_tree(Tree(topology(tmp_path, text)))
    assert all(w in str(caught.value) for w in words), caught.value
    assert str(caught.value).startswith("--topology ")


def test_a_missing_topology_or_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpurctlError, match="no such file"):
        check_tree(Tree(tmp_path / "nope.conf"))
    with pytest.raises(SpurctlError, match="a directory"):
        check_tree(Tree(tmp_path))


def test_a_topology_routed_from_this_host_is_accepted(tmp_path: Path) -> None:
    conf = topology(tmp_path, f"[routes]\n{root_name()}: gw[1-2]\ngw[1-2]: n[1-40]\n")
    check_tree(Tree(conf))
    with pytest.raises(SpurctlError, match="--remote-command is empty"):
        check_tree(Tree(conf, remote_command="  "))


def test_the_tree_options_need_topology_and_exclude_command(tmp_path: Path) -> None:
    conf = topology(tmp_path, f"[routes]\n{root_name()}: gw1\ngw1: n[1-4]\n")
    assert tree_of(None, DEFAULT_REMOTE_COMMAND, None, DEFAULT_COMMAND) is None
    assert tree_of(conf, "x", "/s", DEFAULT_COMMAND) == Tree(conf, "x", "/s")
    with pytest.raises(SpurctlError, match="--remote-command needs --topology"):
        tree_of(None, "x", None, DEFAULT_COMMAND)
    with pytest.raises(SpurctlError, match="--ssh needs --topology"):
        tree_of(None, DEFAULT_REMOTE_COMMAND, "/s", DEFAULT_COMMAND)
    with pytest.raises(SpurctlError, match="use --remote-command"):
        tree_of(conf, DEFAULT_REMOTE_COMMAND, None, "ssh %h x")
    # The holdings of audit/reclaim/checklist carry the tree to the collect.
    src = HoldingOptions(collect=True, topology=conf, ssh="/s").sources(Scope.parse("n[1-4]"))
    assert src.tree == Tree(conf, DEFAULT_REMOTE_COMMAND, "/s")


def test_reclaims_confirm_command_collects_through_the_same_tree(tmp_path: Path) -> None:
    holdings = HoldingOptions(collect=True, topology=Path("/t.conf"), remote_command="x", ssh="/s")
    flags = confirm_flags(holdings, ConnectionOptions())
    assert flags == ["--topology", "/t.conf", "--remote-command", "x", "--ssh", "/s"]


def test_reclaims_confirm_command_repeats_collect_and_controller_options_not_secrets() -> None:
    holdings = HoldingOptions(
        inventory=["inv.jsonl"], collect=True, command="ssh -p 2 %h x", fanout=8, ship_scanner=True
    )
    conn = ConnectionOptions(controller="http://c:6817", conf=Path("/s.conf"), token="SECRET")
    assert confirm_flags(holdings, conn) == [
        "--command", "ssh -p 2 %h x", "--fanout", "8", "--ship-scanner",
        "--controller", "http://c:6817", "--conf", "/s.conf",
    ]  # fmt: skip
    assert confirm_flags(HoldingOptions(), ConnectionOptions()) == []
    # A printed next command: the view's options, -x when it excluded nodes, quoted.
    tls = ConnectionOptions(controller="http://c:6817", timeout=3.0, tls_ca=Path("/ca"))
    assert controller_flags(tls) == ["--controller", "http://c:6817", "--timeout", "3.0",
                                     "--tls-ca", "/ca"]  # fmt: skip
    assert collect_flags(holdings) == confirm_flags(holdings, ConnectionOptions())
    view = view_flags(holdings, conn)
    assert view[:3] == ["--inventory", "inv.jsonl", "--collect"] and "SECRET" not in view
    assert next_command(
        "audit", "--nodes", "gpu[1-2]", flags=["--command", "a b"], exclude="gpu2"
    ) == ("spurctl audit --nodes 'gpu[1-2]' -x gpu2 --command 'a b'")


@pytest.mark.parametrize("command", ["collect", "audit", "reclaim", "checklist post-wipe"])
def test_help_says_the_default_topology_file_is_not_read(command: str) -> None:
    result = CliRunner().invoke(app, [*command.split(), "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--topology" in text and "--remote-command" in text and "--ssh" in text
    assert "Never read unless named" in text


def test_a_line_from_a_gateway_past_the_limit_is_skipped_whole_and_the_next_read() -> None:
    import io

    from spurctl.node.gateway_relay import lines

    stream = io.BufferedReader(io.BytesIO(b"short\n" + b"x" * 100 + b"\nnext\n" + b"y" * 50))
    assert list(lines(stream, 20)) == [b"short\n", b"next\n"]


def _taken(doc: object, cap: int = 100) -> Relayed:
    from spurctl.sources.tree import _take

    out = {"n1": Relayed()}
    ticks: list[int] = []
    _take(json.dumps(doc).encode(), out, lambda: ticks.append(1), cap)
    assert len(ticks) == (1 if out["n1"].rc is not None or out["n1"].gateway_error else 0)
    return out["n1"]


def test_a_relayed_answer_is_data_only_and_held_to_the_cap_whatever_the_gateway_says() -> None:
    # A gateway that says it cut nothing but sends more than the cap: cut here.
    big = _taken({"node": "n1", "rc": 0, "stdout": "z" * 150, "cut": 0, "printed": 150})
    assert big.cut == 50 and big.stdout == [] and big.printed == 150
    said = _taken({"node": "n1", "rc": 0, "stdout": "", "printed": 600_000_000, "cut": 599_999_900})
    assert (said.printed, said.cut, said.stdout) == (600_000_000, 599_999_900, [])
    assert _taken({"node": "n1", "rc": True, "stdout": INVENTORY.decode()}).rc is None
    assert _taken({"node": ["n1"], "rc": 0}).rc is None
    inv = _relayed("n1", said, 60)
    assert inv.error == (
        "printed 600,000,000 bytes, more than the 4,194,304 an inventory may take: "
        "599,999,900 bytes cut and nothing read"
    )
    assert inv.held == () and inv.source == "collect"


def _dispatched(router: Any, targets: Any) -> tuple[list[str], dict[str, list[str]]]:
    """What ClusterShell's router dispatches, node by node: (direct, {gateway: nodes})."""
    from ClusterShell.NodeSet import NodeSet

    direct: list[str] = []
    behind: dict[str, list[str]] = {}
    for hop, nodes in router.dispatch(targets):
        if str(hop) == str(nodes):
            direct += list(NodeSet(nodes))
        else:
            behind.setdefault(str(hop), []).extend(NodeSet(nodes))
    return direct, behind


def _clustershells_plan(nodes: list[str], topology: Any, root: str) -> dict[str, Any]:
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Propagation import PropagationTreeRouter

    direct, behind = _dispatched(PropagationTreeRouter(root, topology), NodeSet.fromlist(nodes))
    return {
        "nodes": sorted(direct),
        "gateways": {
            gw: _clustershells_plan(sub, topology, gw) for gw, sub in sorted(behind.items())
        },
    }


@pytest.mark.parametrize(
    "routes",
    [
        "ROOT: gw[1-3]\ngw1: n[1-10]\ngw2: n[11-20]\ngw3: n[21-30]\n",
        "ROOT: gw[1-3]\ngw[1-3]: n[1-20]\n",  # one route, three gateways: balanced
        "ROOT: gw[1-2]\ngw[1-2]: gw[10-13]\ngw[10-13]: n[1-40]\n",
        "ROOT: gw[1-2],gwx\ngw[1-2]: n[1-30]\ngwx: m[01-09],gw[20-21]\ngw[20-21]: p[1-25]\n",
        "ROOT: gw[1-2]\ngw1: n[1-10]\ngw2: n[11-20],gw5\ngw5: n[21-30]\n",
    ],
)
def test_the_plan_spreads_nodes_over_the_gateways_as_clustershells_router_does(
    tmp_path: Path, routes: str
) -> None:
    # shipped_plan spreads route by route; ClusterShell's router node by node (1.4 s
    # for 10,000 nodes). Same plans, for nodes of every route, gateways among the
    # targets, nodes no route holds, in any order.
    conf = topology(tmp_path, "[routes]\n" + routes.replace("ROOT", root_name()))
    topo = _load_topology(conf)
    pool = [
        *(f"n{i}" for i in range(1, 45)), *(f"m{i:02d}" for i in range(1, 12)),
        *(f"p{i}" for i in range(1, 30)), "gw1", "gw2", "gw5", "gw10", "gw20", "other1", "x",
    ]  # fmt: skip
    rng = random.Random(routes)
    for _ in range(25):
        nodes = rng.sample(pool, rng.randint(1, len(pool)))
        assert shipped_plan(nodes, topo, root_name()) == _clustershells_plan(
            nodes, topo, root_name()
        ), nodes


def test_a_target_that_is_an_earlier_routes_gateway_is_reached_directly_as_clustershell_does(
    tmp_path: Path,
) -> None:
    # A topology file cannot say this (ClusterShell refuses a convergent path), but a
    # routing table can: gw1 routes n[1-4] and sits in the next route's network.
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Propagation import PropagationTreeRouter

    conf = topology(tmp_path, f"[routes]\n{root_name()}: gw1\ngw1: n1\n")
    router = PropagationTreeRouter(root_name(), _load_topology(conf))
    router.table = [
        (NodeSet("n[1-4]"), NodeSet("gw1")),
        (NodeSet("gw1,n[5-9]"), NodeSet("gw[2-3]")),
    ]
    targets = NodeSet("gw1,n[1-9],z1")
    direct, behind = _spread(router.table, targets.copy())
    assert (direct, behind) == _dispatched(router, targets.copy())
    assert direct == ["gw1", "z1"] and behind["gw2"] == ["n5", "n7", "n9"]
