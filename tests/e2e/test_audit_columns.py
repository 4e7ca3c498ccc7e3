"""Through the real CLI against the simulated incident (#43 item 11): `audit
--columns/-O` chooses and orders the table's columns as sinfo -O does, and
`--kind`/`--action` take comma lists as well as repeats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli


@pytest.fixture
def inventory(sim: SimCluster, tmp_path: Path) -> Path:
    return sim.write_inventories(tmp_path / "inventory.jsonl")


def audit(sim: SimCluster, inventory: Path, *args: str):  # type: ignore[no-untyped-def]
    return run_cli(
        "audit", "--inventory", str(inventory), *args,
        env={"SPUR_CONTROLLER_ADDR": sim.controller_address},
    )  # fmt: skip


def test_columns_are_the_ones_chosen_in_the_order_chosen_one_finding_per_line(
    sim: SimCluster, inventory: Path
) -> None:
    run = audit(sim, inventory, "-O", "kind,node", "--columns", "since,reason")

    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("kind "))
    assert lines[head].split() == ["kind", "node", "since", "reason"]
    rows = lines[head + 1 : head + 15]  # the incident's 14 findings
    assert len({re.split(r"\s{2,}", row)[1] for row in rows}) == 13  # gpu006 twice
    (held,) = [row for row in rows if row.startswith("terminal-held ")]
    cells = re.split(r"\s{2,}", held)
    assert cells[:3] == ["terminal-held", "gpu012", "ended 2026-12-01T23:40:51Z"]
    assert cells[3].startswith("job 4702 ended COMPLETED") and cells[3].endswith("no live process")
    (phantom,) = [row for row in rows if row.startswith("phantom-alloc ")]
    assert re.split(r"\s{2,}", phantom)[:3] == ["phantom-alloc", "gpu009", "-"]
    assert lines[-2].startswith("24 nodes in scope") and lines[-1].startswith("Controller ")


def test_columns_without_header_are_the_rows_alone(sim: SimCluster, inventory: Path) -> None:
    run = audit(sim, inventory, "-O", "job,node", "-h", "--kind", "terminal-held")
    assert (run.returncode, run.stdout.split()) == (1, ["4702", "gpu012"])


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-O", "node,bogus"], ["--columns", "unknown column 'bogus'", "node, job, kind"]),
        (["-O", "node", "--format", "json"], ["--columns", "--format json", "drop one"]),
        (["-O", "node", "--watch"], ["--columns", "--watch"]),
    ],
)
def test_an_unknown_or_misplaced_column_is_one_line_naming_the_columns(
    sim: SimCluster, inventory: Path, args: list[str], words: list[str]
) -> None:
    one_line_error(audit(sim, inventory, *args), *words)


def test_the_unknown_column_error_lists_every_valid_column(
    sim: SimCluster, inventory: Path
) -> None:
    line = one_line_error(audit(sim, inventory, "-O", "node,bogus"))
    assert (
        "the columns are node, job, kind, action, live, since, controller-state, "
        "allocated-nodes, gpus, pids, inventory-age, reason" in line
    )


def test_kind_and_action_take_comma_lists_as_well_as_repeats(
    sim: SimCluster, inventory: Path
) -> None:
    def shown(*args: str) -> list[tuple[str, int | None, str]]:
        run = audit(sim, inventory, "--format", "json", *args)
        assert run.returncode == 1, run.stderr
        doc = json.loads(run.stdout)
        return [(f["node"], f["job_id"], f["kind"]) for f in doc["findings"]]

    repeated = shown("--kind", "terminal-held", "--kind", "phantom-alloc")
    listed = shown("--kind", "terminal-held,phantom-alloc")
    assert (
        listed
        == repeated
        == [
            ("gpu009", None, "phantom-alloc"),
            ("gpu012", 4702, "terminal-held"),
        ]
    )
    assert shown("--action", "spare,investigate") == shown(
        "--action", "investigate", "--action", "spare"
    )
    line = one_line_error(
        audit(sim, inventory, "--kind", "terminal-held,bogus"), "unknown finding kind 'bogus'"
    )
    assert "separate them with commas" in line
