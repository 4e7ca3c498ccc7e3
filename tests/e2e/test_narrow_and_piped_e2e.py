"""Through the real CLI: output that fits 80 columns and pipes (issue 28, item 5).

- reclaim's plan at 80 columns breaks no word (it stacks, as audit's table does);
- explain and checklist wrap to the terminal; checklist is rendered text on a
  terminal and Markdown down a pipe or when asked;
- audit's table down a pipe has one finding per line, and `--no-header` (`-h`, as
  sinfo's and squeue's) leaves the rows alone, for audit and nodes;
- journal keeps a hostlist whole, at 80 columns and down a pipe.

A screen is a pseudo-terminal set to 80x24, read as the operator would see it.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from spurctl.act.journal import Journal, journal_lock
from spurctl.hostlist import fold
from spurctl_sim import SimCluster
from spurctl_sim import post_wipe as post_wipe_scenario
from tests.cli import on_screen, run_cli
from tests.reclaim import reclaim_args

WIDTH = 80
_PLAN_HEADINGS = ["node", "job", "kind", "agent", "will", "stop"]


def words(text: str) -> set[str]:
    """The words of `text`, without the punctuation a layout puts after them (`title:`)."""
    return {w.rstrip(".,;:") for w in text.split()}


def assert_fits_and_keeps_words(lines: list[str], *texts: str) -> None:
    """No line wider than the screen, and every word of `texts` shown whole on a line."""
    assert all(len(line) <= WIDTH for line in lines), "\n".join(lines)
    shown = words("\n".join(lines))
    for text in texts:
        missing = words(text) - shown
        assert not missing, (missing, "\n".join(lines))


def test_the_reclaim_plan_at_80_columns_breaks_no_address_kind_or_word(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    args = [*reclaim_args(sim, inventory, agent_map, tmp_path / "j.jsonl"), "--dry-run"]
    plan = json.loads(run_cli(*args, "--format", "json", home=tmp_path / "home").stdout)["plan"]
    assert len(plan) == 9
    status, lines = on_screen(*args, home=tmp_path / "home")
    assert status == 0, lines
    assert_fits_and_keeps_words(
        lines, *(f"{e['node']} {e['job_id']} {e['kind']} {e['agent']} {e['reason']}" for e in plan)
    )
    # Each node's address and kind on a line of their own words, not cut into pieces.
    for e in plan:
        assert any(e["agent"] in line.split() for line in lines), e["agent"]
        assert any(e["kind"] in line.split() for line in lines), e["kind"]
    assert [line for line in lines if line][-1] == "DRY RUN: nothing sent"

    # Wide enough, the reasons stand in a column of their own beside the cells.
    status, wide = on_screen(*args, home=tmp_path / "home", width=220)
    assert status == 0
    assert any(line.split() == [*_PLAN_HEADINGS, "why"] for line in wide), "\n".join(wide)
    assert all(any(e["reason"] in line for line in wide) for e in plan[:8]), "\n".join(wide)


def test_explain_wraps_to_the_terminal_and_keeps_whole_lines_down_a_pipe(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    args = [
        "explain", "gpu003", "4711", "--controller", sim.controller_address,
        "--inventory", str(inventory), "--agent-map", str(agent_map),
    ]  # fmt: skip
    piped = run_cli(*args, home=tmp_path / "home")
    assert piped.returncode == 0, piped.stderr
    long_lines = [line for line in piped.stdout.splitlines() if len(line) > WIDTH]
    assert long_lines  # a pipe gets every fact on one line, for grep
    reason = next(line for line in piped.stdout.splitlines() if "Reason:" in line)

    status, lines = on_screen(*args, home=tmp_path / "home")
    assert status == 0, lines
    assert_fits_and_keeps_words(lines, piped.stdout)
    # A wrapped value goes on under where it began.
    at = next(i for i, line in enumerate(lines) if line.startswith("  Reason:"))
    assert lines[at + 1].startswith(" " * 18) and not lines[at + 1][18].isspace()
    assert " ".join(" ".join(lines[at : at + 2]).split()) == " ".join(reason.split())


def test_checklist_is_rendered_text_on_a_terminal_and_markdown_when_piped_or_asked(
    tmp_path: Path,
) -> None:
    with SimCluster(post_wipe_scenario()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        args = [
            "checklist", "post-wipe", "--controller", sim.controller_address,
            "--inventory", str(inventory),
        ]  # fmt: skip
        piped = run_cli(*args, home=tmp_path / "home")
        doc = json.loads(run_cli(*args, "--json", home=tmp_path / "home").stdout)
        status, lines = on_screen(*args, home=tmp_path / "home")
        _, asked = on_screen(*args, "--format", "markdown", home=tmp_path / "home")
    assert piped.returncode == status == 1, piped.stderr
    assert piped.stdout.startswith("# Post-wipe agent recycle checklist\n")
    assert "- [ ] **Stop submissions**" in piped.stdout and "| node |" in piped.stdout

    screen = "\n".join(lines)
    assert "Post-wipe agent recycle checklist" in screen
    assert "# Post-wipe" not in screen and "**" not in screen and "```" not in screen
    assert "Stop submissions" in screen and "Held ids" in screen
    # Every word of each step and of each held id's hazard and reason is on the screen
    # whole (the held ids listed rather than cut short in a table), within 80 columns.
    texts = [f"{s['title']} {s['detail']}" for s in doc["steps"]]
    texts += [f"{h['hazard']} {h['reason']}" for n in doc["nodes"] for h in n["held"]]
    assert len(texts) > len(doc["steps"])
    # A step's command is one line whatever the width (a broken one does not paste); the
    # terminal folds it. Everything else fits the 80 columns.
    commands = [line for line in lines if re.match(r"    (spurctl|ssh|clush|scontrol) ", line)]
    assert commands and all(shlex.split(c) for c in commands)
    prose = [line for line in lines if line not in commands]
    assert_fits_and_keeps_words(prose, *(re.sub(r"[`*]", "", t) for t in texts))
    assert "above-watermark-unknown" in words(screen)
    # The controller-version note is its short form on the screen; documents keep it whole.
    assert "NOTE: Spur 0.8.0 may free by itself" in screen
    assert "clears terminal-held" not in screen
    assert "release v0.8.0 clears terminal-held" in piped.stdout

    assert asked[0] == "# Post-wipe agent recycle checklist", asked[:3]


def test_audit_down_a_pipe_is_one_finding_per_line_and_no_header_leaves_the_rows(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    args = ["audit", "--controller", sim.controller_address, "--inventory", str(inventory)]
    narrow = {"COLUMNS": str(WIDTH)}  # a pipe's width is no reason to wrap a finding
    doc = json.loads(run_cli(*args, "--format", "json", home=tmp_path / "home").stdout)
    findings = doc["findings"]
    table = run_cli(*args, "-N", home=tmp_path / "home", env=narrow)
    assert table.returncode == 1, table.stderr
    lines = table.stdout.splitlines()
    for f in findings:
        (line,) = [ln for ln in lines if f["reason"] in ln]  # whole, on one line
        assert line.split()[0] == f["node"], line
        assert f["kind"] in line.split() and f["action"] in line.split()
    assert any(line.startswith("node ") and line.endswith("reason") for line in lines)

    for flag in ("--no-header", "-h"):
        rows = run_cli(*args, "-N", flag, home=tmp_path / "home", env=narrow)
        assert rows.returncode == 1, rows.stderr
        got = rows.stdout.splitlines()
        assert len(got) == len(findings), rows.stdout
        for line, f in zip(got, findings, strict=True):
            assert line.split()[:2] == [f["node"], str(f["job_id"] or "-")]
            assert line.endswith(f["reason"])
        # The warnings are still said, on stderr (the version note is explain's and JSON's).
        for note in doc["notes"]:
            assert note in rows.stderr or note.startswith("Spur 0.8.0 is release"), note

    refused = run_cli(*args, "--no-header", "--format", "csv", home=tmp_path / "home")
    assert refused.returncode == 2 and "--no-header is for the table" in refused.stderr
    helped = run_cli("audit", "--help", home=tmp_path / "home")
    assert helped.returncode == 0 and "--no-header" in helped.stdout and "-h" in helped.stdout

    nodes = run_cli(
        "nodes", "--controller", sim.controller_address, "--inventory", str(inventory), "-h",
        home=tmp_path / "home",
    )  # fmt: skip
    assert nodes.returncode == 0, nodes.stderr
    listed = json.loads(
        run_cli(
            "nodes",
            "--controller",
            sim.controller_address,
            "--inventory",
            str(inventory),
            "--json",
            home=tmp_path / "home",
        ).stdout
    )["nodes"]
    assert [line.split()[0] for line in nodes.stdout.splitlines()] == [n["node"] for n in listed]


def _journal_of_a_wide_run(path: Path) -> str:
    """A journal whose one run touched every other node of 30: a folded hostlist that
    fits 80 columns alone, but not beside the run's other cells."""
    touched = [f"gpu{n:03d}" for n in range(1, 31, 2)]
    with journal_lock(path), Journal(path) as j:
        for node in touched:
            j.intent(node, 4711, "active-elsewhere")
            j.outcome(node, 4711, "active-elsewhere", "sent", "accepted")
    hostlist = fold(touched)
    assert len(hostlist) > WIDTH // 2 and "," in hostlist
    return hostlist


