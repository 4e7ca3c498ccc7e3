"""Through the real CLI against the simulated cluster: the ways a reclaim could
reach a legitimate run, or report a cancel it cannot vouch for, are closed.

- a wrong agent map (gpu003 pointing at gpu015's agent) refuses the whole plan;
- NOT_FOUND from a credential that cannot see the job proves nothing (owner_only);
- an inventory older than --max-inventory-age is not acted on;
- a --collect whose re-collect fails leaves its cancels unconfirmed;
- a --job matching nothing says so;
- a node the agent map lacks is named;
- a journal that cannot be written mid-run is one line plus the summary so far.
"""

from __future__ import annotations

import json
import resource
import shlex
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spurctl.act import cancels
from spurctl.act.agents import AgentPool
from spurctl.act.journal import Journal
from spurctl.audit_view import run_audit
from spurctl.decide import plan as rc
from spurctl.scope import Scope
from spurctl.sources import credentials as auth
from spurctl.sources.controller import ControllerClient
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import connect_settings
from spurctl_sim import SimCluster, incident
from tests.cli import cli_process, one_line_error, run_cli
from tests.live import KEY, secured_incident
from tests.reclaim import cancelled, journal_records

make_sim = secured_incident  # the `sim` fixture (tests/conftest.py)


def _files(sim: SimCluster, tmp_path: Path, agent_map: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    inv = sim.write_inventories(tmp_path / "inventory.jsonl")
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps(sim.agent_map() if agent_map is None else agent_map))
    key = tmp_path / "jwt.key"
    key.write_text(KEY)
    key.chmod(0o600)
    return {
        "inventory": str(inv),
        "agents": str(agents),
        "key": str(key),
        "journal": str(tmp_path / "journal.jsonl"),
        "token": auth.mint(KEY, "root", admin=True, lifetime_s=300),
    }


def _reclaim(sim: SimCluster, f: dict, *args: str, token: str | None = None):  # type: ignore[no-untyped-def,type-arg]
    return run_cli(
        "reclaim", "--inventory", f["inventory"], "--agent-map", f["agents"],
        "--journal", f["journal"], "--jwt-key-file", f["key"], *args,
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address,
             "SPUR_AUTH_TOKEN": token or f["token"]},
    )  # fmt: skip


# -- item 1: a wrong agent map --------------------------------------------------------


def test_an_agent_map_pointing_gpu003_at_gpu015s_agent_refuses_the_plan(
    sim: SimCluster, tmp_path: Path
) -> None:
    wrong = sim.agent_map()
    wrong["gpu003"] = wrong["gpu015"]  # gpu015 runs 4711 for real; gpu003 holds a stale copy
    f = _files(sim, tmp_path, wrong)
    for extra in (("--yes",), ("--dry-run",), ("--dry-run", "--format", "json")):
        run = _reclaim(sim, f, "--node", "gpu003", *extra)
        line = one_line_error(run, "refusing the whole plan", "gpu015", "--agent-map")
        assert "4711" in line and wrong["gpu015"] in line
        assert run.stdout == ""
    assert sim.cancels == [] and sim.controller_cancels == []
    assert {h.job_id for h in sim.holdings("gpu015")} == {4711}  # the live run lives
    assert not Path(f["journal"]).exists()


def test_two_planned_nodes_on_one_agent_endpoint_refuse_the_plan(
    sim: SimCluster, tmp_path: Path
) -> None:
    shared = sim.agent_map()
    shared["gpu007"] = shared["gpu008"]
    f = _files(sim, tmp_path, shared)
    run = _reclaim(sim, f, "--node", "gpu[007-008]", "--yes")
    one_line_error(run, "gpu007 and gpu008 resolve to one agent endpoint")
    assert sim.cancels == []


def test_the_plan_shows_each_entrys_agent_address(sim: SimCluster, tmp_path: Path) -> None:
    f = _files(sim, tmp_path)
    address = sim.agent_map()["gpu003"]
    table = _reclaim(sim, f, "--node", "gpu003", "--dry-run")
    assert table.returncode == 0, table.stderr
    assert address in table.stdout
    doc = json.loads(_reclaim(sim, f, "--node", "gpu003", "--dry-run", "--format", "json").stdout)
    assert [(p["node"], p["agent"], p["agent_fallback"]) for p in doc["plan"]] == [
        ("gpu003", address, False)
    ]


