"""collect, audit --collect, reclaim --verify-inventory and the gateway tree through real OpenSSH.

tests/sshd.py starts the test's own sshd on 127.0.0.x and an ssh_config naming
each address as a node; every command here goes through /usr/bin/ssh and sshd
for real. The nodes run this checkout's `spurctl node-inventory` on fixture
/proc and cgroup trees, or print their line of the simulated cluster's live
inventory (what a node shows after a real cancel).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.sources.tree import root_name
from spurctl_sim import SimCluster
from spurctl_sim import node_line as simulated_node
from tests.cli import run_process
from tests.e2e.test_reclaim_confirm import NODES, SENT, kept_fresh
from tests.reclaim import cancelled
from tests.sshd import SshSite, ssh_site
from tests.unit.test_node_scan import add_process, make_proc, write_cgroup

SPURCTL = Path(sys.executable).with_name("spurctl")
TIMEOUT = 4.0


def node_line(tmp_path: Path, live: Path) -> str:
    """The remote command: the node's line of the live inventory (what its agent holds now)."""
    return simulated_node.command(live)


def records(stdout: str) -> dict[str, dict[str, object]]:
    return {d["node"]: d for d in map(json.loads, stdout.splitlines())}


@pytest.fixture
def fixture_nodes(tmp_path: Path) -> Iterator[SshSite]:
    """n1 holds job 101 (a process and a cgroup), n2 holds nothing; and the failing nodes."""
    roots = tmp_path / "roots"
    for node in ("n1", "n2"):
        (roots / node).mkdir(parents=True)
        make_proc(roots / node)
        (roots / node / "cgroup").mkdir()
    add_process(roots / "n1" / "proc", 4242, {"SPUR_JOB_ID": "101", "SPUR_TARGET_NODE": "n1"})
    write_cgroup(roots / "n1" / "cgroup", 101, {"cpuset.cpus": "0-3", "cgroup.procs": "4242\n"})
    with ssh_site(tmp_path, ["n1", "n2"]) as site:
        yield site


def scan_command(site: SshSite) -> str:
    roots = site.dir / "roots"
    return site.command(
        f"{SPURCTL} node-inventory --hostname %h "
        f"--proc-root {roots}/%h/proc --cgroup-root {roots}/%h/cgroup"
    )


