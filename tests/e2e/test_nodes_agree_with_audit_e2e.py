"""Issue 53.8: `spurctl nodes` reads as sinfo does, at 80 columns and with sinfo's -t names.

The incident: gpu013 and gpu014 hold below- and above-watermark ids (the longest kinds),
gpu021's inventory calls itself gpu021.cluster.local; gpu012 runs job 4950 and (its spurd
restarted at 05:00, after its runs began) holds agent orphans, so `spurctl drain` leaves
it DRAINING while 4950 runs.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from spurctl_sim import SimCluster, incident
from tests.cli import on_screen, run_cli


def test_nodes_at_80_columns_keeps_its_heading_and_one_line_per_node_where_it_fits(
    tmp_path: Path,
) -> None:
    with SimCluster(incident()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        args = ["nodes", "--controller", sim.controller_address, "--inventory", str(inventory)]
        status, lines = on_screen(*args, "--ack-version", "0.8.0", home=tmp_path, height=60)
        assert status == 0, "\n".join(lines)
        assert all(len(line) <= 80 for line in lines), "\n".join(lines)
        (heading,) = [ln for ln in lines if ln.startswith("node ")]
        assert heading.split() == ["node", "state", "jobs", "held", "agent", "inv-age", "findings"]
        rows = {ln.split()[0]: ln for ln in lines if re.match(r"gpu\d{3} ", ln)}
        assert len(rows) == 24
        # A short finding stays on its node's line; a long one carries on under it.
        assert rows["gpu003"].split()[-1] == "active-elsewhere"
        at = lines.index(rows["gpu013"])
        assert lines[at + 1] == "  below-watermark-unknown"


def test_nodes_takes_sinfos_state_names_and_drain_means_drained_or_draining(
    tmp_path: Path,
) -> None:
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with SimCluster(scenario) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        view = ["--controller", sim.controller_address, "--inventory", str(inventory)]
        journal = ["--journal", str(tmp_path / "journal.jsonl")]
        drained = run_cli("drain", "--node", "gpu012", *view, *journal, "--yes", home=tmp_path)
        assert drained.returncode == 0, drained.stdout + drained.stderr
        assert sim.node("gpu012").state.name == "DRAINING"

        def listed(*states: str) -> list[str]:
            run = run_cli("nodes", *view, *journal, *states, "--no-header", home=tmp_path)
            assert run.returncode == 0, run.stderr
            return [ln.split()[0] for ln in run.stdout.splitlines()]

        assert listed("-t", "drain") == ["gpu012"]  # as sinfo -t drain: draining too
        assert listed("-t", "drng") == listed("-t", "draining") == ["gpu012"]
        assert listed("-t", "drain*") == ["gpu012"]  # sinfo's not-responding flag
        assert listed("-t", "drained") == []


def test_nodes_without_inventories_lists_the_controllers_columns_and_each_reason(
    tmp_path: Path,
) -> None:
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with SimCluster(scenario) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        view = ["--controller", sim.controller_address]
        journal = ["--journal", str(tmp_path / "journal.jsonl")]
        drained = run_cli(
            "drain", "--node", "gpu012", *view, "--inventory", str(inventory), *journal, "--yes",
            home=tmp_path,
        )  # fmt: skip
        assert drained.returncode == 0, drained.stdout + drained.stderr
        # As sinfo: no inventory is no refusal, every agent not-inventoried.
        run = run_cli("nodes", *view, *journal, home=tmp_path)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        rows = [ln.split() for ln in lines if re.match(r"gpu\d{3} ", ln)]
        assert len(rows) == 24 and {r[4] for r in rows} == {"not-inventoried"}
        # As sinfo -R: the reason, who set it where the controller says, and when.
        at = lines.index(next(ln for ln in lines if ln.startswith("who ")))
        assert lines[at].split() == ["who", "when", "nodes", "reason"]
        reasons = {re.split(r"\s{2,}", ln)[2]: re.split(r"\s{2,}", ln) for ln in lines[at + 1 :]}
        assert reasons["gpu[003-005]"] == ["-", "-", "gpu[003-005]", "Not responding"]
        ours = reasons["gpu012"]
        assert ours[1].endswith(" UTC") and ours[3].startswith("spurctl: agent-orphan job")
        doc = json.loads(run_cli("nodes", *view, *journal, "--json", home=tmp_path).stdout)
        (row,) = [n for n in doc["nodes"] if n["node"] == "gpu012"]
        assert row["reason"].startswith("spurctl: ") and row["reason_since"].endswith("Z")
