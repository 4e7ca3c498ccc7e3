"""Through the real CLI: `spurctl nodes`, -x wherever -w is taken, `journal --node --since`.

Against the simulated incident cluster (tests/conftest.py's incident_cluster), with its
inventory file edited where a case needs a node that failed or was never inventoried.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from spurctl_sim import SimCluster
from spurctl_sim import post_wipe as post_wipe_scenario
from tests.cli import one_line_error, run_cli
from tests.reclaim import PLANNED, RECLAIM_NODES, cancelled, reclaim_args

INCIDENT = tuple[SimCluster, Path, Path]


def _nodes(sim: SimCluster, inventory: Path, *extra: str) -> str:
    run = run_cli(
        "nodes", "--controller", sim.controller_address, "--inventory", str(inventory), *extra
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def _row(out: str, node: str) -> list[str]:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(f"{node} ")]
    return re.split(r"\s{2,}", line.strip())


def _edited(inventory: Path, tmp_path: Path) -> Path:
    """The incident's inventories with gpu023's collect failed and gpu024 never collected."""
    docs = [json.loads(line) for line in inventory.read_text().splitlines() if line.strip()]
    kept = []
    for doc in docs:
        if doc["node"] == "gpu024":
            continue
        if doc["node"] == "gpu023":
            doc.update(error="ssh: connect to host gpu023 port 22: Connection refused", held=[])
        kept.append(doc)
    out = tmp_path / "edited.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in kept))
    return out


# -- spurctl nodes -------------------------------------------------------------------


def test_nodes_lists_one_line_per_node_with_both_views_and_folds_each_agent_status(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    out = _nodes(sim, _edited(inventory, tmp_path))

    lines = out.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("node "))
    # The one table style, as audit's: lowercase headings over the cells.
    assert re.split(r"\s{2,}", lines[header]) == [
        "node",
        "state",
        "jobs",
        "held",
        "agent",
        "inv-age",
        "findings",
    ]
    listed = [ln.split()[0] for ln in lines[header + 1 :] if ln.startswith("gpu")]
    assert listed == [f"gpu{i:03d}" for i in range(1, 25)]
    # gpu003 is DOWN and the controller runs nothing there, but its agent still holds 4711.
    assert _row(out, "gpu003")[:5] == ["gpu003", "down", "-", "4711", "answered"]
    assert _row(out, "gpu012")[:5] == ["gpu012", "mixed", "4950", "4702,4950", "answered"]
    # The name its inventory reports rides in the findings column, never widening the cells.
    assert _row(out, "gpu021")[4] == "answered"
    assert _row(out, "gpu021")[6] == "name-mismatch (its inventory says gpu021.cluster.local)"
    assert _row(out, "gpu023")[3:] == [
        "?", "unreachable", _row(out, "gpu023")[5], "agent-unreachable"
    ]  # fmt: skip
    assert _row(out, "gpu024")[3:] == ["?", "not-inventoried", "-", "not-inventoried"]
    assert "answered (22): gpu[001-022]" in lines
    assert "unreachable (1): gpu023" in lines and "not-inventoried (1): gpu024" in lines
    # The controller-version note is one line, its short form; acknowledged, none.
    (version,) = [ln for ln in lines[:header] if "Spur 0.8.0" in ln]
    assert version.startswith("NOTE: Spur 0.8.0 may free by itself only terminal-held")
    assert version.endswith(
        "Hide this note with --ack-version 0.8.0 (or ack_version in the config file)."
    )
    acked = _nodes(sim, _edited(inventory, tmp_path), "--ack-version", "v0.8.0")
    assert "Spur 0.8.0" not in acked and acked.count("\n") == out.count("\n") - 1


def test_nodes_json_and_csv_carry_every_field_and_take_w_and_x(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    edited = _edited(inventory, tmp_path)
    doc = json.loads(
        _nodes(sim, edited, "-w", "gpu[001-006],gpu023", "-x", "gpu003", "--format", "json")
    )

    assert doc["schema"] == "spurctl.nodes/v1"
    assert [n["node"] for n in doc["nodes"]] == [
        "gpu001",
        "gpu002",
        "gpu004",
        "gpu005",
        "gpu006",
        "gpu023",
    ]
    by = {n["node"]: n for n in doc["nodes"]}
    assert by["gpu001"] == {
        **by["gpu001"],
        "state": "ALLOCATED",
        "jobs": [4690],
        "held": [4690],
        "agent": "answered",
        "error": None,
    }
    assert by["gpu023"]["agent"] == "unreachable" and "Connection refused" in by["gpu023"]["error"]
    assert by["gpu023"]["held"] is None
    assert doc["summary"] == {
        "nodes": 6,
        "by_agent": {"answered": "gpu[001-002,004-006]", "unreachable": "gpu023"},
    }
    assert "1 node excluded by -x and not audited: gpu003." in doc["notes"]
    assert any("release v0.8.0 clears terminal-held" in n for n in doc["notes"])  # whole

    rows = list(
        csv.DictReader(io.StringIO(_nodes(sim, edited, "-w", "gpu[006,021]", "--format", "csv")))
    )
    assert [(r["node"], r["held"], r["agent"], r["inventory_node"]) for r in rows] == [
        ("gpu006", "4715 4716", "answered", ""),
        ("gpu021", "4960", "answered", "gpu021.cluster.local"),
    ]


def test_nodes_names_the_findings_on_each_node_under_either_of_its_names(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    out = _nodes(sim, inventory)

    assert _row(out, "gpu006")[-1] == "active-elsewhere(2)"  # 4715 and 4716
    assert _row(out, "gpu009")[-1] == "phantom-alloc"
    assert _row(out, "gpu012")[-1] == "terminal-held"
    assert _row(out, "gpu021")[-1].split()[0] == "name-mismatch"  # as gpu021.cluster.local
    assert _row(out, "gpu001")[-1] == "-"  # a healthy job: nothing to say
    doc = json.loads(_nodes(sim, inventory, "-w", "gpu[006,009]", "--json"))
    assert [n["findings"] for n in doc["nodes"]] == [
        {"active-elsewhere": 2},
        {"phantom-alloc": 1},
    ]
    rows = list(
        csv.DictReader(io.StringIO(_nodes(sim, inventory, "-w", "gpu006", "--format", "csv")))
    )
    assert rows[0]["findings"] == "active-elsewhere=2"


def test_nodes_state_chooses_nodes_by_the_controllers_state_as_sinfo_t(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    out = _nodes(sim, inventory, "--state", "down")
    listed = [ln.split()[0] for ln in out.splitlines() if ln.startswith("gpu")]
    assert listed == ["gpu003", "gpu004", "gpu005"]  # the incident's DOWN nodes
    assert "Filter --state down: showing 3 of 24 nodes." in out.splitlines()

    both = json.loads(_nodes(sim, inventory, "-t", "down,mix", "--json"))
    repeated = json.loads(_nodes(sim, inventory, "-t", "down", "-t", "mixed", "--json"))

    def names(doc: dict[str, Any]) -> list[tuple[str, str]]:
        return [(n["node"], n["state"]) for n in doc["nodes"]]

    assert names(both) == names(repeated)
    assert {n["state"] for n in both["nodes"]} == {"DOWN", "MIXED"}
    assert both["filter"] == {
        "states": ["down", "mixed"],
        "shown": len(both["nodes"]),
        "hidden": 24 - len(both["nodes"]),
    }
    assert both["summary"]["nodes"] == len(both["nodes"])

    bad = run_cli(
        "nodes", "--controller", sim.controller_address, "--inventory", str(inventory),
        "--state", "down,sleepy",
    )  # fmt: skip
    one_line_error(bad, "unknown node state 'sleepy'", "idle, allocated, mixed, down")


def test_nodes_refuses_a_bad_exclude_hostlist_with_one_line(incident_cluster: INCIDENT) -> None:
    sim, inventory, _ = incident_cluster
    run = run_cli(
        "nodes", "--controller", sim.controller_address, "--inventory", str(inventory), "-x", "gpu["
    )
    assert run.returncode == 2
    one_line_error(run, "-x/--exclude", "gpu[")


# -- -x wherever -w is taken ---------------------------------------------------------


def _leaf_commands() -> dict[str, Any]:
    import typer.main

    from spurctl.cli import app

    out: dict[str, Any] = {}

    def walk(cmd: Any, path: str) -> None:
        if hasattr(cmd, "commands"):  # a group: checklist, the root
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            out[path] = cmd

    walk(typer.main.get_command(app), "")
    return out


def test_every_command_taking_w_takes_x() -> None:
    found = _leaf_commands()
    taking_w = sorted(n for n, c in found.items() if any("-w" in p.opts for p in c.params))
    assert {"audit", "reclaim", "nodes", "collect", "journal", "checklist post-wipe"} <= set(
        taking_w
    )
    for name in taking_w:
        opts = {o for p in found[name].params for o in p.opts}
        assert {"-x", "--exclude"} <= opts, name
        shown = run_cli(*name.split(), "--help").stdout
        assert re.search(r"-x, --exclude +HOSTLIST", shown), name


def test_audit_leaves_excluded_nodes_out_and_says_how_many(incident_cluster: INCIDENT) -> None:
    sim, inventory, _ = incident_cluster
    base = [
        "audit",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(inventory),
        "--format",
        "json",
    ]
    every = json.loads(run_cli(*base).stdout)
    assert {"gpu003", "gpu004", "gpu021.cluster.local"} <= {f["node"] for f in every["findings"]}

    # Either name of a node excludes it: gpu021 reports itself as gpu021.cluster.local.
    doc = json.loads(run_cli(*base, "-x", "gpu[003-004],gpu021").stdout)
    nodes = {f["node"] for f in doc["findings"]}
    assert not nodes & {"gpu003", "gpu004", "gpu021", "gpu021.cluster.local"}
    assert "gpu005" in nodes
    assert "3 nodes excluded by -x and not audited: gpu[003-004,021]." in doc["notes"]
    assert doc["summary"]["nodes"] == every["summary"]["nodes"] - 3


def test_reclaim_never_cancels_on_an_excluded_node(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    args = reclaim_args(sim, inventory, agent_map, tmp_path / "journal.jsonl")
    run = run_cli(*args, "-x", "gpu[003-006]", "--format", "json")
    assert run.returncode in (0, 1), run.stderr

    sent = set(cancelled(sim))
    assert sent == {p for p in PLANNED if p[0] not in {"gpu003", "gpu004", "gpu005", "gpu006"}}
    assert not {p["node"] for p in json.loads(run.stdout)["plan"]} & {"gpu003", "gpu006"}

    everything = run_cli(*args, "-x", RECLAIM_NODES)
    assert everything.returncode == 2
    one_line_error(everything, "leaves out every node")


def test_collect_does_not_run_the_command_on_an_excluded_node(tmp_path: Path) -> None:
    marks = tmp_path / "ran"
    marks.mkdir()
    # Each node's command leaves a mark, then prints that node's empty inventory.
    doc = (
        '{"schema": "spurctl.inventory/v1", "node": "%h", "collected_at": '
        '"2026-12-02T10:00:00Z", "source": "proc", "error": null, "held": []}'
    )
    command = f"sh -c 'touch {marks}/$0; echo \"$1\"' %h '{doc}'"
    run = run_cli("collect", "-w", "n[1-4]", "-x", "n[2-3]", "--command", command)

    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in marks.iterdir()) == ["n1", "n4"]
    assert [json.loads(ln)["node"] for ln in run.stdout.splitlines()] == ["n1", "n4"]


def test_checklist_leaves_excluded_nodes_out(tmp_path: Path) -> None:
    with SimCluster(post_wipe_scenario()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        base = [
            "checklist",
            "post-wipe",
            "--controller",
            sim.controller_address,
            "--inventory",
            str(inventory),
            "--format",
            "json",
        ]
        every = json.loads(run_cli(*base).stdout)
        doc = json.loads(run_cli(*base, "-x", "gpu[001-002]").stdout)
    assert {"gpu001", "gpu002"} <= set(_hostlist_nodes(every["nodes_to_recycle"]))
    assert not {"gpu001", "gpu002"} & set(_hostlist_nodes(doc["nodes_to_recycle"]))
    assert not {"gpu001", "gpu002"} & {n["node"] for n in doc["nodes"]}


def _hostlist_nodes(value: Any) -> list[str]:
    from spurctl.hostlist import expand

    if isinstance(value, list):
        return value
    return sorted(expand(value)) if value else []


# -- journal --node --since ------------------------------------------------------------


def _legacy(node: str, job_id: int, at: str) -> str:
    rec = {"event": "intent", "at": at, "operator": "ops", "node": node, "job_id": job_id}
    return json.dumps({**rec, "kind": "active-elsewhere"})


@pytest.fixture
def journal(incident_cluster: INCIDENT, tmp_path: Path) -> Path:
    """An old interrupted run on gpu003 (2026-12-02), then today's reclaim of the incident."""
    sim, inventory, agent_map = incident_cluster
    path = tmp_path / "journal.jsonl"
    path.write_text(_legacy("gpu003", 4711, "2026-12-02T10:00:00Z") + "\n")
    os.chmod(path, 0o600)
    assert run_cli(*reclaim_args(sim, inventory, agent_map, path)).returncode == 1
    return path


