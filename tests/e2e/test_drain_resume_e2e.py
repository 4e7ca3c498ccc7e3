"""`spurctl drain` and `spurctl resume` against the simulated cluster, through the real CLI.

In the incident, with gpu012's spurd restarted at 05:00 (after its runs began), gpu012
holds agent orphans: 4950 (live, still RUNNING there) and 4702 (finished, a leftover
reservation); no agent cancel frees them, only `spurctl node-release`. gpu006 holds
stale runs of 4715 and 4716 (active elsewhere), which a reclaim cancels, unless its
agent is down: then the cancel fails. Drains carry spurctl's reason; resume lifts
only those, and only from a node whose fresh audit is clean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from spurctl.model import NodeState
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl_sim import SimCluster, incident
from tests.cli import run_cli, wait_for
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records, reclaim_args

ORPHAN_DRAIN = "spurctl: agent-orphan job 4950 and 1 more (spurctl explain gpu012)"


@dataclass
class Cluster:
    sim: SimCluster
    live: Path
    journal: Path
    home: Path
    agent_map: Path


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with SimCluster(scenario) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        with kept_fresh(sim, live):
            yield Cluster(sim, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map)


def command(c: Cluster, verb: str, nodes: str, *extra: str) -> Any:
    return run_cli(
        verb, "--node", nodes, "--controller", c.sim.controller_address,
        "--inventory", str(c.live), "--journal", str(c.journal), *extra, home=c.home,
    )  # fmt: skip


def update(c: Cluster, **fields: Any) -> None:
    channel = grpc.insecure_channel(c.sim.controller_address.removeprefix("http://"))
    with channel:
        rpc.SlurmControllerStub(channel).UpdateNode(pb.UpdateNodeRequest(**fields), timeout=5)


def test_drain_drains_a_node_holding_agent_orphans_naming_the_finding(c: Cluster) -> None:
    proc = command(c, "drain", "gpu[001-002,009,012]", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"gpu012  UpdateNode(state=DRAIN, reason='{ORPHAN_DRAIN}')" in proc.stdout
    assert "Result: 1 drained, 0 failed." in proc.stdout
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.DRAINING, ORPHAN_DRAIN)  # 4950 runs
    for healthy in ("gpu001", "gpu002", "gpu009"):  # nothing spurctl cannot free there
        assert c.sim.node(healthy).state_reason == ""
    records = [r for r in journal_records(c.journal) if r.get("action") == "drain"]
    assert [(r["event"], r["node"], r["job_id"], r["kind"]) for r in records] == [
        ("intent", "gpu012", 4950, "agent-orphan"),
        ("outcome", "gpu012", 4950, "agent-orphan"),
    ]
    assert records[1]["result"] == "sent" and records[1]["confirmed"] is True


def test_a_dry_run_drains_nothing(c: Cluster) -> None:
    proc = command(c, "drain", "gpu012", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "DRY RUN: nothing sent" in proc.stdout
    assert c.sim.node("gpu012").state_reason == ""
    assert not c.journal.exists()


def test_a_node_whose_cancel_failed_is_drained_with_that_said(c: Cluster) -> None:
    c.sim.stop_agent("gpu006")
    reclaim = run_cli(
        *reclaim_args(c.sim, c.live, c.agent_map, c.journal, node="gpu006"), home=c.home
    )
    assert reclaim.returncode == 1, reclaim.stdout + reclaim.stderr
    proc = command(c, "drain", "gpu006", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reason = "spurctl: active-elsewhere job 4715, cancel failed and 1 more (spurctl explain gpu006)"
    assert c.sim.node("gpu006").state_reason == reason


def test_a_node_drained_for_another_reason_or_by_a_health_check_is_left_alone(
    c: Cluster,
) -> None:
    update(c, name="gpu012", state=pb.NODE_DRAIN, reason="ops: bad DIMM")
    proc = command(c, "drain", "gpu012", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "gpu012  gpu012 is already DRAINING for another reason ('ops: bad DIMM'): left alone"
        in (proc.stdout)
    )
    assert c.sim.node("gpu012").state_reason == "ops: bad DIMM"
    update(c, name="gpu012", state=pb.NODE_DRAIN, reason="health-check(gpu-burn): failed")
    proc = command(c, "drain", "gpu012", "--yes")
    assert "is held by a health check ('health-check(gpu-burn): failed'): never touched" in (
        proc.stdout
    )
    assert c.sim.node("gpu012").state_reason == "health-check(gpu-burn): failed"
    records = journal_records(c.journal) if c.journal.exists() else []
    assert [r for r in records if r.get("action") == "drain"] == []


def test_resume_keeps_a_node_that_is_not_clean_and_lifts_it_once_it_is(c: Cluster) -> None:
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu012  still drained: agent-orphan job 4702: " in proc.stdout
    assert c.sim.node("gpu012").state_reason == ORPHAN_DRAIN

    # The orphans freed on the node (node-release) and the job ended.
    c.sim.state.cancel_job(4950)
    for job_id in (4702, 4950):
        c.sim.release("gpu012", job_id)
    wait_for(lambda: '"job_id": 4950' not in c.live.read_text())
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"gpu012  UpdateNode(state=IDLE): lifts '{ORPHAN_DRAIN}', its audit is clean" in (
        proc.stdout
    )
    node = c.sim.node("gpu012")
    assert node.state is NodeState.IDLE and node.state_reason == ""
    resumed = [r for r in journal_records(c.journal) if r.get("action") == "resume"]
    assert [(r["event"], r["kind"], r.get("confirmed")) for r in resumed] == [
        ("intent", "agent-orphan", None),
        ("outcome", "agent-orphan", True),
    ]


def test_resume_never_touches_someone_elses_drain(c: Cluster) -> None:
    update(c, name="gpu001", state=pb.NODE_DRAIN, reason="ops: reseat GPUs")
    proc = command(c, "resume", "gpu001", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu001  gpu001 is DRAINING by someone else ('ops: reseat GPUs'): never touched" in (
        proc.stdout
    )
    assert c.sim.node("gpu001").state_reason == "ops: reseat GPUs"
    assert not c.journal.exists()


def test_the_audits_metrics_count_spurctls_drains_and_name_the_nodes_left_drained(
    c: Cluster, tmp_path: Path
) -> None:
    prom = tmp_path / "spurctl.prom"

    def metrics() -> dict[str, float]:
        proc = run_cli(
            "audit", "--controller", c.sim.controller_address, "--inventory", str(c.live),
            "--journal", str(c.journal), "--format", "prometheus", "-o", str(prom), home=c.home,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        lines = [x for x in prom.read_text().splitlines() if x and not x.startswith("#")]
        return {x.rpartition(" ")[0]: float(x.rpartition(" ")[2]) for x in lines}

    before = metrics()
    assert before['spurctl_drains_total{command="drain"}'] == 0
    assert before["spurctl_nodes_left_drained"] == 0
    assert "# TYPE spurctl_repairs_total counter" in prom.read_text()
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    [record] = [
        r for r in journal_records(c.journal) if r["event"] == "outcome" and r["step"] == "drain"
    ]
    drained_at = datetime.fromisoformat(record["at"].replace("Z", "+00:00")).timestamp()

    after = metrics()
    assert after['spurctl_drains_total{command="drain"}'] == 1
    assert after["spurctl_nodes_left_drained"] == 1
    assert after['spurctl_node_drained_since_timestamp_seconds{node="gpu012"}'] == drained_at
    update(c, name="gpu012", state=pb.NODE_IDLE)  # someone lifted it by hand
    assert metrics()["spurctl_nodes_left_drained"] == 0


def test_a_follower_that_cannot_forward_the_drain_sends_spurctl_to_the_leader(
    c: Cluster, tmp_path: Path
) -> None:
    leader = c.sim.controller_address.removeprefix("http://")
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with SimCluster(scenario, agents=False, follower_of=leader) as follower:
        proc = run_cli(
            "drain", "--node", "gpu012", "--controller", follower.controller_address,
            "--inventory", str(c.live), "--journal", str(c.journal), "--yes", home=c.home,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert [(r.method, r.detail) for r in follower.refusals] == [
            ("UpdateNode", "not the Raft leader")
        ]
        assert follower.node("gpu012").state_reason == ""  # never written there
    assert c.sim.node("gpu012").state_reason == ORPHAN_DRAIN  # the leader took it


def test_a_ctrl_c_during_the_drain_call_is_taken_after_it_and_reported(
    c: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Ctrl-C arrives while UpdateNode is on its way (at the process, as a terminal
    # sends it): the call, its journal outcome and the run's record of it finish first;
    # the run then stops, says so and exits 1, not 130 with nothing shown.
    import os
    import signal

    from spurctl.act import node_admin

    real = node_admin.ControllerWriter.update_node

    def pressed(self: Any, name: str, **fields: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real(self, name, **fields)

    monkeypatch.setattr(node_admin.ControllerWriter, "update_node", pressed)
    proc = command(c, "drain", "gpu[001-002,009,012]", "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Result: 1 drained, 0 failed, 0 not attempted (interrupted)." in proc.stdout
    assert c.sim.node("gpu012").state_reason == ORPHAN_DRAIN
    records = [r for r in journal_records(c.journal) if r.get("action") == "drain"]
    assert [r["event"] for r in records] == ["intent", "outcome"]
    assert records[1]["result"] == "sent"


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_a_drain_stopped_by_sigterm_or_sighup_says_what_it_sent_and_what_it_did_not(
    tmp_path: Path, stop: str
) -> None:
    # A systemd stop or a closed ssh session part way through a long drain: as a Ctrl-C,
    # the call in flight finishes, the run reports the drains it sent and the nodes it
    # never tried (exit 1), where the signal's default action said nothing at all.
    import signal

    from tests.cli import cli_process

    scenario = incident()
    late = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)  # every spurd restarted after its runs
    scenario.agent_started_at = dict.fromkeys(scenario.holdings, late)
    journal = tmp_path / "journal.jsonl"
    with SimCluster(scenario, controller_latency=0.15) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        argv = [
            "drain", "--node", "gpu[001-024]", "--controller", sim.controller_address,
            "--inventory", str(live), "--journal", str(journal), "--yes",
            "--max-unavailable", "100%",  # many nodes at once, past the default cap
        ]  # fmt: skip

        def sent() -> int:
            if not journal.is_file():
                return 0
            return sum(1 for r in journal_records(journal) if r.get("result") == "sent")

        with cli_process(*argv, home=tmp_path / "home") as proc:
            wait_for(lambda: sent() >= 3, timeout=60)
            proc.send_signal(getattr(signal, stop))
            out, err = proc.communicate(timeout=60)
        reasons = {n: sim.node(n).state_reason for n in scenario.holdings}
    assert proc.returncode == 1, out + err
    records = [r for r in journal_records(journal) if r.get("action") == "drain"]
    drained = [r["node"] for r in records if r.get("result") == "sent"]
    assert [r["event"] for r in records] == ["intent", "outcome"] * len(drained), records
    assert all(reasons[n].startswith("spurctl: ") for n in drained), reasons
    result = re.search(
        r"Result: (\d+) drained, 0 failed, (\d+) not attempted \(interrupted\)\.", out
    )
    assert result is not None, out + err
    assert int(result[1]) == len(drained) >= 3, out
    untried = re.findall(r"  (\S+)  not attempted: interrupted before it", out)
    assert len(untried) == int(result[2]) > 0, out
    assert not any(reasons[n].startswith("spurctl: ") for n in untried), reasons


def test_a_journal_that_fills_mid_drain_still_reports_every_drain_that_went_out(
    tmp_path: Path,
) -> None:
    """The journal can grow no more (EFBIG, RLIMIT_FSIZE on the running process) while a
    drain is on its way: that drain went out, so the result says so, though the journal
    does not; the run stops there (exit 2)."""
    import resource
    import signal

    from tests.cli import cli_process

    scenario = incident()
    late = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)  # every spurd restarted after its runs
    scenario.agent_started_at = dict.fromkeys(scenario.holdings, late)
    journal = tmp_path / "journal.jsonl"
    with SimCluster(scenario, controller_latency=0.3) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        argv = [
            "drain", "--node", "gpu[001-024]", "--controller", sim.controller_address,
            "--inventory", str(live), "--journal", str(journal), "--yes",
            "--max-unavailable", "100%",  # many nodes at once, past the default cap
        ]  # fmt: skip

        def intents() -> int:
            if not journal.is_file():
                return 0
            return sum(1 for r in journal_records(journal) if r.get("event") == "intent")

        def ignore_sigxfsz() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        with cli_process(*argv, home=tmp_path / "home", preexec_fn=ignore_sigxfsz) as proc:
            wait_for(lambda: intents() >= 2, timeout=60)  # the second drain on its way
            size = journal.stat().st_size
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, size))
            out, err = proc.communicate(timeout=60)
        drained = sorted(
            n for n in scenario.holdings if sim.node(n).state_reason.startswith("spurctl: ")
        )
    assert proc.returncode == 2, out + err
    assert len(drained) >= 2, drained
    reported = re.findall(r"  (\S+)  sent: ", out)
    assert sorted(reported) == drained, out
