"""node_scan reads spurd's cgroups and /proc; fixture trees in tmp_path, and the real /proc."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.model import Holding, Inventory
from spurctl.node.cgroup_limits import parse_cpu_list, parse_memory_max
from spurctl.node.node_scan import scan
from spurctl.sources.inventory_document import inventory_from_dict, inventory_to_dict

BTIME = 1_780_000_000  # boot time of the fixture node, seconds since the epoch
HZ = os.sysconf("SC_CLK_TCK")
NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def add_process(
    proc: Path,
    pid: int,
    env: dict[str, str] | bytes,
    start_ticks: int | None = 1000,
    comm: str = "python3",
) -> None:
    d = proc / str(pid)
    d.mkdir(parents=True)
    raw = env if isinstance(env, bytes) else b"".join(f"{k}={v}\0".encode() for k, v in env.items())
    (d / "environ").write_bytes(raw)
    if start_ticks is not None:
        # Fields 3..52 after "pid (comm)"; field 22 is the start time in ticks.
        rest = ["S"] + ["0"] * 18 + [str(start_ticks)] + ["0"] * 30
        (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(rest) + "\n")


def make_proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text(f"cpu  1 2 3 4\nintr 5\nbtime {BTIME}\nprocesses 9\n")
    (proc / "self").mkdir()  # non-numeric entries are not processes
    return proc


def cgroup_files(
    cpus: str | None = None,
    effective: str | None = None,
    memory: str | None = None,
    procs: str | None = None,
    cpu_max: str | None = None,
) -> dict[str, str]:
    named = {
        "cpuset.cpus": cpus,
        "cpuset.cpus.effective": effective,
        "memory.max": memory,
        "cgroup.procs": procs,
        "cpu.max": cpu_max,
    }
    return {k: v for k, v in named.items() if v is not None}


def write_cgroup(root: Path, job_id: int | str, files: dict[str, str]) -> Path:
    d = root / f"job_{job_id}"
    d.mkdir(parents=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def started(ticks: int) -> datetime:
    return datetime.fromtimestamp(BTIME + ticks / HZ, UTC)


def holdings(inv: Inventory) -> dict[int, Holding]:
    return {h.job_id: h for h in inv.held}


# -- what makes a job held -------------------------------------------------------


def test_process_only_job_is_held_when_no_cgroup_root_exists(tmp_path: Path) -> None:
    proc = make_proc(tmp_path)
    add_process(proc, 4242, {"SPUR_JOB_ID": "4711", "ROCR_VISIBLE_DEVICES": "1,0"}, 5000)
    add_process(proc, 4243, {"PATH": "/usr/bin"})  # a process of no job

    inv = scan(tmp_path / "no-cgroups", proc, "gpu017", now=NOW)

    assert inv.source == "proc"
    assert inv.node == "gpu017" and inv.collected_at == NOW and inv.error is None
    assert inv.held == (
        Holding(
            job_id=4711,
            cpus=None,
            memory_mb=None,
            gpus=(0, 1),
            pids=(4242,),
            started_at=started(5000),
            traces=("process",),
        ),
    )


def test_cgroup_only_job_is_held_with_its_limits_and_the_dir_ctime(tmp_path: Path) -> None:
    cg = tmp_path / "spur"
    d = write_cgroup(
        cg,
        900,
        cgroup_files(cpus="0-7,16-23", effective="0-7,16-23\n", memory="68719476736\n", procs=""),
    )

    inv = scan(cg, make_proc(tmp_path), "gpu017", now=NOW)

    assert inv.source == "cgroup+proc"
    (h,) = inv.held
    assert (h.job_id, h.cpus, h.memory_mb, h.gpus, h.pids) == (900, 16, 65536, (), ())
    assert h.started_at == datetime.fromtimestamp(d.stat().st_ctime, UTC)
    assert not h.live


def test_cgroup_and_process_evidence_merge_into_one_holding(tmp_path: Path) -> None:
    cg, proc = tmp_path / "spur", make_proc(tmp_path)
    # pid 100 is in the cgroup without the id in its environment; 101 carries the id.
    write_cgroup(cg, 5, cgroup_files(effective="2-3", memory="max\n", procs="100\n"))
    add_process(proc, 100, {"ROCR_VISIBLE_DEVICES": "2"}, start_ticks=700)
    add_process(proc, 101, {"SLURM_JOB_ID": "5", "ROCR_VISIBLE_DEVICES": "3"}, start_ticks=300)

    (h,) = scan(cg, proc, "n1", now=NOW).held

    assert h == Holding(
        job_id=5,
        cpus=2,
        memory_mb=None,
        gpus=(2, 3),
        pids=(100, 101),
        started_at=started(300),
        traces=("cgroup", "process"),
    )


def test_processes_of_nested_cgroups_belong_to_the_job(tmp_path: Path) -> None:
    cg = tmp_path / "spur"
    d = write_cgroup(cg, 77, cgroup_files(procs=""))
    (d / "step_0" / "task_1").mkdir(parents=True)
    (d / "step_0" / "task_1" / "cgroup.procs").write_text("300\n301\n")
    (d / "step_0" / "cgroup.procs").write_text("0\n")  # pid 0: another pid namespace

    (h,) = scan(cg, make_proc(tmp_path), "n1", now=NOW).held

    assert h.pids == (300, 301)


def test_entries_that_are_not_job_cgroups_are_ignored(tmp_path: Path) -> None:
    cg = tmp_path / "spur"
    cg.mkdir()
    (cg / "cgroup.procs").write_text("1\n")
    (cg / "job_abc").mkdir()
    (cg / "job_12").write_text("a file, not a cgroup")
    (cg / f"job_{2**32}").mkdir()  # beyond a uint32 job id

    inv = scan(cg, make_proc(tmp_path), "n1", now=NOW)

    assert inv.held == () and inv.source == "cgroup+proc"


def test_several_jobs_come_out_sorted_by_id(tmp_path: Path) -> None:
    cg, proc = tmp_path / "spur", make_proc(tmp_path)
    write_cgroup(cg, 30, cgroup_files())
    add_process(proc, 9, {"SPUR_JOB_ID": "4"})
    add_process(proc, 8, {"SPUR_JOB_ID": "200"})

    assert [h.job_id for h in scan(cg, proc, "n1").held] == [4, 30, 200]


# -- a live node changes under the scan ---------------------------------------------


def test_vanished_and_unreadable_entries_are_skipped_not_fatal(tmp_path: Path) -> None:
    cg, proc = tmp_path / "spur", make_proc(tmp_path)
    # pid 50 is listed by the cgroup but already gone from /proc.
    write_cgroup(cg, 8, cgroup_files(procs="50\n51\n"))
    add_process(proc, 51, {"SPUR_JOB_ID": "8"}, start_ticks=900)
    # pid 60 vanished between listing /proc and reading it: its dir is empty.
    (proc / "60").mkdir()
    # pid 61 carries the id but its stat vanished before it was read.
    add_process(proc, 61, {"SPUR_JOB_ID": "8"}, start_ticks=None)
    # pid 62's environment cannot be read at all (a directory where a file should be).
    (proc / "62" / "environ").mkdir(parents=True)
    skipped: list[tuple[str, type[Exception]]] = []

    inv = scan(cg, proc, "n1", now=NOW, on_skip=lambda p, e: skipped.append((str(p), type(e))))

    (h,) = inv.held
    assert h.pids == (50, 51, 61)
    assert h.started_at == started(900)  # from the one process whose start is readable
    assert (str(proc / "60" / "environ"), FileNotFoundError) in skipped
    assert (str(proc / "50" / "stat"), FileNotFoundError) in skipped
    assert (str(proc / "62" / "environ"), IsADirectoryError) in skipped


def test_a_process_environment_that_is_not_ours_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = make_proc(tmp_path)
    add_process(proc, 70, {"SPUR_JOB_ID": "70"})
    add_process(proc, 71, {"SPUR_JOB_ID": "71"})
    # Another user's process, as a scan that is not root meets it (root, as CI runs, reads
    # any file whatever its mode, so a chmod would prove nothing there).
    not_ours = proc / "70" / "environ"
    from spurctl.node import node_procs

    read_bytes = node_procs.read_whole  # every environment the scan reads goes through it

    def refusing(path: Path) -> bytes:
        if path == not_ours:
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(node_procs, "read_whole", refusing)
    skipped: list[type[Exception]] = []

    inv = scan(tmp_path / "none", proc, "n1", on_skip=lambda p, e: skipped.append(type(e)))

    assert [h.job_id for h in inv.held] == [71]
    assert skipped == [PermissionError]


def test_garbage_environments_and_stat_lines_yield_nothing_false(tmp_path: Path) -> None:
    proc = make_proc(tmp_path)
    # Not UTF-8, no "=", an id that is not a number: no job at all.
    add_process(proc, 80, b"\xff\xfe\0SPUR_JOB_ID=\xff\x00=\0novalue\0SPUR_JOB_ID=12abc\0")
    # A bad SPUR_JOB_ID falls back to its Slurm twin; GPU UUIDs are not device ids.
    add_process(
        proc,
        81,
        b"SPUR_JOB_ID=zz\0SLURM_JOB_ID=33\0CUDA_VISIBLE_DEVICES=GPU-8f3c2a,1\0\xff\xff\0",
        start_ticks=None,
    )
    (proc / "81" / "stat").write_bytes(b"81 (weird) S \xff garbage")
    add_process(proc, 82, {"SPUR_JOB_ID": str(2**32)})  # not a uint32 job id

    inv = scan(tmp_path / "none", proc, "n1", now=NOW)

    assert inv.held == (
        Holding(job_id=33, gpus=(1,), pids=(81,), started_at=None, traces=("process",)),
    )


def test_start_time_survives_a_command_name_with_spaces_and_parens(tmp_path: Path) -> None:
    proc = make_proc(tmp_path)
    add_process(proc, 90, {"SPUR_JOB_ID": "9"}, start_ticks=4321, comm="my job) (x")

    (h,) = scan(tmp_path / "none", proc, "n1").held

    assert h.started_at == started(4321)


def test_no_boot_time_falls_back_to_the_cgroup_ctime(tmp_path: Path) -> None:
    cg, proc = tmp_path / "spur", make_proc(tmp_path)
    (proc / "stat").write_text("cpu 1 2 3\n")  # no btime line
    d = write_cgroup(cg, 3, cgroup_files(procs="91\n"))
    add_process(proc, 91, {"SPUR_JOB_ID": "3"}, start_ticks=100)

    (h,) = scan(cg, proc, "n1").held

    assert h.started_at == datetime.fromtimestamp(d.stat().st_ctime, UTC)


def test_a_proc_root_that_cannot_be_listed_is_an_operator_error(tmp_path: Path) -> None:
    with pytest.raises(SpurctlError, match="--proc-root"):
        scan(tmp_path / "spur", tmp_path / "not-proc", "n1")


def test_a_cgroup_root_that_is_a_file_counts_as_no_cgroups(tmp_path: Path) -> None:
    (tmp_path / "spur").write_text("")
    assert scan(tmp_path / "spur", make_proc(tmp_path), "n1").source == "proc"


# -- resources ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("0-7,16-23", 16),
        ("0-7,16-23\n", 16),
        ("3", 1),
        ("0,2,4", 3),
        ("0-3,2-5", 6),  # overlapping ranges count each CPU once
        (" 0-1 \n", 2),
        ("", None),
        ("\n", None),
        ("7-0", None),
        ("a-b", None),
        ("0-", None),
        ("-3", None),
        ("1,x", None),
        ("０-３", None),  # noqa: RUF001  full-width digits are not a cpuset
    ],
)
def test_cpuset_lists_count_cpus(text: str, count: int | None) -> None:
    assert parse_cpu_list(text) == count


@pytest.mark.parametrize(
    ("text", "mib"),
    [("68719476736\n", 65536), ("1048576", 1), ("max\n", None), ("", None), ("-1", None)],
)
def test_memory_max_is_read_in_mib(text: str, mib: int | None) -> None:
    assert parse_memory_max(text) == mib


@pytest.mark.parametrize(
    ("files", "cpus"),
    [
        # Pinned by spurd: the effective cpuset is the job's.
        (cgroup_files(cpus="0-3", effective="0-3", cpu_max="400000 100000"), 4),
        # Not pinned (empty cpuset.cpus): the effective set is the whole node,
        # the quota is what spurd granted.
        (cgroup_files(cpus="\n", effective="0-127", cpu_max="400000 100000"), 4),
        (cgroup_files(cpus="", effective="0-127", cpu_max="150000 100000"), 2),
        (cgroup_files(cpus="", effective="0-127", cpu_max="max 100000"), None),
        # No cpuset controller at all: the quota.
        (cgroup_files(cpu_max="800000 100000"), 8),
        (cgroup_files(effective=""), None),
        (cgroup_files(), None),
        # Spur #762: cpu.max unset by default (absent, or "max"), the cpuset the only bound.
        (cgroup_files(cpus="0-7", effective="0-7"), 8),
        (cgroup_files(cpus="2-5", effective="2-5", cpu_max="max 100000"), 4),
        # ...counted from cpuset.cpus itself when the effective set cannot be read.
        (cgroup_files(cpus="0-7"), 8),
        (cgroup_files(cpus="0,2,4", cpu_max="max 100000"), 3),
        (cgroup_files(cpus="0-3", effective="", cpu_max="max 100000"), 4),
    ],
)
def test_job_cpus_come_from_its_cpuset_or_else_its_quota(
    tmp_path: Path, files: dict[str, str], cpus: int | None
) -> None:
    write_cgroup(tmp_path / "spur", 1, files)
    (h,) = scan(tmp_path / "spur", make_proc(tmp_path), "n1").held
    assert h.cpus == cpus


@pytest.mark.parametrize(
    ("env", "gpus"),
    [
        ({"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "0"}, (4, 5)),
        ({"ROCR_VISIBLE_DEVICES": "3,1", "CUDA_VISIBLE_DEVICES": "3,1"}, (1, 3)),
        ({"CUDA_VISIBLE_DEVICES": "7"}, (7,)),
        # spurd sets HIP_VISIBLE_DEVICES only to -1 (deny); a list there is the
        # program's own, relative to ROCR's: never read.
        ({"HIP_VISIBLE_DEVICES": "2,2,0"}, ()),
        ({"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "6"}, ()),
        ({"CUDA_VISIBLE_DEVICES": "GPU-1a2b,MIG-3c4d"}, ()),
        ({}, ()),
    ],
)
def test_gpus_are_the_physical_ids_a_process_may_see(
    tmp_path: Path, env: dict[str, str], gpus: tuple[int, ...]
) -> None:
    proc = make_proc(tmp_path)
    add_process(proc, 10, {"SPUR_JOB_ID": "1", **env})
    (h,) = scan(tmp_path / "none", proc, "n1").held
    assert h.gpus == gpus


def test_gpus_of_a_job_are_the_union_over_its_processes(tmp_path: Path) -> None:
    proc = make_proc(tmp_path)
    add_process(proc, 10, {"SPUR_JOB_ID": "1", "ROCR_VISIBLE_DEVICES": "0"})
    add_process(proc, 11, {"SPUR_JOB_ID": "1", "ROCR_VISIBLE_DEVICES": "1"})
    add_process(proc, 12, {"SPUR_JOB_ID": "2", "ROCR_VISIBLE_DEVICES": "5"})

    by_id = holdings(scan(tmp_path / "none", proc, "n1"))

    assert by_id[1].gpus == (0, 1) and by_id[2].gpus == (5,)


def test_the_inventory_survives_its_json_document(tmp_path: Path) -> None:
    cg, proc = tmp_path / "spur", make_proc(tmp_path)
    write_cgroup(cg, 4711, cgroup_files(effective="0-15", memory="68719476736", procs="81234"))
    add_process(proc, 81234, {"SPUR_JOB_ID": "4711", "ROCR_VISIBLE_DEVICES": "0,1"}, 2000)

    inv = scan(cg, proc, "gpu017", now=NOW)

    assert inventory_from_dict(inventory_to_dict(inv), where="test") == inv


# -- the real /proc -------------------------------------------------------------------


def _nest(top: Path, levels: int) -> Path:
    """`top`/d/d/... `levels` deep, made one level at a time (pathlib's mkdir recurses)."""
    deepest = top
    deepest.mkdir(parents=True)
    for _ in range(levels):
        deepest /= "d"
        deepest.mkdir()
    return deepest


def _unnest(deepest: Path, top: Path) -> None:
    """Remove what `_nest` made, bottom up (shutil.rmtree, pytest's clean-up, recurses)."""
    while True:
        for f in deepest.iterdir():
            f.unlink()
        deepest.rmdir()
        if deepest == top:
            return
        deepest = deepest.parent


def test_a_cgroup_nested_past_any_recursion_limit_is_walked_to_the_depth_and_cut_there(
    tmp_path: Path,
) -> None:
    from spurctl.node.node_scan import MAX_CGROUP_DEPTH, CgroupTooDeep, walk_dirs

    top = tmp_path / "spur" / "job_30"
    deepest = _nest(top, 1_200)
    skipped: list[tuple[Path, Exception]] = []
    try:
        seen = list(walk_dirs(top, lambda path, exc: skipped.append((path, exc))))
        assert len(seen) == MAX_CGROUP_DEPTH + 1  # the job cgroup and 32 levels below it
        ((path, exc),) = skipped
        assert isinstance(exc, CgroupTooDeep) and exc.args == (top,)
        assert len(path.relative_to(top).parts) == MAX_CGROUP_DEPTH + 1
    finally:
        _unnest(deepest, top)


def test_node_release_of_a_cgroup_nested_past_any_recursion_limit_ends_with_it_kept(
    tmp_path: Path,
) -> None:
    from spurctl.act import node_release

    top = tmp_path / "spur" / "job_30"
    deepest = _nest(top, 1_200)
    clock = iter(range(0, 10_000, 5))  # each look 5 s later: the wait for it to empty ends
    try:
        removed = node_release._remove_tree(top, lambda: float(next(clock)), lambda _: None)
        assert removed is False and top.exists()  # kept, said; never a RecursionError
        assert deepest.exists()
    finally:
        _unnest(deepest, top)
