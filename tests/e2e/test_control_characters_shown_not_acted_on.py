"""Text from the cluster never acts on the operator's terminal.

A node whose name carries ESC, an OSC title sequence, BEL, CR and a newline (and a
controller version and a job's state reason that carry them too) is shown with every
control character written out (`\\x1b`, `\\x07`, `\\r`, `\\n`) in the table, Markdown, explain,
checklist, journal, the reclaim plan and stderr; JSON keeps the exact text and a
CSV cell a spreadsheet would run as a formula gets OWASP's leading quote.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import msgspec
import pytest

from spurctl.model import Node, NodeState
from spurctl_sim import Scenario, SimCluster, incident
from tests.cli import clean_env, on_a_terminal, read_terminal, run_cli, spurctl_argv

TRAP = "\x1b]0;owned\x07\x1b[2J\rX\nY"  # set the title, clear the screen, overwrite, break
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\rX\\nY"  # what the operator must see instead
SILENT = f"gpu097{TRAP}"  # a node no inventory speaks for: its row shows its name
HOLDER = f"gpu098{TRAP}"  # a node holding a finished job: reclaimable
FORMULA = "=HYPERLINK(1)"  # a node name a spreadsheet would run
HELD = 4702  # the incident's finished job still held on gpu012
RAW = ("\x1b", "\x07", "\r")


def trapped_scenario() -> Scenario:
    s = incident()
    s.version = f"0.8.0{TRAP}"  # every report's header shows it
    s.jobs = [
        msgspec.structs.replace(j, name=f"train{TRAP}", state_reason=f"ended{TRAP}")
        if j.job_id == HELD
        else j
        for j in s.jobs
    ]
    s.nodes = [
        *s.nodes,
        Node(SILENT, NodeState.IDLE, state_reason=f"drained{TRAP}"),
        Node(HOLDER, NodeState.IDLE),
        Node(FORMULA, NodeState.IDLE),
    ]
    s.holdings[HOLDER] = list(s.holdings["gpu012"])
    return s


def make_sim() -> SimCluster:
    return SimCluster(trapped_scenario())  # the `sim` fixture (tests/conftest.py)


def inventory_of(sim: SimCluster, path: Path) -> Path:
    """Every node's inventory but the silent node's and the formula node's."""
    sim.write_inventories(path)
    kept = [line for line in path.read_text().splitlines() if "gpu097" not in line]
    kept = [line for line in kept if "HYPERLINK" not in line]
    path.write_text("".join(f"{line}\n" for line in kept))
    return path


def assert_no_raw_control(*texts: str) -> None:
    for text in texts:
        for raw in RAW:
            assert raw not in text, f"{raw!r} reached the terminal raw in:\n{text[:3000]!r}"


def audit(sim: SimCluster, inventory: Path, *args: str, home: Path):  # type: ignore[no-untyped-def]
    return run_cli(
        "audit", "--controller", sim.controller_address, "--inventory", str(inventory), *args,
        home=home, env={"COLUMNS": "220"},
    )  # fmt: skip


@pytest.mark.parametrize("fmt", ["table", "markdown", "prometheus"])
def test_the_audit_shows_control_characters_written_out(
    sim: SimCluster, tmp_path: Path, fmt: str
) -> None:
    inventory = inventory_of(sim, tmp_path / "inventory.jsonl")
    shown = audit(sim, inventory, "--format", fmt, home=tmp_path / "home")
    written = tmp_path / f"audit.{fmt}"
    to_file = audit(sim, inventory, "--format", fmt, "-o", str(written), home=tmp_path / "home")
    assert shown.returncode == 1, shown.stderr
    assert to_file.returncode == 1, to_file.stderr
    assert_no_raw_control(shown.stdout, shown.stderr, written.read_text())
    if fmt == "prometheus":  # a label value: its backslashes escaped, its newline \\n
        assert 'node="gpu098\\\\x1b]0;owned\\\\x07\\\\x1b[2J\\\\rX\\nY"' in shown.stdout
        return
    visible = shown.stdout if fmt == "table" else shown.stdout.replace("\\\\", "\\")
    assert f"gpu098{SHOWN}" in visible  # the reclaimable holding's row
    assert f"gpu097{SHOWN}" in visible  # the not-inventoried row


