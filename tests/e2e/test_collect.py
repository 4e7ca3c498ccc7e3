"""collect fans a real command out over many nodes through ClusterShell; the CLI runs for real."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.model import Inventory
from spurctl.sources.collect import check_command, collect
from spurctl.sources.inventory_document import parse_inventory_text
from spurctl_sim import SimCluster, node_line
from tests.cli import one_line_error, run_cli

OK_SLEEP = 0.3
TIMEOUT = 5.0  # an ok node under a loaded machine (two test workers) still answers in it


def inventory(name: str, number: int) -> dict[str, object]:
    return {"schema": "spurctl.inventory/v1", "node": name,
            "collected_at": "2026-12-02T10:00:00Z", "source": "cgroup+proc", "error": None,
            "held": [{"job_id": 1000 + number, "cpus": 8, "memory_mb": 1024,
                      "gpus": [number % 8], "pids": [4000 + number],
                      "started_at": "2026-12-01T22:14:05Z"}]}  # fmt: skip


def canned_answer(node: str) -> dict[str, str]:
    """What `ssh NODE spurctl node-inventory` answers here, by the node's name (ok*,
    fail*, hang*, junk*, ...): node_line's --answers files (.out, .err, .status, .sleep, .hang)."""
    kind = node.rstrip("0123456789")
    number = int(node[len(kind) :] or 0)
    doc = inventory(node, number)
    if kind == "ok":
        return {"sleep": str(OK_SLEEP), "out": json.dumps(doc) + "\n"}
    if kind == "pretty":
        return {"out": json.dumps(doc, indent=2) + "\n"}
    if kind == "alias":
        return {"out": json.dumps(inventory(node.upper(), number)) + "\n"}
    if kind == "fail":
        return {"out": "", "err": f"some noise\nboom on {node}\n\n\n", "status": "3"}
    if kind == "hang":
        return {"hang": "60"}
    if kind == "junk":
        return {"out": "Last login: Tue Dec  1 22:14:05 2026\n{not json\n"}
    if kind == "twice":
        return {"out": (json.dumps(doc) + "\n") * 2}
    if kind == "liar":  # speaks for ok1: later, holding nothing
        lie = {**inventory("ok1", 1), "collected_at": "2026-12-02T11:00:00Z", "held": []}
        return {"out": json.dumps(lie) + "\n"}
    if kind == "deep":
        # An inventory whose `held` nests 100,000 deep: the parser recurses out.
        text = json.dumps(doc)
        deep = text.replace('"held": [', '"held": [' + "[" * 100000, 1)[:-2] + "]" * 100001 + "}"
        return {"out": deep + "\n"}
    assert kind == "empty", node
    return {"out": ""}


NAMES = [
    *(f"ok{i}" for i in range(1, 10)),
    *(f"ok{i:02d}" for i in range(1, 41)),
    *(f"{kind}{i}" for kind in ("fail", "hang", "junk", "alias", "pretty", "twice", "liar")
      for i in range(1, 10)),
    "empty1",
    "deep1",
]  # fmt: skip


@pytest.fixture
def fake_command(tmp_path: Path) -> str:
    """The shared stand-in (spurctl_sim/node_line.py) answering each of NAMES as above."""
    state = tmp_path / "state"
    state.mkdir()
    for node in NAMES:
        for suffix, text in canned_answer(node).items():
            (state / f"{node}.{suffix}").write_text(text)
    return node_line.answers_command(state)


def by_node(results: list[Inventory]) -> dict[str, Inventory]:
    return {inv.node: inv for inv in results}