# -- item 14 part: a node the agent map lacks ----------------------------------------


def test_a_node_the_agent_map_lacks_is_named_on_stderr_and_in_json(
    sim: SimCluster, tmp_path: Path
) -> None:
    partial = {n: a for n, a in sim.agent_map().items() if n != "gpu004"}
    f = _files(sim, tmp_path, partial)
    run = _reclaim(sim, f, "--node", "gpu[003-004]", "--dry-run", "--format", "json")
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "--agent-map lacks gpu004" in warnings[0]
    doc = json.loads(run.stdout)
    assert doc["agent_fallback_nodes"] == ["gpu004"]
    by_node = {p["node"]: p for p in doc["plan"]}
    assert by_node["gpu004"]["agent"] == "gpu004:6818" and by_node["gpu004"]["agent_fallback"]
    assert not by_node["gpu003"]["agent_fallback"]
    # A complete map: no warning at all.
    whole = _files(sim, tmp_path)
    quiet = _reclaim(sim, whole, "--node", "gpu[003-004]", "--dry-run")
    assert "lacks" not in quiet.stderr


# -- item 2: NOT_FOUND from a credential that cannot see the job ----------------------


@pytest.fixture
def owner_only() -> Iterator[SimCluster]:
    with SimCluster(
        incident(), auth="required", jwt_key=KEY, job_info_visibility="owner_only"
    ) as cluster:
        yield cluster


def test_owner_only_controller_answers_not_found_to_a_non_owner(owner_only: SimCluster) -> None:
    frank = auth.mint(KEY, "frank", uid=1006, lifetime_s=300)
    alice = auth.mint(KEY, "alice", uid=1001, lifetime_s=300)
    for token, seen in ((frank, False), (alice, True)):
        conn = connect_settings(controller=owner_only.controller_address, token=token)
        with ControllerClient(conn) as client:
            assert (client.get_job(4711) is not None) is seen


