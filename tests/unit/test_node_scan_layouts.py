"""node_scan on each spurd layout: fixture /sys/fs/cgroup and /proc trees modelled on real spurd.

Which upstream code each fixture mirrors (ROCm/spur, commit 4cc3da843d77, 2026-08-22,
the newest snapshot fetchable here; docs/node-evidence.md has the detail):

- `spur_main_node`: crates/spurd/src/executor.rs `setup_cgroup` (a fixed
  CGROUP_ROOT /sys/fs/cgroup/spur, `job_<id>`, cpu.max, memory.max only when
  > 0, memory.oom.group, pids.max, cpuset.cpus) and `create_job_spool_dir`
  (/var/spool/spur/job<id>/spur_job.sh); crates/spurd/src/agent_server.rs
  `launch_job` environment (SPUR_JOB_ID + SLURM_ twin, SPUR_TARGET_NODE);
  crates/spur-devices/src/inject.rs (SPUR_JOB_GPUS, one vendor variable).
- `delegated_node`: NOT in that snapshot. The project's notes
  (../shared/SPUR-WIRE.md, "What the agent holds") describe newer spurd:
  `job_<id>_<attempt>` with `step_<n>` children under a root systemd delegates.
  The fixture puts spurd in `system.slice/spurd.service/agent` and its jobs
  beside it, as a delegated unit must (cgroup v2 keeps processes out of inner
  nodes); a second variant keeps them under a `spur` child.
- hooks: crates/spur-core/src/hooks.rs `run_hook` (SPUR_JOB_ID, SPUR_JOB_GPUS,
  SPUR_SCRIPT_CONTEXT = "epilog_slurmd", ...), called from agent_server.rs after
  the job left the running map.
- GPU deny: crates/spur-core/src/task_launch.rs `gpu_deny_visibility` (-1 in
  every vendor variable, HIP_VISIBLE_DEVICES included; SPUR_JOB_GPUS empty) and
  `apply_gpu_bind_env` (per-rank lists in SPUR_JOB_GPUS and the vendor variables).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.errors import DocumentError
from spurctl.model import AgentProcess, Holding, Inventory
from spurctl.node.node_scan import find_cgroup_roots, scan
from spurctl.sources.inventory_document import inventory_from_dict, inventory_to_dict

BTIME = 1_780_000_000
HZ = os.sysconf("SC_CLK_TCK")
NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
MOUNTINFO_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
MOUNTINFO_HYBRID = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


def started(ticks: int) -> datetime:
    return datetime.fromtimestamp(BTIME + ticks / HZ, UTC)


class Node:
    """A fixture node: tmp/sys/fs/cgroup, tmp/proc, tmp/var/spool/spur."""

    def __init__(self, tmp: Path, mountinfo: str = MOUNTINFO_V2, self_cgroup: str = "/") -> None:
        self.sys = tmp
        self.cgroup = tmp / "sys" / "fs" / "cgroup"
        self.proc = tmp / "proc"
        self.spool = tmp / "var" / "spool" / "spur"
        self.proc.mkdir(parents=True)
        (self.proc / "stat").write_text(f"cpu  1 2 3 4\nbtime {BTIME}\n")
        (self.proc / "self").mkdir()
        (self.proc / "self" / "mountinfo").write_text(mountinfo)
        (self.proc / "self" / "cgroup").write_text(f"0::{self_cgroup}\n")

    def process(
        self,
        pid: int,
        env: dict[str, str],
        *,
        comm: str = "python3",
        ppid: int = 1,
        ticks: int = 1000,
        cgroup: str | None = None,
    ) -> None:
        d = self.proc / str(pid)
        d.mkdir()
        (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in env.items()))
        (d / "comm").write_text(comm + "\n")
        rest = ["S", str(ppid)] + ["0"] * 17 + [str(ticks)] + ["0"] * 30
        (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(rest) + "\n")
        if cgroup is not None:
            (d / "cgroup").write_text(f"0::{cgroup}\n")
            procs = self.cgroup.joinpath(*cgroup.strip("/").split("/")) / "cgroup.procs"
            procs.parent.mkdir(parents=True, exist_ok=True)
            old = procs.read_text() if procs.exists() else ""
            procs.write_text(old + f"{pid}\n")

    def job_cgroup(self, rel: str, **files: str) -> Path:
        d = self.cgroup.joinpath(*rel.split("/"))
        d.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (d / name.replace("_", ".")).write_text(text)
        if not (d / "cgroup.procs").exists():
            (d / "cgroup.procs").write_text("")
        return d

    def spool_dir(self, job_id: int) -> Path:
        d = self.spool / f"job{job_id}"
        d.mkdir(parents=True)
        (d / "spur_job.sh").write_text("#!/bin/bash\nsleep 1000\n")
        return d

    def scan(self, cgroup_root: Path | None = None, **kw: object) -> Inventory:
        return scan(
            cgroup_root,
            self.proc,
            "gpu017",
            now=NOW,
            spool_root=self.spool,
            sys_root=self.sys,
            **kw,  # type: ignore[arg-type]
        )


def spurd_env(job_id: int, target: str = "gpu017", **extra: str) -> dict[str, str]:
    """What agent_server.rs launch_job gives a batch job's processes (the parts read)."""
    return {
        "SPUR_JOB_ID": str(job_id),
        "SLURM_JOB_ID": str(job_id),
        "SPUR_TARGET_NODE": target,
        **extra,
    }


