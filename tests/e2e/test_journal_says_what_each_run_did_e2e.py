"""`spurctl journal` says what each run did: a drain, a repair and a cancel each in its words.

A drain, a repair and a reclaim all read "1 sent"; a repair's records showed `job 0`
and its "registered again" twice (issue 53.5). Each run now names its command and
cluster, says what went through (drained, repaired, sent), and `--run` shows one line
per outcome, `-` for the node as a whole.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from spurctl_sim import incident
from tests.cli import run_cli
from tests.e2e.test_repair_e2e import phantom
from tests.reclaim import journal_records, reclaim_args


def test_each_run_names_its_command_and_says_what_it_did(tmp_path: Path) -> None:
    scenario = incident()
    # gpu012's spurd restarted after its runs began: its agent orphans are drained.
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with phantom(tmp_path, scenario) as p:
        journal, ctl = str(p.journal), p.sim.controller_address
        where = ("--controller", p.sim.controller_address, "--inventory", str(p.live))
        repaired = run_cli(
            "repair", "--node", "gpu009", *where, "--conf", str(p.conf), "--journal", journal,
            "--tick", "0", "--wait", "5", "--yes", home=p.home,
        )  # fmt: skip
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        drained = run_cli(
            "drain", "--node", "gpu012", *where, "--journal", journal, "--yes", home=p.home
        )
        assert "Result: 1 drained" in drained.stdout, drained.stdout + drained.stderr
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(p.sim.agent_map()))
        reclaimed = run_cli(
            *reclaim_args(p.sim, p.live, agent_map, p.journal, node="gpu003"), home=p.home
        )
        assert reclaimed.returncode == 1, reclaimed.stdout + reclaimed.stderr  # unconfirmed
        shown = run_cli("journal", "--journal", journal, home=p.home)
        assert shown.returncode == 0, shown.stderr
        runs = [r["run"] for r in journal_records(p.journal)]
        repair_run = runs[0]
        one = run_cli("journal", "--journal", journal, "--run", repair_run, home=p.home)

    rows = {line.split()[0]: line for line in shown.stdout.splitlines() if line[:1].isdigit()}
    assert len(rows) == 3
    (repair_row,) = [r for r in rows.values() if " repair " in r]
    assert re.search(rf"{re.escape(ctl)}\s+repair\s+gpu009\s+1 repaired$", repair_row)
    (drain_row,) = [r for r in rows.values() if " drain " in r]
    assert re.search(r"\s+drain\s+gpu012\s+1 drained$", drain_row)
    (reclaim_row,) = [r for r in rows.values() if " reclaim " in r]
    assert re.search(r"\s+reclaim\s+gpu003\s+1 sent \(1 unconfirmed\)$", reclaim_row)

    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    assert lines[0].startswith(f"Run {repair_run} (repair) by ")
    assert f"cluster {ctl}" in lines[0]
    steps = [line.split()[4] for line in lines if line[:4].isdigit()]  # at is 3 words
    assert steps == ["drain", "deregister", "return", "done"]  # one line per outcome
    assert all(line.split()[6] == "-" for line in lines if line[:4].isdigit())  # no job 0
    assert one.stdout.count("registered again") == 1