def test_journal_keeps_a_hostlist_whole_at_80_columns_and_down_a_pipe(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    hostlist = _journal_of_a_wide_run(journal)
    args = ["journal", "--journal", str(journal)]
    status, lines = on_screen(*args, home=tmp_path / "home")
    assert status == 0, lines
    assert any(hostlist in line.split() for line in lines), "\n".join(lines)
    # (The first line names the journal's path: whole, as long as the path is; and the
    # confirm command is one line to paste, however long.)
    commands = [line for line in lines if line.startswith("  spurctl audit --nodes ")]
    assert len(commands) == 1 and hostlist in commands[0], "\n".join(lines)
    assert all(len(line) <= WIDTH for line in lines[1:] if line not in commands), "\n".join(lines)
    assert any("15 sent (15 unconfirmed)" in line for line in lines)
    for width in ("80", "200"):
        piped = run_cli(*args, home=tmp_path / "home", env={"COLUMNS": width})
        assert piped.returncode == 0, piped.stderr
        assert any(hostlist in line.split() for line in piped.stdout.splitlines()), piped.stdout
    # Wide enough, one row of the table.
    wide = run_cli(*args, home=tmp_path / "home", env={"COLUMNS": "200"}).stdout
    (row,) = [line for line in wide.splitlines() if hostlist in line.split()]
    assert "15 sent (15 unconfirmed)" in row
