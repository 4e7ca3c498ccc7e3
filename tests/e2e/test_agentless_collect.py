"""collect --ship-scanner: nodes with only Python 3, the scanner sent on ssh's standard input.

The shipped program is run by a clean interpreter (`python3 -I -S`: no site
packages, so no spurctl, msgspec or ClusterShell), locally and through real sshd.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.node.shipped_scan import read_scan, scanner_program
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl.sources.tree import Tree, root_name, run_tree
from spurctl_sim import SimCluster
from tests.cli import run_process
from tests.e2e.test_real_openssh import (  # noqa: F401 (a fixture)
    fixture_nodes,
    records,
)
from tests.sshd import SshSite, ssh_site
from tests.unit.test_node_scan import add_process, make_proc, write_cgroup

# Runs the program from stdin as `python3 -` would, then names every module it
# loaded that is not in the standard library (spurctl's own stand-ins aside).
WATCH_IMPORTS = """
import sys
program = sys.stdin.read()
sys.argv = ["-", *sys.argv[1:]]
exec(compile(program, "<stdin>", "exec"), {"__name__": "__main__"})
outside = sorted(
    name for name in sys.modules
    if name.split(".")[0] not in {*sys.stdlib_module_names, "spurctl", "__main__"}
)
print("outside:", ",".join(outside), file=sys.stderr)
"""


def fixture_roots(tmp_path: Path) -> list[str]:
    proc = make_proc(tmp_path)
    cgroup = tmp_path / "cgroup"
    add_process(
        proc, 4242, {"SPUR_JOB_ID": "101", "SPUR_TARGET_NODE": "n1", "SPUR_JOB_GPUS": "0,1"}
    )
    add_process(proc, 4243, {"SLURM_JOB_ID": "102"}, start_ticks=5000)
    write_cgroup(
        cgroup,
        101,
        {
            "cpuset.cpus": "0-3,8-11\n",
            "cpuset.cpus.effective": "0-3,8-11\n",  # read through hostlist's range reader
            "memory.max": "1073741824\n",
        },
    )
    return ["--proc-root", str(proc), "--cgroup-root", str(cgroup), "--hostname", "n1"]


def python3() -> str:
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def test_the_shipped_scanner_runs_in_a_clean_interpreter_on_the_standard_library_only(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [python3(), "-I", "-S", "-c", WATCH_IMPORTS, *fixture_roots(tmp_path)],
        input=scanner_program().decode(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == ["outside: "], run.stderr
    assert [inv.node for inv in read_scan(run.stdout, name="n1")] == ["n1"]


def test_the_shipped_scanner_finds_what_node_inventory_finds(tmp_path: Path) -> None:
    roots = fixture_roots(tmp_path)
    installed = run_process("node-inventory", *roots)
    shipped = subprocess.run(
        [python3(), "-I", "-S", "-", *roots],
        input=scanner_program().decode(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert installed.returncode == 0 and shipped.returncode == 0, installed.stderr + shipped.stderr
    expected = json.loads(installed.stdout)
    (got,) = read_scan(shipped.stdout, name="n1")
    doc = inventory_to_dict(got)
    for d in (expected, doc):
        d.pop("collected_at")
    assert doc == expected
    assert [(h["job_id"], h["cpus"], h["memory_mb"]) for h in doc["held"]] == [
        (101, 8, 1024),
        (102, None, None),
    ]


def test_collect_ship_scanner_through_real_sshd_inventories_nodes_without_spurctl(
    fixture_nodes: SshSite,  # noqa: F811
) -> None:
    site = fixture_nodes
    roots = site.dir / "roots"
    # -I -S: the node's python3 sees no site packages, so no installed spurctl.
    command = site.command(
        f"python3 -I -S - --hostname %h --proc-root {roots}/%h/proc --cgroup-root {roots}/%h/cgroup"
    )
    run = run_process(
        "collect", "--nodes", "n[1-2],refused", "--ship-scanner", "--command", command,
        "--node-timeout", "20", timeout=60,
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    n1 = got["n1"]
    assert n1["error"] is None and n1["source"] == "cgroup+proc", n1
    assert [(h["job_id"], h["pids"]) for h in n1["held"]] == [(101, [4242])]  # type: ignore[union-attr]
    assert n1["target_node"] == "n1"
    assert got["n2"]["error"] is None and got["n2"]["held"] == []
    refused = got["refused"]["error"]
    assert isinstance(refused, str) and "Permission denied (publickey)" in refused


def test_a_node_that_prints_an_inventory_instead_of_the_scanners_answer_is_an_error(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "inv.json"
    doc.write_text(json.dumps({"schema": "spurctl.inventory/v1", "node": "n1", "held": []}) + "\n")
    run = run_process(
        "collect",
        "--nodes",
        "n1",
        "--ship-scanner",
        "--command",
        f"sh -c 'cat {doc}' %h",
        timeout=60,
    )
    assert run.returncode == 1
    error = records(run.stdout)["n1"]["error"]
    assert isinstance(error, str) and "not a spurctl.node-scan/v1 document" in error, error


@pytest.fixture
def deep_tree(tmp_path: Path) -> Iterator[tuple[SshSite, Path]]:
    """n1 a gateway for down, badkey, refused and two gateways: n2 (for n3, which holds
    job 101) and hang (for n4); only n3's roots exist, as no other node is reached."""
    roots = tmp_path / "roots"
    (roots / "n3").mkdir(parents=True)
    make_proc(roots / "n3")
    add_process(roots / "n3" / "proc", 4242, {"SPUR_JOB_ID": "101", "SPUR_TARGET_NODE": "n3"})
    write_cgroup(roots / "n3" / "cgroup", 101, {"cpuset.cpus": "0-3", "cgroup.procs": "4242\n"})
    topology = tmp_path / "topology.conf"
    topology.write_text(
        f"[routes]\n{root_name()}: n1\nn1: n2,down,badkey,refused,hang\nn2: n3\nhang: n4\n"
    )
    with ssh_site(tmp_path, ["n1", "n2", "n3", "n4"]) as site:
        yield site, topology


