"""Reading each Spur release's controller under its answer limit, end to end.

Release v0.8.0 has no GetJobsRequest.nodes and no REQUEUED state: asked to filter by
node it answers every job, so spurctl, which cannot tell v0.8.0 from a later main
build by the version string "0.8.0", reads it by job-id range instead and never
sends it a filter it cannot apply. A controller whose first node-split answer holds a
job on none of the nodes asked for ignores the filter, whatever its version says.
One audit sends at most its request budget, and says so when that cut it short.
The answer limit is set small, so that a 1,200-job cluster needs what a 200,000-job
one does.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spurctl.audit_view import audit, gather
from spurctl.model import Action, JobState, Kind
from spurctl.sources import controller
from spurctl.sources import credentials as auth
from spurctl.sources.controller import ControllerClient
from spurctl.sources.settings import Connection
from spurctl_sim import Scenario, SimCluster, large
from spurctl_sim.releases import V0_8_0, V0_9_TO_0_11, SpurRelease
from spurctl_sim.striped_scenario import striped
from tests.cli import run_cli
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.live import KEY

SMALL = {"nodes": 120, "jobs": 1_200, "held": 600, "seed": 3}
LIMIT = 60_000  # bytes: about 120 real-sized records per answer
# A 0.9 controller that ignores the node filter: no release does, but the version
# string is not what spurctl trusts with a production controller's load.
IGNORING = dataclasses.replace(V0_8_0, name="says 0.11, filters like 0.8", version="0.11.0")


def decisions(sim: SimCluster, budget: int | None = None) -> tuple[Any, list[tuple[Any, ...]]]:
    """The audit of `sim` as a library call: its view, and (node, job, kind, action) each."""
    inventories = sim.inventories()
    with ControllerClient(Connection((sim.controller_address,), timeout=30.0)) as client:
        if budget is not None:
            client.request_budget = budget
        view = client.view()
        report = audit(gather(view, inventories, client=client))
    rows = sorted((f.node, f.job_id or 0, f.kind.value, f.action.value) for f in report.findings)
    return report, rows


@pytest.fixture
def zero_nine() -> Iterator[SimCluster]:
    with SimCluster(
        large(**SMALL), agents=False, answer_limit=LIMIT, spur_release=V0_9_TO_0_11
    ) as sim:
        yield sim


def cluster(release: SpurRelease, limit: int | None = LIMIT) -> SimCluster:
    return SimCluster(large(**SMALL), agents=False, answer_limit=limit, spur_release=release)


def test_v0_8_0_is_read_by_id_range_and_finds_what_a_0_9_controller_finds(
    zero_nine: SimCluster,
) -> None:
    with cluster(V0_8_0) as old:
        report, found = decisions(old)
        requests, sizes = list(old.job_requests), list(old.answer_sizes)
    new_report, new_found = decisions(zero_nine)
    # The same findings (a REQUEUED job is PENDING at v0.8.0: both are not-started).
    assert found == new_found and report.view_complete and new_report.view_complete
    kinds = {k for _, _, k, a in found if a == Action.RECLAIM}
    assert kinds == {"terminal-held", "active-elsewhere", "below-watermark-unknown"}
    # Never a filter v0.8.0 cannot apply, every answer under the limit, and id ranges
    # wider than a look-up batch: the running jobs, which one answer cannot hold.
    assert not [r for r in requests if r.nodes]
    assert not [r for r in requests if list(r.states) == [JobState.REQUEUED]]
    assert max(sizes) <= LIMIT
    assert [r for r in requests if len(r.job_ids) > 64 and list(r.states) == [1]]
    # A comparable number of requests to a 0.9 controller's node splits.
    assert len(requests) <= 2 * len(zero_nine.job_requests) + 8


def test_a_controller_whose_first_split_answer_ignores_the_nodes_is_read_by_id(
    zero_nine: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Planned answers small enough that the running jobs are split by node while each
    # answer still fits: the first answer shows jobs on other nodes.
    monkeypatch.setattr(controller, "_PLANNED_ANSWER", 50_000)
    with cluster(IGNORING, limit=None) as liar:
        report, found = decisions(liar)
        by_node = [r for r in liar.job_requests if r.nodes]
    assert len(by_node) <= 20  # the split's parts in flight, then no more
    assert any("it ignores GetJobsRequest.nodes" in n for n in report.notes), report.notes
    assert report.view_complete and found == decisions(zero_nine)[1]


def test_a_controller_that_refuses_every_node_split_is_caught_by_one_check(
    zero_nine: SimCluster,
) -> None:
    # Every node-split answer is the whole state, over the limit: the first refusal
    # asks once for a node no node is named, which a filtering controller answers empty.
    with cluster(IGNORING) as liar:
        report, found = decisions(liar)
        by_node = [r for r in liar.job_requests if r.nodes]
    assert any(list(r.nodes) == ["spurctl/no-such-node"] for r in by_node)
    assert len(by_node) <= 10
    assert any("as if it were every node" in n for n in report.notes), report.notes
    assert report.view_complete and found == decisions(zero_nine)[1]
    # On a controller that does filter, the check costs one empty answer.
    assert [r for r in zero_nine.job_requests if list(r.nodes) == ["spurctl/no-such-node"]] or not [
        r for r in zero_nine.job_requests if r.nodes
    ]


def test_an_audit_that_spends_its_request_budget_says_so_and_reclaims_only_what_it_verified() -> (
    None
):
    with cluster(V0_8_0) as old:
        report, _ = decisions(old, budget=6)
        assert len(old.job_requests) <= 6
        truth = dict(old.state.jobs)
    assert not report.view_complete
    [line] = [n for n in report.notes if "not read to the end" in n]
    assert "6 GetJobs requests one audit may send" in line
    assert "nothing it could not verify is reclaimed" in line
    # Every reclaim stands on what the controller said of that very id (its record, or
    # GetJob's NOT_FOUND), never on its absence from the cut read.
    reclaims = [f for f in report.findings if f.action is Action.RECLAIM]
    assert reclaims
    for f in reclaims:
        job = truth.get(f.job_id or 0)
        if f.kind is Kind.BELOW_WATERMARK_UNKNOWN:
            assert job is None
        elif f.kind is Kind.TERMINAL_HELD:
            assert job is not None and job.state.terminal
        else:
            assert f.kind is Kind.ACTIVE_ELSEWHERE and job is not None and job.state.active


def test_the_budget_line_reaches_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ControllerClient, "request_budget", 6)
    with cluster(V0_8_0) as old:
        inventory = old.write_inventories(tmp_path / "inventory.jsonl")
        result = run_cli(
            "audit", "--controller", old.controller_address, "--inventory", str(inventory),
            "--format", "json", home=tmp_path / "home",
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["view"]["complete"] is False
    assert [n for n in doc["notes"] if "not read to the end" in n]
    assert not [
        f for f in doc["findings"] if f["kind"] == "unverifiable" and f["action"] != "spare"
    ]


def test_a_credential_scoped_read_of_a_0_8_0_controller_asks_for_its_users_jobs_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A main build that says 0.8.0 scopes GetJobs to a credential's user (#640), while
    # JobMetrics counts every job: the unscoped counts say the running jobs need an id
    # range split (planned answers as small as the limit), but the user's own answer
    # fits, and is asked for first.
    monkeypatch.setattr(controller, "_PLANNED_ANSWER", LIMIT // 2)
    with SimCluster(
        large(**SMALL), agents=False, answer_limit=LIMIT, auth="required", jwt_key=KEY
    ) as sim:
        token = auth.mint(KEY, "u0001", uid=20_001, lifetime_s=300)
        conn = Connection((sim.controller_address,), token=token, timeout=30.0)
        with ControllerClient(conn) as client:
            view = client.view()
        requests = list(sim.job_requests)
    assert not [r for r in requests if r.nodes]
    assert len(requests) <= 4 and not [r for r in requests if len(r.job_ids) > 64]
    assert not any("not read to the end" in n for n in view.read_notes)
    mine = {j.job_id for j in sim.state.jobs.values() if j.user == "u0001" and j.state.active}
    assert mine and mine <= set(view.jobs)


def test_the_request_budget_counts_each_request_it_sends_once(zero_nine: SimCluster) -> None:
    # A node-by-node read sends a state's parts together: they are counted once each,
    # so a budget of exactly what an audit sends lets that audit read to the end.
    report, found = decisions(zero_nine)
    sent = len(zero_nine.job_requests)
    assert report.view_complete and any(r.nodes for r in zero_nine.job_requests)
    again, found_again = decisions(zero_nine, budget=sent)
    assert again.view_complete, again.notes
    assert found_again == found
    assert len(zero_nine.job_requests) == 2 * sent


# Issue 49's shape, a tenth of its size: ids 1..20,000, odd ones COMPLETED and even ones
# RUNNING on one node each (five a node), every node inventoried, a stale terminal holding
# on one node in twenty; spurctld's 32 MiB answer limit scaled by a tenth with it.
STRIPED = {"nodes": 2_000, "jobs": 20_000}
SCALED_LIMIT = controller.ANSWER_LIMIT // 10


def per_release(scenario: Scenario) -> dict[str, tuple[Any, list[tuple[Any, ...]], int]]:
    """Each release's audit of `scenario`: its report, its decisions, its GetJobs sent."""
    out = {}
    for release in (V0_9_TO_0_11, V0_8_0):
        with SimCluster(
            scenario, agents=False, answer_limit=SCALED_LIMIT, spur_release=release
        ) as sim:
            report, found = decisions(sim)
            out[release.name] = (report, found, len(sim.job_requests))
            assert max(sim.answer_sizes) <= SCALED_LIMIT
    return out


