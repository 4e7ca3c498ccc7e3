"""node_scan with spurstepd sessions (Spur #754): descriptors bound to /proc by pid and start.

The fixtures mirror upstream ROCm/spur crates/spurd/src/stepd.rs (read in the code
index; not in the v0.8.0 tag nor main at 4cc3da8): `StepdStore` keeps
`<state-dir>/runtime/<job>.<attempt>.<step>/descriptor.json`, whose `pid` and
`process_start_ticks` are the supervisor's own (`run_process`: std::process::id()
and /proc/<pid>/stat field 22), `workload_pid`/`workload_start_ticks` the job's
process, `cgroup_path` its `job_<id>_<attempt>` cgroup (crates/spurd/src/executor.rs
`cgroup_path_for`); `stepd_liveness` calls it live exactly when the ticks still
match. The step id of a batch job is STEP_BATCH, 0xFFFFFFFE (spur-core step.rs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from spurctl.holdings import Holding, Inventory, Session, SessionBinding
from spurctl.sources.inventory_document import inventory_from_dict, inventory_to_dict
from tests.unit.test_node_scan_layouts import Node, by_id, spurd_env, started

BATCH = 0xFFFF_FFFE
EXTERN = 0xFFFF_FFFD
SPURD_TICKS = 5000  # spurd restarted after every run below began


class StepdNode(Node):
    """A fixture node whose spurd keeps its state in tmp/var/spool/spur (the default)."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.state = tmp / "var" / "spool" / "spur"
        self.process(
            2201, {}, comm="spurd", ticks=SPURD_TICKS, cgroup="/system.slice/spurd.service"
        )

    def supervisor(self, pid: int, ticks: int, job_id: int, attempt: int) -> None:
        """spurstepd, double-forked (parent: init), with the command line spurd gives it."""
        self.process(pid, {}, comm="spurstepd", ppid=1, ticks=ticks)
        args = ["spurstepd", "/var/spool/spur", str(job_id), str(attempt), "/tmp/spec.json"]
        (self.proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in args))

    def descriptor(
        self,
        job_id: int,
        attempt: int,
        step: int = BATCH,
        *,
        pid: int,
        ticks: int,
        workload: tuple[int, int] = (0, 0),
        cgroup: str = "",
        state: Path | None = None,
        **fields: Any,
    ) -> Path:
        session = (state or self.state) / "runtime" / f"{job_id}.{attempt}.{step}"
        session.mkdir(parents=True, exist_ok=True)
        doc = {
            "format_version": 1,
            "job_id": job_id,
            "run_attempt": attempt,
            "step_id": step,
            "pid": pid,
            "process_start_ticks": ticks,
            "socket_path": str(session / "runtime.sock"),
            "cgroup_path": cgroup,
            "capability": "4f7c3b1e-capability",
            "owner": "alice",
            "uid": 1000,
            "gid": 1000,
            "work_dir": "/home/alice",
            "workload_pid": workload[0],
            "workload_start_ticks": workload[1],
            **fields,
        }
        (session / "descriptor.json").write_text(json.dumps(doc))
        return session

    def batch_run(self, job_id: int, attempt: int, *, supervisor: int, workload: int) -> None:
        """A batch step as spurd launches it: supervisor, workload in job_<id>_<attempt>."""
        self.supervisor(supervisor, 1400, job_id, attempt)
        rel = f"spur/job_{job_id}_{attempt}"
        self.job_cgroup(rel, cpuset_cpus="0-3", cpuset_cpus_effective="0-3", cpu_max="max 100000")
        self.process(workload, spurd_env(job_id), ppid=supervisor, ticks=1500, cgroup="/" + rel)
        self.descriptor(
            job_id,
            attempt,
            pid=supervisor,
            ticks=1400,
            workload=(workload, 1500),
            cgroup=f"/sys/fs/cgroup/{rel}",
        )

    def scan_sessions(self, **kw: Any) -> Inventory:
        return self.scan(state_dir=self.state, **kw)


def test_a_live_descriptor_binds_its_supervisor_and_workload_and_gives_the_attempt(
    tmp_path: Path,
) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    h = by_id(node.scan_sessions())[4711]
    assert h.sessions == (
        Session(2, BATCH, 4900, SessionBinding.LIVE, "", 5100, "/sys/fs/cgroup/spur/job_4711_2"),
    )
    assert h.attempt == 2 and h.supervisors == (4900,)
    assert h.pids == (4900, 5100)
    assert h.traces == ("cgroup", "process", "session")
    # #762: cpu.max unset ("max"), so the CPUs are the cpuset's.
    assert h.cpus == 4
    # The run began when its supervisor did, before the restarted spurd.
    assert h.started_at == started(1400)


