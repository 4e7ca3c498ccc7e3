"""Two clusters' autopilots on one journal: each counts only its own cluster's records.

Every record the autopilot writes says its cluster (controller, cluster_name), and a
round reads only its own cluster's: another cluster's actions spend none of this one's
--max-actions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spurctl.model import format_time, utcnow
from spurctl_sim.fleet_scenario import node_name, strand
from tests.cli import run_cli
from tests.e2e.test_autopilot_e2e import autopilot_records, rounds_of, running_fleet


def _other_clusters_actions(journal: Path, n: int) -> None:
    at = format_time(utcnow())
    lines = [
        json.dumps(
            {
                "schema": "spurctl.journal/v1",
                "run": "20261205T000000-lab001",
                "event": "outcome",
                "at": at,
                "operator": "ops",
                "node": node_name(i),
                "job_id": i,
                "kind": "terminal-held",
                "origin": "autopilot",
                "round": 1,
                "result": "sent",
                "detail": "agent accepted CancelJob signal 0",
                "controller": "http://lab-ctl.example:6817",
                "cluster": "lab",
            }
        )
        for i in range(1, n + 1)
    ]
    journal.write_text("\n".join(lines) + "\n")
    os.chmod(journal, 0o600)


def test_another_clusters_autopilot_records_spend_none_of_this_ones_budget(
    tmp_path: Path,
) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)]) as f:
        _other_clusters_actions(f.journal, 5)  # the lab cluster spent its 5 this hour
        strand(f.sim, 3)
        proc = run_cli(*f.args("--grace", "0", "--max-actions", "5/h", "--rounds", "1"),
                       home=f.home)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        [r] = rounds_of(proc.stdout)
        assert [(c["node"], c["result"]) for c in r["calls"]] == [(node_name(3), "sent")], r
        assert r["budgets_left"]["max-actions"] == 4
        # This cluster's records say which cluster they are of.
        mine = [x for x in autopilot_records(f.journal) if x.get("cluster") != "lab"]
        assert mine and all(x["controller"] == f.sim.controller_address for x in mine), mine
