"""Whose drain a node carries, and a node changed while `drain`'s or `resume`'s prompt is
open, against the simulated cluster (issue 48 items 1 and 2).

A drain is spurctl's only when its reason is exactly one the journal records spurctl
setting on that node (and, where the controller has #860's reason_uid, set by the uid of
spurctl's credential). A reason that merely reads like spurctl's (behind blanks or
control characters, amended by an admin, never journaled) is someone else's and stays.
Every UpdateNode goes out only after a GetNode shows the node still as the plan saw it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.model import NodeState
from spurctl.scope import Scope
from spurctl.sources import credentials
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import connect_settings
from spurctl.usecases.drain import Changed, DrainPlan, DrainRequest, Verb, change
from spurctl_sim import SimCluster, incident
from spurctl_sim.releases import NEWEST
from tests.cli import wait_for
from tests.e2e.test_drain_resume_e2e import ORPHAN_DRAIN, Cluster, command
from tests.e2e.test_reclaim_confirm import kept_fresh
from tests.reclaim import journal_records

KEY = "owner-test-key-of-at-least-32-bytes!"
BOB = "bob: GPU1 XID79, RMA, KEEP DRAINED"


def _cluster(tmp_path: Path, **sim: object) -> Iterator[Cluster]:
    scenario = incident()
    scenario.agent_started_at["gpu012"] = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    with SimCluster(scenario, **sim) as s:  # type: ignore[arg-type]
        live = s.write_inventories(tmp_path / "live.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text("{}")
        with kept_fresh(s, live):
            yield Cluster(s, live, tmp_path / "journal.jsonl", tmp_path / "home", agent_map)


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(tmp_path)


def _clean_gpu012(c: Cluster) -> None:
    """gpu012's orphans freed (node-release) and their job ended: its audit is clean."""
    c.sim.state.cancel_job(4950)
    for job_id in (4702, 4950):
        c.sim.release("gpu012", job_id)
    wait_for(lambda: '"job_id": 4950' not in c.live.read_text())


def _in_process(
    c: Cluster, verb: Verb, nodes: str, ask: Callable[[DrainPlan], bool], token: str | None = None
) -> Changed:
    """The use case run as the command runs it, with `ask` as the operator at the prompt."""
    conn = connect_settings(controller=c.sim.controller_address, token=token, home=c.home)
    src = Sources(Scope.parse(nodes), [str(c.live)], False, "", 1)
    request = DrainRequest(verb, src.scope, c.journal)
    return change(request, src, conn, show_plan=lambda plan: None, ask=ask)


# -- item 1: ownership ---------------------------------------------------------------------


