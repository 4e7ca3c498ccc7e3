"""Through the CLI: the table on a terminal, Markdown and the watch fold findings that
differ only in their node into one hostlist row; `-N/--per-node` shows every node on
its own row, as the table down a pipe always does."""

from __future__ import annotations

import json
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import on_screen, run_cli

INVENTORIED = ("gpu012", "gpu013")  # every other node has no inventory


def _inventory(sim: SimCluster, path: Path) -> Path:
    sim.write_inventories(path)
    keep = [ln for ln in path.read_text().splitlines() if json.loads(ln)["node"] in INVENTORIED]
    path.write_text("".join(f"{ln}\n" for ln in keep))
    return path


def _silent_nodes(doc: dict) -> list[str]:  # type: ignore[type-arg]
    return [f["node"] for f in doc["findings"] if f["kind"] == "not-inventoried"]


def test_not_inventoried_nodes_are_one_row_and_per_node_lists_each(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = _inventory(sim, tmp_path / "inventory.jsonl")
    base = ("audit", "--controller", sim.controller_address, "--inventory", str(inventory))
    doc = json.loads(run_cli(*base, "--format", "json").stdout)
    silent = _silent_nodes(doc)
    assert len(silent) > 10  # one JSON record per finding, always

    # On a terminal the rows that differ only in their node are one hostlist row.
    status, lines = on_screen(*base, home=tmp_path / "home", width=160, height=50)
    assert status == 1, lines
    rows = [ln for ln in lines if "not-inventoried  " in ln]
    assert len(rows) == 1, "\n".join(lines)
    assert f"({len(silent):,} nodes)" in " ".join(lines)  # the reason may go on under it

    _, per_node = on_screen(*base, "-N", home=tmp_path / "home", width=160, height=50)
    rows = [ln for ln in per_node if "not-inventoried  " in ln]
    assert len(rows) == len(silent) and "nodes)" not in " ".join(per_node)

    # Down a pipe (or into a file) every finding is a line of its own: grep finds each.
    piped = run_cli(*base)
    assert piped.returncode == 1, piped.stderr
    rows = [ln for ln in piped.stdout.splitlines() if "not-inventoried  " in ln]
    assert [r.split()[0] for r in rows] == silent and "nodes)" not in piped.stdout

    markdown = run_cli(*base, "--format", "markdown").stdout
    assert len([ln for ln in markdown.splitlines() if "| not-inventoried" in ln]) == 1
    long_md = run_cli(*base, "--format", "markdown", "--per-node").stdout
    assert len([ln for ln in long_md.splitlines() if "| not-inventoried" in ln]) == len(silent)


def test_the_watch_folds_the_same_way_and_per_node_unfolds_it(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = _inventory(sim, tmp_path / "inventory.jsonl")
    base = ("audit", "--controller", sim.controller_address, "--inventory", str(inventory))
    watch = ("--watch", "--rounds", "1", "--interval", "1")
    env = {"COLUMNS": "160"}
    folded = run_cli(*base, *watch, env=env, timeout=60)
    assert folded.returncode == 1, folded.stderr
    assert len([ln for ln in folded.stdout.splitlines() if "not-inventoried  " in ln]) == 1
    unfolded = run_cli(*base, *watch, "--per-node", env=env, timeout=60)
    assert len([ln for ln in unfolded.stdout.splitlines() if "not-inventoried  " in ln]) > 10