def by_id(inv: Inventory) -> dict[int, Holding]:
    return {h.job_id: h for h in inv.held}


# -- Spur main at 4cc3da8: job_<id> under a fixed /sys/fs/cgroup/spur ---------------


def spur_main_node(tmp_path: Path) -> Node:
    node = Node(tmp_path, self_cgroup="/user.slice/user-0.slice/session-4.scope")
    node.process(
        2201, {"PATH": "/usr/bin"}, comm="spurd", ticks=100, cgroup="/system.slice/spurd.service"
    )
    node.job_cgroup(
        "spur/job_4711",
        cpu_max="1600000 100000",
        memory_max="68719476736",
        memory_oom_group="1",
        pids_max="4096",
        cpuset_cpus="0-15",
        cpuset_cpus_effective="0-15",
    )
    node.process(
        81234,
        spurd_env(4711, SPUR_JOB_GPUS="0,1", ROCR_VISIBLE_DEVICES="0,1"),
        ppid=2201,
        ticks=5000,
        cgroup="/spur/job_4711",
    )
    node.spool_dir(4711)
    return node


def test_spur_main_layout_is_read_with_its_evidence_and_the_agent(tmp_path: Path) -> None:
    node = spur_main_node(tmp_path)

    inv = node.scan()

    assert inv.source == "cgroup+proc"
    assert inv.held == (
        Holding(
            job_id=4711,
            cpus=16,
            memory_mb=65536,
            gpus=(0, 1),
            pids=(81234,),
            started_at=started(5000),
            attempt=None,
            traces=("cgroup", "process", "spool"),
            tracked_pids=(81234,),  # spurd's child: its own run
        ),
    )
    assert inv.agent == AgentProcess(pid=2201, started_at=started(100))
    assert inv.target_node == "gpu017" and inv.target_nodes == ("gpu017",)
    assert inv.hostname == "gpu017"


def test_spur_main_layout_on_a_hybrid_host_is_found_at_the_fixed_root(tmp_path: Path) -> None:
    # A hybrid host mounts cgroup v2 at /sys/fs/cgroup/unified; Spur main still
    # writes /sys/fs/cgroup/spur (its CGROUP_ROOT is a constant).
    node = Node(tmp_path, MOUNTINFO_HYBRID)
    node.job_cgroup("spur/job_12")

    roots = find_cgroup_roots(node.proc, None, node.sys, lambda p, e: None)

    assert roots == [node.cgroup / "unified" / "spur", node.cgroup / "spur"]
    assert [h.job_id for h in node.scan().held] == [12]


# -- newer spurd: job_<id>_<attempt>/step_<n> under a delegated root --------------------


