"""`spurctl repair` against the simulated cluster, through the real CLI.

In the incident gpu009 carries a phantom charge (64 CPUs, 512 GiB, GPUs 0-3, no job
lists it); here its spurd runs and its inventory says so. Spur clears such a charge
only by a fresh record: repair drains the node, re-reads it, removes it with
DeregisterNode(force=false), waits for the node's spurd to register it again at its
next heartbeat (0.1 s here), verifies the charge is zero and puts back what the
fresh record dropped. Each refusal is one line naming what it saw.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import msgspec
import pytest

from spurctl.model import Allocation, Holding, NodeState, format_time, utcnow
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl_sim import SimCluster, incident
from spurctl_sim.releases import V0_8_0, V0_9_TO_0_11, SpurRelease
from spurctl_sim.scenario import Scenario
from tests.cli import run_cli, wait_for
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records

AGENT = datetime(2026, 11, 18, 7, 31, 10, tzinfo=UTC)  # gpu009's spurd, as /proc shows it
CONF = "[controller]\nhosts = []\n"
CHARGE = "64 CPUs, 524288 MB of memory, GPUs 0-3"
OUR_DRAIN = f"spurctl: phantom allocation {CHARGE}"


@dataclass
class Phantom:
    sim: SimCluster
    live: Path  # every node's inventory, rewritten whenever what the cluster holds changes
    conf: Path
    journal: Path
    home: Path


MID_COMMIT = 5119  # the incident's RUNNING job whose allocation is not recorded yet


@contextlib.contextmanager
def phantom(
    tmp_path: Path, scenario: Scenario | None = None, **sim_options: Any
) -> Iterator[Phantom]:
    """The incident cluster with gpu009's spurd running and shown, heartbeating every 0.1 s,
    and 5119's allocation committed (gpu011, where it runs): an active job without a
    placement may be on any node, and holds up every repair while it lasts."""
    scenario = scenario or incident()
    scenario.agent_started_at["gpu009"] = AGENT
    scenario.jobs = [
        msgspec.structs.replace(j, nodelist="gpu011") if j.job_id == MID_COMMIT else j
        for j in scenario.jobs
    ]
    with SimCluster(scenario, heartbeat_interval=0.1, **sim_options) as sim:
        live = sim.write_inventories(tmp_path / "live.jsonl")
        conf = tmp_path / "spur.conf"
        conf.write_text(CONF)
        with kept_fresh(sim, live):
            yield Phantom(sim, live, conf, tmp_path / "journal.jsonl", tmp_path / "home")


@pytest.fixture
def p(tmp_path: Path) -> Iterator[Phantom]:
    with phantom(tmp_path) as cluster:
        yield cluster


def repair(p: Phantom, *extra: str, node: str = "gpu009", conf: bool = True) -> Any:
    return run_cli(
        "repair", "--node", node, "--controller", p.sim.controller_address,
        "--inventory", str(p.live), *(["--conf", str(p.conf)] if conf else []),
        "--journal", str(p.journal), "--tick", "0", "--wait", "5", *extra,
        home=p.home,
    )  # fmt: skip


def update(p: Phantom, **fields: Any) -> None:
    channel = grpc.insecure_channel(p.sim.controller_address.removeprefix("http://"))
    with channel:
        rpc.SlurmControllerStub(channel).UpdateNode(pb.UpdateNodeRequest(**fields), timeout=5)


def steps(p: Phantom) -> list[tuple[str, str, str | None]]:
    return [
        (r["step"], r["event"], r.get("result"))
        for r in journal_records(p.journal)
        if r.get("action") == "repair"
    ]


def untouched(p: Phantom, before: Any) -> None:
    """Nothing was sent: the node's record is as it was and nothing was removed."""
    assert p.sim.state.deregistrations == []
    assert p.sim.node("gpu009") == before


def recharge(p: Phantom) -> None:
    """The controller's charge of gpu009 becomes 8 CPUs (what a real one might have become)."""
    with p.sim.state.lock:
        node = p.sim.state.nodes["gpu009"]
        p.sim.state.nodes["gpu009"] = dataclasses.replace(node, alloc=Allocation(cpus=8))
        p.sim.state.generation += 1


def when_drained(p: Phantom, act: Callable[[], None]) -> threading.Thread:
    """Run `act` once spurctl's drain is on gpu009 (during the tick)."""

    def watch() -> None:
        wait_for(lambda: p.sim.node("gpu009").state_reason == OUR_DRAIN, timeout=30)
        act()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


# -- the whole repair ------------------------------------------------------------------