def test_json_keeps_the_exact_text_and_csv_neutralises_a_formula(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = inventory_of(sim, tmp_path / "inventory.jsonl")
    doc = json.loads(audit(sim, inventory, "--format", "json", home=tmp_path / "h").stdout)
    nodes = {f["node"] for f in doc["findings"]}
    assert {SILENT, HOLDER, FORMULA} <= nodes
    rows = list(
        csv.DictReader(
            io.StringIO(audit(sim, inventory, "--format", "csv", home=tmp_path / "h").stdout)
        )
    )
    by_node = {r["node"] for r in rows}
    assert f"'{FORMULA}" in by_node and FORMULA not in by_node
    # Exact otherwise, the csv module quoting the newline (text mode reads the CR as one).
    assert HOLDER.replace("\r", "\n") in by_node


def test_explain_checklist_and_the_reclaim_plan_write_control_characters_out(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = inventory_of(sim, tmp_path / "inventory.jsonl")
    home = tmp_path / "home"
    c = ("--controller", sim.controller_address, "--inventory", str(inventory))
    runs = {
        "explain refused": run_cli("explain", HOLDER, *c, home=home),  # not one node name
        "explain job": run_cli("explain", "gpu012", str(HELD), *c, home=home),
        "checklist": run_cli("checklist", "post-wipe", *c, home=home),
        "reclaim": run_cli("reclaim", "--node", "gpu012", "--dry-run", *c, home=home),
    }
    for what, r in runs.items():
        expected = {"explain refused": 2, "checklist": 1}.get(what, 0)  # 1: steps to take
        assert r.returncode == expected, f"{what}: {r.stderr}"
        assert_no_raw_control(r.stdout, r.stderr)
    assert f"gpu098{SHOWN}" in runs["explain refused"].stderr  # the name it was given
    assert f"ended{SHOWN}" in runs["explain job"].stdout  # the job's state reason
    assert f"0.8.0{SHOWN}" in runs["reclaim"].stdout  # the plan's header: the version


def test_an_error_line_naming_the_cluster_s_text_is_written_out_on_stderr(
    sim: SimCluster, tmp_path: Path
) -> None:
    bad = sim.write_inventories(tmp_path / "inventory.jsonl")
    record = json.loads(bad.read_text().splitlines()[0])
    bad.write_text(json.dumps({**record, "collected_at": TRAP}) + "\n")
    r = audit(sim, bad, home=tmp_path / "home")
    assert r.returncode == 2, r.stderr
    assert_no_raw_control(r.stdout, r.stderr)
    assert "\\x1b]0;owned\\x07" in r.stderr, r.stderr  # the value it could not read


def test_on_a_terminal_only_the_table_s_own_colours_are_escape_sequences(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = inventory_of(sim, tmp_path / "inventory.jsonl")
    argv = spurctl_argv(
        "audit", "--controller", sim.controller_address, "--inventory", str(inventory)
    )
    env = clean_env(tmp_path / "home", COLUMNS="200", LINES="60", TERM="xterm-256color")
    status, seen = on_a_terminal(
        argv, env, lambda terminal: read_terminal(terminal, lambda _: False, timeout=60)
    )  # to the child's exit
    text = seen.decode()
    assert status == 1, text
    # Every ESC on screen starts one of rich's colour (SGR) sequences; none is an OSC,
    # a screen clear or a cursor move, and no BEL rings.
    assert "\x1b[" in text, "no colour at all: the test would prove nothing"
    assert re.sub(r"\x1b\[[0-9;]*m", "", text).count("\x1b") == 0, text
    assert "\x07" not in text and "\x1b]" not in text
    assert f"gpu098{SHOWN}" in re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_the_journal_writes_out_control_characters_its_records_carry(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    record = {"event": "intent", "at": "2026-12-02T10:00:00Z", "operator": f"ops{TRAP}"}
    journal.write_text(json.dumps({**record, "node": HOLDER, "job_id": HELD}) + "\n")
    os.chmod(journal, 0o600)
    runs = [
        run_cli("journal", "--journal", str(journal), home=tmp_path / "home"),
        run_cli("journal", "--journal", str(journal), "--run", "legacy", home=tmp_path / "h"),
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert_no_raw_control(r.stdout, r.stderr)
    assert f"ops{SHOWN}" in runs[0].stdout
