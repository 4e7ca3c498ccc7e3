"""The property test's ground truth and scenario builder (spurctl_sim/random_scenarios.py)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from spurctl.model import Job, JobState
from spurctl_sim.random_scenarios import (
    ClusterSpec,
    HoldSpec,
    JobSpec,
    MapEntry,
    agent_map_of,
    hold_specs,
    legitimately_on,
    scenario_of,
    spur_conf_text,
    spur_nodes,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("nodelist", "nodes"),
    [
        ("", set()),
        ("gpu002 ", {"gpu002"}),
        ("  gpu001 , gpu003", {"gpu001", "gpu003"}),
        (" gpu[001-002,004] ,gpu009", {"gpu001", "gpu002", "gpu004", "gpu009"}),
        ("GPU002", {"GPU002"}),  # exact names: Spur does not fold case
    ],
)
def test_spur_reads_each_part_trimmed_and_names_exactly(nodelist: str, nodes: set[str]) -> None:
    assert spur_nodes(nodelist) == nodes


def test_only_an_active_job_runs_legitimately_where_its_nodelist_says() -> None:
    running = Job(5001, JobState.RUNNING, nodelist=" gpu002 ")
    assert legitimately_on(running, "gpu002")
    assert not legitimately_on(running, "gpu001")
    assert not legitimately_on(Job(5001, JobState.COMPLETED, nodelist="gpu002"), "gpu002")
    assert not legitimately_on(Job(5001, JobState.RUNNING, nodelist="GPU002"), "gpu002")
    assert not legitimately_on(None, "gpu002")


SPEC = ClusterSpec(
    nodes=("gpu001", "gpu002", "gpu003"),
    jobs=(JobSpec(5001, JobState.RUNNING, "bob", "gpu002 "),),
    holds=hold_specs(
        [
            HoldSpec("gpu002", 5001, True, "current"),
            HoldSpec("gpu002", 5001, False, "none"),  # a duplicate: the first one wins
            HoldSpec("gpu001", 5001, True, "none"),
            HoldSpec("gpu003", 4001, False, "pre_wipe"),
        ]
    ),
    agent_map=(MapEntry("gpu001", "gpu002", "localhost"), MapEntry("gpu002", "gpu002")),
    credential="alice",
    visibility="owner_only",
    conf="no_key",
    inventory_names=(("gpu003", "GPU003"),),
    next_job_id=6000,
)


def test_a_spec_becomes_the_cluster_it_describes() -> None:
    s = scenario_of(SPEC, NOW)
    s.check()
    (job,) = s.jobs
    assert job.nodelist == "gpu002 " and job.user == "bob" and job.uid == 1002
    assert job.start_time == NOW - timedelta(hours=5)
    assert job.submit_time is not None and job.submit_time < job.start_time
    held = {(node, h.job_id): h for node, hs in s.holdings.items() for h in hs}
    assert set(held) == {("gpu001", 5001), ("gpu002", 5001), ("gpu003", 4001)}
    assert held["gpu002", 5001].pids and held["gpu002", 5001].started_at == job.start_time
    assert held["gpu001", 5001].started_at is None
    assert held["gpu003", 4001].started_at < job.submit_time  # type: ignore[operator]
    assert s.inventory_names == {"gpu003": "GPU003"} and s.next_job_id == 6000


def test_the_agent_map_names_the_agents_the_spec_says_and_leaves_out_the_rest() -> None:
    serving = {"gpu001": "127.0.0.1:1001", "gpu002": "127.0.0.1:1002", "gpu003": "127.0.0.1:1003"}
    assert agent_map_of(SPEC, serving) == {"gpu001": "localhost:1002", "gpu002": "127.0.0.1:1002"}


def test_spur_conf_is_absent_silent_or_states_the_controllers_setting() -> None:
    assert spur_conf_text(SPEC) is not None
    assert "job_info_visibility" not in (spur_conf_text(SPEC) or "")
    stated = dataclasses.replace(SPEC, conf="stated")
    assert 'job_info_visibility = "owner_only"' in (spur_conf_text(stated) or "")
    assert spur_conf_text(dataclasses.replace(SPEC, conf="absent")) is None
    assert "gpu001 -> gpu002's agent via localhost" in SPEC.describe()
