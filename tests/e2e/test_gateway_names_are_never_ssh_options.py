"""A gateway or node name never reaches ssh as an option (issue 48.6): a topology naming
a gateway `-F...` or `-oProxyCommand=...` is refused before anything runs, and every ssh
the relay starts ends ssh's options with `--` before the name, so a name that got that
far is a destination ssh refuses, never an option it obeys. Real OpenSSH where the harm
is ssh's own (a ProxyCommand run here); the tests' stand-in ssh where what is pinned is
which word ssh takes for the host."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spurctl.node import gateway_relay
from spurctl.sources.output_cap import OUTPUT_CAP
from spurctl.sources.tree import root_name
from tests import standin_ssh
from tests.cli import one_line_error, run_cli


def run_relay(ssh: str, plan: dict[str, Any], remote: str) -> list[dict[str, Any]]:
    """The relay as a gateway runs it (`python3 -I -S -`, its program on stdin): its lines."""
    data = {
        "relay": Path(gateway_relay.__file__).read_text(encoding="utf-8"),
        "scanner": "",
        "cap": OUTPUT_CAP,
        "ssh": ssh,
        "remote": remote,
        "fanout": 4,
        "timeout": 20.0,
        "name": "gw0",
        "plan": plan,
    }
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-"],
        input=gateway_relay.program(data),
        capture_output=True,
        timeout=60,
        check=False,
    )
    return [json.loads(line) for line in proc.stdout.splitlines()][1:]


def test_a_topology_naming_a_gateway_like_an_option_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ssh-ran"
    ssh = standin_ssh.write(tmp_path / "ssh", prelude=f"touch {marker}")
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: -Fevil,gw1\n-Fevil: gpu[1-2]\ngw1: gpu[3-4]\n")
    run = run_cli(
        "collect", "--nodes", "gpu[1-4]", "--topology", str(topology), "--ssh", str(ssh),
        home=tmp_path,
    )  # fmt: skip
    line = one_line_error(run, f"--topology {topology}", "gateway '-Fevil'", "starts with '-'")
    assert "option" in line
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_a_node_named_like_an_ssh_option_is_a_destination_not_a_proxy_command(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "proxy-command-ran"
    node = f"-oProxyCommand=touch {marker}"
    got = run_relay("ssh", {"nodes": [node], "gateways": {}}, remote="true")
    assert [d["node"] for d in got] == [node]
    assert got[0]["rc"] != 0
    assert not marker.exists(), "ssh read the node's name as an option and ran its command"


def test_a_gateway_named_like_an_option_is_what_ssh_connects_to(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    ssh = standin_ssh.write(tmp_path / "ssh", prelude=f'echo "$STANDIN_HOST" >> {hosts}; exit 1')
    plan = {"nodes": [], "gateways": {"-Fevil": {"nodes": ["gpu1"], "gateways": {}}}}
    got = run_relay(str(ssh), plan, remote="true")
    assert hosts.read_text().splitlines() == ["-Fevil"]
    assert got[0]["node"] == "gpu1" and got[0]["gateway_error"].startswith("gateway -Fevil")