def test_an_allocation_only_job_is_visible_by_its_session_alone(tmp_path: Path) -> None:
    # salloc / standalone srun: an extern-step supervisor with no workload and no cgroup
    # of its own (stepd.rs: `allocation_only` launches nothing).
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 88, 0)
    node.descriptor(88, 0, EXTERN, pid=4900, ticks=1400)
    assert 88 not in by_id(node.scan())  # without the sessions nothing shows it
    h = by_id(node.scan_sessions())[88]
    assert h.pids == (4900,) and h.supervisors == (4900,) and h.live
    assert h.traces == ("process", "session")
    assert h.sessions[0].binding is SessionBinding.LIVE and h.sessions[0].workload is None


def test_a_reused_pid_makes_the_descriptor_stale_and_says_what_runs_there(
    tmp_path: Path,
) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    # The supervisor died; its pid now belongs to a shell that started much later.
    (node.proc / "4900" / "stat").write_text(
        "4900 (bash) S 1 " + " ".join(["0"] * 17) + " 9000 " + " ".join(["0"] * 30) + "\n"
    )
    (node.proc / "4900" / "comm").write_text("bash\n")
    h = by_id(node.scan_sessions())[4711]
    (session,) = h.sessions
    assert session.binding is SessionBinding.STALE
    assert "pid 4900" in session.why and "tick 9000" in session.why and "1400" in session.why
    assert "reused" in session.why
    # The workload still runs with its recorded start: it is still bound to the run.
    assert session.workload == 5100 and 5100 in h.pids
    assert 4900 not in h.pids and h.supervisors == ()


def test_a_supervisor_that_is_gone_leaves_a_stale_session(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    for name in ("stat", "comm", "environ", "cmdline"):
        (node.proc / "4900" / name).unlink()
    (node.proc / "4900").rmdir()
    (session,) = by_id(node.scan_sessions())[4711].sessions
    assert session.binding is SessionBinding.STALE and session.why == "pid 4900 no longer runs"


def test_two_sessions_claiming_one_process_are_refused_naming_what_was_seen(
    tmp_path: Path,
) -> None:
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 7, 1)
    node.descriptor(7, 1, pid=4900, ticks=1400)
    node.descriptor(9, 1, pid=4900, ticks=1400)
    inv = node.scan_sessions()
    assert 7 not in by_id(inv) and 9 not in by_id(inv)  # neither binding is trusted
    assert sorted(r.job_id for r in inv.session_refusals) == [7, 9]
    for r in inv.session_refusals:
        assert "pid 4900 (start tick 1400)" in r.why
        assert f"7.1.{BATCH}" in r.why and f"9.1.{BATCH}" in r.why
        assert "cannot be told" in r.why


def test_a_descriptor_that_disagrees_with_its_directory_is_refused(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 7, 1)
    session = node.descriptor(7, 1, pid=4900, ticks=1400)
    doc = json.loads((session / "descriptor.json").read_text())
    (session / "descriptor.json").write_text(json.dumps({**doc, "job_id": 8}))
    inv = node.scan_sessions()
    (refusal,) = inv.session_refusals
    assert refusal.job_id == 7 and refusal.path == str(session)
    assert f"names job 8 attempt 1 step {BATCH}" in refusal.why
    assert 7 not in by_id(inv) and 8 not in by_id(inv)


def test_live_sessions_naming_two_attempts_leave_the_attempt_to_the_cgroup(
    tmp_path: Path,
) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    # The first attempt's supervisor is still tearing down (its epilog runs).
    node.supervisor(4800, 1300, 4711, 1)
    node.descriptor(4711, 1, pid=4800, ticks=1300)
    inv = node.scan_sessions()
    h = by_id(inv)[4711]
    assert {s.attempt for s in h.sessions} == {1, 2}
    assert h.attempt == 2  # job_4711_2, the cgroup with processes, as without sessions
    (refusal,) = inv.session_refusals
    assert "name attempts 1, 2" in refusal.why and refusal.job_id == 4711


def test_a_workload_in_another_jobs_cgroup_refuses_the_binding(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 7, 1)
    node.job_cgroup("spur/job_9_1")
    node.process(5100, spurd_env(9), ppid=4900, ticks=1500, cgroup="/spur/job_9_1")
    node.descriptor(7, 1, pid=4900, ticks=1400, workload=(5100, 1500))
    inv = node.scan_sessions()
    (refusal,) = inv.session_refusals
    assert "pid 5100 sits in job 9's cgroup, not job 7's" in refusal.why
    assert by_id(inv)[9].pids == (5100,) and 7 not in by_id(inv)


