"""Faults and interruptions, met through the real CLI against a simulated cluster.

What an operator can rely on, whatever goes wrong: a dead controller endpoint is
passed over; one bad node never hides or stops the others; a Ctrl-C never loses
the record of a cancel that went out; and no secret ever reaches the screen, the
journal or a --debug trace. (Operator errors, one line each: test_errors.py.)
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from spurctl.act.journal import unresolved
from spurctl.simcluster import SimCluster, incident
from spurctl.sources import credentials as auth
from tests.cli import clean_env, dead_url, run_cli, spurctl_argv, stderr_lines

KEY = "harden-test-cluster-key-Zq8v3XkP-0123456789"
OTHER_KEY = "harden-test-other-key-9Lm2Wd7R-0123456789"
# The incident's reclaimable holdings on gpu003-008 (stale runs of requeued jobs),
# gpu012 (a finished job still reserved) and gpu013 (an id aged out below the watermark).
RECLAIM_NODES = "gpu[003-008,012-013]"
PLANNED = {
    ("gpu003", 4711),
    ("gpu004", 4712),
    ("gpu005", 4712),
    ("gpu006", 4715),
    ("gpu006", 4716),
    ("gpu007", 4719),
    ("gpu008", 4720),
    ("gpu012", 4702),
    ("gpu013", 4388),
}


def journal_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def outcomes(path: Path, result: str | None = None) -> set[tuple[str, int]]:
    return {
        (r["node"], r["job_id"])
        for r in journal_records(path)
        if r["event"] == "outcome" and (result is None or r["result"] == result)
    }


def cancelled(sim: SimCluster) -> list[tuple[str, int]]:
    return [(c.node, c.job_id) for c in sim.cancels]


# -- HA through the CLI -------------------------------------------------------------------------


def test_audit_fails_over_past_dead_endpoints_without_a_word(tmp_path: Path) -> None:
    with SimCluster(incident(), agents=False) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        live = sim.controller_address
        controllers = f"{dead_url()},{dead_url()},{live}"
        proc = run_cli(
            "audit",
            "--controller",
            controllers,
            "--inventory",
            str(inventory),
            "--format",
            "json",
            home=tmp_path,
        )
    assert proc.returncode == 1, proc.stderr
    assert stderr_lines(proc) == []
    assert json.loads(proc.stdout)["controller"]["address"] == live


# -- partial failure: one bad node never hides or stops the others --------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SimCluster, Path, Path]]:
    """A cluster with every agent up, its inventory file and its agent map."""
    with SimCluster(incident()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        yield sim, inventory, agent_map


def reclaim_args(
    sim: SimCluster, inventory: Path, agent_map: Path, journal: Path, node: str = RECLAIM_NODES
) -> list[str]:
    return [
        "reclaim",
        "--controller",
        sim.controller_address,
        "--node",
        node,
        "--inventory",
        str(inventory),
        "--agent-map",
        str(agent_map),
        "--journal",
        str(journal),
        "--yes",
    ]


def test_a_stopped_agent_fails_its_entry_and_every_other_node_is_still_reclaimed(
    cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = cluster
    sim.stop_agent("gpu006")  # two planned cancels on it
    journal = tmp_path / "journal.jsonl"

    proc = run_cli(
        *reclaim_args(sim, inventory, agent_map, journal), "--format", "json", home=tmp_path
    )

    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    by_entry = {(o["node"], o["job_id"]): o for o in doc["outcomes"]}
    assert set(by_entry) == PLANNED
    failed = {e for e, o in by_entry.items() if o["result"] == "failed"}
    assert failed == {("gpu006", 4715), ("gpu006", 4716)}
    for entry in failed:
        assert "unreachable" in by_entry[entry]["detail"]
    assert doc["summary"] == {
        "planned": 9,
        "sent": 7,
        "skipped": 0,
        "failed": 2,
        "interrupted": False,
    }
    # What the agents received is exactly what was reported sent, and the journal agrees.
    assert sorted(cancelled(sim)) == sorted(PLANNED - failed)
    assert outcomes(journal, "sent") == PLANNED - failed
    assert outcomes(journal, "failed") == failed
    assert unresolved(journal) == []


def test_the_table_summary_names_the_node_that_failed(
    cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = cluster
    sim.stop_agent("gpu013")
    proc = run_cli(*reclaim_args(sim, inventory, agent_map, tmp_path / "j.jsonl"), home=tmp_path)
    assert proc.returncode == 1, proc.stderr
    failed_rows = [line for line in proc.stdout.splitlines() if " failed " in line]
    assert len(failed_rows) == 1 and "gpu013" in failed_rows[0] and "4388" in failed_rows[0]
    assert "9 planned: 8 sent, 0 skipped, 1 failed." in proc.stdout


def test_an_agent_that_answers_too_late_is_failed_with_a_warning_to_check_it(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=2.0) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        args = reclaim_args(sim, inventory, agent_map, tmp_path / "j.jsonl", node="gpu013")
        proc = run_cli(*args, "--timeout", "0.3", "--format", "json", home=tmp_path)
    assert proc.returncode == 1, proc.stderr
    (outcome,) = json.loads(proc.stdout)["outcomes"]
    assert outcome["result"] == "failed"
    # A deadline is not proof that nothing happened: the operator is told to look.
    assert "no answer within 0.3 s" in outcome["detail"]
    assert "may still have been applied: check the node" in outcome["detail"]


FAKE_SSH = textwrap.dedent(
    """
    import sys
    node, inventory, broken = sys.argv[1], sys.argv[2], sys.argv[3]
    if node == broken:
        print(f"ssh: connect to host {node} port 22: Connection refused", file=sys.stderr)
        sys.exit(255)
    for line in open(inventory):
        if f'"node": "{node}"' in line:
            print(line, end="")
    """
)


def fake_ssh(tmp_path: Path, inventory: Path, broken: str) -> str:
    script = tmp_path / "fake_ssh.py"
    script.write_text(FAKE_SSH)
    return f"{sys.executable} -I -S {script} %h {inventory} {broken}"


def test_audit_collect_reports_an_unreachable_node_and_audits_all_the_others(
    cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = cluster
    proc = run_cli(
        "audit",
        "--controller",
        sim.controller_address,
        "--collect",
        "--nodes",
        "gpu[003-008]",
        "--command",
        fake_ssh(tmp_path, inventory, "gpu005"),
        "--format",
        "json",
        home=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    by_node: dict[str, list[dict[str, Any]]] = {}
    for f in doc["findings"]:
        by_node.setdefault(f["node"], []).append(f)
    (unreachable_finding,) = by_node.pop("gpu005")
    assert unreachable_finding["kind"] == "agent-unreachable"
    assert "Connection refused" in unreachable_finding["reason"]
    assert sorted(by_node) == ["gpu003", "gpu004", "gpu006", "gpu007", "gpu008"]
    assert all(f["kind"] == "active-elsewhere" for fs in by_node.values() for f in fs)
    assert doc["summary"]["nodes_inventoried"] == 5


@contextmanager
def inventory_kept_fresh(sim: SimCluster, path: Path) -> Iterator[None]:
    """Rewrite the inventory file whenever what the agents hold changes, as the nodes would."""
    done = threading.Event()

    def watch() -> None:
        seen = sim.state.generation
        while not done.wait(0.02):
            if sim.state.generation != seen:
                seen = sim.state.generation
                sim.write_inventories(path)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def test_reclaim_collect_spares_an_unreachable_node_and_reclaims_the_others(
    cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = cluster
    journal = tmp_path / "journal.jsonl"
    with inventory_kept_fresh(sim, inventory):
        proc = run_cli(
            "reclaim",
            "--controller",
            sim.controller_address,
            "--node",
            "gpu[003-008]",
            "--collect",
            "--settle",
            "0.3",  # the watcher rewrites the file within 20 ms of a change
            "--command",
            fake_ssh(tmp_path, inventory, "gpu005"),
            "--agent-map",
            str(agent_map),
            "--journal",
            str(journal),
            "--yes",
            "--format",
            "json",
            home=tmp_path,
        )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    sent = {(o["node"], o["job_id"]) for o in doc["outcomes"] if o["result"] == "sent"}
    expected = {e for e in PLANNED if e[0] in {"gpu003", "gpu004", "gpu006", "gpu007", "gpu008"}}
    assert sent == expected
    assert sorted(cancelled(sim)) == sorted(expected)
    assert sim.holdings("gpu005")  # never touched: it could not be inventoried


# -- interrupt: Ctrl-C stops before the next send and loses no outcome -------------------------


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def start_reclaim(
    sim: SimCluster, inventory: Path, agent_map: Path, journal: Path, home: Path
) -> subprocess.Popen[str]:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        spurctl_argv(
            *reclaim_args(sim, inventory, agent_map, journal),
            "--concurrency",
            "1",
            "--format",
            "json",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=clean_env(home),
    )


def test_ctrl_c_stops_before_the_next_send_and_the_journal_matches_what_the_agents_got(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=0.4) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        journal = tmp_path / "journal.jsonl"
        proc = start_reclaim(sim, inventory, agent_map, journal, tmp_path / "home")
        try:
            wait_for(lambda: journal.exists() and bool(outcomes(journal)))
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()

        assert proc.returncode == 1, stderr
        assert "Traceback" not in stderr
        sent = outcomes(journal, "sent")
        assert sorted(cancelled(sim)) == sorted(sent)  # exactly, no more and no less
        assert 1 <= len(sent) < len(PLANNED)
        assert unresolved(journal) == []  # every intent has its outcome
        doc = json.loads(stdout)
        assert doc["summary"]["interrupted"] is True
        not_sent = {(e["node"], e["job_id"]) for e in doc["not_attempted"]}
        assert not_sent and not_sent.isdisjoint(sent)
        assert not_sent | outcomes(journal) == PLANNED


def test_ctrl_c_at_the_confirmation_prompt_sends_nothing(
    cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = cluster
    journal = tmp_path / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal)
    args.remove("--yes")
    env = clean_env(tmp_path / "home")
    pid, terminal = pty.fork()
    if pid == 0:  # the child: spurctl on a terminal, as an operator runs it
        try:
            os.execve(sys.executable, spurctl_argv(*args), env)
        finally:
            os._exit(127)  # never fall back into the test runner
    seen = b""
    try:
        deadline = time.monotonic() + 20
        while b"[y/N]" not in seen:
            assert time.monotonic() < deadline, seen
            if select.select([terminal], [], [], 0.1)[0]:
                seen += os.read(terminal, 4096)
        os.write(terminal, b"\x03")  # Ctrl-C, through the terminal's line discipline
        _, status = os.waitpid(pid, 0)
        with suppress(OSError):  # the terminal closes with the child
            while select.select([terminal], [], [], 0.5)[0]:
                seen += os.read(terminal, 4096)
    finally:
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 1
    assert b"spurctl: aborted" in seen and b"Traceback" not in seen
    assert sim.cancels == [] and not journal.exists()


def test_a_cancel_cut_off_by_a_crash_is_reported_as_unknown_on_the_next_run(
    tmp_path: Path,
) -> None:
    with SimCluster(incident(), agent_latency=1.5) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        journal = tmp_path / "journal.jsonl"
        proc = start_reclaim(sim, inventory, agent_map, journal, tmp_path / "home")
        try:
            # The first intent is journaled and its cancel is in flight (1.5 s): kill -9 now.
            wait_for(lambda: journal.exists() and journal.read_text().count('"intent"') == 1)
            proc.kill()
            proc.communicate(timeout=30)
        finally:
            proc.kill()
        (open_intent,) = unresolved(journal)

        sim.agent_latency = 0.0
        args = reclaim_args(sim, inventory, agent_map, journal)
        dry = run_cli(*args, "--dry-run", home=tmp_path / "home")
        assert dry.returncode == 0, dry.stderr
        assert (
            f"unknown: check the node — job {open_intent.job_id} on {open_intent.node}"
            in dry.stdout
        )
        assert unresolved(journal) == [open_intent]  # a dry run records nothing

        real = run_cli(*args, "--format", "json", home=tmp_path / "home")
        assert "check the node" in real.stderr
        closing = next(
            r
            for r in journal_records(journal)
            if r["event"] == "outcome"
            and (r["node"], r["job_id"]) == (open_intent.node, open_intent.job_id)
        )
        assert closing["result"] == "failed" and "unknown" in closing["detail"]
        assert unresolved(journal) == []


# -- secrets never leave ----------------------------------------------------------------------


def test_no_token_or_cluster_key_reaches_output_or_journal_even_with_debug(tmp_path: Path) -> None:
    with SimCluster(incident(), auth="required", jwt_key=KEY) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        key_file = tmp_path / "jwt.key"
        key_file.write_text(KEY + "\n")
        wrong_key_file = tmp_path / "wrong.key"
        wrong_key_file.write_text(OTHER_KEY + "\n")
        journal = tmp_path / "journal.jsonl"
        token = auth.mint(KEY, "root", admin=True)
        forged = auth.mint(OTHER_KEY, "root", admin=True)
        home = tmp_path / "home"

        def reclaim(
            token: str, key: Path, node: str = RECLAIM_NODES
        ) -> subprocess.CompletedProcess[str]:
            args = reclaim_args(sim, inventory, agent_map, journal, node)
            return run_cli(
                "--debug", *args, "--token", token, "--jwt-key-file", str(key), home=home
            )

        runs = [
            # A rejected credential, traceback and all.
            reclaim(forged, key_file),
            # Agents refuse a credential minted with the wrong key: every entry fails.
            reclaim(token, wrong_key_file, "gpu013"),
            # A run that sends.
            reclaim(token, key_file),
        ]
        assert runs[0].returncode == 2 and "Traceback" in runs[0].stderr
        assert runs[1].returncode == 1 and "refused the controller credential" in runs[1].stdout
        assert runs[2].returncode == 0, runs[2].stderr
        assert {c.subject for c in sim.cancels} == {"spurctld"}

        seen = [journal.read_text()] + [r.stdout + r.stderr for r in runs]
        for text in seen:
            for secret in (KEY, OTHER_KEY, token, forged):
                assert secret not in text
