"""Through the real CLI against the simulated incident cluster:
`audit --kind/--action` (rows only; the summary and the exit status count all),
`audit -o FILE` (whole or not at all), and `-w` / `reclaim --nodes`."""

from __future__ import annotations

import csv
import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest
import typer

from spurctl.cli import app
from spurctl.model import Action, Kind
from spurctl_sim import SimCluster
from tests.cli import dead_url, one_line_error, run_cli, stderr_lines
from tests.reclaim import PLANNED, cancelled, reclaim_args

# The incident's reclaim findings: what its reclaim plans.
RECLAIMABLE = PLANNED


@pytest.fixture
def inventory(sim: SimCluster, tmp_path: Path) -> Path:
    return sim.write_inventories(tmp_path / "inventory.jsonl")


def audit(sim: SimCluster, inventory: Path, *args: str, home: Path | None = None):  # type: ignore[no-untyped-def]
    return run_cli(
        "audit",
        "--inventory",
        str(inventory),
        *args,
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
        home=home,
    )


def audit_json(sim: SimCluster, inventory: Path, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    run = audit(sim, inventory, "--format", "json", *args)
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def last_lines(text: str, n: int) -> list[str]:
    return text.rstrip("\n").splitlines()[-n:]


# -- --kind / --action -----------------------------------------------------------


def test_action_filter_shows_only_those_rows_and_counts_everything(
    sim: SimCluster, inventory: Path
) -> None:
    status_all, everything = audit_json(sim, inventory)
    status, doc = audit_json(sim, inventory, "--action", "reclaim")

    assert {(f["node"], f["job_id"]) for f in doc["findings"]} == RECLAIMABLE
    assert {f["action"] for f in doc["findings"]} == {"reclaim"}
    # The summary and the exit status are the whole audit's, not the rows'.
    assert doc["summary"] == everything["summary"]
    assert status == status_all == 1
    total = len(everything["findings"])
    assert total > len(RECLAIMABLE)
    assert doc["filter"] == {
        "kinds": [],
        "actions": ["reclaim"],
        "shown": len(RECLAIMABLE),
        "hidden": total - len(RECLAIMABLE),
    }
    assert "filter" not in everything  # no filter, no key


def test_kind_and_action_repeat_and_both_must_match(sim: SimCluster, inventory: Path) -> None:
    _, doc = audit_json(
        sim,
        inventory,
        "--kind",
        "terminal-held",
        "--kind",
        "below-watermark-unknown",
        "--kind",
        "phantom-alloc",
        "--action",
        "reclaim",
    )
    # phantom-alloc is an investigate finding: the action filter drops it.
    assert {(f["node"], f["job_id"]) for f in doc["findings"]} == {
        ("gpu012", 4702),
        ("gpu013", 4388),
    }
    assert doc["filter"]["kinds"] == ["terminal-held", "below-watermark-unknown", "phantom-alloc"]
    assert doc["filter"]["actions"] == ["reclaim"]


def test_the_table_shows_the_filtered_rows_says_what_it_hid_and_keeps_the_summary(
    sim: SimCluster, inventory: Path
) -> None:
    everything = audit(sim, inventory)
    run = audit(sim, inventory, "--kind", "name-mismatch")

    assert run.returncode == everything.returncode == 1, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("gpu")]
    assert rows and all("name-mismatch" in line for line in rows)
    # The table's own rows (the notes above it, the version note among them, name kinds).
    shown_table = run.stdout.split("Filter --kind")[0]
    assert "active-elsewhere" not in shown_table[shown_table.index("\nnode ") :]
    _, doc = audit_json(sim, inventory)
    total = len(doc["findings"])
    shown = sum(1 for f in doc["findings"] if f["kind"] == "name-mismatch")
    assert (
        f"Filter --kind name-mismatch: showing {shown} of {total} findings, "
        f"{total - shown} hidden; the summary and the exit status count all {total}."
    ) in run.stdout
    # The summary line and the context line: the same words as without the filter.
    summary = [line for line in everything.stdout.splitlines() if "nodes in scope" in line]
    assert summary and summary[0] in run.stdout.splitlines()


def test_a_filter_that_matches_nothing_never_reads_as_no_discrepancies(
    sim: SimCluster, inventory: Path
) -> None:
    run = audit(sim, inventory, "--action", "none")

    assert run.returncode == 1, run.stderr  # the hidden findings still need action
    assert "No finding matches --action none." in run.stdout
    assert "No discrepancies" not in run.stdout


