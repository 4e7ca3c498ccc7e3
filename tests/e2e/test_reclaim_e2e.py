"""`spurctl reclaim` end to end: real agents and controller on loopback, real journal files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.act import cancels
from spurctl.act.agents import AgentPool
from spurctl.act.journal import Journal
from spurctl.audit_view import run_audit
from spurctl.decide import confirm
from spurctl.decide import plan as rc
from spurctl.model import Holding
from spurctl.releases import filters_for
from spurctl.scope import Scope
from spurctl.sources import credentials as auth
from spurctl.sources.controller import ControllerClient
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import connect_settings
from spurctl_sim import SimCluster, incident
from spurctl_sim.releases import SPUR_RELEASES, SpurRelease
from tests.cli import run_cli
from tests.live import KEY, secured_incident

WHEN = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # after every submission


def mixed_node(sim: SimCluster) -> None:
    """gpu012 also holds one of every other kind: a stale run, an aged-out id, ..."""
    for job_id in (4711, 4388, 5187, 5119, 5118):
        sim.hold(
            "gpu012", Holding(job_id=job_id, gpus=(0,), pids=(1000 + job_id,), started_at=WHEN)
        )


make_sim = secured_incident  # the `sim` fixture (tests/conftest.py)


def files(sim: SimCluster, tmp_path: Path) -> dict[str, str]:
    inv = sim.write_inventories(tmp_path / "inventory.jsonl")
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps(sim.agent_map()))
    key = tmp_path / "jwt.key"
    key.write_text(KEY)
    key.chmod(0o600)
    token = auth.mint(KEY, "root", admin=True, lifetime_s=300)
    return {
        "inventory": str(inv),
        "agents": str(agents),
        "key": str(key),
        "journal": str(tmp_path / "journal.jsonl"),
        "token": token,
    }


def reclaim_cli(sim: SimCluster, f: dict[str, str], *args: str, key: str | None = None):  # type: ignore[no-untyped-def]
    return run_cli(
        "reclaim", "--inventory", f["inventory"], "--agent-map", f["agents"],
        "--journal", f["journal"], "--jwt-key-file", key or f["key"], *args,
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address, "SPUR_AUTH_TOKEN": f["token"]},
    )  # fmt: skip


def journal(f: dict[str, str]) -> list[dict]:  # type: ignore[type-arg]
    path = Path(f["journal"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_dry_run_plans_and_sends_nothing(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu[003-008]", "--dry-run")
    assert run.returncode == 0, run.stderr
    assert "Reclaim plan: 7 cancels" in run.stdout
    assert "7 live runs will be stopped" in run.stdout
    assert sim.cancels == [] and sim.controller_cancels == []
    assert journal(f) == []


@pytest.mark.parametrize("release", SPUR_RELEASES.values(), ids=SPUR_RELEASES.keys())
def test_exact_cancel_set_for_a_node_mixing_every_kind(
    release: SpurRelease, tmp_path: Path
) -> None:
    # The core loop against every Spur release a cluster runs, answers limited to a few
    # records: a controller that says 0.8.0 is read by job-id range (release v0.8.0 has
    # no node filter), later ones node by node. The controller answers unscoped (auth
    # disabled there), so that the whole of its state has to be split.
    with SimCluster(
        incident(), agent_auth="required", jwt_key=KEY, spur_release=release, answer_limit=6_000
    ) as sim:
        exact_cancel_set_for_a_node_mixing_every_kind(sim, tmp_path)
        split = [r for r in sim.job_requests if r.nodes or len(r.job_ids) > 64]
        by_node = filters_for(sim.state.version).nodes  # never for a controller saying 0.8.0
        assert split and all(bool(r.nodes) is by_node for r in split)


def exact_cancel_set_for_a_node_mixing_every_kind(sim: SimCluster, tmp_path: Path) -> None:
    mixed_node(sim)
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu012", "--yes", "--format", "json")
    # Without a re-collect every sent cancel is unconfirmed, exit 1 (was 0).
    assert run.returncode == 1, run.stdout + run.stderr
    sent = sorted((c.node, c.job_id, c.signal, c.subject) for c in sim.cancels)
    # terminal-held 4702, active-elsewhere 4711, below-watermark-unknown 4388; never
    # the healthy 4950, above-watermark 5187, mid-commit 5119 or not-started 5118.
    assert sent == [
        ("gpu012", 4388, 0, "spurctld"),
        ("gpu012", 4702, 0, "spurctld"),
        ("gpu012", 4711, 0, "spurctld"),
    ]
    assert sim.controller_cancels == []  # never the cluster-wide cancel
    doc = json.loads(run.stdout)
    assert doc["summary"]["sent"] == 3 and doc["summary"]["failed"] == 0
    assert doc["confirmation"]["unconfirmed"] == 3 and not doc["confirmation"]["verified"]
    held = {h.job_id for h in sim.holdings("gpu012")}
    assert held == {4950, 5187, 5119, 5118}
    assert {h.job_id for h in sim.holdings("gpu015")} == {4711}  # the legitimate run lives


def test_journal_records_intent_then_outcome_per_cancel(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu[006,012]", "--yes")
    assert run.returncode == 1, run.stdout + run.stderr  # sent, unconfirmed: nothing re-collected
    records = journal(f)
    per_entry: dict[tuple[str, int], list[str]] = {}
    for r in records:
        per_entry.setdefault((r["node"], r["job_id"]), []).append(r["event"])
        assert r["operator"] and r["at"].endswith("Z") and r["kind"]
    assert per_entry == {
        ("gpu006", 4715): ["intent", "outcome"],
        ("gpu006", 4716): ["intent", "outcome"],
        ("gpu012", 4702): ["intent", "outcome"],
    }
    # Within a node, in order: 4715's outcome is written before 4716's intent.
    gpu006 = [(r["event"], r["job_id"]) for r in records if r["node"] == "gpu006"]
    assert gpu006 == [("intent", 4715), ("outcome", 4715), ("intent", 4716), ("outcome", 4716)]
    sent = {(r["node"], r["job_id"]) for r in records if r.get("result") == "sent"}
    assert sent == {(c.node, c.job_id) for c in sim.cancels}


def test_secrets_never_reach_output_or_journal(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu003", "--yes", "--format", "json")
    assert run.returncode == 1  # sent, unconfirmed: nothing re-collected
    for text in (run.stdout, run.stderr, Path(f["journal"]).read_text()):
        assert KEY not in text and f["token"] not in text


def test_a_job_requeued_between_plan_and_send_is_skipped(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    conn = connect_settings(controller=sim.controller_address, token=f["token"], timeout=5.0)
    src = Sources(Scope.parse("gpu[003,007]"), [f["inventory"]], False, "", 1)
    report, inputs = run_audit(src, conn)
    entries = rc.plan(report, {"gpu003", "gpu007"}, None, sim.agent_map().__getitem__)
    assert [(e.node, e.job_id) for e in entries] == [("gpu003", 4711), ("gpu007", 4719)]
    # The controller requeues 4711 onto gpu003 itself after the plan was made.
    sim.requeue(4711, "gpu003")
    agents = AgentPool(jwt_key=KEY, timeout=5.0)
    with Journal(Path(f["journal"])) as j, ControllerClient(conn) as client:
        run = cancels.execute(
            entries, jobs=client, agents=agents, journal=j, watermark=inputs.watermark.value
        )
    agents.close()
    results = {(o.entry.node, o.entry.job_id): o for o in run.outcomes}
    assert results[("gpu003", 4711)].result is rc.Result.SKIPPED
    assert "no longer active-elsewhere" in results[("gpu003", 4711)].detail
    assert results[("gpu007", 4719)].result is rc.Result.SENT
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu007", 4719)]
    assert not run.ok


def test_a_wrong_key_makes_the_agent_refuse_and_the_outcome_failed(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    wrong = tmp_path / "wrong.key"
    wrong.write_text("not-the-cluster-key-0123456789abcdef")
    run = reclaim_cli(sim, f, "--node", "gpu003", "--yes", "--format", "json", key=str(wrong))
    assert run.returncode == 1
    doc = json.loads(run.stdout)
    (outcome,) = doc["outcomes"]
    assert outcome["result"] == "failed"
    assert "refused the controller credential" in outcome["detail"]
    assert sim.cancels == []
    assert journal(f)[-1]["result"] == "failed"


def test_an_agent_with_no_key_configured_is_named_as_the_cause_not_the_key_file(
    tmp_path: Path,
) -> None:
    # gpu003's spurd runs permissive with no [auth] jwt_key: the credential spurctl
    # mints is refused there, though a call without one would pass.
    with SimCluster(
        incident(), auth="required", agent_auth="permissive", jwt_key=KEY, keyless=["gpu003"]
    ) as keyless:
        f = files(keyless, tmp_path)
        run = reclaim_cli(keyless, f, "--node", "gpu003", "--yes", "--format", "json")
        cancels = list(keyless.cancels)
    assert run.returncode == 1, run.stderr
    (outcome,) = json.loads(run.stdout)["outcomes"]
    assert outcome["result"] == "failed"
    detail = outcome["detail"]
    assert "a token was presented but no auth.jwt_key is configured" in detail
    assert "has no [auth] jwt_key configured" in detail and "anonymous call would pass" in detail
    assert "the key file is not at fault" in detail
    assert "check --jwt-key-file" not in detail
    assert cancels == []


def test_an_unreachable_agent_fails_alone(sim: SimCluster, tmp_path: Path) -> None:
    sim.stop_agent("gpu004")
    f = files(sim, tmp_path)
    run = reclaim_cli(
        sim, f, "--node", "gpu[003-005]", "--yes", "--format", "json", "--timeout", "2"
    )
    assert run.returncode == 1
    results = {(o["node"], o["job_id"]): o["result"] for o in json.loads(run.stdout)["outcomes"]}
    assert results == {
        ("gpu003", 4711): "sent",
        ("gpu004", 4712): "failed",
        ("gpu005", 4712): "sent",
    }


def test_without_yes_off_a_terminal_it_refuses_and_sends_nothing(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu003")
    assert run.returncode == 2
    assert "refusing to reclaim without --yes" in run.stderr
    assert sim.cancels == [] and journal(f) == []


def test_nothing_reclaimable_on_a_healthy_node_exits_zero(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu001", "--yes")
    assert run.returncode == 0, run.stderr
    assert "Nothing to reclaim" in run.stdout
    assert sim.cancels == []


def test_job_narrows_the_plan(sim: SimCluster, tmp_path: Path) -> None:
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu006", "--job", "4716", "--yes")
    assert run.returncode == 1  # sent, unconfirmed: nothing re-collected
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu006", 4716)]


def test_verify_turns_a_sent_cancel_into_failed_when_the_node_still_holds_it() -> None:
    from spurctl.model import Action, Finding, Kind

    def outcome(job_id: int) -> rc.Outcome:
        finding = Finding("gpu003", job_id, Kind.TERMINAL_HELD, Action.RECLAIM, "ended")
        return rc.Outcome(rc.Entry(finding, "gpu003:6818"), rc.Result.SENT, "accepted")

    run = rc.ReclaimRun(outcomes=[outcome(1), outcome(2)])
    changed = confirm.verify(run, {"gpu003": {2, 99}}, settle=5)
    assert [o.entry.job_id for o in changed] == [2]
    assert [o.result for o in run.outcomes] == [rc.Result.SENT, rc.Result.FAILED]
    assert "still holds job 2 5 s later" in run.outcomes[1].detail
    assert not run.ok


def test_a_dry_run_without_a_cluster_key_warns_that_the_real_run_would_be_refused(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = files(sim, tmp_path)
    with_key = reclaim_cli(sim, f, "--node", "gpu003", "--dry-run")
    assert with_key.returncode == 0 and with_key.stderr == "", with_key.stderr
    no_key = run_cli(
        "reclaim", "--inventory", f["inventory"], "--agent-map", f["agents"],
        "--journal", f["journal"], "--node", "gpu003", "--dry-run",
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address, "SPUR_AUTH_TOKEN": f["token"]},
    )  # fmt: skip
    assert no_key.returncode == 0, no_key.stderr
    assert "Reclaim plan: 1 cancel" in no_key.stdout
    (warning,) = no_key.stderr.strip().splitlines()
    assert warning.startswith("spurctl: warning: no cluster key is configured")
    assert "--jwt-key-file" in warning
    assert sim.cancels == []


def test_a_node_with_only_investigate_findings_says_so(sim: SimCluster, tmp_path: Path) -> None:
    # gpu014 holds a job above the watermark: a person must look, no cancel is planned.
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu014", "--yes")
    assert run.returncode == 0, run.stderr
    said = " ".join(run.stdout.split())
    assert (
        "Nothing to reclaim on these nodes, but 1 finding needs investigating instead: "
        "above-watermark-unknown on gpu014 (job 5187)"
    ) in said
    assert sim.cancels == []
