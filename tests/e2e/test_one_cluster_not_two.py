"""One cluster, not two: what a reclaim reads is bound to the controller it reads (issue 39.9).

Two simulated clusters with the same node names and job ids. Cluster A runs job
4711 on gpu015; cluster B once ran a job 4711 too, and has finished it. An
operator's SPURCTL_CONFIG names B's controller together with A's inventories and
A's agent map: read against B, A's running 4711 on gpu015 is `terminal-held`, and
its cancel would go to A's gpu015 agent. Every way the files say they are A's
stops the reclaim in one line with nothing cancelled on either cluster; a file that
names no cluster still works; and inventories that cannot be B's at all (ids far
above B's watermark on most nodes) stop it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

from spurctl.model import JobState
from spurctl_sim import SimCluster, incident, node_line
from spurctl_sim.scenario import Scenario
from tests.cli import one_line_error, run_cli


def finished_4711() -> Scenario:
    """Cluster B: the incident's names and ids, but its job 4711 completed long ago."""
    scenario = incident()
    jobs = [
        msgspec.structs.replace(
            j, state=JobState.COMPLETED, end_time=j.start_time + timedelta(hours=1)
        )
        if j.job_id == 4711 and j.start_time is not None
        else j
        for j in scenario.jobs
    ]
    return replace(scenario, jobs=jobs)


def low_ids() -> Scenario:
    """A cluster with the incident's node names whose controller has issued only a few dozen
    ids: every id the incident's agents hold is far above its watermark."""
    scenario = incident()
    jobs = [
        msgspec.structs.replace(j, job_id=i, array_job_id=0, array_task_id=0)
        for i, j in enumerate(scenario.jobs, 1)
    ]
    return replace(scenario, jobs=jobs, holdings={}, next_job_id=0, target_names={})


@pytest.fixture
def clusters() -> Iterator[tuple[SimCluster, SimCluster]]:
    with SimCluster(incident()) as a, SimCluster(finished_4711()) as b:
        yield a, b


def config(tmp_path: Path, controller: str, inventory: Path, agent_map: Path) -> dict[str, str]:
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.toml"
    path.write_text(
        f'controller = "{controller}"\nagent_map = "{agent_map}"\ninventory = "{inventory}"\n'
    )
    return {"SPURCTL_CONFIG": str(path)}


