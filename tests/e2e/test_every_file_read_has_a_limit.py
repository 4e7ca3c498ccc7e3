"""Every file spurctl reads has a limit, and refuses past it: one line, exit 2, in seconds.

Each document is given twice: as /dev/zero (endless, and one endless line) and as a
regular file one byte over its limit (sparse: it costs no disk). Every run has a
deadline: a read without end fails the test at it instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.sources import bounded
from spurctl_sim import SimCluster, incident
from tests.cli import clean_env, home_for, one_line_error, spurctl_argv

DEADLINE_S = 60.0  # /dev/zero read to the largest limit (1 GiB) takes a second or two
# And a memory limit: a read without end then fails at once (MemoryError), before it can
# take the machine's memory in the seconds to its deadline.
MEMORY_LIMIT = 6 * bounded.GIB
ZERO = Path("/dev/zero")


def limited(argv: list[str]) -> list[str]:
    """`argv` under the memory limit (a shell's ulimit: a preexec_fn would fork this process,
    whose gRPC threads then abort the child)."""
    kib = MEMORY_LIMIT // bounded.KIB
    return ["/bin/sh", "-c", f'ulimit -v {kib} && exec "$@"', "sh", *argv]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path]]:
    with SimCluster(incident(), agents=False) as cluster:
        inventory = cluster.write_inventories(tmp_path_factory.mktemp("inv") / "inv.jsonl")
        yield cluster, inventory


def run(
    *args: str, home: Path, env: dict[str, str] | None = None, stdin: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """spurctl with a deadline (subprocess.run kills it there, and the test fails)."""
    with open(stdin or os.devnull, "rb") as given:
        return subprocess.run(
            limited(spurctl_argv(*args)), capture_output=True, text=True, timeout=DEADLINE_S,
            env=clean_env(home_for(home), **(env or {})), stdin=given,
        )  # fmt: skip


def over(tmp_path: Path, limit: bounded.Limit, name: str = "big") -> Path:
    """A regular file one byte over `limit`, sparse."""
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(limit.size + 1)
    return path


def refused(proc: subprocess.CompletedProcess[str], limit: bounded.Limit, given: Path) -> str:
    line = one_line_error(proc, str(given), bounded.size_text(limit.size), limit.noun)
    assert "internal error" not in line
    return line


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
def test_a_saved_plan_has_a_limit(sim: tuple[SimCluster, Path], tmp_path: Path, kind: str) -> None:
    cluster, inventory = sim
    plan = ZERO if kind == "dev-zero" else over(tmp_path, bounded.PLAN)
    proc = run(
        "reclaim", "--plan", str(plan), "--inventory", str(inventory), "--yes",
        "--controller", cluster.controller_address, home=tmp_path,
    )  # fmt: skip
    refused(proc, bounded.PLAN, plan)
    assert cluster.cancels == []


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
def test_a_snapshot_has_a_limit(sim: tuple[SimCluster, Path], tmp_path: Path, kind: str) -> None:
    _, inventory = sim
    snapshot = ZERO if kind == "dev-zero" else over(tmp_path, bounded.SNAPSHOT)
    proc = run("audit", "--snapshot", str(snapshot), "--inventory", str(inventory), home=tmp_path)
    refused(proc, bounded.SNAPSHOT, snapshot)


def test_an_endless_inventory_line_ends_at_the_line_limit(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, _ = sim
    ctl = ("--controller", cluster.controller_address)
    line = bounded.size_text(bounded.INVENTORY.line or 0)
    for given in (ZERO, over(tmp_path, bounded.Limit("", 100 * bounded.MIB, ""))):
        proc = run("audit", "--inventory", str(given), *ctl, home=tmp_path)
        one_line_error(proc, str(given), "line 1", f"longer than {line}")
    # Standard input is read the same way.
    proc = run("audit", "--inventory", "-", *ctl, home=tmp_path, stdin=ZERO)
    one_line_error(proc, "<stdin>", "line 1", f"longer than {line}")


def test_inventories_over_their_whole_limit_are_refused_by_their_size(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, _ = sim
    big = over(tmp_path, bounded.INVENTORY, "big.jsonl")
    proc = run("audit", "--inventory", str(big), "--controller", cluster.controller_address,
               home=tmp_path)  # fmt: skip
    refused(proc, bounded.INVENTORY, big)


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
@pytest.mark.parametrize("option", ["--conf", "--tls-ca", "SPURCTL_CONFIG"])
def test_connection_files_have_a_limit(
    sim: tuple[SimCluster, Path], tmp_path: Path, option: str, kind: str
) -> None:
    cluster, inventory = sim
    limit = {"--conf": bounded.CONF, "--tls-ca": bounded.TLS_CA}.get(option, bounded.USER_CONFIG)
    given = ZERO if kind == "dev-zero" else over(tmp_path, limit)
    named = {"SPURCTL_CONFIG": str(given)} if option == "SPURCTL_CONFIG" else {}
    flag = [] if named else [option, str(given)]
    proc = run(
        "audit", "--inventory", str(inventory), "--controller", cluster.controller_address,
        *flag, home=tmp_path, env=named,
    )  # fmt: skip
    refused(proc, limit, given)


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
def test_a_key_file_has_a_limit(sim: tuple[SimCluster, Path], tmp_path: Path, kind: str) -> None:
    cluster, inventory = sim
    key = ZERO if kind == "dev-zero" else over(tmp_path, bounded.KEY)
    proc = run(
        "reclaim", "--node", "gpu003", "--dry-run", "--inventory", str(inventory),
        "--controller", cluster.controller_address, "--jwt-key-file", str(key), home=tmp_path,
    )  # fmt: skip
    refused(proc, bounded.KEY, key)


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
def test_explains_agent_map_has_a_limit(
    sim: tuple[SimCluster, Path], tmp_path: Path, kind: str
) -> None:
    cluster, inventory = sim
    agent_map = ZERO if kind == "dev-zero" else over(tmp_path, bounded.AGENT_MAP)
    proc = run(
        "explain", "gpu003", "--inventory", str(inventory), "--agent-map", str(agent_map),
        "--controller", cluster.controller_address, home=tmp_path,
    )  # fmt: skip
    refused(proc, bounded.AGENT_MAP, agent_map)


def test_a_journal_over_its_limit_is_refused_by_its_size(tmp_path: Path) -> None:
    journal = over(tmp_path, bounded.JOURNAL, "journal.jsonl")
    refused(run("journal", "--journal", str(journal), home=tmp_path), bounded.JOURNAL, journal)
    # A device holds no run (read as such, never read without end).
    one_line_error(run("journal", "--journal", str(ZERO), home=tmp_path), "not a regular file")


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
def test_a_token_file_over_its_limit_is_ignored_saying_so(
    sim: tuple[SimCluster, Path], tmp_path: Path, kind: str
) -> None:
    cluster, inventory = sim
    spur = tmp_path / "home" / ".spur"
    spur.mkdir(parents=True)
    token = spur / "token"
    if kind == "dev-zero":  # /dev/zero itself is 0666, which the token file check refuses
        try:
            os.mknod(token, 0o600 | 0o020000, os.makedev(1, 5))  # a character device: zero
        except PermissionError:
            pytest.skip("no CAP_MKNOD here: cannot make a 0600 /dev/zero")
    else:
        over(spur, bounded.KEY, "token").chmod(0o600)
    proc = run(
        "nodes", "--inventory", str(inventory), "--controller", cluster.controller_address,
        home=tmp_path / "home",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (warning,) = [line for line in proc.stderr.splitlines() if str(token) in line]
    assert warning.startswith(f"spurctl: warning: ignoring {token}: ")
    assert "larger than 64 KiB" in warning


def test_node_inventory_skips_a_proc_or_cgroup_file_without_end(tmp_path: Path) -> None:
    cgroups, proc = tmp_path / "spur", tmp_path / "proc"
    job = cgroups / "job_4711"
    job.mkdir(parents=True)
    (job / "cgroup.procs").write_text("81234\n")
    endless = cgroups / "job_4712"
    endless.mkdir()
    (endless / "cgroup.procs").symlink_to(ZERO)
    (endless / "memory.max").symlink_to(ZERO)
    (proc / "81234").mkdir(parents=True)
    (proc / "81234" / "environ").write_bytes(b"SPUR_JOB_ID=4711\0")
    (proc / "666").mkdir()
    (proc / "666" / "environ").symlink_to(ZERO)
    (proc / "667").mkdir()
    with open(proc / "667" / "environ", "wb") as fh:
        fh.truncate(2 * bounded.NODE_FILE.size)  # NUL bytes, as many as there are
    (proc / "stat").write_text("btime 1780000000\n")
    proc_run = run(
        "node-inventory", "--cgroup-root", str(cgroups), "--proc-root", str(proc),
        "--hostname", "gpu017", home=tmp_path / "home",
    )  # fmt: skip
    assert proc_run.returncode == 0, proc_run.stderr
    held = {h["job_id"]: h for h in json.loads(proc_run.stdout)["held"]}
    assert sorted(held) == [4711, 4712]
    assert held[4711]["pids"] == [81234] and held[4712]["pids"] == []
    assert held[4712]["memory_mb"] is None


def test_a_scenario_file_has_a_limit(tmp_path: Path) -> None:
    # In a process of its own, with the deadline and memory limit of the others.
    check = (
        "import sys; from pathlib import Path; from spurctl.errors import SpurctlError; "
        "from spurctl_sim.scenario import read_scenario\n"
        "try: read_scenario(Path(sys.argv[1]))\n"
        "except SpurctlError as exc: print(exc)"
    )
    for given in (ZERO, over(tmp_path, bounded.SCENARIO)):
        proc = subprocess.run(
            limited([sys.executable, "-c", check, str(given)]), capture_output=True, text=True,
            timeout=DEADLINE_S, env=clean_env(home_for(tmp_path / "home")),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "larger than 256 MiB, more than a simulated cluster's scenario" in proc.stdout


@pytest.mark.parametrize("kind", ["dev-zero", "over-limit"])
def test_a_topology_file_has_a_limit(tmp_path: Path, kind: str) -> None:
    # ClusterShell is handed the text spurctl read, never the path to read without end.
    topology = ZERO if kind == "dev-zero" else over(tmp_path, bounded.TOPOLOGY, "topology.conf")
    proc = run(
        "collect", "--nodes", "n[1-2]", "--topology", str(topology), "-o", str(tmp_path / "o"),
        home=tmp_path,
    )  # fmt: skip
    refused(proc, bounded.TOPOLOGY, topology)
    assert not (tmp_path / "o").exists()
