"""Issue 43 item 8, through the real CLI on a pseudo-terminal: one screen.

- at 120x40 the incident's 14 findings, the summary and the command that reclaims what
  is reclaimable fit the screen (they took ~65 lines: reasons squeezed into 45
  columns, a blank line between rows);
- at 80 columns no table splits a word: audit's, reclaim's plan and result (which cut
  `below-watermark-unk`/`nown`), the journal's, nodes';
- a plain audit ends with the reclaim hostlist and the one command that acts on it,
  which pastes and runs as printed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import on_screen, run_cli
from tests.reclaim import reclaim_args

INCIDENT = tuple[SimCluster, Path, Path]


def rows_on(lines: list[str], width: int) -> int:
    """How many terminal rows `lines` take at `width` (a longer line folds)."""
    return sum(max(1, -(-len(line) // width)) for line in lines)


def shown(lines: list[str]) -> list[str]:
    """The lines the command printed (the pty's trailing empty line left out)."""
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def test_the_incident_audit_fits_one_120x40_screen_and_ends_with_the_reclaim_command(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    args = ["audit", "--controller", sim.controller_address, "--inventory", str(inventory)]
    doc = json.loads(run_cli(*args, "--json", home=tmp_path / "home").stdout)
    assert len(doc["findings"]) == 14

    status, lines = on_screen(*args, home=tmp_path / "home", width=120, height=40)
    lines = shown(lines)
    assert status == 1, "\n".join(lines)
    assert rows_on(lines, 120) <= 40, f"{rows_on(lines, 120)} rows:\n" + "\n".join(lines)
    # Every finding on a row of its own that names it, its reason whole (carried on
    # under the row when it must be), no blank line between rows.
    text = " ".join(" ".join(lines).split())
    for f in doc["findings"]:
        (row,) = [ln for ln in lines if ln.split()[:2] == [f["node"], str(f["job_id"] or "-")]
                  and f["kind"] in ln.split()]  # fmt: skip
        assert f["action"] in row.split()
        assert f["reason"] in text, f["reason"]
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("node "))) :]
    assert "" not in table

    # The last two lines: what the command does, then the command, on a line of its own.
    reclaimable = sorted({f["node"] for f in doc["findings"] if f["action"] == "reclaim"})
    assert lines[-2] == (
        "Reclaim 9 holdings on gpu[003-008,012-013] with (it shows its plan and asks "
        "before it sends):"
    )
    command = shlex.split(lines[-1])
    assert command == [
        "spurctl", "reclaim", "--node", "gpu[003-008,012-013]", "--inventory", str(inventory),
        "--controller", sim.controller_address,
    ]  # fmt: skip
    # Pasted, it plans exactly the audit's reclaimable holdings (a dry run sends nothing).
    plan = run_cli(*command[1:], "--dry-run", "--json", home=tmp_path / "home")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)["plan"]
    assert sorted({e["node"] for e in planned}) == reclaimable and len(planned) == 9


def test_an_audit_with_nothing_to_reclaim_or_from_a_snapshot_prints_no_reclaim_command(
    incident_cluster: INCIDENT, tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    home = tmp_path / "home"
    base = ["audit", "--controller", sim.controller_address, "--inventory", str(inventory)]
    nothing = run_cli(*base, "-w", "gpu[009-011]", home=home)
    # No reclaim command (the version note may name spurctl reclaim in its sentence).
    assert nothing.returncode == 1 and "spurctl reclaim --node" not in nothing.stdout
    snap = tmp_path / "snap.json"
    assert (
        run_cli("snapshot", "-o", str(snap), "--controller", sim.controller_address).returncode == 0
    )
    offline = run_cli("audit", "--snapshot", str(snap), "--inventory", str(inventory), home=home)
    assert offline.returncode == 1, offline.stderr
    assert "active-elsewhere" in offline.stdout
    assert "spurctl reclaim --node" not in offline.stdout
    # Down a pipe the command is the table's last line too, whole.
    piped = run_cli(*base, home=home)
    assert piped.stdout.splitlines()[-1].startswith("  spurctl reclaim --node ")


def _word(w: str) -> str:
    return w.strip(".,;:()'\"")


def words_of(lines: list[str]) -> set[str]:
    return {_word(w) for line in lines for w in line.split()}


def fits_80_and_keeps(lines: list[str], *words: str) -> None:
    """No line wider than 80 columns but a command to paste or a journal's path (each
    whole on a line of its own), and every word whole."""
    whole = ("spurctl ", "Journal")
    wide = [ln for ln in lines if len(ln) > 80 and not ln.lstrip().startswith(whole)]
    assert not wide, "\n".join(lines)
    missing = {_word(w) for w in words} - words_of(lines)
    assert not missing, (missing, "\n".join(lines))


def test_at_80_columns_no_table_splits_a_word(incident_cluster: INCIDENT, tmp_path: Path) -> None:
    sim, inventory, agent_map = incident_cluster
    home = tmp_path / "home"
    base = ["--controller", sim.controller_address, "--inventory", str(inventory)]
    doc = json.loads(run_cli("audit", *base, "--json", home=home).stdout)
    kinds = {f["kind"] for f in doc["findings"]}
    assert "below-watermark-unknown" in kinds and "above-watermark-unknown" in kinds

    _, audit = on_screen("audit", *base, home=home)
    fits_80_and_keeps(audit, *kinds, *(w for f in doc["findings"] for w in f["reason"].split()
                                       if len(w) < 70))  # fmt: skip
    _, nodes = on_screen("nodes", *base, home=home)
    fits_80_and_keeps(nodes, "gpu021.cluster.local", "answered", "allocated")

    journal = tmp_path / "journal.jsonl"
    args = reclaim_args(sim, inventory, agent_map, journal, node="gpu[012-013]")
    status, reclaim = on_screen(*args, home=home)
    assert status == 1, "\n".join(reclaim)  # sent, unconfirmed
    fits_80_and_keeps(reclaim, "terminal-held", "below-watermark-unknown", "unconfirmed")
    _, runs = on_screen("journal", "--journal", str(journal), home=home)
    fits_80_and_keeps(runs, "gpu[012-013]", "unconfirmed")
    run_id = next(ln.split()[0] for ln in runs if ln.startswith("2"))
    _, records = on_screen("journal", "--journal", str(journal), "--run", run_id, home=home)
    fits_80_and_keeps(records, "below-watermark-unknown", "terminal-held", "intent", "outcome")