def test_repair_rebuilds_the_phantom_node_and_puts_back_the_admins_label(p: Phantom) -> None:
    update(p, name="gpu009", labels={"owner": "ml-infra"})
    before = p.sim.node("gpu009")
    assert not before.alloc.empty

    proc = repair(p, "--yes")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"gpu009  phantom allocation {CHARGE}: drain ('{OUR_DRAIN}')" in proc.stdout
    assert "Repair result: 1 repaired, 0 refused after the re-read, 0 failed, 0 not back." in (
        proc.stdout
    )
    assert "put back labels owner=ml-infra" in proc.stdout
    after = p.sim.node("gpu009")
    assert after.alloc.empty and after.state is NodeState.IDLE and after.state_reason == ""
    assert after.labels == {**before.labels, "owner": "ml-infra"}
    assert after.agent_start_time != before.agent_start_time  # a fresh registration
    assert [(n, force) for n, force, _ in p.sim.state.deregistrations] == [("gpu009", False)]
    assert steps(p) == [
        ("drain", "intent", None),
        ("drain", "outcome", "sent"),
        ("deregister", "intent", None),
        ("deregister", "outcome", "sent"),
        ("return", "outcome", "sent"),
        ("labels", "intent", None),
        ("labels", "outcome", "sent"),
        ("done", "outcome", "sent"),
    ]
    drain = journal_records(p.journal)[0]
    assert drain["restore"]["labels"]["owner"] == "ml-infra"
    assert drain["call"] == f"UpdateNode(gpu009, state=DRAIN, reason='{OUR_DRAIN}')"
    metrics = run_cli(
        "audit", "--controller", p.sim.controller_address, "--inventory", str(p.live),
        "--journal", str(p.journal), "--format", "prometheus", home=p.home,
    ).stdout  # fmt: skip
    assert 'spurctl_repairs_total{result="repaired"} 1\n' in metrics
    assert 'spurctl_drains_total{command="repair"} 1\n' in metrics
    assert "spurctl_nodes_left_drained 0\n" in metrics


def test_the_audit_and_explain_name_repair_as_the_remedy(p: Phantom) -> None:
    audit = run_cli(
        "audit", "--controller", p.sim.controller_address, "--inventory", str(p.live),
        "--nodes", "gpu009", "--format", "json", home=p.home,
    )  # fmt: skip
    [finding] = json.loads(audit.stdout)["findings"]
    assert finding["kind"] == "phantom-alloc"
    assert "spurctl repair --node gpu009" in finding["reason"]
    explain = run_cli(
        "explain", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), home=p.home,
    )  # fmt: skip
    assert explain.returncode == 0, explain.stderr
    assert "spurctl repair --node gpu009" in explain.stdout