def test_collect_through_real_sshd_reads_each_node_and_names_each_failure(
    fixture_nodes: SshSite,
) -> None:
    site = fixture_nodes
    run = run_process(
        "collect", "--nodes", "n[1-2],down,hang,badkey,refused",
        "--command", scan_command(site), "--timeout", str(TIMEOUT), timeout=60,
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert sorted(got) == ["badkey", "down", "hang", "n1", "n2", "refused"]
    n1 = got["n1"]
    assert n1["error"] is None and n1["source"] == "cgroup+proc"
    held = n1["held"]
    assert isinstance(held, list) and [(h["job_id"], h["pids"], h["traces"]) for h in held] == [
        (101, [4242], ["cgroup", "process"])
    ]
    assert n1["target_node"] == "n1"
    assert got["n2"]["error"] is None and got["n2"]["held"] == []
    port, user = site.port, os.environ.get("USER") or "root"
    down = f"command exited with status 255: ssh: connect to host 127.0.0.4 port {port}: "
    assert got["down"]["error"] == down + "Connection refused"
    assert got["hang"]["error"] == f"no answer within {TIMEOUT:g} s; command killed"
    assert got["badkey"]["error"] == (
        "command exited with status 255: Host key verification failed."
    )
    assert got["refused"]["error"] == (
        f"command exited with status 255: {user}@127.0.0.2: Permission denied (publickey)."
    )
    for node in ("down", "hang", "badkey", "refused"):
        assert got[node]["held"] == [] and got[node]["source"] == "collect"
    assert "collected 2 of 6 nodes" in run.stderr


@pytest.fixture
def cluster_nodes(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> Iterator[tuple[SimCluster, SshSite, Path]]:
    """The incident cluster's nodes behind real sshd; each prints its line of `live`."""
    sim = incident_cluster[0]
    live = sim.write_inventories(tmp_path / "live.jsonl")
    with ssh_site(tmp_path, sorted(sim.state.nodes)) as site:
        yield sim, site, live


def test_audit_collect_through_real_sshd_matches_the_inventory_file(
    cluster_nodes: tuple[SimCluster, SshSite, Path], tmp_path: Path
) -> None:
    sim, site, live = cluster_nodes
    command = site.command(node_line(tmp_path, live))

    over_ssh = run_process(
        "audit", "--controller", sim.controller_address, "--collect", "--command", command,
        "--format", "json", timeout=90,
    )  # fmt: skip
    from_file = run_process(
        "audit", "--controller", sim.controller_address, "--inventory", str(live),
        "--format", "json",
    )  # fmt: skip

    assert over_ssh.returncode == from_file.returncode == 1, over_ssh.stderr

    def findings(stdout: str) -> list[tuple[object, ...]]:
        return [(f["node"], f.get("job_id"), f["kind"]) for f in json.loads(stdout)["findings"]]

    assert findings(over_ssh.stdout) == findings(from_file.stdout)
    assert json.loads(over_ssh.stdout)["summary"]["nodes_inventoried"] == 24


def test_reclaim_verify_inventory_confirms_each_cancel_through_real_sshd(
    cluster_nodes: tuple[SimCluster, SshSite, Path], tmp_path: Path
) -> None:
    sim, site, live = cluster_nodes
    plan_from = sim.write_inventories(tmp_path / "plan.jsonl")
    (tmp_path / "agents.json").write_text(json.dumps(sim.agent_map()))

    with kept_fresh(sim, live):
        run = run_process(
            "reclaim", "--controller", sim.controller_address, "--node", NODES,
            "--inventory", str(plan_from), "--verify-inventory", "--settle", "0.5",
            "--command", site.command(node_line(tmp_path, live)),
            "--agent-map", str(tmp_path / "agents.json"), "--journal", str(tmp_path / "j.jsonl"),
            "--yes", timeout=90,
        )  # fmt: skip

    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(cancelled(sim)) == sorted(SENT)
    assert "Confirmed: a re-collect of 3 nodes no longer shows 3 jobs." in run.stdout


def test_the_gateway_tree_runs_over_real_sshd_and_names_failed_nodes_and_gateways(
    fixture_nodes: SshSite, tmp_path: Path
) -> None:
    site = fixture_nodes
    roots = site.dir / "roots"
    # n1 is the gateway (a real ClusterShell gateway over ssh) for n2 and the failing nodes.
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: n1\nn1: n2,down,hang,badkey\n")
    node = "$SPURCTL_TEST_NODE"  # one command for every node: the session names it
    remote = (
        f"{SPURCTL} node-inventory --hostname {node} "
        f"--proc-root {roots}/{node}/proc --cgroup-root {roots}/{node}/cgroup"
    )
    run = run_process(
        "collect", "--nodes", "n2,down,hang,badkey", "--topology", str(topology),
        "--ssh", site.ssh(), "--remote-command", remote, "--timeout", str(TIMEOUT),
        env={"CLUSTERSHELL_GW_PYTHON_EXECUTABLE": sys.executable}, timeout=90,
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert sorted(got) == ["badkey", "down", "hang", "n2"]
    assert got["n2"]["error"] is None and got["n2"]["held"] == []
    assert got["hang"]["error"] == f"no answer within {TIMEOUT:g} s; killed by gateway n1"
    down = got["down"]["error"]
    assert isinstance(down, str) and "Connection refused" in down, down
    badkey = got["badkey"]["error"]
    assert isinstance(badkey, str) and "Host key verification failed." in badkey, badkey


def test_a_node_that_refuses_the_key_behind_a_gateway_is_named_with_sshds_refusal(
    fixture_nodes: SshSite, tmp_path: Path
) -> None:
    site = fixture_nodes
    roots = site.dir / "roots"
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: n1\nn1: n2,refused\n")
    node = "$SPURCTL_TEST_NODE"
    remote = (
        f"{SPURCTL} node-inventory --hostname {node} "
        f"--proc-root {roots}/{node}/proc --cgroup-root {roots}/{node}/cgroup"
    )
    run = run_process(
        "collect", "--nodes", "n2,refused", "--topology", str(topology),
        "--ssh", site.ssh(), "--remote-command", remote, "--timeout", str(TIMEOUT),
        env={"CLUSTERSHELL_GW_PYTHON_EXECUTABLE": sys.executable}, timeout=90,
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert got["n2"]["error"] is None
    refused = got["refused"]["error"]
    assert isinstance(refused, str) and "Permission denied (publickey)" in refused, refused
    assert got["refused"]["held"] == []
