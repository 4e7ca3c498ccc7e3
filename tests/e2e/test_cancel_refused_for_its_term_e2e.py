"""An agent that fences cancels by controller term refuses spurctl's: reported, never retried.

Spur #600 (docs/spur-facts.md, "Coming upstream") gives the agent's CancelJob a `term`;
once an agent has seen a real one it answers FAILED_PRECONDITION "unfenced request
rejected after a real controller term was observed" to a request without one, and
spurctl's carries none. The simulated gpu006 and gpu003 agents have seen term 7.
gpu006 holds two stale runs (4715, 4716), gpu005 one (4712) on an agent without fencing.
The reclaim reports gpu006's first cancel failed with the agent's words and what they
mean, sends gpu006 nothing more in the run (its second entry is skipped, not sent), and
the unfenced gpu005 is reclaimed as ever. A second run sends the fenced agents one
cancel each again, re-checked, never a guessed term.
"""

from __future__ import annotations

import json
from pathlib import Path

from spurctl_sim import SimCluster
from tests.e2e.test_reclaim_e2e import files, journal, make_sim, reclaim_cli  # noqa: F401

UNFENCED = "unfenced request rejected after a real controller term was observed"


def agent_refusals(sim: SimCluster) -> list[tuple[str, str]]:
    return [(r.endpoint, r.method) for r in sim.refusals if r.endpoint != "controller"]


def test_a_cancel_refused_for_its_term_is_reported_and_never_retried(
    sim: SimCluster, tmp_path: Path
) -> None:
    sim.agent_terms.update(gpu003=7, gpu006=7)
    f = files(sim, tmp_path)
    run = reclaim_cli(sim, f, "--node", "gpu[005-006]", "--yes", "--format", "json")
    assert run.returncode == 1, run.stderr
    outcomes = {(o["node"], o["job_id"]): o for o in json.loads(run.stdout)["outcomes"]}
    assert {k: o["result"] for k, o in outcomes.items()} == {
        ("gpu005", 4712): "sent",
        ("gpu006", 4715): "failed",
        ("gpu006", 4716): "skipped",
    }
    refused = outcomes[("gpu006", 4715)]["detail"]
    assert UNFENCED in refused and "Spur #600" in refused and "not retried" in refused
    assert "controller term" in outcomes[("gpu006", 4716)]["detail"]
    assert outcomes[("gpu006", 4716)]["detail"].startswith("not sent")
    # One CancelJob reached gpu006, refused; none was retried, none went out for 4716.
    assert agent_refusals(sim) == [("gpu006", "CancelJob")]
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu005", 4712)]
    done = {(r["node"], r["job_id"]): r["result"] for r in journal(f) if r["event"] == "outcome"}
    assert done[("gpu006", 4715)] == "failed" and done[("gpu006", 4716)] == "skipped"

    # The next run asks again, once per entry's agent, re-checked: the same refusal.
    sim.refusals.clear()
    again = reclaim_cli(sim, f, "--node", "gpu003", "--yes", "--format", "json")
    assert again.returncode == 1, again.stderr
    (outcome,) = json.loads(again.stdout)["outcomes"]
    assert outcome["result"] == "failed" and UNFENCED in outcome["detail"]
    assert agent_refusals(sim) == [("gpu003", "CancelJob")]
