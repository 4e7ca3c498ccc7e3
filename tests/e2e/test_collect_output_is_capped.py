"""One node printing hundreds of megabytes cannot drive the collector to gigabytes (issue 39.11).

A node `big` prints 256 MiB (1 KiB lines) instead of an inventory; its neighbour n2
answers as usual. Straight from this host (`collect --command`) and through a
gateway (`collect --topology`, the relay on the gateway side), the collect ends
with `big`'s error record saying how much it printed and how much was cut, n2's
inventory, and no process of the run ever larger than half the flood: whatever
held the node's output whole would be at least the whole flood. The peak is read
from getrusage(RUSAGE_CHILDREN) in a fresh parent that runs only the collect
(every process of the run is its descendant and is waited for).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from spurctl.sources.output_cap import OUTPUT_CAP
from spurctl.sources.tree import root_name
from tests import standin_ssh
from tests.cli import clean_env, home_for, spurctl_argv

FLOOD = 256 * 1024 * 1024
# Runs ARGV, then reports on stderr the largest resident size (KiB) of any process it waited for.
PEAK = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:]).returncode\n"
    "print('peak', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(rc)\n"
)
INVENTORY = {
    "schema": "spurctl.inventory/v1",
    "node": "n2",
    "collected_at": "2026-12-02T10:00:00Z",
    "source": "cgroup+proc",
    "error": None,
    "held": [{"job_id": 102}],
}


def node_script(tmp_path: Path) -> Path:
    """`node.sh NODE`: big floods its stdout, n2 prints its inventory."""
    (tmp_path / "n2.out").write_text(json.dumps(INVENTORY) + "\n")
    flood = (
        "import sys; line = b'x' * 1023 + b'\\n'; w = sys.stdout.buffer.write\n"
        f"for _ in range({FLOOD // 1024}): w(line)\n"
    )
    (tmp_path / "flood.py").write_text(flood)
    script = tmp_path / "node.sh"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            if [ "$1" = big ]; then exec {sys.executable} -I -S {tmp_path}/flood.py; fi
            exec cat {tmp_path}/"$1".out
            """
        )
    )
    script.chmod(0o755)
    return script


def collect_with_peak(tmp_path: Path, *args: str) -> tuple[int, dict[str, dict], int]:  # type: ignore[type-arg]
    import subprocess

    out = tmp_path / "inventories.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK,
            *spurctl_argv("collect", "--nodes", "big,n2", "-o", str(out), *args),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(
            home_for(tmp_path / "home"),
            CLUSTERSHELL_GW_PYTHON_EXECUTABLE=sys.executable,  # were ClusterShell's gateway used
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        ),
        stdin=subprocess.DEVNULL,
    )
    peak = [line for line in proc.stderr.splitlines() if line.startswith("peak ")]
    assert peak, proc.stderr[-2000:]
    records = {d["node"]: d for d in map(json.loads, out.read_text().splitlines())}
    return proc.returncode, records, int(peak[-1].split()[1]) * 1024


def check(rc: int, records: dict[str, dict], peak: int, *, n2: bool = True) -> None:  # type: ignore[type-arg]
    assert peak < FLOOD // 2, f"a process of the collect reached {peak / 2**20:.0f} MiB"
    assert rc == 1
    if n2:  # the other node's answer is untouched
        assert records["n2"]["error"] is None and records["n2"]["held"][0]["job_id"] == 102
    cut = FLOOD - OUTPUT_CAP
    assert records["big"]["error"].startswith(
        f"printed {FLOOD:,} bytes, more than the {OUTPUT_CAP:,} an inventory may take: "
        f"{cut:,} bytes cut"
    ), records["big"]["error"]
    assert records["big"]["held"] == []


def test_one_node_flooding_its_output_is_capped_in_the_direct_fan_out(tmp_path: Path) -> None:
    script = node_script(tmp_path)
    check(*collect_with_peak(tmp_path, "--command", f"{script} %h", "--node-timeout", "120"))


@pytest.mark.parametrize("ship", [False, True], ids=["remote-command", "ship-scanner"])
def test_one_node_flooding_its_output_is_capped_on_the_gateway(tmp_path: Path, ship: bool) -> None:
    script = node_script(tmp_path)
    ssh = standin_ssh.write(tmp_path / "ssh")
    topology = tmp_path / "topology.conf"
    topology.write_text(f"[routes]\n{root_name()}: gw1\ngw1: big,n2\n")
    rc, records, peak = collect_with_peak(
        tmp_path, "--topology", str(topology), "--ssh", str(ssh),
        "--remote-command", f'{script} "$STANDIN_HOST"', "--node-timeout", "120",
        *(["--ship-scanner"] if ship else []),
    )  # fmt: skip
    # With --ship-scanner n2's answer is read as a scan, which an inventory document is not.
    check(rc, records, peak, n2=not ship)
