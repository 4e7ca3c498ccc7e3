"""`spurctl audit` end to end: real gRPC against the simulated cluster, real files, the CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from spurctl.model import Action, Kind
from spurctl.sources import credentials as auth
from spurctl_sim import SimCluster, incident
from tests.cli import run_cli
from tests.live import KEY, audit_live, by_key

RECLAIMABLE_IN_INCIDENT = {
    ("gpu003", 4711, Kind.ACTIVE_ELSEWHERE),
    ("gpu004", 4712, Kind.ACTIVE_ELSEWHERE),
    ("gpu005", 4712, Kind.ACTIVE_ELSEWHERE),
    ("gpu006", 4715, Kind.ACTIVE_ELSEWHERE),
    ("gpu006", 4716, Kind.ACTIVE_ELSEWHERE),
    ("gpu007", 4719, Kind.ACTIVE_ELSEWHERE),
    ("gpu008", 4720, Kind.ACTIVE_ELSEWHERE),
    ("gpu012", 4702, Kind.TERMINAL_HELD),
    ("gpu013", 4388, Kind.BELOW_WATERMARK_UNKNOWN),
}


@pytest.fixture
def inventory(sim: SimCluster, tmp_path: Path) -> Path:
    return sim.write_inventories(tmp_path / "inventory.jsonl")


def reclaim_set(findings: list) -> set[tuple[str, int | None, Kind]]:
    return {(f.node, f.job_id, f.kind) for f in findings if f.action is Action.RECLAIM}


def test_the_production_incident_is_found_and_explained(sim: SimCluster, inventory: Path) -> None:
    report = audit_live(sim, inventory)
    assert report.view_complete
    assert reclaim_set(report.findings) == RECLAIMABLE_IN_INCIDENT
    found = by_key(report.findings)
    stale = found[("gpu003", 4711)]
    assert stale.live is True and stale.controller_state == "RUNNING"
    assert stale.allocated_nodes == "gpu015"
    assert "gpu015" in stale.reason and "gpu003" in stale.reason and "GPUs 0-7" in stale.reason
    # What the controller cannot see, each explained and never reclaimed.
    assert found[("gpu009", None)].kind is Kind.PHANTOM_ALLOC
    assert found[("gpu014", 5187)].kind is Kind.ABOVE_WATERMARK_UNKNOWN
    assert found[("gpu010", 5118)].action is Action.SPARE
    assert found[("gpu011", 5119)].kind is Kind.MID_COMMIT
    assert found[("gpu021.cluster.local", None)].kind is Kind.NAME_MISMATCH
    assert report.watermark.value == 5121
    assert report.nodes_in_scope == 24 and report.nodes_inventoried == 24


def test_fqdn_agent_is_not_mistaken_for_a_stale_run(sim: SimCluster, inventory: Path) -> None:
    # Spur's own heartbeat compares names exactly and kills 4960's legitimate run on gpu021.
    with SimCluster(incident(), heartbeat_reclaim=True) as spur:
        decisions = {(d.node, d.job_id): d for d in spur.heartbeat()}
    assert decisions[("gpu021", 4960)].reclaim
    report = audit_live(sim, inventory, include_healthy=True)
    held = by_key(report.findings)[("gpu021.cluster.local", 4960)]
    assert held.action is not Action.RECLAIM


def test_nodes_limit_the_audit_to_a_hostlist(sim: SimCluster, inventory: Path) -> None:
    report = audit_live(sim, inventory, nodes="gpu[003-005]")
    assert {f.node for f in report.findings} == {"gpu003", "gpu004", "gpu005"}
    assert report.nodes_in_scope == 3


@pytest.mark.parametrize("spelling", ["--node", "--nodes", "-w"])
def test_audit_takes_node_as_reclaim_does(sim: SimCluster, inventory: Path, spelling: str) -> None:
    run = run_cli(
        "audit", spelling, "gpu[003-004]", "--inventory", str(inventory), "--json",
        "--controller", sim.controller_address,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert {f["node"] for f in doc["findings"]} == {"gpu003", "gpu004"}
    assert doc["summary"]["nodes"] == 2


def test_a_node_in_scope_without_inventory_is_counted_not_inventoried(
    sim: SimCluster, tmp_path: Path
) -> None:
    one = tmp_path / "one.jsonl"
    from spurctl.sources.documents import dump_json
    from spurctl.sources.inventory_document import inventory_to_dict

    one.write_text(dump_json(inventory_to_dict(sim.inventory("gpu003")), indent=None) + "\n")
    report = audit_live(sim, one, nodes="gpu[003-004]")
    assert report.nodes_in_scope == 2 and report.nodes_inventoried == 1
    assert any("gpu004" in note for note in report.notes)
    # And a finding, so the audit cannot pass for a clean one.
    assert by_key(report.findings)[("gpu004", None)].kind is Kind.NOT_INVENTORIED
    assert report.needs_action


def scoped_sim() -> SimCluster:
    return SimCluster(incident(), auth="required", jwt_key=KEY)


def test_admin_credential_sees_a_scoped_view_but_confirms_each_missing_id(
    inventory: Path,
) -> None:
    with scoped_sim() as sim:
        inv = sim.write_inventories(inventory.parent / "scoped.jsonl")
        token = auth.mint(KEY, "henry", admin=True, lifetime_s=300)
        report = audit_live(sim, inv, token=token)
        assert not report.view_complete
        assert report.jobs_seen < report.jobs_total
        assert any("INCOMPLETE" in n for n in report.notes)
        # GetJob confirmations reach the same reclaim set as an unscoped view.
        assert reclaim_set(report.findings) == RECLAIMABLE_IN_INCIDENT


def test_a_users_credential_never_turns_another_users_job_into_a_reclaim(
    inventory: Path,
) -> None:
    with scoped_sim() as sim:
        inv = sim.write_inventories(inventory.parent / "scoped.jsonl")
        token = auth.mint(KEY, "alice", admin=False, lifetime_s=300)
        report = audit_live(sim, inv, token=token)
        assert not report.view_complete
        reclaimed = reclaim_set(report.findings)
        # alice's own stale 4711 is still found; other users' stale runs are
        # redacted by GetJob (no nodelist) and so spared, never guessed at.
        assert ("gpu003", 4711, Kind.ACTIVE_ELSEWHERE) in reclaimed
        assert ("gpu004", 4712, Kind.ACTIVE_ELSEWHERE) not in reclaimed
        assert all(
            f.kind is not Kind.BELOW_WATERMARK_UNKNOWN
            for f in report.findings
            if f.job_id not in (4388,)
        )
        # No spur.conf says how GetJob treats other users' jobs: NOT_FOUND is no proof.
        assert by_key(report.findings)[("gpu013", 4388)].kind is Kind.UNVERIFIABLE
        assert any("NOT_FOUND is not proof" in n for n in report.notes)


def test_with_spur_conf_redacted_visibility_not_found_is_proof(
    inventory: Path, tmp_path: Path
) -> None:
    conf = tmp_path / "spur.conf"
    conf.write_text('cluster_name = "c"\n[controller]\njob_info_visibility = "redacted"\n')
    with scoped_sim() as sim:
        inv = sim.write_inventories(tmp_path / "scoped.jsonl")
        token = auth.mint(KEY, "alice", admin=False, lifetime_s=300)
        report = audit_live(sim, inv, token=token, conf=conf)
        assert by_key(report.findings)[("gpu013", 4388)].kind is Kind.BELOW_WATERMARK_UNKNOWN


def test_cli_json_document_and_exit_status(sim: SimCluster, inventory: Path) -> None:
    run = run_cli(
        "audit", "--inventory", str(inventory), "--format", "json",
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert doc["schema"] == "spurctl.audit/v1"
    assert doc["watermark"] == {"value": 5121, "source": "estimated"}
    assert doc["view"]["complete"] is True
    assert doc["summary"]["by_kind"]["active-elsewhere"] == 7
    assert doc["summary"]["needs_action"] == sum(
        1 for f in doc["findings"] if f["action"] in ("reclaim", "investigate")
    )


def test_cli_csv_and_prometheus(sim: SimCluster, inventory: Path) -> None:
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    run = run_cli("audit", "--inventory", str(inventory), "--format", "csv", env=env)
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert {(r["node"], r["job_id"]) for r in rows if r["action"] == "reclaim"} == {
        (n, str(j)) for n, j, _ in RECLAIMABLE_IN_INCIDENT
    }
    run = run_cli("audit", "--inventory", str(inventory), "--format", "prometheus", env=env)
    assert 'spurctl_findings{kind="active-elsewhere"} 7' in run.stdout
    assert 'spurctl_node_reclaimable_holdings{node="gpu006"} 2' in run.stdout


def test_watermark_flag_only_spares_more(sim: SimCluster, inventory: Path) -> None:
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    run = run_cli(
        "audit", "--inventory", str(inventory), "--format", "json", "--watermark", "4000", env=env
    )
    doc = json.loads(run.stdout)
    assert doc["watermark"] == {"value": 4000, "source": "flag"}
    kinds = {(f["node"], f["job_id"]): f["kind"] for f in doc["findings"]}
    assert kinds[("gpu013", 4388)] == "above-watermark-unknown"


def test_a_healthy_cluster_exits_zero(tmp_path: Path) -> None:
    with SimCluster(incident()) as sim:
        inv = sim.write_inventories(tmp_path / "inv.jsonl")
        env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
        run = run_cli("audit", "--inventory", str(inv), "--nodes", "gpu[001-002]", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "No discrepancies" in run.stdout


def test_an_inventory_dated_in_2031_is_clock_ahead_and_its_holding_is_never_reclaimed(
    sim: SimCluster, tmp_path: Path
) -> None:
    from spurctl.sources.documents import dump_json
    from spurctl.sources.inventory_document import inventory_to_dict

    lines = []
    for inv in sim.inventories():
        doc = inventory_to_dict(inv)
        if inv.node == "gpu012":  # holds 4702, which ended: terminal-held on time
            doc["collected_at"] = "2031-06-01T00:00:00Z"
        lines.append(dump_json(doc, indent=None))
    future = tmp_path / "future.jsonl"
    future.write_text("\n".join(lines) + "\n")
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    run = run_cli("audit", "--inventory", str(future), "--format", "json", env=env)
    assert run.returncode == 1, run.stderr
    on_node = [f for f in json.loads(run.stdout)["findings"] if f["node"] == "gpu012"]
    kinds = {(f["kind"], f["job_id"]): f for f in on_node}
    clock = kinds[("clock-ahead", None)]
    assert clock["action"] == "investigate"
    assert "2031-06-01T00:00:00Z" in clock["reason"] and "node's clock is ahead" in clock["reason"]
    held = kinds[("terminal-held", 4702)]
    assert held["action"] == "investigate" and "clock-ahead" in held["reason"]
    assert not [f for f in on_node if f["action"] == "reclaim"]

    prom = run_cli("audit", "--inventory", str(future), "--format", "prometheus", env=env)
    assert 'spurctl_findings{kind="clock-ahead"} 1' in prom.stdout
    table = run_cli("audit", "--inventory", str(future), "--kind", "clock-ahead", env=env)
    assert "clock-ahead" in table.stdout and "gpu012" in table.stdout

    explained = run_cli("explain", "gpu012", "4702", "--inventory", str(future), env=env)
    assert explained.returncode == 0, explained.stderr
    assert "CLOCK AHEAD" in explained.stdout and "clock-ahead:" in explained.stdout
    assert "Reclaim sends:  nothing" in explained.stdout


def test_the_incomplete_view_note_blames_credential_scoping_only_when_one_was_presented(
    tmp_path: Path,
) -> None:
    with scoped_sim() as sim:
        inv = sim.write_inventories(tmp_path / "scoped.jsonl")
        env = {
            "SPUR_CONTROLLER_ADDR": sim.controller_address,
            "SPUR_AUTH_TOKEN": auth.mint(KEY, "henry", admin=True, lifetime_s=300),
        }
        live = run_cli("audit", "--inventory", str(inv), "--format", "json", env=env)
        snap = tmp_path / "snap.json"
        saved = run_cli("snapshot", "-o", str(snap), env=env)
        assert saved.returncode == 0, saved.stderr
    offline = run_cli("audit", "--snapshot", str(snap), "--inventory", str(inv), "--format", "json")

    def incomplete_note(run: object) -> str:
        doc = json.loads(run.stdout)  # type: ignore[attr-defined]
        (note,) = [n for n in doc["notes"] if n.startswith("controller view is INCOMPLETE")]
        return str(note)

    assert "Spur scopes GetJobs to the credential's user" in incomplete_note(live)
    # A snapshot does not record how it was read: the note says so, and blames nothing.
    note = incomplete_note(offline)
    assert "a saved snapshot does not say whether it was read with a credential" in note


def test_audit_collect_never_tells_the_operator_to_use_collect(
    sim: SimCluster, tmp_path: Path
) -> None:
    from datetime import timedelta

    from spurctl.model import format_time, utcnow
    from spurctl.sources.documents import dump_json
    from spurctl.sources.inventory_document import inventory_to_dict
    from spurctl_sim import node_line

    # gpu003's command prints an inventory dated ten minutes back: its clock is behind.
    lines = []
    for inv in sim.inventories():
        doc = inventory_to_dict(inv)
        if inv.node == "gpu003":
            doc["collected_at"] = format_time(utcnow() - timedelta(minutes=10))
        lines.append(dump_json(doc, indent=None))
    printed = tmp_path / "printed.jsonl"
    printed.write_text("\n".join(lines) + "\n")
    run = run_cli(
        "audit", "--collect", "--nodes", "gpu[001-006]", "--command", node_line.command(printed),
        "--format", "json", env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    (stale,) = [n for n in doc["notes"] if "two agent heartbeats" in n]
    assert "gpu003" in stale and "clocks are behind" in stale and "NTP" in stale
    said = " ".join(doc["notes"] + [f["reason"] for f in doc["findings"]])
    assert "use --collect" not in said

    # The same file read with --inventory: there re-collecting is the right advice.
    files = run_cli(
        "audit", "--inventory", str(printed), "--nodes", "gpu[001-006]", "--format", "json",
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip
    (stale,) = [n for n in json.loads(files.stdout)["notes"] if "two agent heartbeats" in n]
    assert "re-collect them, or use --collect" in stale


def test_a_collect_that_fails_on_a_node_the_controller_does_not_know_says_it_is_unknown(
    sim: SimCluster, tmp_path: Path
) -> None:
    # A typo in --nodes: `gpu1003` is no node of the controller's. Its collect failed and
    # it read agent-unreachable with the command's error alone, where --inventory says it
    # is unknown to the controller (issue 53.4): now both are said.
    from spurctl_sim import node_line

    printed = sim.write_inventories(tmp_path / "printed.jsonl")
    run = run_cli(
        "audit", "--collect", "--nodes", "gpu003,gpu1003",
        "--command", node_line.command(printed), "--format", "json",
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    (typo,) = [f for f in doc["findings"] if f["node"] == "gpu1003"]
    assert typo["kind"] == "agent-unreachable"
    assert typo["reason"].startswith(
        "gpu1003 is unknown to the controller (check the --nodes hostlist), and it could not "
        "be inventoried (command exited with status 255: ssh: Could not resolve hostname gpu1003"
    )
    assert (
        "1 node in scope is unknown to the controller and could not be inventoried: gpu1003 "
        "(check the --nodes hostlist)." in doc["notes"]
    )
    (known,) = [f for f in doc["findings"] if f["node"] == "gpu003"]
    assert "unknown to the controller" not in known["reason"]


def test_a_one_shot_audit_runs_with_the_collector_paused_and_leaves_it_on(
    sim: SimCluster, inventory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # One audit and out: its imports and its read need no cyclic collector; an in-process
    # caller (a test, the demo) gets it back on when the command returns.
    import gc

    from spurctl import audit_view
    from spurctl.cli import main

    real, collector_on = audit_view.run_audit, []

    def run_audit(*args: object, **kwargs: object) -> object:
        collector_on.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(audit_view, "run_audit", run_audit)
    monkeypatch.setenv("SPUR_CONTROLLER_ADDR", sim.controller_address)
    assert gc.isenabled()
    assert main(["audit", "--inventory", str(inventory), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["schema"] == "spurctl.audit/v1"
    assert collector_on == [False]
    assert gc.isenabled()