def test_collect_runs_nodes_in_parallel_and_one_nodes_failure_never_stops_the_others(
    tmp_path: Path, fake_command: str
) -> None:
    ok = [f"ok{i:02d}" for i in range(1, 33)]
    fail = [f"fail{i}" for i in range(1, 5)]
    hang = [f"hang{i}" for i in range(1, 4)]
    junk = [f"junk{i}" for i in range(1, 4)]
    nodes = ok + fail + hang + junk
    random.Random(7).shuffle(nodes)  # results must follow the input, not sorted order
    serial = len(ok) * OK_SLEEP + len(hang) * TIMEOUT

    t0 = time.monotonic()
    results = collect(nodes, command=fake_command, fanout=64, timeout=TIMEOUT, progress=False)
    wall = time.monotonic() - t0

    assert len(nodes) >= 40
    assert [inv.node for inv in results] == nodes
    assert wall < serial / 2, f"took {wall:.1f}s; run one after another it takes >= {serial:.1f}s"
    got = by_node(results)
    for node in ok:
        inv = got[node]
        assert inv.error is None and inv.source == "cgroup+proc"
        (held,) = inv.held
        number = int(node[2:])
        assert (held.job_id, held.gpus, held.pids) == (
            1000 + number,
            (number % 8,),
            (4000 + number,),
        )
    for node in fail:
        # The exit status and the last non-blank line of stderr.
        assert got[node].error == f"command exited with status 3: boom on {node}"
        assert got[node].held == ()
    for node in hang:
        assert got[node].error == f"no answer within {TIMEOUT:g} s; command killed"
    for node in junk:
        assert got[node].error is not None
        assert got[node].error.startswith("printed no valid inventory")
    # A command past its timeout is killed, not left running on the admin host.
    for node in hang:
        pid = int((tmp_path / "state" / f"{node}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_fanout_bounds_how_many_commands_run_at_once(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.mkdir()
    nodes = [f"n{i}" for i in range(6)]
    for node in nodes:  # each takes 0.4 s and fails; node_line records when it ran
        for suffix, text in {"sleep": "0.4", "out": "", "status": "1"}.items():
            (log / f"{node}.{suffix}").write_text(text)
    command = node_line.answers_command(log)

    collect(nodes, command=command, fanout=2, timeout=30, progress=False)

    spans = [tuple(map(float, (log / f"{n}.ran").read_text().split())) for n in nodes]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2, f"{most} commands overlapped with fanout 2"


def test_an_inventory_naming_another_node_is_kept_as_reported(fake_command: str) -> None:
    (inv,) = collect(["alias7"], command=fake_command, progress=False)
    assert inv.node == "ALIAS7" and inv.error is None and inv.held[0].job_id == 1007


def test_a_pretty_printed_inventory_is_accepted(fake_command: str) -> None:
    (inv,) = collect(["pretty3"], command=fake_command, progress=False)
    assert inv.error is None and inv.node == "pretty3"


@pytest.mark.parametrize(
    ("node", "error"),
    [("twice1", "printed 2 inventories, expected one"), ("empty1", "printed no inventory")],
)
def test_a_node_must_print_exactly_one_inventory(fake_command: str, node: str, error: str) -> None:
    (inv,) = collect([node], command=fake_command, progress=False)
    assert (inv.node, inv.error) == (node, error)


def test_a_repeated_node_is_collected_once(fake_command: str) -> None:
    results = collect(["ok2", "ok1", "ok2"], command=fake_command, progress=False)
    assert [inv.node for inv in results] == ["ok2", "ok1"]


def test_a_node_name_a_shell_would_interpret_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    nodes = ["good1", f"x;touch {marker}", "-oProxyCommand=touch", "$(touch)"]

    results = collect(nodes, command="echo %h", progress=False)

    assert not marker.exists()
    assert [inv.node for inv in results] == nodes
    assert results[0].error is not None
    assert results[0].error.startswith("printed no valid inventory")  # it ran: echo is no inventory
    for inv in results[1:]:
        assert inv.error is not None and "not run" in inv.error


def test_a_compound_template_still_runs_once_per_node(fake_command: str) -> None:
    results = collect(["ok1", "fail2"], command=fake_command + " | cat", progress=False)
    assert results[0].error is None and results[0].node == "ok1"
    # The pipeline's status is cat's: the failure shows as output that is no inventory.
    assert results[1].error == "printed no inventory"


def test_the_progress_bar_changes_nothing_but_stderr(fake_command: str) -> None:
    results = collect(["ok1", "ok2", "fail3"], command=fake_command, progress=True)
    assert [inv.error is None for inv in results] == [True, True, False]


@pytest.mark.parametrize(
    ("command", "complaint"),
    [
        ("ssh %hosts spurctl node-inventory", "%hosts"),
        ("spurctl node-inventory", "does not name the node"),
        ("echo 50% %h", "not a valid template"),
        ("ssh %hostname x", "not a valid template"),
    ],
)
def test_a_command_template_that_cannot_run_once_per_node_is_refused(
    command: str, complaint: str
) -> None:
    with pytest.raises(SpurctlError, match=complaint):
        check_command(command)
    with pytest.raises(SpurctlError):
        collect(["n1"], command=command, progress=False)


# -- the command line, run for real ---------------------------------------------------------


def fixture_node(tmp_path: Path) -> tuple[Path, Path]:
    """A node with job 4711 in a cgroup and a process carrying its id."""
    cg, proc = tmp_path / "spur", tmp_path / "proc"
    job = cg / "job_4711"
    job.mkdir(parents=True)
    (job / "cpuset.cpus.effective").write_text("0-15\n")
    (job / "memory.max").write_text(f"{64 * 1024**3}\n")
    (job / "cgroup.procs").write_text("81234\n")
    (proc / "81234").mkdir(parents=True)
    (proc / "81234" / "environ").write_bytes(b"SPUR_JOB_ID=4711\0ROCR_VISIBLE_DEVICES=0,1\0")
    (proc / "stat").write_text("btime 1780000000\n")
    return cg, proc


def test_node_inventory_prints_one_json_line_for_the_node(tmp_path: Path) -> None:
    cg, proc = fixture_node(tmp_path)

    run = run_cli(
        "node-inventory", "--cgroup-root", str(cg), "--proc-root", str(proc), "--hostname", "gpu017"
    )

    assert run.returncode == 0, run.stderr
    assert run.stdout.count("\n") == 1
    (inv,) = parse_inventory_text(run.stdout, name="stdout")
    assert (inv.node, inv.source, inv.error) == ("gpu017", "cgroup+proc", None)
    (held,) = inv.held
    assert (held.job_id, held.cpus, held.memory_mb, held.gpus, held.pids) == (
        4711,
        16,
        65536,
        (0, 1),
        (81234,),
    )


def test_node_inventory_cuts_a_cgroup_nested_past_its_depth_and_reports_every_other_holding(
    tmp_path: Path,
) -> None:
    cg, proc = fixture_node(tmp_path)
    job = cg / "job_30"
    shallow = deepest = job / "step_0" / "d"
    shallow.mkdir(parents=True)
    for _ in range(1_200):  # far past any recursion limit (pathlib's mkdir recurses too)
        deepest /= "d"
        deepest.mkdir()
    (shallow / "cgroup.procs").write_text("555\n")
    (deepest / "cgroup.procs").write_text("999\n")
    try:
        run = run_cli(
            "node-inventory", "--cgroup-root", str(cg), "--proc-root", str(proc),
            "--hostname", "gpu017",
        )  # fmt: skip
    finally:  # bottom up: shutil.rmtree (pytest's clean-up) recurses, and would overflow
        (deepest / "cgroup.procs").unlink()
        while deepest != shallow:
            deepest.rmdir()
            deepest = deepest.parent

    assert run.returncode == 0, run.stderr
    (inv,) = parse_inventory_text(run.stdout, name="stdout")
    held = {h.job_id: h for h in inv.held}
    assert sorted(held) == [30, 4711] and held[4711].pids == (81234,)
    assert held[30].pids == (555,)  # what lies within the depth is read; 999 is below it
    (warning,) = [line for line in run.stderr.splitlines() if "cgroup" in line]
    assert warning.startswith("spurctl: warning: job 30's cgroup ") and str(job) in warning
    assert "levels deep" in warning and "not read" in warning


def test_node_inventory_writes_the_document_to_a_file_and_defaults_to_the_host_name(
    tmp_path: Path,
) -> None:
    import socket

    cg, proc = fixture_node(tmp_path)
    out = tmp_path / "inv.json"

    run = run_cli(
        "node-inventory", "--cgroup-root", str(cg), "--proc-root", str(proc), "-o", str(out)
    )

    assert run.returncode == 0 and run.stdout == ""
    (inv,) = parse_inventory_text(out.read_text(), name=str(out))
    assert inv.node == socket.gethostname()


def test_node_inventory_does_not_count_itself_as_the_job_it_runs_in(tmp_path: Path) -> None:
    # `srun spurctl node-inventory` runs inside a job: the scanner is not that job's work.
    run = run_cli(
        "node-inventory",
        "--cgroup-root",
        str(tmp_path / "absent"),
        env={"SPUR_JOB_ID": "3999999002", "SLURM_JOB_ID": "3999999002"},
    )

    assert run.returncode == 0, run.stderr
    (inv,) = parse_inventory_text(run.stdout, name="stdout")
    assert inv.source == "proc"
    assert 3999999002 not in {h.job_id for h in inv.held}


def test_node_inventory_with_a_wrong_proc_root_exits_2_with_one_line(tmp_path: Path) -> None:
    run = run_cli("node-inventory", "--proc-root", str(tmp_path / "nope"))
    assert run.returncode == 2
    assert run.stderr.startswith("spurctl: error: cannot list") and run.stderr.count("\n") == 1


def test_collect_cli_writes_json_lines_and_exits_1_when_a_node_failed(fake_command: str) -> None:
    run = run_cli(
        "collect", "--nodes", "ok[1-3],fail7", "--command", fake_command, "--node-timeout", "20"
    )

    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    docs = [json.loads(line) for line in lines]
    assert [d["node"] for d in docs] == ["fail7", "ok1", "ok2", "ok3"]
    assert docs[0]["error"] == "command exited with status 3: boom on fail7"
    assert all(d["error"] is None for d in docs[1:])
    # No progress bar when stderr is not a terminal: only the summary.
    assert run.stderr.splitlines() == [
        "collected 3 of 4 nodes",
        "ok (3): ok[1-3]",
        "failed (1): fail7",
        "  fail7: command exited with status 3: boom on fail7",
    ]


def test_a_nodes_output_naming_another_node_is_its_own_error_never_that_nodes_record(
    fake_command: str,
) -> None:
    run = run_cli(
        "collect", "--nodes", "ok1,liar3", "--command", fake_command, "--node-timeout", "20"
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    docs = {d["node"]: d for d in map(json.loads, run.stdout.splitlines())}
    assert sorted(docs) == ["liar3", "ok1"]
    assert docs["liar3"]["error"] == "liar3's command printed an inventory of ok1"
    assert docs["ok1"]["error"] is None and [h["job_id"] for h in docs["ok1"]["held"]] == [1001]
    assert "failed (1): liar3" in run.stderr.splitlines()


def test_audit_collect_keeps_a_nodes_holding_when_another_node_prints_its_name(
    lone_controller: SimCluster, fake_command: str
) -> None:
    run = run_cli(
        "audit", "--controller", lone_controller.controller_address, "--nodes", "ok1,liar3",
        "--collect", "--command", fake_command, "--format", "json",
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    findings = json.loads(run.stdout)["findings"]
    assert any(f["node"] == "ok1" and f["job_id"] == 1001 for f in findings), findings
    (liar,) = [f for f in findings if f["node"] == "liar3"]
    assert liar["kind"] == "agent-unreachable"
    assert "printed an inventory of ok1" in liar["reason"]


def test_collect_cli_exits_0_when_every_node_answered(tmp_path: Path, fake_command: str) -> None:
    out = tmp_path / "inventories.jsonl"

    run = run_cli(
        "collect",
        "--nodes",
        "ok[01-05]",
        "--command",
        fake_command,
        "--fanout",
        "3",
        "-o",
        str(out),
    )

    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    invs = list(parse_inventory_text(out.read_text(), name=str(out)))
    assert [inv.node for inv in invs] == [f"ok{i:02d}" for i in range(1, 6)]
    assert "collected 5 of 5 nodes" in run.stderr


@pytest.mark.parametrize(
    ("hostlist", "complaint"),
    [
        ("gpu[001-", "bad hostlist"),
        ("gpu[3-1]", "bad hostlist"),
        ("", "names no node"),
        ("a b", "bad hostlist"),
        ("-oProxyCommand=x", "bad hostlist"),
    ],
)
def test_collect_cli_refuses_a_bad_hostlist_with_exit_2(hostlist: str, complaint: str) -> None:
    run = run_cli("collect", "--nodes", hostlist, "--command", "echo %h")

    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith("spurctl: error:") and complaint in run.stderr
    assert run.stderr.count("\n") == 1


def test_collect_cli_refuses_a_template_without_the_node_with_exit_2() -> None:
    run = run_cli("collect", "--nodes", "n[1-2]", "--command", "spurctl node-inventory")
    assert run.returncode == 2 and "put %h where the node name goes" in run.stderr


@pytest.mark.parametrize("command", ["node-inventory", "collect"])
def test_each_command_help_has_a_summary_and_an_example(command: str) -> None:
    run = run_cli(command, "--help")
    assert run.returncode == 0
    assert f"spurctl {command}" in run.stdout.split("Example:", 1)[1]


def test_one_nodes_unparseable_output_is_its_error_record_and_the_others_go_on(
    tmp_path: Path, fake_command: str, lone_controller: SimCluster
) -> None:
    """Issue 13 item 9: an inventory nested 100,000 deep is that node's error, never a crash."""
    run = run_cli(
        "collect", "--nodes", "ok[1-2],deep1", "--command", fake_command, "--node-timeout", "20"
    )
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr
    docs = {d["node"]: d for d in map(json.loads, run.stdout.splitlines())}
    assert set(docs) == {"ok1", "ok2", "deep1"}
    assert docs["deep1"]["error"].startswith("printed no valid inventory")
    assert "nested too deeply" in docs["deep1"]["error"]
    assert docs["ok1"]["error"] is None and docs["ok2"]["error"] is None
    assert "failed (1): deep1" in run.stderr

    # The same document from a file: one clear line, exit 2.
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"schema": "spurctl.inventory/v1", "held": ' + "[" * 100_000 + "}")
    address = lone_controller.controller_address
    proc = run_cli("audit", "--controller", address, "--inventory", str(deep))
    one_line_error(proc, str(deep), "nested too deeply")


def test_collects_old_timeout_spelling_still_limits_each_node_with_one_warning(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    started.mkdir()  # where the stand-in marks that it began
    hang = node_line.hanging_command(started)
    old = run_cli("collect", "--nodes", "hang1", "--command", hang, "--timeout", "0.5")
    assert old.returncode == 1, old.stderr
    (doc,) = [json.loads(line) for line in old.stdout.splitlines()]
    assert doc["error"] == "no answer within 0.5 s; command killed"
    warning, *summary = old.stderr.splitlines()
    assert warning == (
        "spurctl: warning: collect --timeout is the old name of --node-timeout (each "
        "node's limit; in every other command --timeout is the RPC deadline): use --node-timeout"
    )
    assert summary[0] == "collected 0 of 1 node"
    new = run_cli("collect", "--nodes", "hang1", "--command", hang, "--node-timeout", "0.5")
    assert new.returncode == 1 and "warning" not in new.stderr, new.stderr
    assert json.loads(new.stdout)["error"] == "no answer within 0.5 s; command killed"
    both = run_cli("collect", "-w", "n1", "--timeout", "5", "--node-timeout", "5")
    one_line_error(both, "give --node-timeout only")