def test_a_runtime_directory_others_can_write_is_not_read(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    (node.state / "runtime").chmod(0o777)
    inv = node.scan_sessions()
    (refusal,) = inv.session_refusals
    assert "writable by group or others (mode 777)" in refusal.why
    h = by_id(inv)[4711]
    assert h.sessions == () and h.attempt == 2  # the cgroup still shows it


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"format_version": 1, "job_id": 7}', "run_attempt is 'None'"),
        (json.dumps({"format_version": 1, "job_id": 7, "run_attempt": 1, "pid": -3}), "pid"),
        (" " * 70_000, "larger than 65536 bytes"),
    ],
)
def test_a_malformed_descriptor_is_refused_and_the_scan_goes_on(
    tmp_path: Path, text: str, said: str
) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    session = node.descriptor(7, 1, pid=4900, ticks=1400)
    (session / "descriptor.json").write_text(text)
    inv = node.scan_sessions()
    (refusal,) = inv.session_refusals
    assert said in refusal.why and refusal.job_id == 7
    assert by_id(inv)[4711].sessions[0].binding is SessionBinding.LIVE


def test_a_newer_descriptor_format_is_refused(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 7, 1)
    node.descriptor(7, 1, pid=4900, ticks=1400, format_version=2)
    (refusal,) = node.scan_sessions().session_refusals
    assert "format_version 2" in refusal.why


def test_a_process_that_is_not_spurstepd_is_no_supervisor(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.process(4900, {}, comm="sleep", ppid=1, ticks=1400)
    node.descriptor(7, 1, pid=4900, ticks=1400)
    inv = node.scan_sessions()
    (refusal,) = inv.session_refusals
    assert "is 'sleep', not spurstepd" in refusal.why and 7 not in by_id(inv)


def test_an_epilog_under_a_live_supervisor_keeps_the_job_held(tmp_path: Path) -> None:
    # Under spurstepd the node epilog runs in the supervisor, before spurd is told the
    # job completed (stepd.rs run_process): the job is still held while it runs.
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 4711, 2)
    node.descriptor(4711, 2, pid=4900, ticks=1400)
    node.process(5300, spurd_env(4711, SPUR_SCRIPT_CONTEXT="epilog_slurmd"), ppid=4900, ticks=4000)
    assert 4711 not in by_id(node.scan())  # the epilog alone is no holding
    h = by_id(node.scan_sessions())[4711]
    assert h.supervisors == (4900,) and 5300 not in h.pids


def test_the_state_directory_a_live_supervisor_names_is_read(tmp_path: Path) -> None:
    # spurd started with --state-dir /srv/spur: its supervisors carry it as argv[1].
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 4711, 2)
    args = [b"spurstepd", b"/srv/spur", b"4711", b"2", b"/srv/spur/spec.json"]
    (node.proc / "4900" / "cmdline").write_bytes(b"\0".join(args))
    node.descriptor(4711, 2, pid=4900, ticks=1400, state=tmp_path / "srv" / "spur")
    h = by_id(node.scan_sessions())[4711]
    assert h.sessions[0].binding is SessionBinding.LIVE and h.attempt == 2


def test_without_a_state_dir_no_session_is_read(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    h = by_id(node.scan())[4711]
    assert h.sessions == () and "session" not in h.traces


def test_sessions_and_refusals_survive_the_inventory_document(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.batch_run(4711, 2, supervisor=4900, workload=5100)
    node.supervisor(4950, 1450, 7, 1)
    node.descriptor(7, 1, pid=4950, ticks=1450)
    node.descriptor(9, 1, pid=4950, ticks=1450)
    inv = node.scan_sessions()
    doc = json.loads(json.dumps(inventory_to_dict(inv)))
    held = doc["held"][[h["job_id"] for h in doc["held"]].index(4711)]
    assert held["sessions"] == [
        {
            "attempt": 2,
            "step": BATCH,
            "supervisor": 4900,
            "binding": "live",
            "workload": 5100,
            "cgroup": "/sys/fs/cgroup/spur/job_4711_2",
        }
    ]
    assert len(doc["session_refusals"]) == 2
    back = inventory_from_dict(doc, where="test")
    assert back.held == inv.held and back.session_refusals == inv.session_refusals


def test_a_document_without_sessions_reads_as_before() -> None:
    doc = {"schema": "spurctl.inventory/v1", "node": "gpu017", "held": [{"job_id": 4711}]}
    inv = inventory_from_dict(doc, where="old")
    assert inv.held == (Holding(job_id=4711),) and inv.session_refusals == ()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_descriptor_is_refused_as_unreadable(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    node.supervisor(4900, 1400, 7, 1)
    session = node.descriptor(7, 1, pid=4900, ticks=1400)
    (session / "descriptor.json").chmod(0o000)
    (refusal,) = node.scan_sessions().session_refusals
    assert "cannot be read" in refusal.why and "permission denied" in refusal.why
