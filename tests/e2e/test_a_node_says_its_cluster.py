"""A node says which cluster it is in: its spurd's own settings bind its inventory (issue 50.4).

Two simulated clusters with the same node names and job ids (test_one_cluster_not_two.py):
A runs job 4711 on gpu015; B finished its own 4711 long ago. The operator's config names
B's controller with A's agent map, and neither the agent map nor `collect` names any
cluster. The inventory is `spurctl node-inventory`'s own, run on a fixture node whose
/proc shows A's gpu015: a process of job 4711 and a spurd started with A's controller
(`--controller`, or `SPUR_CONTROLLER_ADDR`) and a spur.conf naming the cluster. Read
against B, gpu015's 4711 is `terminal-held`; the node's word stops the reclaim, the
repair and the drain, naming both controllers, with nothing sent to either cluster. A
node whose spurd names no cluster keeps today's rules; one whose spurd names this
controller is reclaimed as before.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import one_line_error, run_cli
from tests.e2e.test_one_cluster_not_two import clusters, config  # noqa: F401 (a fixture)
from tests.unit.test_node_scan import add_process, make_proc


def node(
    tmp_path: Path,
    name: str,
    spurd_args: tuple[str, ...] = (),
    spurd_env: dict[str, str] | None = None,
    conf: str | None = None,
) -> Path:
    """`spurctl node-inventory` of a fixture node holding job 4711, its spurd started so."""
    base = tmp_path / name
    base.mkdir(parents=True)
    proc = make_proc(base)
    # Booted an hour ago: the run began after each cluster's job 4711 was submitted.
    (proc / "stat").write_text(f"cpu  1 2 3 4\nbtime {int(time.time()) - 3600}\n")
    add_process(proc, 2201, spurd_env or {}, start_ticks=100, comm="spurd")
    (proc / "2201" / "comm").write_text("spurd\n")
    args = ["/usr/sbin/spurd", *spurd_args]
    if conf is not None:
        (base / "spur.conf").write_text(conf)
        args += ["-f", str(base / "spur.conf")]
    (proc / "2201" / "cmdline").write_bytes(b"\0".join(a.encode() for a in args))
    add_process(proc, 8100, {"SPUR_JOB_ID": "4711", "SPUR_TARGET_NODE": name}, start_ticks=900)
    out = base / "inventory.json"
    run = run_cli(
        "node-inventory", "--proc-root", str(proc), "--cgroup-root", str(base / "no-cgroups"),
        "--state-dir", str(base / "state"), "--hostname", name, "-o", str(out),
        home=tmp_path / "home",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return out


def agent_map(a: SimCluster, tmp_path: Path) -> Path:
    path = tmp_path / "a-agents.json"
    path.write_text(json.dumps(a.agent_map()))
    return path


def test_the_nodes_own_controller_stops_a_reclaim_repair_and_drain_against_another(
    clusters: tuple[SimCluster, SimCluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    a, b = clusters
    conf = 'cluster_name = "alpha"\n[auth]\njwt_key = "not-for-output"\n'
    inventory = node(tmp_path, "gpu015", ("--controller", a.controller_address), conf=conf)
    doc = json.loads(inventory.read_text())
    assert doc["agent_config"] == {"controller": a.controller_address, "cluster": "alpha"}
    assert "not-for-output" not in inventory.read_text()
    env = config(tmp_path, b.controller_address, inventory, agent_map(a, tmp_path))
    journal = str(tmp_path / "j.jsonl")
    runs = {
        "reclaim": run_cli(
            "reclaim", "--node", "gpu015", "--yes", "--journal", journal, env=env,
            home=tmp_path / "home",
        ),
        "repair": run_cli(
            "repair", "--node", "gpu015", "--yes", "--rejoin-checked", "--journal", journal,
            env=env, home=tmp_path / "home",
        ),
        "drain": run_cli(
            "drain", "--node", "gpu015", "--yes", "--journal", journal, env=env,
            home=tmp_path / "home",
        ),
    }  # fmt: skip
    for verb, run in runs.items():
        one_line_error(
            run, f"refusing the {verb}, nothing sent", "gpu015", "spurd",
            a.controller_address, b.controller_address,
        )  # fmt: skip
    assert a.cancels == [] and b.cancels == [] and a.controller_cancels == []
    assert b.node("gpu015").state_reason == "" and not Path(journal).exists()
    assert {h.job_id for h in a.holdings("gpu015")} == {4711}  # A's live run lives


def test_the_controller_in_spurds_environment_binds_the_node_and_no_word_keeps_todays_rules(
    clusters: tuple[SimCluster, SimCluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    a, b = clusters
    inventory = node(tmp_path, "gpu015", spurd_env={"SPUR_CONTROLLER_ADDR": a.controller_address})
    env = config(tmp_path, b.controller_address, inventory, agent_map(a, tmp_path))
    run = run_cli(
        "reclaim", "--node", "gpu015", "--yes", "--journal", str(tmp_path / "j.jsonl"),
        env=env, home=tmp_path / "home",
    )  # fmt: skip
    one_line_error(run, "refusing the reclaim, nothing sent", a.controller_address)
    assert a.cancels == [] and b.cancels == []
    agents = agent_map(a, tmp_path)
    # gpu003's spurd names A: against A, its stale run of 4711 (running on gpu015) goes.
    ours = node(tmp_path, "gpu003", ("--controller", a.controller_address))
    run = run_cli(
        "reclaim", "--node", "gpu003", "--yes", "--journal", str(tmp_path / "a.jsonl"),
        env=config(tmp_path, a.controller_address, ours, agents), home=tmp_path / "home",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr  # sent, unconfirmed: nothing re-collected
    # A spurd on its built-in defaults names no cluster: today's rules, which against B
    # send the cancel (the files name nothing either).
    plain = node(tmp_path / "plain", "gpu015")
    assert "agent_config" not in json.loads(plain.read_text())
    run = run_cli(
        "reclaim", "--node", "gpu015", "--yes", "--journal", str(tmp_path / "b.jsonl"),
        env=config(tmp_path, b.controller_address, plain, agents), home=tmp_path / "home",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert [(c.node, c.job_id) for c in a.cancels] == [("gpu003", 4711), ("gpu015", 4711)]


def test_the_nodes_own_cluster_name_stops_a_reclaim_where_spur_conf_names_another(
    clusters: tuple[SimCluster, SimCluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    # gpu015's spurd has no --controller (its built-in localhost names nothing) but reads a
    # spur.conf naming cluster alpha; the operator's spur.conf for B names beta.
    a, b = clusters
    inventory = node(tmp_path, "gpu015", conf='cluster_name = "alpha"\n')
    assert json.loads(inventory.read_text())["agent_config"] == {"cluster": "alpha"}
    beta = tmp_path / "beta.conf"
    beta.write_text('cluster_name = "beta"\n')
    env = config(tmp_path, b.controller_address, inventory, agent_map(a, tmp_path))
    reclaim = ("reclaim", "--node", "gpu015", "--yes", "--journal", str(tmp_path / "j.jsonl"))
    run = run_cli(*reclaim, "--conf", str(beta), env=env, home=tmp_path / "home")
    one_line_error(run, "refusing the reclaim, nothing sent", "'alpha'", "'beta'")
    assert a.cancels == [] and b.cancels == []
    # With no spur.conf naming the view's cluster, a node's cluster name alone cannot be
    # weighed against it: today's rules (which send).
    run = run_cli(*reclaim, env=env, home=tmp_path / "home")
    assert run.returncode == 1, run.stderr
    assert [(c.node, c.job_id) for c in a.cancels] == [("gpu015", 4711)]