def test_the_gateway_tree_ships_the_scanner_through_real_sshd_and_names_each_failure(
    deep_tree: tuple[SshSite, Path],
) -> None:
    site, topology = deep_tree
    roots = site.dir / "roots"
    node = "$SPURCTL_TEST_NODE"  # one command for every node: the session names it
    # -I -S on the node: no site packages, so no spurctl; the gateways' relay runs so too.
    remote = (
        f"python3 -I -S - --hostname {node} "
        f"--proc-root {roots}/{node}/proc --cgroup-root {roots}/{node}/cgroup"
    )
    run = run_process(
        "collect", "--nodes", "n[3-4],down,badkey,refused", "--topology", str(topology),
        "--ship-scanner", "--ssh", site.ssh(), "--remote-command", remote,
        "--node-timeout", "4", timeout=90,
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert sorted(got) == ["badkey", "down", "n3", "n4", "refused"]
    n3 = got["n3"]  # two gateways down: n1, then n2
    assert n3["error"] is None and n3["source"] == "cgroup+proc", n3
    assert [(h["job_id"], h["pids"]) for h in n3["held"]] == [(101, [4242])]  # type: ignore[union-attr]
    assert got["down"]["error"] == (
        f"command exited with status 255: ssh: connect to host 127.0.0.4 port {site.port}: "
        "Connection refused"
    )
    assert got["badkey"]["error"] == (
        "command exited with status 255: Host key verification failed."
    )
    user = os.environ.get("USER") or "root"
    assert got["refused"]["error"] == (
        f"command exited with status 255: {user}@127.0.0.2: Permission denied (publickey)."
    )
    assert got["n4"]["error"] == "gateway hang did not answer within 4 s"
    for name in ("down", "badkey", "refused", "n4"):
        assert got[name]["held"] == [] and got[name]["source"] == "collect"
    assert "collected 1 of 5 nodes" in run.stderr


def test_a_gateway_that_cannot_be_reached_fails_each_of_its_nodes_never_empty(
    deep_tree: tuple[SshSite, Path], tmp_path: Path
) -> None:
    site = deep_tree[0]
    topology = tmp_path / "down.conf"
    topology.write_text(f"[routes]\n{root_name()}: down\ndown: n[2-3]\n")
    run = run_process(
        "collect", "--nodes", "n[2-3]", "--topology", str(topology), "--ship-scanner",
        "--ssh", site.ssh(), "--node-timeout", "4", timeout=60,
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    reason = (
        f"gateway down failed: ssh: connect to host 127.0.0.4 port {site.port}: Connection refused"
    )
    assert [got[n]["error"] for n in ("n2", "n3")] == [reason, reason]
    assert all(got[n]["held"] == [] for n in ("n2", "n3"))


def test_audit_collect_ship_scanner_audits_nodes_without_spurctl_through_real_sshd(
    fixture_nodes: SshSite,  # noqa: F811
    lone_controller: SimCluster,
) -> None:
    site = fixture_nodes
    roots = site.dir / "roots"
    command = site.command(
        f"python3 -I -S - --hostname %h --proc-root {roots}/%h/proc --cgroup-root {roots}/%h/cgroup"
    )
    run = run_process(
        "audit", "--controller", lone_controller.controller_address, "--nodes", "n[1-2]",
        "--collect", "--ship-scanner", "--command", command, "--format", "json", timeout=60,
    )  # fmt: skip

    doc = json.loads(run.stdout)
    assert doc["summary"]["nodes_inventoried"] == 2, run.stderr
    # The controller has never heard of n1: what n1 holds is found and reported, never healthy.
    held = [f for f in doc["findings"] if f["node"] == "n1" and f.get("job_id") == 101]
    assert held and all(f["action"] != "none" for f in held), doc["findings"]


def test_the_shipped_tree_reports_each_node_once_as_its_answer_arrives(
    deep_tree: tuple[SshSite, Path],
) -> None:
    site, topology = deep_tree
    ticks: list[float] = []
    tree = Tree(topology, "python3 -I -S - --hostname $SPURCTL_TEST_NODE", site.ssh())
    nodes = ["n4", "down", "badkey"]
    t0 = time.monotonic()

    got = run_tree(
        nodes, tree, 64, 4.0, lambda: ticks.append(time.monotonic() - t0), ship_scanner=True
    )
    wall = time.monotonic() - t0

    assert len(ticks) == 3
    # down and badkey answer at once; n4 waits for its gateway (hang) to be given up.
    assert ticks[1] < 3.0 < ticks[2] <= wall, (ticks, wall)
    assert got["n4"].gateway_error == "gateway hang did not answer within 4 s"
    assert got["down"].rc == 255 and got["down"].via == "n1"
    assert got["badkey"].rc == 255 and got["badkey"].gateway_error is None


def test_the_shipped_scanner_reads_spurstepd_sessions_as_node_inventory_does(
    tmp_path: Path,
) -> None:
    # An allocation-only job (Spur #754): only its supervisor and its descriptor show it.
    roots = fixture_roots(tmp_path)
    proc = tmp_path / "proc"
    add_process(proc, 4900, {}, start_ticks=1400, comm="spurstepd")
    (proc / "4900" / "comm").write_text("spurstepd\n")
    state = tmp_path / "state"
    session = state / "runtime" / "77.0.4294967293"
    session.mkdir(parents=True)
    descriptor = {"format_version": 1, "job_id": 77, "run_attempt": 0, "step_id": 4294967293}
    descriptor |= {"pid": 4900, "process_start_ticks": 1400, "cgroup_path": ""}
    (session / "descriptor.json").write_text(json.dumps(descriptor))
    roots += ["--state-dir", str(state)]
    installed = run_process("node-inventory", *roots)
    shipped = subprocess.run(
        [python3(), "-I", "-S", "-", *roots],
        input=scanner_program().decode(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert installed.returncode == 0 and shipped.returncode == 0, installed.stderr + shipped.stderr
    expected = json.loads(installed.stdout)
    (got,) = read_scan(shipped.stdout, name="n1")
    doc = inventory_to_dict(got)
    for d in (expected, doc):
        d.pop("collected_at")
    assert doc == expected
    (held,) = [h for h in doc["held"] if h["job_id"] == 77]
    assert held["sessions"] == [
        {"attempt": 0, "step": 4294967293, "supervisor": 4900, "binding": "live"}
    ]
    assert held["traces"] == ["process", "session"]
