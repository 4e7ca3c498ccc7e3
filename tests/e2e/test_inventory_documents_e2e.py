"""Through the real CLI: inventories read by the one msgspec declaration.

`spurctl audit --inventory FILE` against the simulated incident cluster: the
inventories `spurctl collect` writes (non-ASCII kept raw) are read whole, and a
bad record on some line is one stderr line naming the file, the line, the field's
path and what was expected, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from spurctl.sources.documents import dump_json
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli


def _lines(sim: SimCluster, **replace: Any) -> list[str]:
    """Every node's inventory as `spurctl collect -o` writes it, one line each."""
    invs = [
        dataclasses.replace(inv, **replace) if inv.node == "gpu003" else inv
        for inv in sim.inventories()
    ]
    return [dump_json(inventory_to_dict(inv), indent=None) for inv in invs]


def _audit(sim: SimCluster, path: Path, tmp_path: Path) -> Any:
    return run_cli(
        "audit",
        "--controller",
        sim.controller_address,
        "--inventory",
        str(path),
        "--format",
        "json",
        home=tmp_path / "home",
    )


def test_an_inventory_written_with_a_raw_line_separator_in_it_is_read_whole(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    # U+2028 and U+0085 are line ends to str.splitlines, never to JSON Lines.
    path = tmp_path / "inventory.jsonl"
    path.write_text("\n".join(_lines(lone_controller, source="cgroup\u2028proc\x85")) + "\n")
    assert "\u2028" in path.read_text()
    proc = _audit(lone_controller, path, tmp_path)
    assert proc.returncode == 1, proc.stderr
    found = json.loads(proc.stdout)["findings"]
    assert any(f["node"] == "gpu003" and f["job_id"] == 4711 for f in found)


BAD_HOLDING = {"job_id": 4711, "started_at": "2026-12-01T22:14:05Z"}


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        ({"held": [{**BAD_HOLDING, "cpus": "16"}]}, ["held[0]", "'cpus'", "non-negative integer"]),
        ({"held": [{"cpus": 16}]}, ["held[0]", "missing integer field 'job_id'"]),
        ({"held": [{**BAD_HOLDING, "job_id": 2**32}]}, ["held[0]", "job_id", "32-bit"]),
        ({"held": [{**BAD_HOLDING, "gpus": [0, -1]}]}, ["held[0]", "'gpus'", "gpus[1] is -1"]),
        ({"held": [{**BAD_HOLDING, "started_at": "yesterday"}]}, ["held[0]", "RFC 3339"]),
        ({"schema": "spurctl.inventory/v2"}, ["schema", "'spurctl.inventory/v1'"]),
        ({"held": [{**BAD_HOLDING, "traces": ["cgroup", ""]}]}, ["held[0]", "'traces'", "names"]),
        ({"agent": {"pid": 1, "started_at": 5}}, ["agent", "'started_at'", "RFC 3339"]),
    ],
    ids=[
        "wrong-type",
        "missing-job-id",
        "id-range",
        "list-item",
        "bad-time",
        "schema",
        "trace",
        "agent",
    ],
)
def test_a_bad_record_on_line_3_is_one_line_naming_file_line_field_and_expectation(
    lone_controller: SimCluster, tmp_path: Path, patch: dict[str, Any], words: list[str]
) -> None:
    lines = _lines(lone_controller)
    lines[2] = json.dumps({**json.loads(lines[2]), **patch})
    path = tmp_path / "inventory.jsonl"
    path.write_text("\n".join(lines) + "\n")
    one_line_error(_audit(lone_controller, path, tmp_path), f"{path}: line 3: ", *words)
