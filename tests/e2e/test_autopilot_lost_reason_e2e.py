"""A live autopilot on Spur v0.8.0 beside a drain of spurctl's whose reason Spur replaced.

gpu0004 and gpu0005 hold agent orphans (their spurd restarted after their runs began),
which no cancel frees: spurctl drains such a node. gpu0004 is drained by hand, then its
heartbeat times out: release v0.8.0 marks it DOWN `Not responding`, keeping the drain's
lock (decide/lost_reason.py), so it never comes back by itself and its reason is no
longer spurctl's. The autopilot must leave it alone (no call to it, nothing journaled
for it), say it in each round's `left_to_person` with audit's own line, count it in its
metrics, and count it against --max-unavailable: it is out of service because of
spurctl's drain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from spurctl.model import NodeState
from spurctl_sim import SimCluster
from spurctl_sim.fleet_scenario import T0, fleet, node_name
from spurctl_sim.releases import V0_8_0
from tests.cli import run_cli, wait_for
from tests.e2e.test_autopilot_e2e import Fleet, autopilot_records, rounds_of
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records

LOST, WANTING = node_name(4), node_name(5)


def _agent_of(live: Path, name: str) -> object:
    for line in live.read_text().splitlines():
        inv = json.loads(line)
        if inv["node"] == name:
            return inv.get("agent")
    raise AssertionError(f"no inventory of {name}")


@contextmanager
def _lost_fleet(tmp: Path) -> Iterator[Fleet]:
    """20 nodes on v0.8.0, gpu0004 drained by spurctl then DOWN `Not responding`."""
    scenario = fleet(20)
    for name in (LOST, WANTING):
        scenario.agent_started_at[name] = T0 + timedelta(hours=1)
    with SimCluster(scenario, agents=[], spur_release=V0_8_0) as sim:
        live = sim.write_inventories(tmp / "live.jsonl")
        agent_map = tmp / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        with kept_fresh(sim, live):
            f = Fleet(sim, live, tmp / "journal.jsonl", tmp / "home", agent_map, tmp)
            drain = run_cli(
                "drain", "-w", LOST, "--controller", sim.controller_address, "--inventory",
                str(live), "--journal", str(f.journal), "--yes", home=f.home,
            )  # fmt: skip
            assert drain.returncode == 0, drain.stdout + drain.stderr
            sim.lose_heartbeat(LOST)
            node = sim.node(LOST)
            assert (node.state, node.state_reason) == (NodeState.DOWN, "Not responding")
            wait_for(lambda: _agent_of(live, LOST) is None)
            yield f


def test_the_autopilot_leaves_it_alone_says_it_counts_it_and_keeps_it_in_the_budget(
    tmp_path: Path,
) -> None:
    with _lost_fleet(tmp_path) as f:
        before = len(journal_records(f.journal))
        cancels = len(f.sim.cancels)
        metrics = tmp_path / "autopilot.prom"
        args = f.args("--grace", "0", "--interval", "0.2", "--rounds", "3",
                      "--max-unavailable", "1", "--metrics-file", str(metrics))  # fmt: skip
        proc = run_cli(*args, home=f.home)
        assert proc.returncode == 0, proc.stderr
        rounds = rounds_of(proc.stdout)
        assert [r["state"] for r in rounds] == ["acting"] * 3
        # Left alone: no call to it, nothing journaled for it, its DOWN as it was.
        assert not [c for r in rounds for c in r["calls"] if c["node"] == LOST]
        assert not [r for r in autopilot_records(f.journal) if r.get("node") == LOST]
        assert len(journal_records(f.journal)) == before and len(f.sim.cancels) == cancels
        node = f.sim.node(LOST)
        assert (node.state, node.state_reason) == (NodeState.DOWN, "Not responding")
        # Said each round, in audit's words, with the command that lifts it.
        for r in rounds:
            [why] = [x["why"] for x in r["left_to_person"] if x["node"] == LOST]
            assert why.startswith(f"{LOST} went DOWN after spurctl's drain of "), why
            assert why.endswith(f"`spurctl resume -w {LOST} --lost-reason` lifts it"), why
        # Out of service by spurctl's drain: --max-unavailable 1 is spent, gpu0005 waits.
        assert rounds[-1]["waiting"] == {"max-unavailable": 1}
        assert rounds[-1]["budgets_left"]["max-unavailable"] == 0
        assert f.sim.node(WANTING).state_reason == ""
        shown = metrics.read_text()
        assert "\nspurctl_autopilot_nodes_drain_reason_lost 1\n" in shown
        assert '\nspurctl_autopilot_budget_remaining{budget="max-unavailable"} 0\n' in shown


def test_a_manual_drain_counts_it_against_max_unavailable_too(tmp_path: Path) -> None:
    with _lost_fleet(tmp_path) as f:
        proc = run_cli(
            "drain", "-w", WANTING, "--controller", f.sim.controller_address, "--inventory",
            str(f.live), "--journal", str(f.journal), "--max-unavailable", "1", "--yes",
            home=f.home,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (
            f"beside the 1 already out of service by spurctl's reason ({LOST}; {LOST} DOWN "
            "'Not responding' since spurctl's drain): 2, above --max-unavailable 1"
        ) in proc.stderr
        assert f.sim.node(WANTING).state_reason == ""