def test_a_login_node_spur_conf_and_a_users_token_never_reclaim_another_users_run(
    owner_only: SimCluster, tmp_path: Path
) -> None:
    # frank's token, a spur.conf without job_info_visibility: GetJob's NOT_FOUND for
    # alice's 4711 (RUNNING on gpu015) is not proof that 4711 is untracked.
    f = _files(owner_only, tmp_path)
    conf = tmp_path / "spur.conf"
    conf.write_text('cluster_name = "c"\n[auth]\nmode = "required"\n')
    frank = auth.mint(KEY, "frank", uid=1006, lifetime_s=300)
    run = _reclaim(
        owner_only, f, "--node", "gpu015", "--conf", str(conf), "--yes", "--format", "json",
        token=frank,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["plan"] == [] and owner_only.cancels == []
    assert {h.job_id for h in owner_only.holdings("gpu015")} == {4711}


def test_recheck_under_doubt_skips_a_not_found_instead_of_sending(
    owner_only: SimCluster, tmp_path: Path
) -> None:
    f = _files(owner_only, tmp_path)
    # Planned with an admin's view: 4388 on gpu013 is truly untracked.
    admin = connect_settings(controller=owner_only.controller_address, token=f["token"])
    src = Sources(Scope.parse("gpu013"), [f["inventory"]], False, "", 1)
    report, inputs = run_audit(src, admin)
    entries = rc.plan(report, {"gpu013"}, None, owner_only.agent_map().__getitem__)
    assert [(e.node, e.job_id) for e in entries] == [("gpu013", 4388)]
    # Sent with frank's credential and no spur.conf: the re-check's NOT_FOUND is no proof.
    frank = connect_settings(
        controller=owner_only.controller_address,
        token=auth.mint(KEY, "frank", uid=1006, lifetime_s=300),
    )
    doubt = frank.not_found_doubt()
    assert doubt is not None
    agents = AgentPool(jwt_key=KEY, timeout=5.0)
    try:
        with Journal(Path(f["journal"])) as j, ControllerClient(frank) as client:
            run = cancels.execute(
                entries,
                jobs=client,
                agents=agents,
                journal=j,
                watermark=inputs.watermark.value,
                not_found_doubt=doubt,
            )
    finally:
        agents.close()
    (outcome,) = run.outcomes
    assert outcome.result is rc.Result.SKIPPED and "not proof" in outcome.detail
    assert owner_only.cancels == []


# -- item 11: --max-inventory-age ------------------------------------------------------


def _age_inventories(path: str, by: timedelta) -> None:
    lines = []
    for line in Path(path).read_text().splitlines():
        doc = json.loads(line)
        when = datetime.fromisoformat(doc["collected_at"].replace("Z", "+00:00")) - by
        doc["collected_at"] = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(json.dumps(doc))
    Path(path).write_text("\n".join(lines) + "\n")


def test_an_inventory_older_than_max_inventory_age_is_skipped_with_its_reason(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = _files(sim, tmp_path)
    _age_inventories(f["inventory"], timedelta(hours=1))
    dry = _reclaim(sim, f, "--node", "gpu003", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "WILL SKIP" in dry.stdout and "re-collect" in dry.stdout

    run = _reclaim(sim, f, "--node", "gpu003", "--yes", "--format", "json")
    assert run.returncode == 1, run.stderr
    (outcome,) = json.loads(run.stdout)["outcomes"]
    assert outcome["result"] == "skipped"
    assert "older than --max-inventory-age 10m" in outcome["detail"]
    assert "re-collect" in outcome["detail"]
    assert sim.cancels == []
    assert journal_records(Path(f["journal"]))[-1]["result"] == "skipped"

    # A wider limit accepts the same file.
    wide = _reclaim(sim, f, "--node", "gpu003", "--yes", "--max-inventory-age", "2h")
    # Sent and unconfirmed without a re-collect: exit 1.
    assert wide.returncode == 1, wide.stdout + wide.stderr
    assert "sent, unconfirmed" in wide.stdout
    assert cancelled(sim) == [("gpu003", 4711)]


def test_an_inventory_dated_in_the_future_is_never_planned_and_said_to_be_clock_ahead(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = _files(sim, tmp_path)
    _age_inventories(f["inventory"], -timedelta(days=365 * 5))  # dated five years ahead
    dry = _reclaim(sim, f, "--node", "gpu003", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Nothing to reclaim on these nodes" in dry.stdout
    assert "clock-ahead on gpu003" in dry.stdout
    run = _reclaim(sim, f, "--node", "gpu003", "--yes", "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["outcomes"] == [] and doc["summary"]["planned"] == 0
    assert sim.cancels == []


@pytest.mark.parametrize("bad", ["soon", "-5m", "0", "10x"])
def test_a_bad_max_inventory_age_is_one_line(sim: SimCluster, tmp_path: Path, bad: str) -> None:
    f = _files(sim, tmp_path)
    run = _reclaim(sim, f, "--node", "gpu003", "--dry-run", f"--max-inventory-age={bad}")
    one_line_error(run, "--max-inventory-age")


# -- item 13: a re-collect that fails; a --job that matches nothing --------------------

NODE_SCRIPT = """
import json, pathlib, sys
node, inventory, state = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
seen = state / node
if seen.exists():
    print(f"ssh: connect to host {node} port 22: Connection refused", file=sys.stderr)
    sys.exit(255)
seen.write_text("1")
for line in pathlib.Path(inventory).read_text().splitlines():
    if json.loads(line)["node"] == node:
        print(line)
"""


def test_a_collect_whose_re_collect_fails_leaves_the_cancels_unconfirmed(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = _files(sim, tmp_path)
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    state = tmp_path / "seen"
    state.mkdir()
    command = (
        " ".join(shlex.quote(p) for p in (sys.executable, "-I", "-S", str(script)))
        + f" %h {shlex.quote(f['inventory'])} {shlex.quote(str(state))}"
    )
    run = run_cli(
        "reclaim", "--node", "gpu[003,012]", "--collect", "--command", command,
        "--settle", "0", "--agent-map", f["agents"], "--journal", f["journal"],
        "--jwt-key-file", f["key"], "--yes", "--format", "json",
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address, "SPUR_AUTH_TOKEN": f["token"]},
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    doc = json.loads(run.stdout)
    results = {(o["node"], o["job_id"]): o for o in doc["outcomes"]}
    assert set(results) == {("gpu003", 4711), ("gpu012", 4702)}
    for o in results.values():
        assert o["result"] == "unconfirmed"
        assert "re-collect" in o["detail"] and "Connection refused" in o["detail"]
    assert doc["summary"]["unconfirmed"] == 2 and doc["summary"]["sent"] == 0
    assert sorted(cancelled(sim)) == [("gpu003", 4711), ("gpu012", 4702)]


def test_a_job_that_matches_nothing_says_so_and_exits_1(sim: SimCluster, tmp_path: Path) -> None:
    f = _files(sim, tmp_path)
    run = _reclaim(sim, f, "--node", "gpu006", "--job", "99999", "--yes")
    assert run.returncode == 1, run.stderr
    assert "--job 99999: no reclaimable finding" in run.stdout
    dry = _reclaim(sim, f, "--node", "gpu006", "--job", "99999", "--dry-run", "--format", "json")
    assert dry.returncode == 1
    assert json.loads(dry.stdout)["unmatched_jobs"] == [99999]
    assert "--job 99999" in dry.stderr
    # One matching, one not: the match is sent, the miss still makes the run exit 1.
    both = _reclaim(sim, f, "--node", "gpu006", "--job", "4716", "--job", "99999", "--yes")
    assert both.returncode == 1
    assert cancelled(sim) == [("gpu006", 4716)]


# -- item 12: a journal that cannot be written mid-run ---------------------------------


def _journal_limit(limit: int) -> None:
    # Writes past `limit` bytes fail with EFBIG (Python ignores SIGXFSZ), as a full disk would.
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_journal_that_fills_up_mid_run_is_one_line_plus_the_summary_so_far(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = _files(sim, tmp_path)
    journal = Path(f["journal"])
    args = [
        "reclaim", "--inventory", f["inventory"], "--agent-map", f["agents"],
        "--journal", str(journal), "--jwt-key-file", f["key"], "--node", "gpu[003-008]",
        "--yes", "--concurrency", "1", "--format", "json",
    ]  # fmt: skip
    env = {
        "SPUR_CONTROLLER_ADDR": sim.controller_address,
        "SPUR_AUTH_TOKEN": f["token"],
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # Room for about two records: the first cancel's intent and outcome.
    with cli_process(
        *args, env=env, home=tmp_path / "home", preexec_fn=lambda: _journal_limit(600)
    ) as proc:
        stdout, stderr = proc.communicate(timeout=60)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, stderr
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith(f"spurctl: error: journal {journal}: File too large")
    doc = json.loads(stdout)
    sent = {(o["node"], o["job_id"]) for o in doc["outcomes"] if o["result"] == "sent"}
    assert sent == set(cancelled(sim))  # the summary accounts for every cancel that went out
    assert 1 <= len(sent) < 7 and doc["not_attempted"]


def test_a_journal_with_no_room_for_its_first_record_sends_nothing_and_says_so(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = _files(sim, tmp_path)
    journal = Path(f["journal"])
    args = [
        "reclaim", "--inventory", f["inventory"], "--agent-map", f["agents"],
        "--journal", str(journal), "--jwt-key-file", f["key"], "--node", "gpu003", "--yes",
    ]  # fmt: skip
    env = {
        "SPUR_CONTROLLER_ADDR": sim.controller_address,
        "SPUR_AUTH_TOKEN": f["token"],
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # Room for the lock's pid, not for the first intent.
    with cli_process(
        *args, env=env, home=tmp_path / "home", preexec_fn=lambda: _journal_limit(16)
    ) as proc:
        stdout, stderr = proc.communicate(timeout=60)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, stderr
    assert lines[0].startswith(f"spurctl: error: journal {journal}: File too large")
    assert "summary" in lines[0]
    assert "not sent (journal unwritable)" in stdout
    assert sim.cancels == []


def test_a_journal_that_is_a_device_is_refused_before_anything_is_sent(
    sim: SimCluster, tmp_path: Path
) -> None:
    f = _files(sim, tmp_path)
    journal = tmp_path / "full.jsonl"
    journal.symlink_to("/dev/full")  # its lock would land beside the device, in /dev
    f["journal"] = str(journal)
    run = _reclaim(sim, f, "--node", "gpu003", "--yes")
    one_line_error(run, f"journal {journal} is not a regular file", "--journal")
    assert sim.cancels == []
    assert not Path("/dev/full.lock").exists()
