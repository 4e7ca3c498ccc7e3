"""Through the real CLI: an agent map cannot send one node's cancel to another node's agent.

The incident cluster: gpu003 holds a stale copy of job 4711, which legitimately
runs on gpu015. The agent map points gpu003 at gpu015's agent, written each way
gRPC would still dial it (issue 39.1: a target URI, an IPv4-mapped IPv6 address,
the wildcard address). `reclaim --node gpu003 --job 4711 --yes` must send nothing
(the simulated agents record every CancelJob they receive) and say why in one line,
and `explain gpu003 4711` must give the same verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli

# gpu015's agent, written as gRPC would dial it and a plain comparison would not see.
FORMS = {
    "ipv4-uri": "ipv4:127.0.0.1:{port}",
    "dns-uri": "dns:///127.0.0.1:{port}",
    "ipv4-mapped": "[::ffff:127.0.0.1]:{port}",
    "wildcard": "0.0.0.0:{port}",
}


def _run(sim: SimCluster, tmp_path: Path, command: str, *args: str, form: str) -> tuple:  # type: ignore[type-arg]
    agents = sim.agent_map()
    port = agents["gpu015"].rpartition(":")[2]
    agents["gpu003"] = form.format(port=port)
    agent_map = tmp_path / "agents.json"
    agent_map.write_text(json.dumps(agents))
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    run = run_cli(
        command, *args, "--controller", sim.controller_address,
        "--inventory", str(inventory), "--agent-map", str(agent_map),
        home=tmp_path / "home",
    )  # fmt: skip
    return run, agents["gpu003"]


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_an_agent_map_cannot_send_gpu003s_cancel_to_gpu015s_agent(
    sim: SimCluster, tmp_path: Path, form: str
) -> None:
    journal = tmp_path / "journal.jsonl"
    run, written = _run(
        sim, tmp_path, "reclaim", "--node", "gpu003", "--job", "4711", "--yes",
        "--journal", str(journal), form=form,
    )  # fmt: skip

    line = one_line_error(run, "gpu003", "nothing sent" if "ffff" in written else written)
    assert sim.cancels == [] and sim.controller_cancels == []
    assert {h.job_id for h in sim.holdings("gpu015")} == {4711}  # the live run lives
    assert not journal.exists()

    # explain gives reclaim's verdict, in reclaim's words.
    told, _ = _run(sim, tmp_path, "explain", "gpu003", "4711", "--format", "json", form=form)
    if told.returncode == 2:  # the map itself is refused, as it is for reclaim
        assert one_line_error(told) == line
    else:
        assert told.returncode == 0, told.stderr
        verdict = json.loads(told.stdout)["job"]["reclaim"]
        assert verdict["send"] is False
        assert f"spurctl: error: {verdict['why']}" == line
    assert sim.cancels == []


def test_a_map_form_gRPC_reads_as_a_uri_is_refused_naming_the_one_form(
    sim: SimCluster, tmp_path: Path
) -> None:
    run, _ = _run(
        sim, tmp_path, "reclaim", "--node", "gpu003", "--dry-run", form="unix:/run/spurd.sock"
    )
    one_line_error(run, "gpu003", "unix:/run/spurd.sock", "host:port", "in brackets")


def test_the_one_form_with_a_plain_address_still_reclaims(sim: SimCluster, tmp_path: Path) -> None:
    # gpu003's own agent, written in the accepted bracketed IPv6 form for an IPv4 host.
    agents = sim.agent_map()
    port = agents["gpu003"].rpartition(":")[2]
    run, _ = _run(
        sim, tmp_path, "reclaim", "--node", "gpu003", "--job", "4711", "--yes",
        "--journal", str(tmp_path / "j.jsonl"), form=f"[::ffff:127.0.0.1]:{port}",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr  # sent, unconfirmed: nothing re-collected
    assert [(c.node, c.job_id) for c in sim.cancels] == [("gpu003", 4711)]
