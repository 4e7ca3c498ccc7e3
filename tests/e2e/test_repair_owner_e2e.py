"""`spurctl repair` and drains that are not its own (issue 48 items 1 and 2), against the
simulated cluster: a drain of spurctl's an admin amended after a repair was killed is not
taken up as spurctl's; a drain an admin sets while repair's prompt is open, or during its
tick before a Ctrl-C, is neither overwritten, nor removed with the node, nor lifted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spurctl.model import NodeState
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import connect_settings
from spurctl.usecases.repair import RepairPlan, RepairRequest, Status
from spurctl.usecases.repair import repair as run_repair
from tests.cli import cli_process, kill_group, wait_for
from tests.e2e import test_repair_e2e as base
from tests.e2e.test_repair_e2e import OUR_DRAIN, Phantom, repair, steps

AMENDED = f"{OUR_DRAIN} -- bob: GPU1 XID79, RMA, KEEP DRAINED"


@pytest.fixture
def p(tmp_path: Path) -> Iterator[Phantom]:
    """The incident cluster with gpu009's spurd running and shown, heartbeating every 0.1 s
    (test_repair_e2e's)."""
    with base.phantom(tmp_path) as cluster:
        yield cluster


def _killed_after_its_drain(p: Phantom) -> None:
    """A real repair killed in its tick, after its drain went out (a crash, a kill -9)."""
    args = [
        "repair", "--node", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--tick", "60", "--yes",
    ]  # fmt: skip
    with cli_process(*args, home=p.home) as proc:
        wait_for(lambda: p.sim.node("gpu009").state_reason == OUR_DRAIN, timeout=30)
        wait_for(lambda: ("drain", "outcome", "sent") in steps(p), timeout=30)
        kill_group(proc.pid)
        proc.wait(timeout=10)
    assert p.sim.node("gpu009").state_reason == OUR_DRAIN


def test_a_killed_repairs_drain_an_admin_amended_is_not_taken_up_as_spurctls(
    p: Phantom,
) -> None:
    _killed_after_its_drain(p)
    p.sim.admin_update("gpu009", NodeState.DRAIN, AMENDED)

    proc = repair(p, "--yes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[takes up run " not in proc.stdout
    assert (
        f"gpu009  REFUSED: gpu009 is DRAINING with reason {AMENDED!r}, someone else's: its "
        "fresh registration would drop that drain; pass --restore-drain"
    ) in proc.stdout
    assert p.sim.state.deregistrations == []
    assert p.sim.node("gpu009").state_reason == AMENDED

    # Told to put it back, the repair rebuilds the charge and the admin's drain stays.
    proc = repair(p, "--yes", "--restore-drain")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = p.sim.node("gpu009")
    assert after.alloc.empty
    assert (after.state, after.state_reason) == (NodeState.DRAIN, AMENDED)


def _in_process(p: Phantom, ask: Any) -> Any:
    conn = connect_settings(controller=p.sim.controller_address, conf_path=p.conf, home=p.home)
    request = RepairRequest(scope=Scope.parse("gpu009"), journal_path=p.journal, tick_s=0, wait_s=5)
    src = Sources(request.scope, [str(p.live)], False, "", 1)
    return run_repair(request, src, conn, show_plan=lambda plan: None, ask=ask)


def test_a_drain_an_admin_sets_while_repairs_prompt_is_open_is_left_and_the_node_kept(
    p: Phantom,
) -> None:
    def admin_then_yes(plan: RepairPlan) -> bool:
        assert [t.node for t in plan.targets] == ["gpu009"]
        p.sim.admin_update("gpu009", NodeState.DRAIN, "ops: bad DIMM, ticket 88")
        return True

    done = _in_process(p, admin_then_yes)
    [result] = done.results
    assert result.status is Status.REFUSED
    assert result.detail.startswith("drain not sent: gpu009 changed since the plan saw it")
    assert "it is now DRAINING with reason 'ops: bad DIMM, ticket 88'" in result.detail
    assert p.sim.state.deregistrations == []  # never removed: it stays out of service
    node = p.sim.node("gpu009")
    assert (node.state, node.state_reason) == (NodeState.DRAINING, "ops: bad DIMM, ticket 88")
    assert steps(p) == [("drain", "outcome", "skipped")]
    # Nothing of this repair is left to take up.
    journal = base.run_cli("journal", "--journal", str(p.journal), home=p.home)
    assert "not finished" not in journal.stdout, journal.stdout


def test_ctrl_c_in_the_tick_leaves_a_drain_an_admin_set_after_spurctls(
    p: Phantom,
) -> None:
    def admin_after_ours() -> bool:
        if p.sim.node("gpu009").state_reason != OUR_DRAIN:
            return False
        p.sim.admin_update("gpu009", NodeState.DRAIN, "ops: hold for vendor")
        return True

    rc, out = base._interrupt_when(p, admin_after_ours, "--tick", "60", "--wait", "5")
    assert rc == 1, out
    assert "gpu009  interrupted: interrupted before DeregisterNode; undrain not sent:" in out, out
    node = p.sim.node("gpu009")
    assert node.state_reason == "ops: hold for vendor", node
    assert node.state in (NodeState.DRAIN, NodeState.DRAINING)
    assert p.sim.state.deregistrations == []
    assert ("undrain", "outcome", "skipped") in steps(p)
    assert ("undrain", "intent", None) not in steps(p)