def test_csv_keeps_its_rows_clean_and_says_the_filter_on_stderr(
    sim: SimCluster, inventory: Path
) -> None:
    run = audit(sim, inventory, "--format", "csv", "--action", "reclaim")

    assert run.returncode == 1
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert {(r["node"], int(r["job_id"])) for r in rows} == RECLAIMABLE
    (note,) = stderr_lines(run)
    assert note.startswith("spurctl: note: Filter --action reclaim: showing 9 of ")


def test_markdown_says_the_filter_under_the_summary(sim: SimCluster, inventory: Path) -> None:
    run = audit(sim, inventory, "--format", "markdown", "--kind", "terminal-held")

    assert run.returncode == 1
    assert "**Filter:** Filter --kind terminal-held: showing 1 of " in run.stdout
    table = [line for line in run.stdout.splitlines() if line.startswith("| gpu")]
    assert len(table) == 1 and "| gpu012 " in table[0]


def test_prometheus_counts_stay_whole_and_the_node_series_follow_the_filter(
    sim: SimCluster, inventory: Path
) -> None:
    def samples(text: str) -> dict[str, str]:
        return {
            line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
            for line in text.splitlines()
            if line.startswith("spurctl_") and "timestamp" not in line
        }

    everything = samples(audit(sim, inventory, "--format", "prometheus").stdout)
    run = audit(sim, inventory, "--format", "prometheus", "--kind", "terminal-held")
    shown = samples(run.stdout)

    def per_node(key: str) -> bool:
        return "node=" in key

    assert run.returncode == 1
    assert {k: v for k, v in shown.items() if not per_node(k)} == {
        k: v for k, v in everything.items() if not per_node(k)
    }
    assert [k for k in shown if per_node(k)] == [
        'spurctl_node_reclaimable_holdings{node="gpu012"}',
        'spurctl_finding{node="gpu012",kind="terminal-held",action="reclaim"}',
        'spurctl_finding_since_seconds{node="gpu012",kind="terminal-held",action="reclaim"}',
    ]
    assert run.stdout.splitlines()[0].startswith("# spurctl: Filter --kind terminal-held: ")


@pytest.mark.parametrize(
    ("option", "value", "listed"),
    [("--kind", "stranded", Kind.ACTIVE_ELSEWHERE), ("--action", "kill", Action.INVESTIGATE)],
)
def test_an_unknown_kind_or_action_is_one_line_naming_them_all(
    option: str, value: str, listed: Kind | Action
) -> None:
    run = run_cli("audit", "--inventory", "-", option, value)

    line = one_line_error(run, option, repr(value), listed.value)
    assert "use one of" in line


def test_filters_and_output_are_refused_with_watch(sim: SimCluster, inventory: Path) -> None:
    for extra in (["--kind", "healthy"], ["-o", str(inventory.parent / "x.txt")]):
        run = audit(sim, inventory, "--watch", "--rounds", "1", *extra)
        one_line_error(run, "--watch")
    assert not (inventory.parent / "x.txt").exists()


def test_the_shell_completes_kinds_and_actions() -> None:
    from tests.e2e.test_completions import complete

    assert complete("spurctl audit --kind active") == ["active-elsewhere"]
    assert complete("spurctl audit --kind below") == ["below-watermark-unknown"]
    assert complete("spurctl audit --action i") == ["investigate"]


# -- -o FILE ---------------------------------------------------------------------


def test_output_replaces_the_file_whole_by_rename(sim: SimCluster, inventory: Path) -> None:
    textfile = inventory.parent / "textfile"
    textfile.mkdir()
    prom = textfile / "spurctl.prom"
    prom.write_text("# the last good report\n")
    prom.chmod(0o666)  # made readable to node_exporter (and, carelessly, writable to all)
    reader = prom.open()  # a collector mid-read keeps the file it opened

    run = audit(sim, inventory, "--format", "prometheus", "-o", str(prom))

    assert run.returncode == 1, run.stderr
    # Nothing on stdout, and on stderr only what was written where.
    assert run.stdout == ""
    assert stderr_lines(run) == [f"wrote the audit (prometheus, 14 findings) to {prom}"]
    text = prom.read_text()
    assert text.startswith("# HELP spurctl_findings ")
    assert 'spurctl_findings{kind="active-elsewhere"} 7' in text
    # Renamed over, never rewritten in place: the open handle still reads the old report.
    assert reader.read() == "# the last good report\n"
    reader.close()
    # Its read bits are kept (node_exporter can still read it), never a write bit for others.
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644
    assert sorted(p.name for p in textfile.iterdir()) == ["spurctl.prom"]