def _journal(path: Path, *extra: str) -> dict[str, Any]:
    run = run_cli("journal", "--journal", str(path), "--format", "json", *extra)
    assert run.returncode == 0, run.stderr
    doc: dict[str, Any] = json.loads(run.stdout)
    return doc


def test_journal_node_shows_only_runs_on_those_nodes_counted_for_them(journal: Path) -> None:
    doc = _journal(journal, "--node", "gpu013")
    (run,) = doc["runs"]
    assert (run["nodes"], run["intents"], run["sent"], run["interrupted"]) == (
        "gpu013",
        1,
        1,
        False,
    )
    assert doc["filter"] == {
        "nodes": "gpu013",
        "exclude": None,
        "since": None,
        "cluster": None,
        "runs_in_journal": 2,
    }

    both = _journal(journal, "--node", "gpu[003-004]")
    assert [(r["nodes"], r["intents"]) for r in both["runs"]] == [
        ("gpu[003-004]", 2),
        ("gpu003", 1),
    ]
    without = _journal(journal, "--node", "gpu[003-004]", "-x", "gpu003")
    assert [r["nodes"] for r in without["runs"]] == ["gpu004"]

    table = run_cli("journal", "--journal", str(journal), "--node", "gpu013").stdout
    assert f"Journal {journal}: 1 run matching --node gpu013 (of 2) (all, newest first)" in table


