"""The simulated cluster's scenarios, without serving them: JSON files, hostlists, the large one."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from hypothesis import given
from hypothesis import strategies as st

from spurctl.errors import DocumentError
from spurctl.model import JobState
from spurctl_sim import (
    incident,
    large,
    post_wipe,
    read_scenario,
    scenario_to_dict,
    write_scenario,
)
from spurctl_sim.scenario_parts import hostlist


def test_scenario_round_trips_through_its_json_file(tmp_path: Path) -> None:
    for build in (incident, post_wipe):
        original = build()
        path = tmp_path / f"{build.__name__}.json"
        write_scenario(original, path)
        loaded = read_scenario(path)
        assert json.loads(path.read_text())["schema"] == "spurctl.scenario/v1"
        assert scenario_to_dict(loaded) == scenario_to_dict(original)
        assert loaded.next_job_id == original.next_job_id
        assert loaded.inventory_names == original.inventory_names


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d.update(schema="spurctl.snapshot/v1"), "expected 'spurctl.scenario/v1'"),
        (lambda d: d["holdings"].update(gpu999=[]), "'gpu999', which is not in 'nodes'"),
        (lambda d: d.update(next_job_id=5000), "next_job_id 5000 is not above"),
        (lambda d: d["holdings"]["gpu003"][0].update(pids="81234"), "held[0]"),
        (lambda d: d["jobs"].append(dict(d["jobs"][0])), "job 4690 is listed twice"),
        (lambda d: d["jobs"][0].update(state="RUNNIN"), "unknown JobState"),
    ],
)
def test_a_bad_scenario_file_names_the_file_and_the_problem(
    tmp_path: Path, mutate: object, problem: str
) -> None:
    doc = scenario_to_dict(incident())
    mutate(doc)  # type: ignore[operator]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(DocumentError, match=str(path)) as info:
        read_scenario(path)
    assert problem in str(info.value)


def test_a_scenario_file_that_is_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"schema": "spurctl.scenario/v1",\n  oops}')
    with pytest.raises(DocumentError, match=rf"{path}: line 2: not valid JSON"):
        read_scenario(path)


@given(st.sets(st.integers(min_value=0, max_value=99_999), min_size=1, max_size=40))
def test_hostlist_written_directly_is_what_clustershell_expands(numbers: set[int]) -> None:
    text = hostlist("gpu", numbers, 5)
    assert set(NodeSet(text)) == {f"gpu{n:05d}" for n in numbers}
    assert len(text) <= len(str(NodeSet(text))) + 2


def test_large_builds_twenty_thousand_nodes_and_two_hundred_thousand_jobs() -> None:
    started = time.perf_counter()
    scenario = large()
    elapsed = time.perf_counter() - started
    print(f"\nlarge(): {len(scenario.nodes)} nodes, {len(scenario.jobs)} jobs in {elapsed:.2f} s")
    assert len(scenario.nodes) == 20_000 and len(scenario.jobs) == 200_000
    held = sum(len(h) for h in scenario.holdings.values())
    assert 95_000 <= held <= 100_000
    states = {j.state for j in scenario.jobs}
    assert {JobState.RUNNING, JobState.PENDING, JobState.COMPLETED, JobState.FAILED} <= states
    assert any(j.num_nodes > 1 and "[" in j.nodelist for j in scenario.jobs)
    tracked = {j.job_id for j in scenario.jobs}
    held_ids = {h.job_id for hs in scenario.holdings.values() for h in hs}
    assert any(i >= scenario.next_job_id for i in held_ids), "no id above the watermark"
    assert any(i not in tracked and i < scenario.next_job_id for i in held_ids), "no aged-out id"
    scenario.check()