def test_a_dry_run_sends_nothing_and_a_saved_plan_is_carried_out_later(
    p: Phantom, tmp_path: Path
) -> None:
    before = p.sim.node("gpu009")
    plan = tmp_path / "plan.json"
    proc = repair(p, "--dry-run", "-o", str(plan))
    assert proc.returncode == 0, proc.stderr
    assert "DRY RUN: nothing sent" in proc.stdout
    untouched(p, before)
    saved = json.loads(plan.read_text())
    assert saved["schema"] == "spurctl.repair-plan/v1"
    assert [t["node"] for t in saved["targets"]] == ["gpu009"]

    proc = run_cli(
        "repair", "--plan", str(plan), "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--tick", "0", "--wait", "5", "--yes", home=p.home,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.sim.node("gpu009").alloc.empty


def test_a_saved_plan_whose_charge_changed_is_refused_for_that_node(
    p: Phantom, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    assert repair(p, "--dry-run", "-o", str(plan)).returncode == 0
    recharge(p)
    before = p.sim.node("gpu009")
    proc = run_cli(
        "repair", "--plan", str(plan), "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--yes", home=p.home,
    )  # fmt: skip
    assert proc.returncode == 1
    assert (
        f"gpu009  REFUSED: the charge changed since the saved plan: it was {CHARGE}, it is 8 CPUs"
        in proc.stdout
    )
    untouched(p, before)


def test_without_a_terminal_and_without_yes_nothing_is_sent(p: Phantom) -> None:
    before = p.sim.node("gpu009")
    proc = repair(p)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "spurctl: error: refusing to repair without --yes: standard input is not a terminal"
    )
    untouched(p, before)


def test_inventories_on_standard_input_are_refused_as_they_cannot_be_read_again(
    p: Phantom,
) -> None:
    before = p.sim.node("gpu009")
    proc = run_cli(
        "repair", "--node", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", "-", "--conf", str(p.conf), "--yes", home=p.home,
    )  # fmt: skip
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "standard input (-) can be read only once" in line
    untouched(p, before)


# -- refusals before anything is sent -----------------------------------------------------


def test_a_node_an_active_job_lists_is_refused_naming_the_job(p: Phantom) -> None:
    job = p.sim.job(4960)
    assert job is not None
    p.sim.set_job(msgspec.structs.replace(job, job_id=5120, nodelist="gpu009"))
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes")
    assert proc.returncode == 1
    assert (
        "gpu009  REFUSED: job 5120 RUNNING lists gpu009: the charge is real in substance "
        "(removing the node would make a busy node a dispatch-reject loop); nothing to repair"
    ) in proc.stdout
    untouched(p, before)


def test_a_node_that_holds_a_run_is_refused(p: Phantom) -> None:
    p.sim.hold("gpu009", Holding(job_id=5200, pids=(7001,), started_at=utcnow()))
    wait_for(lambda: '"job_id": 5200' in p.live.read_text())
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes")
    assert proc.returncode == 1
    assert "gpu009  REFUSED: gpu009 holds job 5200, 1 process: the charge may be real" in (
        proc.stdout
    )
    untouched(p, before)


def _inventory_line(p: Phantom, **changes: Any) -> Path:
    """gpu009's inventory, changed, as the only file read."""
    [line] = [json.loads(x) for x in p.live.read_text().splitlines() if '"gpu009"' in x]
    line.update(changes)
    path = p.live.with_name("gpu009.json")
    path.write_text(json.dumps(line) + "\n")
    return path


def test_an_inventory_older_than_the_limit_is_refused(p: Phantom) -> None:
    old = (utcnow() - timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p.live = _inventory_line(p, collected_at=old)
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes")
    assert proc.returncode == 1
    assert (
        "gpu009  REFUSED: gpu009's inventory was collected 20 min ago, longer than "
        "--max-inventory-age 10 min: collect it again, then repair"
    ) in proc.stdout
    untouched(p, before)


def test_a_node_whose_spurd_is_not_running_is_refused(p: Phantom) -> None:
    p.live = _inventory_line(p, agent=None)
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes")
    assert proc.returncode == 1
    assert (
        "gpu009  REFUSED: spurd is not running on gpu009 (its inventory found none): a removed "
        "node comes back only through its spurd's next heartbeat; start spurd there first"
    ) in proc.stdout
    untouched(p, before)


def test_a_node_in_a_health_check_drain_is_refused_and_untouched(p: Phantom) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="health-check(gpu-burn): failed")
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes", "--restore-drain")
    assert proc.returncode == 1
    assert (
        "gpu009  REFUSED: gpu009 is DRAINING with reason 'health-check(gpu-burn): failed', the "
        "health system's (Spur #836): spurctl never repairs a node a health check holds"
    ) in proc.stdout
    untouched(p, before)


@pytest.mark.parametrize(
    ("conf", "said"),
    [
        ("[network]\nwg_enabled = true\n", "says [network] wg_enabled = true; removing a node"),
        ("[cluster]\nenabled = true\n", "says [cluster] enabled = true (k0s); removing a node"),
        ('[admission]\nmode = "token"\n', 'says [admission] mode = "token": a removed node'),
    ],
    ids=["wireguard-mesh", "k0s", "token-admission"],
)
def test_a_cluster_where_a_removed_node_may_not_come_back_is_refused_whole(
    p: Phantom, conf: str, said: str
) -> None:
    p.conf.write_text(CONF + conf)
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("spurctl: error: refusing to repair, nothing sent: ") and said in line
    untouched(p, before)
    assert not p.journal.exists()


def test_without_a_spur_conf_the_operator_must_say_removed_nodes_rejoin(p: Phantom) -> None:
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes", conf=False)
    assert proc.returncode == 2
    assert "no spur.conf was read (pass --conf, or set SPUR_CONF)" in proc.stderr
    assert "pass --rejoin-checked" in proc.stderr
    untouched(p, before)
    proc = repair(p, "--yes", "--rejoin-checked", conf=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Rejoin: the operator checked that a removed node registers again" in proc.stdout
    assert p.sim.node("gpu009").alloc.empty


def test_token_admission_is_repaired_once_the_operator_checked_the_join_tokens(
    p: Phantom,
) -> None:
    p.conf.write_text(CONF + '[admission]\nmode = "token"\n')
    proc = repair(p, "--yes", "--rejoin-checked")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.sim.node("gpu009").alloc.empty


def test_someone_elses_drain_is_refused_unless_told_then_put_back_with_its_reason(
    p: Phantom,
) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM, ticket 88")
    before = p.sim.node("gpu009")
    assert before.state is NodeState.DRAINING  # charged: DRAIN becomes DRAINING, for ever
    proc = repair(p, "--yes")
    assert proc.returncode == 1
    assert (
        "gpu009  REFUSED: gpu009 is DRAINING with reason 'ops: bad DIMM, ticket 88', someone "
        "else's: its fresh registration would drop that drain; pass --restore-drain"
    ) in proc.stdout
    untouched(p, before)

    proc = repair(p, "--yes", "--restore-drain")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = p.sim.node("gpu009")
    assert after.alloc.empty
    assert (after.state, after.state_reason) == (NodeState.DRAIN, "ops: bad DIMM, ticket 88")
    assert ("redrain", "outcome", "sent") in steps(p)


# -- refusals after spurctl's drain ----------------------------------------------------------


def test_a_charge_that_changed_after_the_drain_is_refused_and_spurctls_drain_lifted(
    p: Phantom,
) -> None:
    watcher = when_drained(p, lambda: recharge(p))
    proc = repair(p, "--yes", "--tick", "3")
    watcher.join(timeout=30)
    assert proc.returncode == 1
    assert (
        f"gpu009  refused: not removed: the charge changed since the view: it was {CHARGE}, it "
        "is 8 CPUs (spurctl's drain lifted)"
    ) in proc.stdout
    assert p.sim.state.deregistrations == []
    assert p.sim.node("gpu009").state is not NodeState.DRAINING
    assert steps(p)[-3:] == [
        ("recheck", "outcome", "skipped"),
        ("undrain", "intent", None),
        ("undrain", "outcome", "sent"),
    ]


def test_a_dispatch_landing_during_the_tick_is_refused_at_the_re_read(p: Phantom) -> None:
    job = p.sim.job(4960)
    assert job is not None
    watcher = when_drained(
        p, lambda: p.sim.set_job(msgspec.structs.replace(job, job_id=5120, nodelist="gpu009"))
    )
    proc = repair(p, "--yes", "--tick", "3")
    watcher.join(timeout=30)
    assert proc.returncode == 1
    assert "gpu009  refused: not removed: job 5120 RUNNING lists gpu009 since the plan" in (
        proc.stdout
    )
    assert p.sim.state.deregistrations == []


# -- a node that does not come back -----------------------------------------------------------


def test_a_node_that_never_comes_back_is_named_with_what_to_run_and_taken_up_later(
    p: Phantom,
) -> None:
    update(p, name="gpu009", labels={"owner": "ml-infra"})
    p.sim.state.refuse_registration("gpu009", "join token expired")
    proc = repair(p, "--yes", "--wait", "1")
    assert proc.returncode == 1
    assert (
        "gpu009  not-back: gpu009 did not register again within 1 s (--wait): its spurd is not "
        "running, cannot reach the controller, or is refused (an expired join token)"
    ) in proc.stdout
    assert "    ssh gpu009 'systemctl start spurd'   # starts its spurd" in proc.stdout
    assert f"    spurctl repair --node gpu009 --inventory {p.live}" in proc.stdout
    assert steps(p)[-1] == ("return", "outcome", "failed")
    assert "gpu009" not in p.sim.state.nodes

    journal = run_cli("journal", "--journal", str(p.journal), home=p.home)
    assert journal.returncode == 0, journal.stderr
    assert (
        "not finished: the repair of gpu009 (run " in journal.stdout
        and "stopped after DeregisterNode" in journal.stdout
    )
    assert f"spurctl repair --node gpu009 --journal {p.journal}" in journal.stdout

    # Still gone: a second run waits again and says so, with nothing else sent.
    proc = repair(p, "--yes", "--wait", "1")
    assert proc.returncode == 1
    assert "its record was removed by repair run" in proc.stdout
    assert len(p.sim.state.deregistrations) == 1

    del p.sim.state.registration_refused["gpu009"]
    wait_for(lambda: "gpu009" in p.sim.state.nodes)
    assert "owner" not in p.sim.node("gpu009").labels  # the fresh record dropped it
    proc = repair(p, "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.sim.node("gpu009").labels.get("owner") == "ml-infra"  # from the journal
    assert len(p.sim.state.deregistrations) == 1
    assert (
        run_cli("journal", "--journal", str(p.journal), home=p.home).stdout.count("not finished")
        == 0
    )


def test_a_crash_after_the_drain_leaves_a_journal_the_next_run_takes_up(p: Phantom) -> None:
    """Killed in its tick, after the drain went out: the journal holds someone else's drain,
    which the node's reason no longer shows; the next run puts it back."""
    from tests.cli import cli_process, kill_group

    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM")
    args = [
        "repair", "--node", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--tick", "60", "--yes", "--restore-drain",
    ]  # fmt: skip
    with cli_process(*args, home=p.home) as proc:
        wait_for(lambda: p.sim.node("gpu009").state_reason == OUR_DRAIN, timeout=30)
        wait_for(lambda: ("drain", "outcome", "sent") in steps(p), timeout=30)
        kill_group(proc.pid)
        proc.wait(timeout=10)
    assert steps(p) == [("drain", "intent", None), ("drain", "outcome", "sent")]

    proc2 = repair(p, "--yes")  # no --restore-drain: the journal says what to put back
    assert proc2.returncode == 0, proc2.stdout + proc2.stderr
    assert "[takes up run " in proc2.stdout
    after = p.sim.node("gpu009")
    assert after.alloc.empty
    assert (after.state, after.state_reason) == (NodeState.DRAIN, "ops: bad DIMM")


def test_deregister_refused_by_the_controller_lifts_spurctls_drain(p: Phantom) -> None:
    """A job the re-read could not see (it landed between the re-read and the removal):
    DeregisterNode(force=false) refuses, and spurctl's drain is lifted."""
    from spurctl.scope import Scope
    from spurctl.sources import node_records
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import connect_settings
    from spurctl.usecases.repair import RepairRequest, Status
    from spurctl.usecases.repair import repair as run_repair

    job = p.sim.job(4960)
    assert job is not None
    conn = connect_settings(controller=p.sim.controller_address, conf_path=p.conf, home=p.home)
    request = RepairRequest(
        scope=Scope.parse("gpu009"), journal_path=p.journal, yes=True, tick_s=0, wait_s=2
    )
    src = Sources(request.scope, [str(p.live)], False, "", 1)
    real = node_records.active_jobs_on
    calls: list[str] = []

    def racing(client: Any, name: str, version: str) -> list[Any]:
        calls.append(name)
        seen = real(client, name, version)
        if len(calls) == 2:  # the re-read: the job lands right after it
            p.sim.set_job(msgspec.structs.replace(job, job_id=5120, nodelist="gpu009"))
        return seen

    node_records.active_jobs_on = racing  # type: ignore[assignment]
    try:
        done = run_repair(request, src, conn, show_plan=lambda plan: None, ask=None)
    finally:
        node_records.active_jobs_on = real  # type: ignore[assignment]
    [result] = done.results
    assert result.status is Status.REFUSED
    assert "node 'gpu009' has running jobs; use --force to evict them" in result.detail
    assert [(n, force) for n, force, _ in p.sim.state.deregistrations] == []
    assert p.sim.node("gpu009").state_reason == ""
    assert ("deregister", "outcome", "failed") in steps(p)


def _interrupt_when(
    p: Phantom, ready: Callable[[], bool], *extra: str, stop: str = "SIGINT"
) -> tuple[int, str]:
    """A real `spurctl repair --yes` in its own process, sent `stop` (SIGINT: Ctrl-C) once
    `ready`."""
    import signal

    from tests.cli import cli_process, default_sigint

    argv = [
        "repair", "--node", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--yes", *extra,
    ]  # fmt: skip
    with cli_process(*argv, home=p.home, preexec_fn=default_sigint) as proc:
        wait_for(ready, timeout=30)
        proc.send_signal(getattr(signal, stop))
        out, err = proc.communicate(timeout=30)
    return proc.returncode, out + err


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_ctrl_c_during_the_tick_lifts_spurctls_drain_and_removes_nothing(
    p: Phantom, stop: str
) -> None:
    def drained() -> bool:
        node = p.sim.state.nodes.get("gpu009")
        # Charged, so DRAINING as Spur shows it (a charge-free node would be DRAINED).
        return node is not None and node.state in (NodeState.DRAIN, NodeState.DRAINING)

    rc, out = _interrupt_when(p, drained, "--tick", "60", "--wait", "5", stop=stop)
    # As reclaim's: what was done is reported, exit 1 (docs/contract.md "Exit status").
    assert rc == 1, out
    assert (
        "gpu009  interrupted: interrupted before DeregisterNode (spurctl's drain lifted)" in out
    ), out
    assert "1 interrupted" in out and "0 refused" in out, out
    node = p.sim.state.nodes["gpu009"]
    assert node.state not in (NodeState.DRAIN, NodeState.DRAINING), node
    assert OUR_DRAIN not in node.state_reason, node
    assert p.sim.state.deregistrations == []
    assert [s for s in steps(p) if s[0] == "undrain"] == [
        ("undrain", "intent", None),
        ("undrain", "outcome", "sent"),
    ], steps(p)


def test_ctrl_c_while_waiting_for_the_node_to_return_says_how_to_finish(p: Phantom) -> None:
    p.sim.state.refuse_registration("gpu009", "join token expired")
    rc, out = _interrupt_when(
        p, lambda: bool(p.sim.state.deregistrations), "--tick", "0", "--wait", "60"
    )
    assert rc == 1, out
    assert "interrupted after DeregisterNode: gpu009's record is gone" in out, out
    assert "spurctl repair --node gpu009" in out
    assert len(p.sim.state.deregistrations) == 1
    journal = run_cli("journal", "--journal", str(p.journal), home=p.home)
    assert "stopped after DeregisterNode" in journal.stdout, journal.stdout


def test_a_deregister_failure_other_than_running_jobs_is_a_failure_and_the_hold_put_back(
    p: Phantom,
) -> None:
    """spurctld answers FAILED_PRECONDITION for every error of `remove_node`, a Raft propose
    failure included: only "has running jobs" is the refusal; anything else is said as the
    failure it is, and spurctl's drain gives way to the admin's again."""
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM")
    p.sim.state.remove_failure = "raft propose failed: timeout waiting for the log to commit"
    proc = repair(p, "--yes", "--restore-drain")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if x.startswith("  gpu009  failed")), "")
    assert line, proc.stdout
    assert line.startswith("  gpu009  failed: DeregisterNode failed: controller "), line
    assert "raft propose failed: timeout waiting for the log to commit" in line, line
    assert "its earlier drain put back" in line and "job" not in line, line
    assert "0 refused after the re-read, 1 failed" in proc.stdout, proc.stdout
    node = p.sim.node("gpu009")
    assert (node.state_reason, "gpu009" in p.sim.state.nodes) == ("ops: bad DIMM", True)
    assert [s for s in steps(p) if s[0] == "undrain"] == [
        ("undrain", "intent", None),
        ("undrain", "outcome", "sent"),
    ]


# -- whatever stops a repair, what it owes the node is put back or said --------------------


def _away_for(
    p: Phantom, seconds: float, when: Callable[[], bool], then: Callable[[], None]
) -> Any:
    """Once `when`, spurctld goes away for `seconds` (a restart, a failover) and comes back
    on its port; `then` runs while it is away."""

    def outage() -> None:
        wait_for(when, timeout=30)
        p.sim.stop_controller()
        then()
        time.sleep(seconds)
        p.sim.start_controller()

    thread = threading.Thread(target=outage, daemon=True)
    thread.start()
    return thread


def test_a_controller_away_for_3_s_during_the_wait_ends_nothing_and_the_hold_comes_back(
    p: Phantom,
) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM", labels={"owner": "ml"})
    p.sim.state.refuse_registration("gpu009", "held back until the controller is away")
    thread = _away_for(
        p, 3, lambda: bool(p.sim.state.deregistrations),
        lambda: p.sim.state.registration_refused.pop("gpu009"),
    )  # fmt: skip
    proc = repair(p, "--yes", "--restore-drain", "--wait", "30")
    thread.join(timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 repaired" in proc.stdout, proc.stdout
    node = p.sim.node("gpu009")
    assert (node.state_reason, node.labels.get("owner")) == ("ops: bad DIMM", "ml"), node
    assert node.alloc.empty


def test_a_controller_away_at_the_re_read_removes_nothing_and_puts_the_admins_drain_back(
    p: Phantom,
) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM")
    thread = _away_for(p, 3, lambda: p.sim.node("gpu009").state_reason == OUR_DRAIN, lambda: None)
    proc = repair(p, "--yes", "--restore-drain", "--tick", "0.5", "--wait", "30")
    thread.join(timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if x.startswith("  gpu009  failed")), "")
    assert line.startswith("  gpu009  failed: not removed: the controller did not answer"), (
        proc.stdout + proc.stderr
    )
    assert line.endswith("(its earlier drain put back)"), line
    assert p.sim.state.deregistrations == []
    assert p.sim.node("gpu009").state_reason == "ops: bad DIMM"


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_while_waiting_says_what_the_node_is_owed_and_the_next_run_puts_it_back(
    p: Phantom, stop: str
) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM", labels={"owner": "ml"})
    p.sim.state.refuse_registration("gpu009", "join token expired")
    rc, out = _interrupt_when(
        p, lambda: bool(p.sim.state.deregistrations), "--tick", "0", "--wait", "60",
        "--restore-drain", stop=stop,
    )  # fmt: skip
    assert rc == 1, out
    assert (
        "gpu009  interrupted: interrupted after DeregisterNode: gpu009's record is gone until "
        "its spurd registers it again; owed: the drain 'ops: bad DIMM' and labels gpu=mi300x, "
        "owner=ml, rack=r02 (the journal keeps it)"
    ) in out, out
    assert f"    spurctl repair --node gpu009 --inventory {p.live}" in out, out

    del p.sim.state.registration_refused["gpu009"]
    wait_for(lambda: "gpu009" in p.sim.state.nodes)
    assert p.sim.node("gpu009").state_reason == ""  # back in service: the admin's drain lost
    proc = repair(p, "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    node = p.sim.node("gpu009")
    assert (node.state_reason, node.labels.get("owner")) == ("ops: bad DIMM", "ml"), node


def test_a_second_ctrl_c_while_spurctls_drain_is_lifted_still_says_what_went_out(
    p: Phantom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C pressed as the drain goes out, and again as spurctl lifts it: both calls went
    out, and the result says so (exit 1), not a bare `spurctl: interrupted` (exit 130)."""
    import os
    import signal

    from spurctl.act import node_admin

    real = node_admin.ControllerWriter.update_node

    def pressed(self: Any, name: str, **fields: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real(self, name, **fields)

    monkeypatch.setattr(node_admin.ControllerWriter, "update_node", pressed)
    proc = repair(p, "--yes", "--tick", "30")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "  gpu009  interrupted: interrupted before DeregisterNode (spurctl's drain lifted)"
        in proc.stdout
    ), proc.stdout + proc.stderr
    assert [s for s in steps(p) if s[1] == "outcome"] == [
        ("drain", "outcome", "sent"),
        ("undrain", "outcome", "sent"),
    ], steps(p)
    assert p.sim.node("gpu009").state_reason == ""


def _journal_full_when(
    p: Phantom, ready: Callable[[], bool], then: Callable[[], None], *extra: str
) -> tuple[subprocess.Popen[str], str, str, int]:
    """A real `spurctl repair --yes --restore-drain` whose journal can grow no more once
    `ready` (RLIMIT_FSIZE set on the running process at the journal's size: EFBIG for
    real, as a full disk's ENOSPC); `then` runs right after. The process, its output and
    the journal's size then."""
    import resource
    import signal

    from tests.cli import cli_process

    argv = [
        "repair", "--node", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--yes", "--restore-drain", *extra,
    ]  # fmt: skip

    def ignore_sigxfsz() -> None:  # a write past the limit is then EFBIG, not a kill
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    with cli_process(*argv, home=p.home, preexec_fn=ignore_sigxfsz) as proc:
        wait_for(lambda: p.journal.is_file() and ready())
        size = p.journal.stat().st_size
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, size))
        then()
        out, err = proc.communicate(timeout=60)
    return proc, out, err, size


def test_a_journal_full_after_deregister_still_puts_everything_back_and_says_so_in_one_line(
    p: Phantom,
) -> None:
    """The journal's file can grow no more right after DeregisterNode's outcome: the node
    still gets its drain and labels back when it returns, and the run ends with one line
    saying what went out unrecorded, what is owed and the command that settles it (exit
    2), never an internal error; that command then does."""
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM", labels={"owner": "ml"})
    p.sim.state.refuse_registration("gpu009", "held back until the journal is full")
    proc, out, err, size = _journal_full_when(
        p, lambda: ("deregister", "outcome", "sent") in steps(p),
        lambda: p.sim.state.registration_refused.pop("gpu009"), "--tick", "0", "--wait", "30",
    )  # fmt: skip
    assert proc.returncode == 2, out + err
    node = p.sim.node("gpu009")
    assert (node.state_reason, node.labels.get("owner")) == ("ops: bad DIMM", "ml"), node
    assert p.journal.stat().st_size == size  # nothing more was written
    assert "internal error" not in err and "Traceback" not in err, err
    # The run said what it waited for (notes); the error is one line of its own.
    [line] = [ln for ln in err.splitlines() if not ln.startswith("spurctl: note: ")]
    said = (
        f"spurctl: journal {p.journal}: File too large: sent without its record: "
        "UpdateNode(gpu009, state=DRAIN, reason='ops: bad DIMM'), UpdateNode(gpu009, "
        "labels={'owner': 'ml'}); still owed: nothing; settled by `spurctl repair --node gpu009 "
    )
    assert line.startswith(said), line
    assert "  gpu009  repaired: gpu009 registered again with no charge; put back" in out, out

    again = repair(p, "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    journal = run_cli("journal", "--journal", str(p.journal), home=p.home)
    assert "not finished" not in journal.stdout, journal.stdout
    assert p.sim.node("gpu009").state_reason == "ops: bad DIMM"


def test_a_controller_away_past_the_deadline_says_what_is_owed_and_the_next_run_puts_it_back(
    p: Phantom,
) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM")
    thread = _away_for(p, 5, lambda: p.sim.node("gpu009").state_reason == OUR_DRAIN, lambda: None)
    proc = repair(p, "--yes", "--restore-drain", "--tick", "0.5", "--wait", "1")
    thread.join(timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if x.startswith("  gpu009  failed")), "")
    assert line.startswith("  gpu009  failed: not removed: the controller did not answer"), (
        proc.stdout + proc.stderr
    )
    assert line.endswith(
        "owed: the drain 'ops: bad DIMM' in place of spurctl's (the journal keeps it)"
    ), line
    assert "    spurctl repair --node gpu009 " in proc.stdout, proc.stdout
    assert p.sim.node("gpu009").state_reason == OUR_DRAIN  # the controller never took it
    assert [s for s in steps(p) if s[0] == "undrain"] == [("undrain", "outcome", "failed")]

    again = repair(p, "--yes")
    assert again.returncode == 0, again.stdout + again.stderr
    assert p.sim.node("gpu009").state_reason == "ops: bad DIMM"


def test_a_journal_full_before_deregister_removes_nothing_and_puts_the_admins_drain_back(
    p: Phantom,
) -> None:
    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM")
    proc, out, err, size = _journal_full_when(
        p, lambda: ("drain", "outcome", "sent") in steps(p), lambda: None, "--tick", "2",
    )  # fmt: skip
    assert proc.returncode == 2, out + err
    assert p.sim.state.deregistrations == []
    assert p.sim.node("gpu009").state_reason == "ops: bad DIMM"
    assert p.journal.stat().st_size == size
    # The run said what it waited for (notes); the error is one line of its own.
    [line] = [ln for ln in err.splitlines() if not ln.startswith("spurctl: note: ")]
    assert line.startswith(
        f"spurctl: journal {p.journal}: File too large: sent without its record: "
        "UpdateNode(gpu009, state=DRAIN, reason='ops: bad DIMM'); still owed: nothing; "
        "settled by `spurctl repair --node gpu009 "
    ), line
    assert "  gpu009  failed: not removed: journal " in out, out
    assert out.rstrip().endswith("(its earlier drain put back)"), out


def test_ctrl_c_while_waiting_for_a_node_already_back_still_puts_back_what_it_is_owed(
    p: Phantom,
) -> None:
    """The Ctrl-C lands in the wait's pause, after the node registered again and before the
    run saw it: the run looks once more, finds it back, and puts back the admin's drain
    and label before it stops (its result says so), instead of leaving it in service."""
    import os
    import signal

    from spurctl.scope import Scope
    from spurctl.sources.inventories import Sources
    from spurctl.sources.settings import connect_settings
    from spurctl.usecases.repair import RepairRequest, Status
    from spurctl.usecases.repair import repair as run_repair

    update(p, name="gpu009", state=pb.NODE_DRAIN, reason="ops: bad DIMM", labels={"owner": "ml"})
    p.sim.state.refuse_registration("gpu009", "held back until the wait's first pause")
    conn = connect_settings(controller=p.sim.controller_address, conf_path=p.conf, home=p.home)
    request = RepairRequest(
        scope=Scope.parse("gpu009"), journal_path=p.journal, yes=True, tick_s=0, wait_s=30,
        restore_drain=True,
    )  # fmt: skip
    src = Sources(request.scope, [str(p.live)], False, "", 1)

    def pause(seconds: float) -> None:
        if p.sim.state.deregistrations:  # the wait's pause, not the tick's
            p.sim.state.registration_refused.pop("gpu009", None)
            wait_for(lambda: "gpu009" in p.sim.state.nodes, timeout=10)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as a terminal sends it
            time.sleep(1)  # it lands in here

    done = run_repair(request, src, conn, show_plan=lambda plan: None, ask=None, sleep=pause)
    [result] = done.results
    assert result.status is Status.REPAIRED, result
    assert "put back the drain 'ops: bad DIMM' and labels owner=ml" in result.detail, result
    node = p.sim.node("gpu009")
    assert (node.state_reason, node.labels.get("owner")) == ("ops: bad DIMM", "ml"), node


# -- nothing vouches beyond what it names (issue 48, item 4) ----------------------------------


def _no_deregister_intent(p: Phantom) -> None:
    """spurctl itself refused: no DeregisterNode intent in the journal, none received."""
    assert not p.journal.exists() or ("deregister", "intent", None) not in steps(p)
    assert p.sim.state.deregistrations == []


def test_another_nodes_inventory_matching_only_loosely_does_not_vouch(tmp_path: Path) -> None:
    """The only inventory near gpu009 is gpu009.site-b's: a loose match (same short name,
    another domain). It shows spurd running and nothing held, and still cannot vouch."""
    scenario = incident()
    scenario.inventory_names["gpu009"] = "gpu009.site-b"
    with phantom(tmp_path, scenario) as p:
        assert '"node": "gpu009.site-b"' in p.live.read_text()
        before = p.sim.node("gpu009")
        proc = repair(p, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gpu009  REFUSED: no inventory under the controller's name gpu009; gpu009.site-b "
        "matches it only loosely, which cannot vouch for it"
    ) in proc.stdout
    _no_deregister_intent(p)
    assert p.sim.node("gpu009") == before


def test_a_loosely_named_inventory_holding_a_live_run_beside_an_empty_exact_one_refuses(
    p: Phantom,
) -> None:
    """gpu009's own inventory is empty, and GPU009.site-b's shows a live GPU process."""
    [line] = [json.loads(x) for x in p.live.read_text().splitlines() if '"gpu009"' in x]
    line.update(
        node="GPU009.site-b", hostname="GPU009.site-b",
        held=[{"job_id": 5300, "cpus": 8, "memory_mb": 1024, "gpus": [0], "pids": [9101],
               "started_at": line["collected_at"]}],
    )  # fmt: skip
    twin = p.live.with_name("twin.jsonl")
    twin.write_text(json.dumps(line) + "\n")
    before = p.sim.node("gpu009")
    proc = repair(p, "--yes", "--inventory", str(twin))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gpu009  REFUSED: GPU009.site-b's inventory, a name that matches gpu009 only loosely, "
        "holds job 5300, 1 process: it may be gpu009's"
    ) in proc.stdout
    _no_deregister_intent(p)
    assert p.sim.node("gpu009") == before


@pytest.mark.parametrize(
    ("release", "answer_limit"),
    [(V0_8_0, None), (V0_9_TO_0_11, None), (V0_9_TO_0_11, 2_000)],
    ids=["v0.8.0", "v0.9-0.11", "v0.9-0.11-small-answers"],
)
def test_an_active_job_with_no_nodelist_counts_as_possibly_on_the_node(
    tmp_path: Path, release: SpurRelease, answer_limit: int | None
) -> None:
    """5119 RUNNING with its allocation not recorded yet (the `mid-commit` shape): it may
    hold gpu009's charge. Release v0.8.0 ignores GetJobs' `nodes` filter; 0.9.0 on, the
    filter never answers a job with no allocated node. With answers capped at 2 kB the
    active jobs are read a few at a time (by state, then by id range), and it is found."""
    with phantom(tmp_path, spur_release=release, answer_limit=answer_limit) as p:
        job = p.sim.job(MID_COMMIT)
        assert job is not None
        p.sim.set_job(msgspec.structs.replace(job, nodelist=""))
        before = p.sim.node("gpu009")
        proc = repair(p, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gpu009  REFUSED: job 5119 RUNNING has no nodelist, a placement spurctl cannot read: "
        "it may be on gpu009 and hold that charge; repair once its placement is recorded"
    ) in proc.stdout
    _no_deregister_intent(p)
    assert p.sim.node("gpu009") == before


def test_an_active_job_whose_nodelist_does_not_parse_counts_and_is_caught_at_the_re_read(
    p: Phantom,
) -> None:
    """A nodelist spurctl cannot read (here a '[' never closed), landing during the tick:
    refused at the re-read. Such a job may be on any node."""
    job = p.sim.job(4960)
    assert job is not None
    wide = msgspec.structs.replace(job, job_id=5121, nodelist="gpu[0")
    watcher = when_drained(p, lambda: p.sim.set_job(wide))
    proc = repair(p, "--yes", "--tick", "3")
    watcher.join(timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gpu009  refused: not removed: job 5121 RUNNING has nodelist 'gpu[0' since the plan, a "
        "placement spurctl cannot read: it may be on gpu009"
    ) in proc.stdout
    _no_deregister_intent(p)


def test_a_loosely_named_inventory_showing_a_run_at_the_re_read_refuses_after_the_drain(
    p: Phantom,
) -> None:
    """GPU009.site-b's inventory is read beside gpu009's, empty at the plan; during the tick
    it shows a live process: the re-read refuses, and spurctl's drain is lifted."""
    [line] = [json.loads(x) for x in p.live.read_text().splitlines() if '"gpu009"' in x]
    line.update(node="GPU009.site-b", hostname="GPU009.site-b")
    twin = p.live.with_name("twin.jsonl")
    twin.write_text(json.dumps(line) + "\n")
    busy = dict(line, collected_at=format_time(utcnow()), held=[
        {"job_id": 5300, "cpus": 8, "memory_mb": 1024, "gpus": [0], "pids": [9101],
         "started_at": line["collected_at"]},
    ])  # fmt: skip
    watcher = when_drained(p, lambda: twin.write_text(json.dumps(busy) + "\n"))
    proc = repair(p, "--yes", "--tick", "3", "--inventory", str(twin))
    watcher.join(timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "gpu009  refused: not removed: GPU009.site-b's inventory, a name that matches gpu009 "
        "only loosely, holds job 5300, 1 process: it may be gpu009's"
    ) in proc.stdout
    _no_deregister_intent(p)
    assert p.sim.node("gpu009").state_reason == ""  # spurctl's drain lifted
