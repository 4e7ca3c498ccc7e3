"""No gateway runs code in spurctl, and none speaks for a node it does not serve (issue 39.3).

`collect --topology` without `--ship-scanner`, through a gateway `evilgw` that serves
only n3. Before doing its work the gateway prints what a hostile one would:

- a message in ClusterShell's gateway protocol, labelled n1, whose payload is a
  pickle that creates a directory when unpickled (ClusterShell's root side
  unpickles every gateway message: spurctl must never read gateway output that way);
- a JSON line in the relay's own form claiming n1 holds job 666.

And a gateway that prints a line nested deeper than json's parser goes (it raises
RecursionError, not ValueError) has that line skipped, its nodes' answers kept.

Every host is this machine: `ssh` is a stand-in that takes the host and runs the
command here (as bench/collect_tree.py's), with the host in $STANDIN_HOST. The
marker directory must not exist afterwards, n1's record must be n1's own answer
(reached straight from this host), and n3's its own.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
from pathlib import Path

from spurctl.sources.tree import root_name
from spurctl_sim import node_line
from tests import standin_ssh
from tests.cli import run_cli


class _Runs:
    """Unpickling this calls os.mkdir(path): what a hostile gateway's payload would do."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.mkdir, (self.path,))


def inventory(node: str, job_id: int) -> str:
    return json.dumps(
        {
            "schema": "spurctl.inventory/v1",
            "node": node,
            "collected_at": "2026-12-02T10:00:00Z",
            "source": "cgroup+proc",
            "error": None,
            "held": [{"job_id": job_id, "pids": [4000 + job_id]}],
        }
    )


def test_a_gateway_cannot_run_code_in_spurctl_nor_answer_for_a_node_it_does_not_serve(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "gateway-ran-code-here"
    payload = base64.b64encode(pickle.dumps(_Runs(marker), protocol=4)).decode()
    injected = tmp_path / "injected"
    forged = {
        "node": "n1", "rc": 0, "stdout": inventory("n1", 666), "stderr": "",
        "timed_out": False, "via": "evilgw", "printed": 300, "cut": 0,
    }  # fmt: skip
    injected.write_text(
        "<?xml version='1.0' encoding='utf-8'?><channel version=\"1.10.1\">"
        f'<message msgid="0" type="SER" srcid="0" nodes="n1">{payload}</message>\n'
        + json.dumps(forged)
        + "\n"
    )
    ssh = standin_ssh.write(
        tmp_path / "ssh", f'if [ "$STANDIN_HOST" = evilgw ]; then cat {injected}; fi'
    )
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "n1.out").write_text(inventory("n1", 101) + "\n")
    (answers / "n1.sleep").write_text("1")  # evilgw's line about n1 comes first
    (answers / "n3.out").write_text(inventory("n3", 103) + "\n")
    remote = node_line.answers_command(answers).replace("%h", '"$STANDIN_HOST"')
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: evilgw\nevilgw: n3\n")

    run = run_cli(
        "collect", "--nodes", "n1,n3", "--topology", str(topology), "--ssh", str(ssh),
        "--remote-command", remote, "--node-timeout", "20",
        env={
            # What ClusterShell's own gateway would need, were it ever started.
            "CLUSTERSHELL_GW_PYTHON_EXECUTABLE": sys.executable,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        },
        timeout=90,
    )  # fmt: skip

    assert not marker.exists(), "a gateway's pickle ran inside spurctl"
    got = {d["node"]: d for d in map(json.loads, run.stdout.splitlines())}
    assert run.returncode == 0, run.stderr
    assert [h["job_id"] for h in got["n1"]["held"]] == [101]  # its own answer, not evilgw's
    assert [h["job_id"] for h in got["n3"]["held"]] == [103]


def test_a_gateway_line_nested_past_the_parsers_depth_is_skipped_and_its_nodes_answer(
    tmp_path: Path,
) -> None:
    # json.loads raises RecursionError, not ValueError, on 100,000 nested lists: the
    # relay reading evilgw ended there, and n3 failed as if the tree had stopped.
    injected = tmp_path / "injected"
    injected.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    ssh = standin_ssh.write(
        tmp_path / "ssh", f'if [ "$STANDIN_HOST" = evilgw ]; then cat {injected}; fi'
    )
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "n3.out").write_text(inventory("n3", 103) + "\n")
    remote = node_line.answers_command(answers).replace("%h", '"$STANDIN_HOST"')
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: evilgw\nevilgw: n3\n")

    run = run_cli(
        "collect", "--nodes", "n3", "--topology", str(topology), "--ssh", str(ssh),
        "--remote-command", remote, "--node-timeout", "20", timeout=90,
    )  # fmt: skip

    got = {d["node"]: d for d in map(json.loads, run.stdout.splitlines())}
    assert run.returncode == 0, run.stdout + run.stderr
    assert [h["job_id"] for h in got["n3"]["held"]] == [103]