def test_v0_8_0_reads_jobs_spread_over_every_id_completely_without_a_look_up_storm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the top of the ids was found at 17,471, the ranges read 8,735 of 10,000
    # running jobs, and every held id above was looked up 64 at a time (71 GetJobs).
    monkeypatch.setattr(controller, "_PLANNED_ANSWER", SCALED_LIMIT // 2)
    read = per_release(striped(**STRIPED))
    (new, new_found, new_sent), (old, old_found, old_sent) = read["0.9-0.11"], read["v0.8.0"]
    assert old.view_complete and new.view_complete, old.notes
    assert old_found == new_found
    assert {k for _, _, k, _ in old_found} == {"terminal-held"}
    assert old_sent <= 2 * new_sent + 20, (old_sent, new_sent)


def test_v0_8_0_reads_ids_that_are_not_dense_completely(monkeypatch: pytest.MonkeyPatch) -> None:
    # 60,000 jobs, a gap of 1 to 7 ids after each: before, the top ids were never read
    # (16,615 of 60,000 jobs seen, 268 GetJobs) where a 0.9 controller reads them whole.
    monkeypatch.setattr(controller, "_PLANNED_ANSWER", SCALED_LIMIT // 2)
    read = per_release(striped(1_000, 60_000, stride=4))
    (new, new_found, new_sent), (old, old_found, old_sent) = read["0.9-0.11"], read["v0.8.0"]
    assert old.view_complete and new.view_complete, old.notes
    assert old_found == new_found
    assert old_sent <= 2 * new_sent + 20, (old_sent, new_sent)


def test_repair_reads_a_v0_8_0_controller_with_many_active_jobs_as_audit_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,000 running jobs, far over the answer limit together: repair's reads of the
    # active jobs on a node went out unfiltered (v0.8.0 has no `nodes`) and were refused
    # (exit 2), where the audit read them by id range and named the phantom charges.
    monkeypatch.setattr(controller, "_PLANNED_ANSWER", LIMIT // 2)
    scenario = striped(200, 2_000, phantom=3)
    phantoms = ["gpu198", "gpu199", "gpu200"]
    for name in phantoms:
        scenario.agent_started_at[name] = datetime(2026, 11, 18, 7, 31, tzinfo=UTC)
    with SimCluster(
        scenario, answer_limit=LIMIT, spur_release=V0_8_0, heartbeat_interval=0.1
    ) as sim:
        with ControllerClient(Connection((sim.controller_address,), timeout=30.0)) as client:
            client.active_jobs()
        one_read = len(sim.job_requests)
        live = sim.write_inventories(tmp_path / "live.jsonl")
        conf = tmp_path / "spur.conf"
        conf.write_text("[controller]\nhosts = []\n")
        common = ("--controller", sim.controller_address, "--inventory", str(live))
        with kept_fresh(sim, live):
            audit = run_cli(
                "audit", *common, "--nodes", "gpu[198-200]", "--format", "json", home=tmp_path
            )
            found = json.loads(audit.stdout)["findings"]
            assert [(f["node"], f["kind"]) for f in found] == [
                (n, "phantom-alloc") for n in phantoms
            ]
            audited = len(sim.job_requests) - one_read
            proc = run_cli(
                "repair", "--node", "gpu[198-200]", *common, "--conf", str(conf),
                "--journal", str(tmp_path / "journal.jsonl"), "--tick", "0", "--wait", "5",
                "--yes", home=tmp_path,
            )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Repair result: 3 repaired" in proc.stdout
        assert all(sim.node(n).alloc.empty for n in phantoms)
        assert not [r for r in sim.job_requests if r.nodes]
        assert max(sim.answer_sizes) <= LIMIT
        # Its audit, then one read of the active jobs for the plan and one for the
        # re-read after the drain, whatever the number of nodes.
        repaired = len(sim.job_requests) - one_read - audited
        assert repaired <= audited + 2 * one_read + 2, (repaired, audited, one_read)