def test_journal_since_takes_a_time_or_a_span_back_from_now(journal: Path) -> None:
    assert len(_journal(journal, "--since", "2h")["runs"]) == 1  # today's reclaim only
    assert len(_journal(journal, "--since", "2026-12-01T00:00:00Z")["runs"]) == 2
    assert len(_journal(journal, "--since", "2026-12-02T10:00:01")["runs"]) == 1
    none = run_cli("journal", "--journal", str(journal), "--since", "2999-01-01T00:00:00Z")
    assert none.returncode == 0
    assert "holds no run matching --since 2999-01-01T00:00:00Z (of 2)" in none.stdout


@pytest.mark.parametrize("bad", ["yesterday", "2h ago", "-5m", ""])
def test_journal_since_that_is_no_time_is_one_line_and_exit_2(tmp_path: Path, bad: str) -> None:
    run = run_cli("journal", "--journal", str(tmp_path / "j.jsonl"), "--since", bad)
    assert run.returncode == 2, run.stdout
    one_line_error(run, "--since")


@pytest.mark.parametrize(
    "far", ["1000000000h", "99999999999999999999m", "0001-01-01T00:00:00+01:00"]
)
def test_journal_since_beyond_any_date_is_one_line_and_exit_2(tmp_path: Path, far: str) -> None:
    # A span back past the year 1, or a time that is no UTC date: not an OverflowError.
    run = run_cli("journal", "--journal", str(tmp_path / "j.jsonl"), "--since", far)
    assert "internal error" not in run.stderr
    one_line_error(run, "--since", far)


def test_journal_node_that_is_no_hostlist_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run = run_cli("journal", "--journal", str(tmp_path / "j.jsonl"), "--node", "gpu[1-")
    assert run.returncode == 2
    one_line_error(run, "gpu[1-")
