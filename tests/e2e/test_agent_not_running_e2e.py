"""node-inventory on a node where no spurd runs, through the real CLI into audit and explain.

The node is a fixture /proc (tests/unit/test_node_scan.py's) holding job 5077, which the
incident controller runs on gpu024 (SUSPENDED, healthy): with spurd running the node is
clean; without it the audit must not call it clean.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from spurctl_sim import SimCluster
from tests.cli import run_cli, stderr_lines
from tests.unit.test_node_scan import add_process, make_proc


def _node(tmp_path: Path, *, spurd: bool) -> Path:
    proc = make_proc(tmp_path)
    # Booted a minute ago, so the run (10 s after boot) started after job 5077's submission.
    (proc / "stat").write_text(f"cpu  1 2 3 4\nbtime {int(time.time()) - 60}\n")
    add_process(proc, 4242, {"SPUR_JOB_ID": "5077", "SPUR_TARGET_NODE": "gpu024"})
    if spurd:
        add_process(proc, 2201, {"PATH": "/usr/bin"}, start_ticks=100, comm="spurd")
        (proc / "2201" / "comm").write_text("spurd\n")
    (proc / "4242" / "comm").write_text("python3\n")
    return proc


def _inventory(tmp_path: Path, *, spurd: bool, hostname: str = "gpu024") -> tuple[Path, str]:
    proc = _node(tmp_path, spurd=spurd)
    out = tmp_path / "gpu024.json"
    run = run_cli(
        "node-inventory", "--proc-root", str(proc), "--cgroup-root", str(tmp_path / "none"),
        "--hostname", hostname, "-o", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return out, run.stderr


def _audit(sim: SimCluster, inventory: Path) -> tuple[int, dict[str, Any]]:
    run = run_cli(
        "audit", "--controller", sim.controller_address, "--nodes", "gpu024",
        "--inventory", str(inventory), "--format", "json",
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def test_node_inventory_without_spurd_says_so_and_the_audit_never_calls_the_node_clean(
    tmp_path: Path, lone_controller: SimCluster
) -> None:
    inventory, stderr = _inventory(tmp_path, spurd=False)

    doc = json.loads(inventory.read_text())
    assert "agent" in doc and doc["agent"] is None
    assert [h["job_id"] for h in doc["held"]] == [5077]
    (line,) = [ln for ln in stderr.splitlines() if "spurd" in ln]
    assert line.startswith("spurctl: warning: no spurd process is running on gpu024")
    assert "agent-not-running" in line

    status, report = _audit(lone_controller, inventory)
    assert status == 1
    (finding,) = [f for f in report["findings"] if f["kind"] == "agent-not-running"]
    assert (finding["node"], finding["action"], finding["job_id"]) == (
        "gpu024",
        "investigate",
        None,
    )
    assert "no spurd process was running on gpu024" in finding["reason"]
    assert "holds job 5077" in finding["reason"]
    assert report["summary"]["by_kind"].get("agent-not-running") == 1


def test_the_same_node_with_spurd_running_audits_clean(
    tmp_path: Path, lone_controller: SimCluster
) -> None:
    inventory, stderr = _inventory(tmp_path, spurd=True)

    assert json.loads(inventory.read_text())["agent"]["pid"] == 2201
    assert "no spurd" not in stderr
    status, report = _audit(lone_controller, inventory)
    assert (status, report["findings"]) == (0, [])
    # Clean, and still the audit says the inventory was taken under another host's name.
    own = socket.gethostname()
    assert [n for n in report["notes"] if "--hostname" in n] == [
        "1 inventory was taken with a node-inventory --hostname other than the host's own "
        f"name: gpu024 (host {own}); it is judged as the node named, so check that "
        "--hostname named the right node"
    ]


def test_a_hostname_other_than_the_hosts_own_is_in_the_document_the_audit_and_explain(
    tmp_path: Path, lone_controller: SimCluster
) -> None:
    own = socket.gethostname()
    assert own != "gpu024"
    inventory, stderr = _inventory(tmp_path, spurd=False)

    doc = json.loads(inventory.read_text())
    assert (doc["node"], doc["hostname"]) == ("gpu024", own)
    assert f"(host {own}, --hostname gpu024)" in stderr
    _, report = _audit(lone_controller, inventory)
    (finding,) = [f for f in report["findings"] if f["kind"] == "agent-not-running"]
    assert f"(scanned on host {own} with --hostname gpu024)" in finding["reason"]

    run = run_cli(
        "explain", "gpu024", "--controller", lone_controller.controller_address,
        "--inventory", str(inventory),
    )  # fmt: skip
    assert run.returncode == 0, stderr_lines(run)
    text = run.stdout
    assert f"{own} (the host's own name; node-inventory was given --hostname gpu024)" in text
    assert "NOT RUNNING (the scan found no spurd)" in text
    assert f"gpu024 (host {own}); it is judged as the node named" in text
    assert "agent-not-running" in text

    held = run_cli(
        "explain", "gpu024", "5077", "--controller", lone_controller.controller_address,
        "--inventory", str(inventory), "--format", "json",
    )  # fmt: skip
    assert held.returncode == 0, stderr_lines(held)
    explained = json.loads(held.stdout)
    assert explained["inventory"]["agent_not_running"] is True
    assert explained["inventory"]["hostname_given"] is True
    guards = {g["guard"]: g["detail"] for g in explained["job"]["guards"]}
    assert f"scanned on host {own} with --hostname gpu024" in guards["agent-not-running"]
