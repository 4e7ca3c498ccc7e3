"""Scripted incidents against a live `spurctl autopilot` on the simulated cluster.

The fleet: N nodes, each running one 8-GPU job its agent holds (healthy). A controller
restart that lost the end of some runs' cancels leaves agents holding jobs the
controller finished (`terminal-held`, reclaimable). The autopilot must heal those
within --grace and two rounds, touch no healthy run, and stop acting whenever its
view cannot be trusted or a budget is spent.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from spurctl.model import Holding, Job, JobState, NodeState
from spurctl_sim import SimCluster
from spurctl_sim.fleet_scenario import T0, fleet, node_name, strand
from spurctl_sim.scenario_parts import job_allocation
from tests.cli import cli_process, lines_of, run_cli, wait_for
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records


@dataclass
class Fleet:
    sim: SimCluster
    live: Path
    journal: Path
    home: Path
    agent_map: Path
    tmp: Path

    def args(self, *extra: str) -> list[str]:
        return [
            "autopilot", "--controller", self.sim.controller_address, "--inventory",
            str(self.live), "--agent-map", str(self.agent_map), "--journal", str(self.journal),
            "--pause-file", str(self.tmp / "pause"), *extra,
        ]  # fmt: skip


@contextmanager
def running_fleet(tmp: Path, nodes: int, agents: list[str] | None = None,
                  **sim_kw: Any) -> Iterator[Fleet]:  # fmt: skip
    sim = SimCluster(fleet(nodes), agents=agents if agents is not None else True, **sim_kw)
    with sim:
        live = sim.write_inventories(tmp / "live.jsonl")
        agent_map = tmp / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        with kept_fresh(sim, live):
            yield Fleet(sim, live, tmp / "journal.jsonl", tmp / "home", agent_map, tmp)


def rounds_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def autopilot_records(journal: Path) -> list[dict[str, Any]]:
    if not journal.exists():
        return []
    return [r for r in journal_records(journal) if r.get("origin") == "autopilot"]


FAST = ("--interval", "0.4", "--grace", "0.8")


def test_a_controller_restart_strands_30_of_2000_nodes_healed_within_grace_and_two_rounds(
    tmp_path: Path,
) -> None:
    stranded = list(range(7, 2000, 66))[:30]
    assert len(stranded) == 30
    with running_fleet(tmp_path, 2000, agents=[node_name(i) for i in (*stranded, 1, 2)]) as f:
        for i in stranded:
            strand(f.sim, i)
        proc = run_cli(*f.args(*FAST, "--rounds", "7"), home=f.home, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rounds = rounds_of(proc.stdout)
        # The first round sees them, inside the grace: nothing sent.
        assert rounds[0]["state"] == "acting" and rounds[0]["calls"] == []
        assert rounds[0]["waiting"] == {"grace": 30}
        # Grace (0.8 s = 2 intervals) + two rounds: healed by round 5.
        acted = [r["round"] for r in rounds if r["calls"]]
        healed = next(r["round"] for r in rounds if not r["findings"])
        assert acted and healed <= 2 + 1 + 2, [(r["round"], r["findings"]) for r in rounds]
        sent = {(c["node"], c["job_id"]) for r in rounds for c in r["calls"]}
        assert sent == {(node_name(i), i) for i in stranded}
        # No healthy run touched: the agents got exactly the 30 cancels, nothing drained.
        assert sorted((c.node, c.job_id) for c in f.sim.cancels) == sorted(sent)
        assert all(f.sim.node(node_name(i)).state_reason == "" for i in range(1, 2001, 97))
        records = autopilot_records(f.journal)
        assert {r["event"] for r in records} == {"intent", "outcome"}
        # `spurctl journal` shows the autopilot's run and what it sent.
        shown = run_cli("journal", "--journal", str(f.journal), "--format", "json", home=f.home)
        [run] = json.loads(shown.stdout)["runs"]
        assert run["operators"][0].endswith(" (autopilot)") and run["sent"] == 30
        assert run["commands"] == ["autopilot"]
    assert rounds[-1]["breaker"]["open"] is False


def test_a_post_wipe_opens_the_breaker_and_sends_nothing(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 200, agents=[node_name(i) for i in range(1, 6)]) as f:
        for i in range(1, 181):  # most nodes at once
            strand(f.sim, i)
        proc = run_cli(*f.args("--interval", "0.2", "--grace", "0", "--rounds", "3"),
                       home=f.home)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        rounds = rounds_of(proc.stdout)
        assert [r["state"] for r in rounds] == ["breaker-open"] * 3
        assert "checklist post-wipe" in rounds[0]["why"][0]
        assert all(r["calls"] == [] for r in rounds)
        assert f.sim.cancels == [] and autopilot_records(f.journal) == []


def test_max_actions_5_per_hour_the_sixth_waits_even_after_a_restart(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 40, agents=[node_name(i) for i in range(1, 7)]) as f:
        for i in range(1, 7):
            strand(f.sim, i)
        args = f.args("--interval", "0.2", "--grace", "0", "--max-actions", "5/h")
        proc = run_cli(*args, "--rounds", "3", home=f.home)
        assert proc.returncode == 0, proc.stderr
        rounds = rounds_of(proc.stdout)
        assert sum(len(r["calls"]) for r in rounds) == 5
        assert rounds[-1]["waiting"] == {"max-actions": 1}
        assert rounds[-1]["budgets_left"]["max-actions"] == 0
        # A restart does not reset it: counted from the journal.
        again = rounds_of(run_cli(*args, "--rounds", "1", home=f.home).stdout)
        assert again[0]["calls"] == [] and again[0]["waiting"] == {"max-actions": 1}
        assert len(f.sim.cancels) == 5


def test_a_flapping_node_is_drained_once_with_the_flapping_reason(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(1)]) as f:
        done = threading.Event()
        next_id = [1000]

        def flap() -> None:
            # Whenever gpu0001 holds nothing stale, it strands another run (a bad node).
            while not done.wait(0.05):
                if len(f.sim.holdings(node_name(1))) == 1:
                    next_id[0] += 1
                    j = next_id[0]
                    f.sim.set_job(Job(j, JobState.COMPLETED, node_name(1), "x", "alice", 20001,
                                      "gpu", "research", "", T0, T0, T0 + timedelta(minutes=5),
                                      1, 1, job_allocation((0,), 1)))  # fmt: skip
                    f.sim.hold(
                        node_name(1), Holding(j, 16, 1024, (), (), T0 + timedelta(seconds=1))
                    )

        flapper = threading.Thread(target=flap, daemon=True)
        flapper.start()
        try:
            proc = run_cli(*f.args("--interval", "0.3", "--grace", "0", "--flap-limit", "3",
                                   "--rounds", "8"), home=f.home)  # fmt: skip
        finally:
            done.set()
            flapper.join(timeout=10)
        assert proc.returncode == 0, proc.stderr
        records = autopilot_records(f.journal)
        drains = [r for r in records if r.get("action") == "drain" and r["event"] == "intent"]
        assert len(drains) == 1 and "flapping" in drains[0]["reason"]
        reclaims = [r for r in records if r["event"] == "intent" and r.get("action") is None]
        assert len(reclaims) == 3
        # After it, nothing more is done there: its stranded run waits for a person.
        rounds = rounds_of(proc.stdout)
        drained = next(
            r["round"] for r in rounds if any(c["action"] == "drain" for c in r["calls"])
        )
        later = [r for r in rounds if r["round"] > drained]
        assert later and all(r["calls"] == [] for r in later)
        node = f.sim.node(node_name(1))
        assert node.state in (NodeState.DRAIN, NodeState.DRAINING)
        assert "flapping" in node.state_reason


def test_the_controller_gone_mid_round_sends_nothing_that_round(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)], controller_latency=0.3) as f:
        strand(f.sim, 3)
        seen = len(f.sim.job_requests)

        def cut() -> None:
            wait_for(lambda: len(f.sim.job_requests) > seen, timeout=30)
            f.sim.stop_controller()

        cutter = threading.Thread(target=cut, daemon=True)
        cutter.start()
        proc = run_cli(*f.args("--grace", "0", "--rounds", "1", "--timeout", "2"), home=f.home)
        cutter.join(timeout=30)
        assert proc.returncode == 0, proc.stderr
        [r] = rounds_of(proc.stdout)
        assert all(c["result"] != "sent" for c in r["calls"]), r
        assert f.sim.cancels == []
        assert not any(x.get("result") == "sent" for x in autopilot_records(f.journal))
        # The controller back: the next round acts (its view is whole again).
        f.sim.start_controller()
        [r] = rounds_of(run_cli(*f.args("--grace", "0", "--rounds", "1"), home=f.home).stdout)
        assert [(c["node"], c["result"]) for c in r["calls"]] == [(node_name(3), "sent")]


def test_a_pause_file_audits_only(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)]) as f:
        strand(f.sim, 3)
        (tmp_path / "pause").touch()
        metrics = tmp_path / "m.prom"
        proc = run_cli(*f.args("--grace", "0", "--interval", "0.1", "--rounds", "2",
                               "--metrics-file", str(metrics)), home=f.home)  # fmt: skip
        rounds = rounds_of(proc.stdout)
        assert [r["state"] for r in rounds] == ["paused", "paused"]
        assert f.sim.cancels == []
        assert "spurctl_autopilot_paused 1" in metrics.read_text()
        (tmp_path / "pause").unlink()
        rounds = rounds_of(run_cli(*f.args("--grace", "0", "--rounds", "1"), home=f.home).stdout)
        assert rounds[0]["state"] == "acting" and len(rounds[0]["calls"]) == 1


def test_dry_run_says_what_it_would_send_and_sends_nothing(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)]) as f:
        strand(f.sim, 3)
        proc = run_cli(*f.args("--grace", "0", "--dry-run", "--rounds", "1"), home=f.home)
        [r] = rounds_of(proc.stdout)
        assert r["state"] == "dry-run"
        assert [(c["action"], c["node"], c["job_id"], c["result"]) for c in r["would_send"]] == [
            ("reclaim", "gpu0003", 3, "would-send")
        ]
        assert f.sim.cancels == [] and not f.journal.exists()


def _first_line(lines: queue.Queue[str], timeout: float = 30) -> dict[str, Any]:
    line = lines.get(timeout=timeout)
    assert line, "the autopilot ended before its first round"
    return json.loads(line)


def test_sigterm_exits_0_and_a_second_instance_exits_2_naming_the_first(tmp_path: Path) -> None:
    with (
        running_fleet(tmp_path, 20, agents=[node_name(3)]) as f,
        cli_process(*f.args("--interval", "0.3", "--grace", "60"), home=f.home) as first,
    ):
        assert first.stdout is not None
        lines = lines_of(first.stdout)
        _first_line(lines)
        second = run_cli(*f.args("--rounds", "1"), home=f.home, process=True)
        assert second.returncode == 2
        assert str(first.pid) in second.stderr and len(second.stderr.splitlines()) == 1
        # (A manual reclaim on the same journal waits for a round's end: test_autopilot_lock_e2e.)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0


def test_sigterm_mid_call_lets_the_call_finish_and_be_journaled(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)], agent_latency=1.5) as f:
        strand(f.sim, 3)
        with cli_process(*f.args("--interval", "0.2", "--grace", "0"), home=f.home) as proc:
            wait_for(lambda: any(r["event"] == "intent" for r in autopilot_records(f.journal)),
                     timeout=30)  # fmt: skip
            # Past the re-check (ms): the cancel is in flight at the agent (1.5 s).
            time.sleep(0.4)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        records = autopilot_records(f.journal)
        assert [r["event"] for r in records] == ["intent", "outcome"]
        assert records[1]["result"] == "sent"


def test_after_kill_9_mid_call_the_restart_settles_the_open_intent_first(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)], agent_latency=3.0) as f:
        strand(f.sim, 3)
        with cli_process(*f.args("--interval", "0.2", "--grace", "0"), home=f.home) as proc:
            wait_for(lambda: any(r["event"] == "intent" for r in autopilot_records(f.journal)),
                     timeout=30)  # fmt: skip
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        assert [r["event"] for r in autopilot_records(f.journal)] == ["intent"]
        f.sim.agent_latency = 0.0
        time.sleep(0.1)
        proc2 = run_cli(*f.args("--grace", "0", "--rounds", "1"), home=f.home)
        assert proc2.returncode == 0, proc2.stderr
        [r] = rounds_of(proc2.stdout)
        assert r["settled"] == 1
        records = autopilot_records(f.journal)
        # The open intent closed (its fate unknown) before anything else was written.
        assert records[1]["event"] == "outcome" and records[1]["round"] == 0
        assert "interrupted" in records[1]["detail"]


def test_an_agent_orphan_is_drained_and_resumed_once_clean_and_another_drain_is_never_touched(
    tmp_path: Path,
) -> None:
    scenario = fleet(20)
    # gpu0005's spurd restarted after its run began: an agent orphan no cancel frees.
    scenario.agent_started_at[node_name(5)] = T0 + timedelta(hours=1)
    with SimCluster(scenario, agents=[node_name(5), node_name(9)]) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        with kept_fresh(sim, live):
            f = Fleet(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map, tmp_path)
            sim.admin_update(node_name(9), NodeState.DRAIN, "ops: bad DIMM")
            strand(sim, 9)  # something to act on under another's drain
            args = f.args("--interval", "0.2", "--grace", "0", "--resume-after", "0.5")
            rounds = rounds_of(run_cli(*args, "--rounds", "2", home=f.home).stdout)
            drains = [c for r in rounds for c in r["calls"] if c["action"] == "drain"]
            assert [(c["node"], c["result"]) for c in drains] == [(node_name(5), "sent")]
            reason = sim.node(node_name(5)).state_reason
            assert reason == f"spurctl: agent-orphan job 5 (spurctl explain {node_name(5)})"
            # The orphan freed on the node (node-release, by a person) and the job ended.
            sim.state.cancel_job(5)
            sim.release(node_name(5), 5)
            wait_for(lambda: '"job_id": 5,' not in live.read_text())
            rounds = rounds_of(run_cli(*args, "--rounds", "6", home=f.home).stdout)
            resumes = [
                (r["round"], c) for r in rounds for c in r["calls"] if c["action"] == "resume"
            ]
            assert [c["node"] for _, c in resumes] == [node_name(5)]
            assert resumes[0][0] >= 3  # clean for --resume-after first (0.5 s: 3 rounds)
            assert sim.node(node_name(5)).state_reason == ""
            # The admin's drain on gpu0009 is never touched (its held run is reclaimed).
            assert sim.node(node_name(9)).state_reason == "ops: bad DIMM"
            updates = [r for r in autopilot_records(f.journal) if r.get("node") == node_name(9)]
            assert all(r.get("action") is None for r in updates)  # agent cancels only


def test_old_inventories_open_the_breaker(tmp_path: Path) -> None:
    sim = SimCluster(fleet(20), agents=[node_name(3)])
    with sim:
        strand(sim, 3)
        live = sim.write_inventories(tmp_path / "live.jsonl")  # never re-collected
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        f = Fleet(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map, tmp_path)
        time.sleep(1.1)
        proc = run_cli(*f.args("--grace", "0", "--rounds", "1", "--max-inventory-age", "1s"),
                       home=f.home)  # fmt: skip
        [r] = rounds_of(proc.stdout)
        assert r["state"] == "breaker-open" and "older than --max-inventory-age" in r["why"][0]
        assert sim.cancels == []


def test_sighup_rereads_the_configuration_and_goes_on(tmp_path: Path) -> None:
    with (
        running_fleet(tmp_path, 10, agents=[]) as f,
        cli_process(*f.args("--interval", "0.2", "--grace", "60"), home=f.home) as proc,
    ):
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        _first_line(lines)
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert proc.poll() is None  # a reload, not a stop
        later = [_first_line(lines) for _ in range(3)]
        assert all(r["state"] == "acting" for r in later)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_max_unavailable_is_never_exceeded_the_rest_waits(tmp_path: Path) -> None:
    scenario = fleet(20)
    for i in (4, 5, 6):  # three agent orphans: three drains wanted
        scenario.agent_started_at[node_name(i)] = T0 + timedelta(hours=1)
    with SimCluster(scenario, agents=[]) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        f = Fleet(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map, tmp_path)
        proc = run_cli(*f.args("--grace", "0", "--interval", "0.1", "--rounds", "3",
                               "--max-unavailable", "1"), home=f.home)  # fmt: skip
        rounds = rounds_of(proc.stdout)
        drains = [c for r in rounds for c in r["calls"] if c["action"] == "drain"]
        assert [c["node"] for c in drains] == [node_name(4)]
        assert rounds[-1]["waiting"] == {"max-unavailable": 2}
        assert rounds[-1]["budgets_left"]["max-unavailable"] == 0
        out = [n for n in (4, 5, 6) if sim.node(node_name(n)).state_reason]
        assert out == [4]


def test_an_incomplete_view_opens_the_breaker(tmp_path: Path) -> None:
    from spurctl.sources import credentials as auth
    from tests.live import KEY

    with SimCluster(fleet(20), agents=[node_name(3)], auth="required", jwt_key=KEY) as sim:
        strand(sim, 3)
        live = sim.write_inventories(tmp_path / "live.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        f = Fleet(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map, tmp_path)
        # bob's credential: Spur answers GetJobs with bob's jobs only (none of alice's).
        proc = run_cli(*f.args("--grace", "0", "--rounds", "1", "--token",
                               auth.mint(KEY, "bob")), home=f.home)  # fmt: skip
        [r] = rounds_of(proc.stdout)
        assert r["state"] == "breaker-open" and "incomplete" in r["why"][0], r
        assert sim.cancels == []