def a_files(
    a: SimCluster, tmp_path: Path, *, named: bool, collected: bool = True
) -> tuple[Path, Path]:
    """A's inventories and agent map; `named`: naming A's controller, the inventories as
    `spurctl collect --controller A` writes them (or, not `collected`, written so by hand)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    agents = tmp_path / "a-agents.json"
    inventory = tmp_path / "a-inventory.jsonl"
    if not named:
        agents.write_text(json.dumps(a.agent_map()))
        return a.write_inventories(inventory), agents
    agents.write_text(json.dumps({"controller": a.controller_address, **a.agent_map()}))
    if not collected:
        lines = a.write_inventories(tmp_path / "a-lines.jsonl").read_text().splitlines()
        docs = [{**json.loads(line), "controller": a.controller_address} for line in lines]
        inventory.write_text("".join(json.dumps(d) + "\n" for d in docs))
        return inventory, agents
    lines = a.write_inventories(tmp_path / "a-lines.jsonl")
    collected = run_cli(
        "collect", "--nodes", "gpu[001-024]", "--controller", a.controller_address,
        "--command", node_line.command(lines), "-o", str(inventory), home=tmp_path / "home",
    )  # fmt: skip
    assert collected.returncode in (0, 1), collected.stderr
    assert all(
        json.loads(line)["controller"] == a.controller_address
        for line in inventory.read_text().splitlines()
    )
    return inventory, agents


def reclaim(b: SimCluster, tmp_path: Path, env: dict[str, str], *args: str):  # type: ignore[no-untyped-def]
    return run_cli(
        "reclaim", "--node", "gpu015", "--yes", "--journal", str(tmp_path / "j.jsonl"), *args,
        env=env, home=tmp_path / "home",
    )  # fmt: skip


def test_b_controller_with_a_inventories_and_agent_map_cancels_nothing(
    clusters: tuple[SimCluster, SimCluster], tmp_path: Path
) -> None:
    a, b = clusters
    inventory, agents = a_files(a, tmp_path, named=True)
    run = reclaim(b, tmp_path, config(tmp_path, b.controller_address, inventory, agents))
    one_line_error(run, "refusing the reclaim, nothing sent", a.controller_address)
    assert a.cancels == [] and b.cancels == [] and a.controller_cancels == []
    assert {h.job_id for h in a.holdings("gpu015")} == {4711}  # A's live run lives
    # explain says what reclaim would do, in reclaim's words.
    told = run_cli(
        "explain", "gpu015", "4711", "--format", "json",
        env=config(tmp_path, b.controller_address, inventory, agents), home=tmp_path / "home",
    )  # fmt: skip
    assert told.returncode == 0, told.stderr
    verdict = json.loads(told.stdout)["job"]["reclaim"]
    assert verdict["send"] is False and f"spurctl: error: {verdict['why']}" == run.stderr.strip()


@pytest.mark.parametrize("which", ["agent-map", "inventories"])
def test_either_file_naming_the_other_controller_is_enough(
    clusters: tuple[SimCluster, SimCluster], tmp_path: Path, which: str
) -> None:
    a, b = clusters
    named_inventory, named_agents = a_files(a, tmp_path / "named", named=True, collected=False)
    plain_inventory, plain_agents = a_files(a, tmp_path, named=False)
    inventory = named_inventory if which == "inventories" else plain_inventory
    agents = named_agents if which == "agent-map" else plain_agents
    run = reclaim(b, tmp_path, config(tmp_path, b.controller_address, inventory, agents))
    line = one_line_error(run, "refusing the reclaim, nothing sent", a.controller_address)
    assert ("--agent-map" in line) == (which == "agent-map")
    assert a.cancels == [] and b.cancels == []


def test_files_naming_this_controller_or_none_still_reclaim(
    clusters: tuple[SimCluster, SimCluster], tmp_path: Path
) -> None:
    a, _ = clusters
    for named, node in ((True, "gpu003"), (False, "gpu004")):
        inventory, agents = a_files(a, tmp_path / node, named=named)
        run = run_cli(
            "reclaim", "--node", node, "--yes", "--journal", str(tmp_path / f"{node}.jsonl"),
            env=config(tmp_path, a.controller_address, inventory, agents), home=tmp_path / "home",
        )  # fmt: skip
        assert run.returncode == 1, run.stderr  # sent, unconfirmed: nothing re-collected
    assert [(c.node, c.job_id) for c in a.cancels] == [("gpu003", 4711), ("gpu004", 4712)]


def test_inventories_holding_ids_far_above_the_watermark_on_most_nodes_stop_the_reclaim(
    tmp_path: Path,
) -> None:
    # A controller that issued a few dozen ids (the incident's jobs renumbered from 1), and
    # old inventory files (no cluster named) from the incident's nodes: on gpu012 the run
    # this controller knows as its finished job 4702-renumbered, everywhere else ids in the
    # thousands. Read against it, gpu012 is terminal-held, and its cancel would go out.
    renumbered = {j.job_id: i for i, j in enumerate(incident().jobs, 1)}
    with SimCluster(incident()) as a, SimCluster(low_ids()) as other:
        _, agents = a_files(a, tmp_path, named=False)
        docs = [
            json.loads(line)
            for line in a.write_inventories(tmp_path / "a.jsonl").read_text().splitlines()
        ]
        for doc in docs:
            for held in doc["held"]:
                if doc["node"] == "gpu012" and held["job_id"] == 4702:
                    held["job_id"] = renumbered[4702]
        inventory = tmp_path / "old.jsonl"
        inventory.write_text("".join(json.dumps(d) + "\n" for d in docs))
        env = config(tmp_path, other.controller_address, inventory, agents)
        run = run_cli(
            "reclaim", "--node", "gpu012", "--yes", "--journal", str(tmp_path / "j.jsonl"),
            env=env, home=tmp_path / "home",
        )  # fmt: skip
        one_line_error(run, "refusing the reclaim, nothing sent", "far above", "watermark")
        assert a.cancels == [] and other.cancels == []