@pytest.mark.parametrize("jobs_under", ["", "spur/"])
def test_delegated_root_is_found_from_spurds_own_cgroup(tmp_path: Path, jobs_under: str) -> None:
    node = Node(tmp_path, self_cgroup="/user.slice/user-0.slice/session-4.scope")
    unit = "system.slice/spurd.service"
    node.process(2201, {}, comm="spurd", ticks=100, cgroup=f"/{unit}/agent")
    node.job_cgroup(
        f"{unit}/{jobs_under}job_5121_2",
        cpuset_cpus="4-7",
        cpuset_cpus_effective="4-7",
        memory_max="max",
    )
    node.process(
        9001,
        spurd_env(5121, SPUR_JOB_GPUS="2,3", ROCR_VISIBLE_DEVICES="2"),
        ppid=2201,
        ticks=7000,
        cgroup=f"/{unit}/{jobs_under}job_5121_2/step_0",
    )
    # A second rank of the step, split to the other GPU, not carrying the id
    # in a way we read (its cgroup says whose it is).
    node.process(
        9002,
        {"ROCR_VISIBLE_DEVICES": "3"},
        ppid=9001,
        ticks=7100,
        cgroup=f"/{unit}/{jobs_under}job_5121_2/step_1",
    )

    (h,) = node.scan().held

    assert (h.job_id, h.attempt, h.pids, h.gpus) == (5121, 2, (9001, 9002), (2, 3))
    assert h.traces == ("cgroup", "process") and h.started_at == started(7000)
    assert h.cpus == 4 and h.memory_mb is None


