"""The autopilot's `--repair` against the simulated cluster, through the real CLI.

The incident's gpu009 carries a phantom charge (no job lists it) with its spurd running
and shown in a fresh inventory; spur.conf has no WireGuard mesh and no k0s. Without
`--repair` the autopilot leaves it to a person and sends nothing for it; with it, after
--grace, one repair a round through `spurctl repair`'s own steps: spurctl's drain, the
re-read, DeregisterNode(force=false), the node back at its spurd's next heartbeat (0.1 s
here) with no charge and the admin's labels. A mesh refuses it; a dry run sends nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spurctl.model import NodeState
from tests.cli import cli_process, run_cli, wait_for
from tests.e2e.test_repair_e2e import CONF, Phantom, phantom, update
from tests.reclaim import journal_records

FAST = ("--interval", "0.3", "--grace", "0.5", "--tick", "0", "--wait", "5")


@pytest.fixture
def p(tmp_path: Path) -> Iterator[Phantom]:
    with phantom(tmp_path) as cluster:
        yield cluster


def autopilot(p: Phantom, *extra: str, rounds: int = 4) -> tuple[list[dict[str, Any]], str]:
    proc = run_cli(
        "autopilot", "-w", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--pause-file", str(p.journal.parent / "pause"), *FAST, "--rounds", str(rounds),
        *extra, home=p.home, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], proc.stderr


def calls(rounds: list[dict[str, Any]], key: str = "calls") -> list[dict[str, Any]]:
    return [c for r in rounds for c in r.get(key, [])]


def test_without_repair_the_phantom_node_is_left_to_a_person(p: Phantom) -> None:
    before = p.sim.node("gpu009")
    rounds, _ = autopilot(p)
    assert calls(rounds) == [] and p.sim.state.deregistrations == []
    assert p.sim.node("gpu009") == before
    [person] = rounds[-1]["left_to_person"]
    assert person["node"] == "gpu009" and "--repair" in person["why"]
    assert "spurctl repair -w gpu009" in person["why"]


def test_with_repair_the_node_comes_back_with_no_charge_and_the_admins_labels(
    p: Phantom,
) -> None:
    update(p, name="gpu009", labels={"owner": "ml-infra"})
    before = p.sim.node("gpu009")
    assert not before.alloc.empty
    rounds, _ = autopilot(p, "--repair", rounds=5)
    # Inside --grace nothing goes out; then one repair, through repair's own steps.
    assert rounds[0]["calls"] == [] and rounds[0]["waiting"] == {"grace": 1}
    [done] = [c for c in calls(rounds) if c["action"] == "repair"]
    assert done["node"] == "gpu009" and done["result"] == "sent", done
    assert "registered again with no charge" in done["detail"]
    after = p.sim.node("gpu009")
    assert after.alloc.empty and after.state is NodeState.IDLE and after.state_reason == ""
    assert after.labels == {**before.labels, "owner": "ml-infra"}
    assert [(n, force) for n, force, _ in p.sim.state.deregistrations] == [("gpu009", False)]
    records = [r for r in journal_records(p.journal) if r.get("action") == "repair"]
    assert {r.get("origin") for r in records} == {"autopilot"}
    assert [(r["step"], r["event"]) for r in records][:4] == [
        ("drain", "intent"), ("drain", "outcome"), ("deregister", "intent"),
        ("deregister", "outcome"),
    ]  # fmt: skip
    # Its calls count against --max-actions: drain, DeregisterNode, the labels put back.
    assert rounds[-1]["budgets_left"]["max-actions"] == 60 - 3
    assert rounds[-1]["findings"] == {} or "phantom-alloc" not in rounds[-1]["findings"]


def test_a_mesh_spur_conf_refuses_the_repair_and_sends_nothing(p: Phantom) -> None:
    p.conf.write_text(CONF + "[network]\nwg_enabled = true\n")
    before = p.sim.node("gpu009")
    rounds, _ = autopilot(p, "--repair")
    assert calls(rounds) == [] and p.sim.state.deregistrations == []
    assert p.sim.node("gpu009") == before
    assert any("wg_enabled = true" in w for w in rounds[-1]["why"])
    [person] = rounds[-1]["left_to_person"]
    assert person["node"] == "gpu009" and "repair refused" in person["why"]


def test_dry_run_says_it_would_repair_and_sends_nothing(p: Phantom) -> None:
    before = p.sim.node("gpu009")
    rounds, _ = autopilot(p, "--repair", "--dry-run")
    would = calls(rounds, "would_send")
    assert would and {(w["action"], w["node"], w["result"]) for w in would} == {
        ("repair", "gpu009", "would-send")
    }
    assert p.sim.state.deregistrations == [] and p.sim.node("gpu009") == before
    assert not p.journal.exists() or not journal_records(p.journal)


def test_rejoin_checked_without_repair_is_a_usage_error(p: Phantom) -> None:
    proc = run_cli(
        "autopilot", "-w", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--journal", str(p.journal), "--rejoin-checked",
        "--rounds", "1", home=p.home,
    )  # fmt: skip
    assert proc.returncode == 2 and "--rejoin-checked goes with --repair" in proc.stderr


def test_a_node_not_back_within_wait_is_owed_and_the_next_round_puts_its_labels_back(
    p: Phantom,
) -> None:
    update(p, name="gpu009", labels={"owner": "ml-infra"})
    before = p.sim.node("gpu009")
    args = ("--repair", "--grace", "0", "--wait", "0")
    # --wait 0 is one GetNode right after DeregisterNode (1 ms here, 10 ms and more on a
    # loaded machine): a 0.1 s heartbeat may land before it, and a node back at that read
    # is back (its labels put back, `sent`). Held away until the round is over: `owed`.
    with p.sim.state.registration_held("gpu009"):
        rounds, _ = autopilot(p, *args, rounds=1)
    [owed] = calls(rounds)
    assert (owed["action"], owed["result"]) == ("repair", "owed"), owed
    assert "owner=ml-infra" in owed["detail"] and "the journal keeps it" in owed["detail"]
    # Back at its spurd's next heartbeat, without the admin's label: the next round's.
    wait_for(lambda: "gpu009" in p.sim.state.nodes, timeout=30)
    assert "owner" not in p.sim.node("gpu009").labels
    rounds, _ = autopilot(p, *args, rounds=1)
    [settled] = calls(rounds)
    assert (settled["action"], settled["result"]) == ("repair", "sent"), settled
    after = p.sim.node("gpu009")
    assert after.alloc.empty and after.labels == {**before.labels, "owner": "ml-infra"}
    assert len(p.sim.state.deregistrations) == 1


def test_with_wait_0_a_node_back_at_its_one_read_gets_its_labels_back_in_the_round(
    p: Phantom,
) -> None:
    update(p, name="gpu009", labels={"owner": "ml-infra"})
    p.sim.state.back_at_once.add("gpu009")  # registered again before DeregisterNode answers
    rounds, _ = autopilot(p, "--repair", "--grace", "0", "--wait", "0", rounds=1)
    [back] = calls(rounds)
    assert (back["action"], back["result"]) == ("repair", "sent"), back
    assert "registered again with no charge" in back["detail"], back
    node = p.sim.node("gpu009")
    assert node.alloc.empty and node.labels.get("owner") == "ml-infra"
    assert len(p.sim.state.deregistrations) == 1


def test_sigterm_while_waiting_for_the_node_exits_0_and_a_later_round_puts_it_back(
    p: Phantom,
) -> None:
    update(p, name="gpu009", labels={"owner": "ml-infra"})
    p.sim.state.refuse_registration("gpu009", "join token expired")
    args = (
        "autopilot", "-w", "gpu009", "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--pause-file", str(p.journal.parent / "pause"), "--repair", "--interval", "0.3",
        "--grace", "0", "--tick", "0",
    )  # fmt: skip
    with cli_process(*args, "--wait", "60", home=p.home, stdout=subprocess.PIPE) as proc:
        wait_for(lambda: bool(p.sim.state.deregistrations), timeout=30)
        time.sleep(0.3)  # in the wait for gpu009 to register again
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0  # not the 60 s --wait
        assert proc.stdout is not None
        [line] = [json.loads(x) for x in proc.stdout.read().splitlines() if x.strip()]
    [stopped] = line["calls"]
    assert (stopped["action"], stopped["result"]) == ("repair", "interrupted"), stopped
    assert "owner=ml-infra" in stopped["detail"]
    del p.sim.state.registration_refused["gpu009"]
    wait_for(lambda: "gpu009" in p.sim.state.nodes, timeout=30)
    rounds, _ = autopilot(p, "--repair", "--grace", "0", rounds=1)
    [settled] = calls(rounds)
    assert (settled["action"], settled["result"]) == ("repair", "sent"), settled
    assert p.sim.node("gpu009").labels.get("owner") == "ml-infra"
    assert len(p.sim.state.deregistrations) == 1