@pytest.mark.parametrize("lead", [" ", "\t", "\u3000", "\x1c", "\x1f"])
def test_resume_leaves_a_reason_that_reads_as_spurctls_only_after_lstrip(
    c: Cluster, lead: str
) -> None:
    reason = f"{lead}spurctl: agent-orphan job 4950 (spurctl explain gpu001)"
    c.sim.admin_update("gpu001", NodeState.DRAIN, reason)
    proc = command(c, "resume", "gpu001", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert c.sim.node("gpu001").state_reason == reason
    assert "spurctl-looking reason spurctl never journaled setting on gpu001" in proc.stdout
    assert not c.journal.exists()  # nothing sent, nothing journaled


def test_resume_leaves_a_spurctl_reason_spurctl_never_journaled(c: Cluster) -> None:
    reason = f"spurctl: agent-orphan job 4950 (spurctl explain gpu001) -- {BOB}"
    c.sim.admin_update("gpu001", NodeState.DRAIN, reason)
    proc = command(c, "resume", "gpu001", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        f"gpu001  gpu001 is DRAINING and carries a spurctl-looking reason spurctl never "
        f"journaled setting on gpu001 ({reason!r}): someone else's, left alone"
    ) in proc.stdout
    assert c.sim.node("gpu001").state_reason == reason


def test_resume_leaves_spurctls_drain_once_an_admin_amended_it(c: Cluster) -> None:
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    amended = f"{ORPHAN_DRAIN} -- {BOB}"
    c.sim.admin_update("gpu012", NodeState.DRAIN, amended)
    _clean_gpu012(c)
    proc = command(c, "resume", "gpu012", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "spurctl-looking reason spurctl never journaled setting on gpu012" in proc.stdout
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.DRAIN, amended)
    assert [r for r in journal_records(c.journal) if r.get("action") == "resume"] == []


def test_a_reason_spurctl_lifted_and_an_admin_then_set_again_is_the_admins(c: Cluster) -> None:
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    _clean_gpu012(c)
    assert command(c, "resume", "gpu012", "--yes").returncode == 0
    assert c.sim.node("gpu012").state_reason == ""
    # bob copies spurctl's old reason onto the node, by hand.
    c.sim.admin_update("gpu012", NodeState.DRAIN, ORPHAN_DRAIN)
    proc = command(c, "resume", "gpu012", "--yes")
    assert "spurctl-looking reason spurctl never journaled setting on gpu012" in proc.stdout
    assert c.sim.node("gpu012").state_reason == ORPHAN_DRAIN


@pytest.fixture
def newest(tmp_path: Path) -> Iterator[Cluster]:
    """The newest Spur (#860: reason_uid), credentials required."""
    yield from _cluster(tmp_path, spur_release=NEWEST, auth="required", jwt_key=KEY)


def test_where_the_controller_says_who_set_it_resume_leaves_the_same_reason_set_by_another(
    newest: Cluster,
) -> None:
    c = newest
    root = credentials.mint(KEY, "root", uid=0, admin=True)
    drained = _in_process(c, Verb.DRAIN, "gpu012", lambda plan: True, token=root)
    assert drained.done == {"gpu012": (True, f"drained: {ORPHAN_DRAIN}")}, drained
    assert c.sim.node("gpu012").reason_uid == 0  # spurctl's, by its credential's uid
    # bob drains it again, for his own reasons, with the very same text.
    c.sim.admin_update("gpu012", NodeState.DRAIN, ORPHAN_DRAIN, uid=1000)
    _clean_gpu012(c)
    resumed = _in_process(c, Verb.RESUME, "gpu012", lambda plan: True, token=root)
    assert resumed.plan.changes == [], resumed.plan
    [left] = resumed.plan.left
    assert "set by uid 1000 (reason_uid), not by spurctl's uid 0" in left.why
    node = c.sim.node("gpu012")
    assert (node.state_reason, node.reason_uid) == (ORPHAN_DRAIN, 1000)

    # spurctl's own drain, as it set it, is lifted as ever.
    c.sim.admin_update("gpu012", NodeState.IDLE)
    c.sim.admin_update("gpu012", NodeState.DRAIN, ORPHAN_DRAIN, uid=0)
    resumed = _in_process(c, Verb.RESUME, "gpu012", lambda plan: True, token=root)
    assert resumed.done == {"gpu012": (True, f"resumed: lifted {ORPHAN_DRAIN!r}")}, resumed
    assert c.sim.node("gpu012").reason_uid is None  # a resume clears it


# -- item 2: re-read right before the call -------------------------------------------------------


def test_a_drain_an_admin_sets_while_drains_prompt_is_open_is_left_as_it_is(c: Cluster) -> None:
    def admin_then_yes(plan: DrainPlan) -> bool:
        c.sim.admin_update("gpu012", NodeState.DRAIN, "ops: bad DIMM, ticket 88")
        return True

    done = _in_process(c, Verb.DRAIN, "gpu012", admin_then_yes)
    sent, detail = done.done["gpu012"]
    assert not sent
    assert detail.startswith("not sent: gpu012 changed since the plan saw it"), detail
    assert "it is now DRAINING with reason 'ops: bad DIMM, ticket 88'" in detail
    assert c.sim.node("gpu012").state_reason == "ops: bad DIMM, ticket 88"
    records = [r for r in journal_records(c.journal) if r.get("action") == "drain"]
    assert [(r["event"], r.get("result")) for r in records] == [("outcome", "skipped")]
    # Never taken for spurctl's afterwards: resume leaves it.
    _clean_gpu012(c)
    proc = command(c, "resume", "gpu012", "--yes")
    assert c.sim.node("gpu012").state_reason == "ops: bad DIMM, ticket 88", proc.stdout


def test_a_drain_an_admin_sets_while_resumes_prompt_is_open_is_not_lifted(c: Cluster) -> None:
    assert command(c, "drain", "gpu012", "--yes").returncode == 0
    _clean_gpu012(c)

    def admin_then_yes(plan: DrainPlan) -> bool:
        assert [ch.node for ch in plan.changes] == ["gpu012"]
        c.sim.admin_update("gpu012", NodeState.DRAIN, "ops: reseat GPUs")
        return True

    done = _in_process(c, Verb.RESUME, "gpu012", admin_then_yes)
    sent, detail = done.done["gpu012"]
    assert not sent and "it is now DRAIN with reason 'ops: reseat GPUs'" in detail, detail
    node = c.sim.node("gpu012")
    assert (node.state, node.state_reason) == (NodeState.DRAIN, "ops: reseat GPUs")