def test_without_the_delegated_root_the_old_default_would_miss_the_job(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.process(2201, {}, comm="spurd", cgroup="/system.slice/spurd.service/agent")
    node.job_cgroup("system.slice/spurd.service/job_77_1")

    assert node.scan(cgroup_root=node.cgroup / "spur").held == ()
    assert [h.job_id for h in node.scan().held] == [77]


def test_running_inside_a_job_finds_the_root_above_it(tmp_path: Path) -> None:
    # `srun spurctl node-inventory`: this process's own cgroup is a job's step.
    node = Node(tmp_path, self_cgroup="/machine.slice/spur/job_3_1/step_0")
    node.job_cgroup("machine.slice/spur/job_3_1/step_0")
    node.job_cgroup("machine.slice/spur/job_4_1")

    assert [h.job_id for h in node.scan().held] == [3, 4]


def test_an_empty_leftover_cgroup_is_a_trace_and_the_live_attempt_wins(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.job_cgroup("spur/job_9_1")  # rmdir failed at release: empty, no process
    node.job_cgroup(
        "spur/job_7_1", cpuset_cpus="0-1", cpuset_cpus_effective="0-1"
    )  # attempt 1 left behind
    node.job_cgroup("spur/job_7_2", cpuset_cpus="0-3", cpuset_cpus_effective="0-3")
    node.process(300, spurd_env(7), cgroup="/spur/job_7_2/step_0")

    held = by_id(node.scan())

    assert held[9].traces == ("cgroup",) and held[9].attempt == 1 and not held[9].live
    assert held[7].attempt == 2 and held[7].cpus == 4 and held[7].pids == (300,)


def test_an_explicit_root_is_the_only_one_read(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.job_cgroup("spur/job_1")
    node.job_cgroup("elsewhere/job_2_1")

    assert [h.job_id for h in node.scan(node.cgroup / "elsewhere").held] == [2]


# -- the spool ---------------------------------------------------------------------------


def test_a_spool_directory_alone_is_a_holding_seen_only_there(tmp_path: Path) -> None:
    node = Node(tmp_path)
    d = node.spool_dir(600)
    (node.spool / "images").mkdir()  # container image store, not a job
    (node.spool / "job601").write_text("a file, not a job's directory")

    (h,) = node.scan().held

    assert (h.job_id, h.traces, h.pids) == (600, ("spool",), ())
    assert h.started_at == datetime.fromtimestamp(d.stat().st_ctime, UTC)


def test_no_spool_root_reads_no_spool(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.spool_dir(600)
    assert scan(None, node.proc, "n", sys_root=node.sys).held == ()


# -- epilog and prolog processes ------------------------------------------------------------


def hook_env(job_id: int, context: str) -> dict[str, str]:
    """What hooks.rs run_hook gives a hook (the parts read)."""
    return {
        "SPUR_JOB_ID": str(job_id),
        "SLURM_JOB_ID": str(job_id),
        "SPUR_JOB_GPUS": "0,1",
        "SPUR_SCRIPT_CONTEXT": context,
    }


def test_an_epilog_after_the_release_is_no_holding(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.process(2201, {}, comm="spurd", ticks=100)
    node.process(400, hook_env(55, "epilog_slurmd"), comm="epilog.sh", ppid=2201)
    node.process(401, {**hook_env(55, "epilog_slurmd"), "SPUR_TARGET_NODE": "x"}, ppid=400)

    inv = node.scan()

    assert inv.held == ()
    assert inv.target_node is None and inv.target_nodes == ()


def test_a_prolog_is_the_launch_of_a_held_job(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.process(402, hook_env(56, "prolog_slurmd"), comm="prolog.sh")

    (h,) = node.scan().held

    assert (h.job_id, h.gpus, h.traces) == (56, (0, 1), ("process",))


def test_an_epilog_beside_a_leftover_cgroup_leaves_the_cgroup_trace(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.job_cgroup("spur/job_57")
    node.process(403, hook_env(57, "epilog_slurmd"))

    (h,) = node.scan().held

    assert (h.job_id, h.traces, h.pids) == (57, ("cgroup",), ())


# -- GPUs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "gpus"),
    [
        # SPUR_JOB_GPUS first: a program's own CUDA_VISIBLE_DEVICES is relative.
        ({"SPUR_JOB_GPUS": "4,5", "CUDA_VISIBLE_DEVICES": "0"}, (4, 5)),
        ({"ROCR_VISIBLE_DEVICES": "6"}, (6,)),
        ({"CUDA_VISIBLE_DEVICES": "1,3"}, (1, 3)),
        ({"ZE_AFFINITY_MASK": "0,1"}, (0, 1)),
        ({"ZE_AFFINITY_MASK": "2.0,2.1,3.0"}, (2, 3)),  # tiles: the device is before the dot
        # A zero-GPU job (gpu_deny_visibility): nothing is a device.
        (
            {
                "SPUR_JOB_GPUS": "",
                "ROCR_VISIBLE_DEVICES": "-1",
                "HIP_VISIBLE_DEVICES": "-1",
                "CUDA_VISIBLE_DEVICES": "-1",
                "ZE_AFFINITY_MASK": "-1",
            },
            (),
        ),
        ({"HIP_VISIBLE_DEVICES": "0,1"}, ()),
    ],
)
def test_gpus_as_spurd_assigns_them(
    tmp_path: Path, env: dict[str, str], gpus: tuple[int, ...]
) -> None:
    node = Node(tmp_path)
    node.process(10, spurd_env(1, **env))
    (h,) = node.scan().held
    assert h.gpus == gpus


def test_a_jobs_gpus_are_the_union_over_its_ranks(tmp_path: Path) -> None:
    # apply_gpu_bind_env with map_gpu: each rank sees its own slice.
    node = Node(tmp_path)
    for pid, gpu in [(20, "0"), (21, "1"), (22, "2"), (23, "3")]:
        node.process(pid, spurd_env(8, SPUR_JOB_GPUS=gpu, ROCR_VISIBLE_DEVICES=gpu))
    (h,) = node.scan().held
    assert h.gpus == (0, 1, 2, 3)


# -- target node --------------------------------------------------------------------------------


def test_processes_that_disagree_on_the_target_node_leave_it_unset_with_the_list(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.process(30, spurd_env(1, target="gpu017"))
    node.process(31, spurd_env(2, target="GPU017.cluster"))
    node.process(32, spurd_env(3, target=""))  # no target: says nothing

    inv = node.scan()

    assert inv.target_node is None
    assert inv.target_nodes == ("GPU017.cluster", "gpu017")


def test_no_job_process_means_no_target_node(tmp_path: Path) -> None:
    inv = Node(tmp_path).scan()
    assert (inv.target_node, inv.target_nodes) == (None, ())


# -- the agent ------------------------------------------------------------------------------------


def test_no_spurd_means_agent_null_and_a_fork_is_not_another_agent(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.process(40, {}, comm="spurdx")  # not spurd
    assert node.scan().agent is None

    node.process(2201, {}, comm="spurd", ticks=100)
    node.process(2300, {}, comm="spurd", ppid=2201, ticks=9000)  # pre-exec fork of a job
    assert node.scan().agent == AgentProcess(2201, started(100))


def test_two_top_level_spurds_name_no_agent_and_record_both(tmp_path: Path) -> None:
    # It used to take the newest and count its children alone as tracked, while the
    # older spurd still supervised its runs.
    node = Node(tmp_path)
    node.process(2201, {}, comm="spurd", ticks=100)
    node.process(3300, {}, comm="spurd", ticks=8000)
    node.process(81234, spurd_env(4711), ppid=2201, ticks=5000)
    inv = node.scan()
    assert inv.agent is None and not inv.agent_checked
    assert inv.agents == (AgentProcess(2201, started(100)), AgentProcess(3300, started(8000)))
    assert by_id(inv)[4711].tracked_pids == ()
    doc = inventory_to_dict(inv)
    assert "agent" not in doc and [a["pid"] for a in doc["agents"]] == [2201, 3300]
    assert inventory_from_dict(json.loads(json.dumps(doc)), where="t") == inv


def test_a_spurd_whose_stat_cannot_be_read_still_counts_as_a_spurd(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.process(2201, {}, comm="spurd", ticks=100)
    node.process(3300, {}, comm="spurd", ticks=8000)
    (node.proc / "3300" / "stat").write_text("garbage")
    assert node.scan().agents == (AgentProcess(2201, started(100)), AgentProcess(3300, None))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--hostname", "gpu017-ib"], "gpu017-ib"),
        (["--controller", "http://c:6817", "--hostname=gpu017-ib"], "gpu017-ib"),
        (["-N", "gpu017-ib"], "gpu017-ib"),
        (["-Ngpu017-ib"], "gpu017-ib"),
        (["--listen", "[::]:6818"], None),
        (["--", "--hostname", "x"], None),
    ],
)
def test_spurds_hostname_option_is_read_from_its_command_line(
    tmp_path: Path, argv: list[str], expected: str | None
) -> None:
    node = Node(tmp_path)
    node.process(2201, {}, comm="spurd", ticks=100)
    (node.proc / "2201" / "cmdline").write_bytes(
        b"\0".join(a.encode() for a in ["/usr/bin/spurd", *argv]) + b"\0"
    )
    inv = node.scan()
    assert inv.agent_hostname == expected and inv.hostname == "gpu017"
    doc = inventory_to_dict(inv)
    assert doc.get("agent_hostname") == expected
    assert inventory_from_dict(json.loads(json.dumps(doc)), where="t") == inv


def test_a_process_in_another_jobs_cgroup_is_that_jobs_whatever_its_environment(
    tmp_path: Path,
) -> None:
    node = spur_main_node(tmp_path)
    node.job_cgroup("spur/job_200")
    node.process(500, spurd_env(100), ticks=6000, cgroup="/spur/job_200")
    node.process(501, spurd_env(100), ticks=6000)  # job 100's, in no job cgroup
    held = by_id(node.scan())
    assert held[100].pids == (501,) and held[200].pids == (500,)


def test_a_jobs_processes_under_spurd_and_under_a_supervisor_are_recorded(
    tmp_path: Path,
) -> None:
    node = spur_main_node(tmp_path)  # 81234 of job 4711 is spurd's child
    # After a graceful restart: a pre-restart process in the same cgroup, not spurd's.
    node.process(700, spurd_env(4711), ppid=1, ticks=50, cgroup="/spur/job_4711")
    # Job 9 under a spurstepd supervisor (Spur #754), reparented to init.
    node.process(900, {}, comm="spurstepd", ppid=1, ticks=40)
    node.process(901, spurd_env(9), ppid=900, ticks=41)
    held = by_id(node.scan())
    assert held[4711].pids == (700, 81234) and held[4711].tracked_pids == (81234,)
    assert held[9].supervisors == (900,) and held[9].tracked_pids == ()
    assert held[4711].supervisors == ()


# -- the document ----------------------------------------------------------------------------------


def test_the_new_fields_survive_the_json_document(tmp_path: Path) -> None:
    node = spur_main_node(tmp_path)
    node.job_cgroup("spur/job_9_3")
    node.process(31, spurd_env(9, target="other"))
    inv = node.scan()

    doc = inventory_to_dict(inv)

    assert doc["agent"] == {"pid": 2201, "started_at": doc["agent"]["started_at"]}
    assert doc["target_node"] is None and doc["target_nodes"] == ["gpu017", "other"]
    assert doc["held"][0]["attempt"] == 3 and doc["held"][0]["traces"] == ["cgroup", "process"]
    assert inventory_from_dict(json.loads(json.dumps(doc)), where="t") == inv


def test_no_agent_is_written_as_null_and_read_back_as_looked_for(tmp_path: Path) -> None:
    inv = Node(tmp_path).scan()
    doc = inventory_to_dict(inv)
    assert doc["agent"] is None and "agent" in doc
    back = inventory_from_dict(doc, where="t")
    assert back.agent is None and back.agent_checked


def test_an_older_document_reads_with_the_new_fields_absent() -> None:
    old = {
        "schema": "spurctl.inventory/v1",
        "node": "gpu017",
        "collected_at": "2026-12-02T10:00:00Z",
        "source": "cgroup+proc",
        "error": None,
        "held": [{"job_id": 4711, "cpus": 16, "memory_mb": None, "gpus": [0], "pids": [1]}],
    }

    inv = inventory_from_dict(old, where="old.json")

    assert (inv.agent, inv.agent_checked, inv.hostname, inv.target_node) == (
        None,
        False,
        None,
        None,
    )
    assert inv.target_nodes == ()
    assert (inv.held[0].attempt, inv.held[0].traces) == (None, ())
    assert inventory_to_dict(inv) == {**old, "held": [{**old["held"][0], "started_at": None}]}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"agent": 2201}, "field 'agent' must be an object with 'pid' or null"),
        ({"agent": {"started_at": None}}, "agent: missing integer field 'pid'"),
        ({"agent": {"pid": 1, "started_at": "yesterday"}}, "agent: field 'started_at' is not"),
        ({"hostname": 7}, "field 'hostname' must be a non-empty string or null"),
        ({"target_node": ""}, "field 'target_node' must be a non-empty string or null"),
        ({"target_nodes": "gpu017"}, "field 'target_nodes' must be a list of node names"),
        ({"held": [{"job_id": 1, "attempt": -1}]}, "held[0]: field 'attempt' must be"),
        ({"held": [{"job_id": 1, "traces": "cgroup"}]}, "held[0]: field 'traces' must be a list"),
        ({"held": [{"job_id": 1, "traces": [3]}]}, "held[0]: field 'traces' must be a list"),
    ],
)
def test_bad_new_fields_are_named_clearly(patch: dict[str, object], message: str) -> None:
    doc = {"schema": "spurctl.inventory/v1", "node": "n", "held": [], **patch}
    with pytest.raises(DocumentError) as err:
        inventory_from_dict(doc, where="inv.json")
    assert message in str(err.value) and str(err.value).startswith("inv.json")


def test_ancestry_is_read_only_when_every_job_process_is_traced_to_pid_1(tmp_path: Path) -> None:
    node = spur_main_node(tmp_path)
    node.process(700, spurd_env(50), ppid=1, ticks=6000)  # daemonized: init's child
    inv = node.scan()
    assert inv.ancestry_read and by_id(inv)[50].tracked_pids == ()
    doc = inventory_to_dict(inv)
    assert doc["ancestry_read"] is True
    assert inventory_from_dict(json.loads(json.dumps(doc)), where="t") == inv
    # A parent that cannot be read leaves the ancestry unknown: nothing is concluded.
    node.process(701, spurd_env(51), ppid=5555, ticks=6000)
    assert not node.scan().ancestry_read
