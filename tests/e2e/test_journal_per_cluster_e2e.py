"""One admin host, two clusters, one journal: each run reads only its own cluster's records.

Two clusters with the same node names and job ids (`[contexts.prod]`, `[contexts.lab]`)
share the default journal. Cancels journaled on one turned the other's reclaimable
holdings into `leftover`s (issue 53.1): every record now names the cluster it was
written for, and a run reads only its own cluster's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as rpc
from spurctl_sim import SimCluster, incident
from tests.cli import run_cli
from tests.reclaim import PLANNED, RECLAIM_NODES, cancelled, journal_records


@dataclass
class Two:
    prod: SimCluster
    lab: SimCluster
    home: Path
    env: dict[str, str]

    @property
    def journal(self) -> Path:
        return self.home / "state" / "spurctl" / "journal.jsonl"  # the default (tests/cli.py)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Two]:
    with SimCluster(incident()) as prod, SimCluster(incident()) as lab:
        tables = []
        for name, sim in (("prod", prod), ("lab", lab)):
            inventory = sim.write_inventories(tmp_path / f"{name}.jsonl")
            agent_map = tmp_path / f"{name}-agents.json"
            agent_map.write_text(json.dumps(sim.agent_map()))
            tables.append(
                f"[contexts.{name}]\ncontroller = {json.dumps(sim.controller_address)}\n"
                f"agent_map = {json.dumps(str(agent_map))}\n"
                f"inventory = {json.dumps(str(inventory))}\n"
            )
        config = tmp_path / "config.toml"
        config.write_text("\n".join(tables))
        yield Two(prod, lab, tmp_path / "home", {"SPURCTL_CONFIG": str(config)})


def _plan(two: Two, context: str) -> set[tuple[str, int]]:
    run = run_cli(
        "--context", context, "reclaim", "--node", RECLAIM_NODES, "--dry-run", "--format", "json",
        home=two.home, env=two.env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return {(e["node"], e["job_id"]) for e in json.loads(run.stdout)["plan"]}


def test_cancels_journaled_on_one_cluster_leave_the_other_clusters_plan_whole(two: Two) -> None:
    sent = run_cli(
        "--context", "prod", "reclaim", "--node", RECLAIM_NODES, "--yes",
        home=two.home, env=two.env,
    )  # fmt: skip
    assert sent.returncode == 1, sent.stdout + sent.stderr  # sent, unconfirmed
    assert set(cancelled(two.prod)) == PLANNED
    # Every record names the cluster it was written for.
    written = journal_records(two.journal)
    assert written
    assert {(r["cluster"], r["controller"]) for r in written} == {
        ("prod", two.prod.controller_address)
    }

    # The lab's plan is whole: prod's cancels are not its own (it shrank to 7, the
    # processless holdings read as leftovers of cancels sent to prod's agents).
    assert _plan(two, "lab") == PLANNED
    assert cancelled(two.lab) == []
    # prod still remembers its own: its processless holdings are not cancelled again.
    assert _plan(two, "prod") < PLANNED

    # A journal written before records named a cluster: its cancels count wherever it is
    # read (a leftover spares a holding; forgetting them would resend futile cancels).
    old = [
        {k: v for k, v in r.items() if k not in ("cluster", "controller")}
        for r in journal_records(two.journal)
    ]
    two.journal.write_text("".join(json.dumps(r) + "\n" for r in old))
    assert _plan(two, "lab") == _plan(two, "prod") < PLANNED


def test_a_drain_journaled_on_one_cluster_is_not_spurctls_on_the_other(two: Two) -> None:
    # prod's spurctl drains gpu001 (a node its drain may take); the lab's gpu001 carries
    # the very same reason, set by someone else (another admin host's spurctl, or a copy).
    # Read with prod's records, the lab's resume took it for its own and lifted it.
    reason = "spurctl: phantom allocation 64 CPUs"
    for sim in (two.prod, two.lab):
        channel = grpc.insecure_channel(sim.controller_address.removeprefix("http://"))
        with channel:
            rpc.SlurmControllerStub(channel).UpdateNode(
                pb.UpdateNodeRequest(name="gpu001", state=pb.NODE_DRAIN, reason=reason),
                timeout=5,
            )
    # What prod's drain journaled (act/node_admin.py: an intent, then its outcome).
    record = {
        "schema": "spurctl.journal/v1", "run": "20261205T080000-abcdef",
        "at": "2026-12-05T08:00:00Z", "operator": "ops", "cluster": "prod",
        "controller": two.prod.controller_address, "node": "gpu001", "job_id": 0,
        "kind": "phantom-alloc", "action": "drain", "step": "drain",
    }  # fmt: skip
    two.journal.parent.mkdir(parents=True)
    two.journal.write_text(
        json.dumps({**record, "event": "intent", "reason": reason}) + "\n"
        + json.dumps({**record, "event": "outcome", "result": "sent", "confirmed": True,
                      "detail": f"drained: {reason}"}) + "\n"
    )  # fmt: skip
    two.journal.chmod(0o600)

    mine = run_cli(
        "--context", "prod", "resume", "--node", "gpu001", "--dry-run", home=two.home, env=two.env
    )
    theirs = run_cli(
        "--context", "lab", "resume", "--node", "gpu001", "--dry-run", home=two.home, env=two.env
    )
    assert f"gpu001  UpdateNode(state=IDLE): lifts {reason!r}" in mine.stdout, (
        mine.stdout + mine.stderr
    )
    assert "spurctl never journaled setting on gpu001" in theirs.stdout, (
        theirs.stdout + theirs.stderr
    )


def _shown(two: Two, *args: str) -> tuple[dict[str, object], str]:
    shown = run_cli("journal", *args, "--format", "json", home=two.home, env=two.env)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return json.loads(shown.stdout), shown.stderr


def test_journal_cluster_shows_that_clusters_runs_and_those_naming_none(two: Two) -> None:
    for context in ("prod", "lab"):
        sent = run_cli(
            "--context", context, "reclaim", "--node", RECLAIM_NODES, "--yes",
            home=two.home, env=two.env,
        )  # fmt: skip
        assert sent.returncode == 1, sent.stdout + sent.stderr  # sent, unconfirmed
    runs = {r["cluster"]: r["run"] for r in journal_records(two.journal)}
    assert set(runs) == {"prod", "lab"}
    # A run written before records named a cluster: every cluster's, as every run reads it.
    old = {
        "schema": "spurctl.journal/v1", "run": "20261201T080000-0a0b0c",
        "at": "2026-12-01T08:00:00Z", "operator": "ops", "node": "gpu099", "job_id": 7,
        "kind": "leftover",
    }  # fmt: skip
    with two.journal.open("a") as out:
        out.write(json.dumps({**old, "event": "intent"}) + "\n")
        out.write(json.dumps({**old, "event": "outcome", "result": "sent"}) + "\n")

    everything, _ = _shown(two)
    assert {r["run"] for r in everything["runs"]} == {runs["prod"], runs["lab"], old["run"]}
    for name, other in (("prod", "lab"), ("lab", "prod")):
        doc, said = _shown(two, "--cluster", name)
        assert {r["run"] for r in doc["runs"]} == {runs[name], old["run"]}, doc
        assert runs[other] not in said and doc["filter"]["cluster"] == name
        assert doc["filter"]["runs_in_journal"] == 3

    # A name no record gives: nothing shown (not the runs naming none), one line says why.
    doc, said = _shown(two, "--cluster", "staging")
    assert doc["runs"] == [] and doc["filter"]["runs_in_journal"] == 3
    [line] = said.splitlines()
    assert "names cluster 'staging'" in line and "prod, lab" in line, said
    table = run_cli("journal", "--cluster", "prod", home=two.home, env=two.env)
    assert table.returncode == 0, table.stderr
    assert "2 runs matching --cluster prod (of 3)" in table.stdout, table.stdout
    assert runs["lab"] not in table.stdout and runs["prod"] in table.stdout
