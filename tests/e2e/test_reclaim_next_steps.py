"""Every command reclaim tells the operator to run next is one whole line that pastes (#41.3).

On an 80-column terminal, with options long enough that a sentence would fold them:
the audit a --job that matched nothing points at, the audit a node with only findings
to investigate points at, and the names listing after an unknown node. Each is
pasted back into the CLI and answers for the same nodes.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import run_cli
from tests.e2e.test_narrow_and_piped_e2e import on_screen


def _files(sim: SimCluster, tmp_path: Path) -> list[str]:
    # A deep directory: the --inventory path alone takes most of a line.
    deep = tmp_path / ("a-directory-whose-name-is-long-" * 2) / "inventories"
    deep.mkdir(parents=True)
    inventory = sim.write_inventories(deep / "inventory.jsonl")
    agents = deep / "agents.json"
    agents.write_text(json.dumps(sim.agent_map()))
    return ["--controller", sim.controller_address, "--inventory", str(inventory),
            "--agent-map", str(agents), "--journal", str(tmp_path / "j.jsonl")]  # fmt: skip


def _pasted(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[0] == "spurctl", line
    return words[1:]


def test_the_audit_a_plan_points_at_is_one_line_on_an_80_column_terminal(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    given = _files(sim, tmp_path)
    for nodes, extra, said in (
        ("gpu006", ["--job", "99999"], "--job 99999: no reclaimable finding names it"),
        ("gpu014", [], "1 finding needs investigating"),
    ):
        status, lines = on_screen(
            "reclaim", "--node", nodes, *extra, *given, "--dry-run", home=tmp_path / "home"
        )
        shown = "\n".join(lines)
        assert status == (1 if extra else 0), shown
        assert said in " ".join(shown.split()), shown
        (line,) = [ln for ln in lines if ln.startswith("  spurctl audit ")]
        assert len(line) > 80  # longer than the screen, and still whole
        argv = _pasted(line)
        assert argv[argv.index("--nodes") + 1] == nodes
        assert argv[argv.index("--inventory") + 1] == given[given.index("--inventory") + 1]
        pasted = run_cli(*argv, home=tmp_path / "home")
        assert pasted.returncode in (0, 1) and "error" not in pasted.stderr, pasted.stderr
        assert f"{nodes}" in pasted.stdout


def test_an_unknown_node_names_the_listing_that_answers(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim = incident_cluster[0]
    typo = run_cli(
        "reclaim", "--node", "gpu099", *_files(sim, tmp_path), "--dry-run", home=tmp_path / "h"
    )
    assert typo.returncode == 2
    (line,) = typo.stderr.splitlines()
    lead, command, end = line.split("`")
    assert lead.endswith("check the names with ") and end == ""
    listing = run_cli(*_pasted(command), home=tmp_path / "h")
    assert listing.returncode == 0, listing.stderr
    assert "gpu003" in listing.stdout and "gpu099" not in listing.stdout