def test_output_takes_every_format_and_the_filters(sim: SimCluster, inventory: Path) -> None:
    out = inventory.parent / "audit.json"
    run = audit(sim, inventory, "--format", "json", "--action", "reclaim", "--output", str(out))

    assert run.returncode == 1 and run.stdout == ""
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # a new file: private
    doc = json.loads(out.read_text())
    assert {(f["node"], f["job_id"]) for f in doc["findings"]} == RECLAIMABLE
    table = inventory.parent / "audit.txt"
    assert audit(sim, inventory, "-o", str(table)).returncode == 1
    assert "nodes in scope" in table.read_text()


def test_an_audit_that_fails_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    prom = tmp_path / "spurctl.prom"
    prom.write_text("# the last good report\n")
    inv = tmp_path / "inv.jsonl"
    inv.write_text("")

    run = run_cli(
        "audit",
        "--controller",
        dead_url(),
        "--timeout",
        "2",
        "--inventory",
        str(inv),
        "--format",
        "prometheus",
        "-o",
        str(prom),
    )

    assert run.returncode == 2, run.stderr
    assert prom.read_text() == "# the last good report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inv.jsonl", "spurctl.prom"]


def test_output_into_a_missing_directory_is_one_line(sim: SimCluster, inventory: Path) -> None:
    run = audit(sim, inventory, "-o", str(inventory.parent / "missing" / "audit.txt"))
    one_line_error(run, "cannot write", "missing/audit.txt")


# -- -w and reclaim --nodes --------------------------------------------------------


def test_w_is_the_short_form_of_nodes_on_every_command_that_has_it() -> None:
    root = typer.main.get_command(app)
    seen = []

    def walk(command: Any, path: str) -> None:
        for sub_name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {sub_name}")
        for param in command.params:
            if "--nodes" in param.opts:
                seen.append(path)
                assert "-w" in param.opts, path
                assert param.metavar == "HOSTLIST", path

    walk(root, "spurctl")
    assert {"spurctl audit", "spurctl reclaim", "spurctl collect"} <= set(seen)
    assert "spurctl checklist post-wipe" in seen


def test_audit_w_limits_the_audit_as_nodes_does(sim: SimCluster, inventory: Path) -> None:
    _, short = audit_json(sim, inventory, "-w", "gpu[003-005]")
    _, long = audit_json(sim, inventory, "--nodes", "gpu[003-005]")

    assert short["summary"]["nodes"] == 3
    assert {f["node"] for f in short["findings"]} == {"gpu003", "gpu004", "gpu005"}

    def rows(doc: dict[str, Any]) -> list[tuple[str, int, str, str]]:
        return [(f["node"], f["job_id"], f["kind"], f["action"]) for f in doc["findings"]]

    assert rows(short) == rows(long)


def test_collect_takes_w(tmp_path: Path) -> None:
    run = run_cli("collect", "-w", "n[1-2]", "--command", "true %h", "--node-timeout", "10")

    assert run.returncode == 1  # `true` prints no inventory
    nodes = [json.loads(line)["node"] for line in run.stdout.splitlines()]
    assert sorted(nodes) == ["n1", "n2"]


@pytest.mark.parametrize("spelling", ["--nodes", "-w"])
def test_reclaim_takes_nodes_and_w_as_node(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path, spelling: str
) -> None:
    sim, inventory, agent_map = incident_cluster
    args = reclaim_args(sim, inventory, agent_map, tmp_path / "journal.jsonl", node="gpu[003,012]")
    args[args.index("--node")] = spelling

    run = run_cli(*args, "--format", "json", home=tmp_path)

    assert "--yes" not in run.stderr  # Typer's "did you mean --yes" is gone
    assert run.returncode == 1, run.stderr  # sent, unconfirmed without a re-collect
    doc = json.loads(run.stdout)
    assert {(e["node"], e["job_id"]) for e in doc["plan"]} == {("gpu003", 4711), ("gpu012", 4702)}
    assert sorted(cancelled(sim)) == [("gpu003", 4711), ("gpu012", 4702)]


@pytest.mark.parametrize(
    "twice",
    [
        ["--node", "gpu003", "--nodes", "gpu012"],
        ["--node", "gpu003", "-w", "gpu012"],
        ["--node", "gpu012", "--node", "gpu003"],
    ],
)
def test_reclaim_given_the_nodes_twice_acts_on_their_union_as_clush_does(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path, twice: list[str]
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal = tmp_path / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal)
    at = args.index("--node")
    args[at : at + 2] = twice

    run = run_cli(*args, "--dry-run", "--format", "json", home=tmp_path)

    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert {(e["node"], e["job_id"]) for e in doc["plan"]} == {("gpu003", 4711), ("gpu012", 4702)}
    assert cancelled(sim) == []


def test_reclaim_without_nodes_still_says_what_is_missing() -> None:
    run = run_cli("reclaim", "--dry-run")
    one_line_error(run, "--node")
