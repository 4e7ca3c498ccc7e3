"""A warning or a note is one stderr line whatever it quotes: a file name (or any text
from a file or the cluster) holding a line break cannot forge a second line, such as a
`spurctl: error:` an operator or a script would act on (errors.warn, errors.note)."""

from __future__ import annotations

from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import run_cli


def test_a_skipped_file_whose_name_holds_a_line_break_is_warned_about_on_one_line(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, _ = incident_cluster
    found = tmp_path / "inventories"
    found.mkdir()
    (found / "all.jsonl").write_text(inventory.read_text())
    (found / "x\nspurctl: error: forged\x1b[2J.json").write_text('{"schema": "other/v1"}')
    run = run_cli("audit", "--controller", sim.controller_address, "--inventory", str(found))
    assert run.returncode in (0, 1), run.stderr
    lines = run.stderr.splitlines()
    assert not any(line.startswith("spurctl: error:") for line in lines), run.stderr
    skipped = [line for line in lines if "skipped" in line]
    assert len(skipped) == 1, run.stderr
    assert "x\\nspurctl: error: forged\\x1b[2J.json" in skipped[0]
