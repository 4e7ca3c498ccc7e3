#!/usr/bin/env python3
"""Golden answers encoded with upstream Spur's own slurm.proto, for spurctl's reader to decode.

    python scripts/gen_golden.py --spur-git /work/.mirror/ROCm+spur/repo
    python scripts/gen_golden.py --spur-git DIR --rev v0.8.0=v0.8.0 --rev main-4cc3da8=4cc3da8

`--spur-git` is a git directory of github.com/ROCm/spur (a clone, or a bare mirror).
For each `--rev LABEL=REV` (default: release v0.8.0 and the newest commit read,
main 4cc3da8) the script takes `proto/slurm.proto` at REV from git into a
temporary directory, compiles it with grpcio-tools' protoc into a descriptor set
there (no generated code is written anywhere else), builds a few representative
messages from upstream's own descriptors (real-sized, every field set, so fields
spurctl does not declare are on the wire too) and writes, under
`tests/golden/LABEL/`:

- `GetJobsResponse.bin` (two jobs in every state that release's JobState has, and
  three RUNNING jobs whose nodelists are what Spur's `compress` writes across a change
  of width, `SPUR_FOLDED`: forms ClusterShell refuses, which spurctl must read as Spur's
  `expand` does),
  `JobInfo.bin`, `GetNodesResponse.bin`, `JobMetrics.bin`, `PingResponse.bin`:
  the encoded bytes (deterministic serialization);
- `expected.json`: the same messages as upstream's descriptors decode them
  (json_format, field names as in the proto, enums by name), and where they
  came from (repository, rev, commit, the proto's sha256).

Only those files are committed: never upstream's proto, nor code generated from it.
tests/unit/test_golden_answers.py decodes the bytes with spurctl's reader and checks
every field spurctl reads against expected.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REVS = ("v0.8.0=v0.8.0", "main-4cc3da8=4cc3da843d7782774b616b2cdf7fc1e0d2cde777")
PROTO = "proto/slurm.proto"
BASE = datetime(2026, 12, 1, 22, 14, 5, tzinfo=UTC).timestamp()
# What the builder sets itself (or leaves unset on purpose: a pending job has no start);
# every other field is filled generically.
JOB_FIELDS_SET = frozenset(
    (
        "job_id",
        "name",
        "user",
        "uid",
        "partition",
        "account",
        "state",
        "state_reason",
        "submit_time",
        "start_time",
        "end_time",
        "num_nodes",
        "num_tasks",
        "nodelist",
        "work_dir",
        "command",
        "stdout_path",
        "stderr_path",
        "stdin_path",
        "qos",
        "comment",
        "resources",
        "array_job_id",
        "array_task_id",
    )
)
NODE_FIELDS_SET = frozenset(
    (
        "name",
        "state",
        "state_reason",
        "partitions",
        "total_resources",
        "alloc_resources",
        "boot_time",
        "last_busy",
        "slurmd_start_time",
        "labels",
    )
)


def proto_at(git_dir: Path, rev: str) -> tuple[bytes, str]:
    """(slurm.proto's text, the commit) at `rev`."""

    def git(*args: str) -> bytes:
        return subprocess.run(
            ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
        ).stdout

    commit = git("rev-parse", f"{rev}^{{commit}}").decode().strip()
    return git("show", f"{commit}:{PROTO}"), commit


def compiled(text: bytes, workdir: Path) -> descriptor_pool.DescriptorPool:
    """A private descriptor pool holding upstream's slurm.proto (and its imports)."""
    import grpc_tools

    (workdir / "slurm.proto").write_bytes(text)
    include = Path(grpc_tools.__file__).parent / "_proto"
    out = workdir / "slurm.desc"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{workdir}", f"-I{include}",
         f"--descriptor_set_out={out}", "--include_imports", str(workdir / "slurm.proto")],
        check=True,
    )  # fmt: skip
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return pool


# What spur-core hostlist.rs `compress` writes (`coalesce_ranges`, `width_equiv`; the
# same at v0.8.0 and 4cc3da8) for these nodes: a run keeps its first number's width when
# a wider number joins it, so gpu01..gpu99 and gpu100 are one range. Written out here as
# upstream's rules give them, never computed by spurctl's own code.
SPUR_FOLDED = {
    "gpu[01-100]": [f"gpu{i:02d}" for i in range(1, 101)],
    "gpu[09-100]": [f"gpu{i:02d}" for i in range(9, 101)],
    "gpu[001-1000]": [f"gpu{i:03d}" for i in range(1, 1001)],
}


class Builder:
    """Representative messages from one release's descriptors."""

    def __init__(self, pool: descriptor_pool.DescriptorPool) -> None:
        self.pool = pool

    def new(self, name: str) -> Message:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(f"slurm.{name}"))()

    def states(self) -> list[tuple[str, int]]:
        enum = self.pool.FindEnumTypeByName("slurm.JobState")
        return [(v.name, v.number) for v in enum.values]

    def job(self, job_id: int, state: int, state_name: str, folded: str | None = None) -> Message:
        m: Any = self.new("JobInfo")
        user = f"u{job_id % 300:04d}"
        name = f"llama-70b-sft-{job_id % 97}"
        work = f"/home/{user}/runs/{name}-{job_id}"
        started = not state_name.endswith(("PENDING", "REQUEUED"))
        ended = state_name not in ("JOB_PENDING", "JOB_RUNNING", "JOB_COMPLETING",
                                   "JOB_SUSPENDED", "JOB_PREEMPTED", "JOB_REQUEUED")  # fmt: skip
        nodes = ["gpu017"] if job_id % 2 else ["gpu018", "gpu019"]
        if folded is not None:
            nodes = SPUR_FOLDED[folded]
        m.job_id, m.name, m.user, m.uid = job_id, name, user, 20_000 + job_id % 300
        m.partition, m.account, m.state = "gpu", f"acct{job_id % 7}", state
        m.state_reason = "" if started else "Priority"
        m.submit_time.FromSeconds(int(BASE) + job_id)
        if started:
            m.start_time.FromSeconds(int(BASE) + job_id + 60)
            m.nodelist = folded or (nodes[0] if len(nodes) == 1 else "gpu[018-019]")
        if ended:
            m.end_time.FromSeconds(int(BASE) + job_id + 3_660)
        m.num_nodes, m.num_tasks = len(nodes), 8 * len(nodes)
        m.work_dir = work
        m.command = f"{work}/launch.sh torchrun --nnodes={len(nodes)} train.py --seed {job_id}"
        m.stdout_path, m.stderr_path, m.stdin_path = f"{work}/out", f"{work}/err", "/dev/null"
        m.qos, m.comment = "normal", f"sweep {name} trial {job_id % 13}, pipeline ci-{job_id}"
        if started:
            m.resources.cpus, m.resources.memory_mb = 64 * len(nodes), 262_144 * len(nodes)
            gpus = m.resources.devices["gpu"]
            for device in range(4):
                gpus.devices.add(device_id=device, count=len(nodes))
        if job_id % 3 == 0:
            m.array_job_id, m.array_task_id = job_id - 1, 1
        self.fill(m, f"job {job_id}", skip=JOB_FIELDS_SET)
        return m

    def node(self, i: int) -> Message:
        m: Any = self.new("NodeInfo")
        m.name, m.state = f"gpu{i:03d}", i % 5
        m.state_reason = "" if i % 5 in (0, 1, 2) else f"spurctl: job {4000 + i} (stranded)"
        m.partitions.extend(["gpu", "debug"] if i % 2 else ["gpu"])
        m.total_resources.cpus, m.total_resources.memory_mb = 128, 1_048_576
        for device in range(8):
            m.total_resources.gpus.add(device_id=device, gpu_type="mi300x", memory_mb=196_608)
        m.total_resources.generic["license"] = 4
        m.alloc_resources.cpus, m.alloc_resources.memory_mb = 32 * (i % 3), 65_536 * (i % 3)
        if i % 3:
            m.alloc_resources.devices["gpu"].devices.add(device_id=i % 8, count=1)
        m.boot_time.FromSeconds(int(BASE) - 86_400 * i)
        m.last_busy.FromSeconds(int(BASE) - 60 * i)
        m.slurmd_start_time.FromSeconds(int(BASE) - 3_600 * i)
        m.labels["rack"] = f"r{i:02d}"
        self.fill(m, f"node {i}", skip=NODE_FIELDS_SET)
        return m

    def fill(self, m: Any, who: str, depth: int = 0, skip: frozenset[str] = frozenset()) -> None:
        """Every field still unset but those in `skip` (set, or left unset on purpose, by
        the builder), so that the record is as large as a real one and every field
        spurctl does not declare is on the wire."""
        for f in m.DESCRIPTOR.fields:
            if f.name in skip:
                continue
            if f.is_repeated:
                if f.message_type is not None and f.message_type.GetOptions().map_entry:
                    self._map(getattr(m, f.name), f.message_type, who)
                elif not len(getattr(m, f.name)):
                    self._one(m, f, who, depth)
            elif f.message_type is not None:
                if not m.HasField(f.name) and depth < 2:
                    self._message(getattr(m, f.name), f.message_type, who, depth)
            elif getattr(m, f.name) in ("", 0, False):
                setattr(m, f.name, self._scalar(f, who))

    def _one(self, m: Any, f: FieldDescriptor, who: str, depth: int) -> None:
        field = getattr(m, f.name)
        if f.message_type is not None:
            if depth < 2:
                self._message(field.add(), f.message_type, who, depth)
        else:
            field.append(self._scalar(f, who))

    def _map(self, field: Any, entry: Descriptor, who: str) -> None:
        if len(field):
            return
        value = entry.fields_by_name["value"]
        if value.message_type is None:
            field[f"{who} key"] = self._scalar(value, who)

    def _message(self, sub: Any, d: Descriptor, who: str, depth: int) -> None:
        if d.full_name == "google.protobuf.Timestamp":
            sub.seconds = int(BASE) + 7
            return
        if d.full_name == "google.protobuf.Duration":
            sub.seconds = 4 * 3_600
            return
        self.fill(sub, who, depth + 1)

    @staticmethod
    def _scalar(f: FieldDescriptor, who: str) -> Any:
        if f.type == FieldDescriptor.TYPE_STRING:
            return f"{f.name} of {who}"
        if f.type == FieldDescriptor.TYPE_BOOL:
            return True
        if f.type == FieldDescriptor.TYPE_ENUM:
            values = f.enum_type.values
            return values[min(1, len(values) - 1)].number
        if f.type == FieldDescriptor.TYPE_BYTES:
            return who.encode()
        return 7 + f.number


def answers(b: Builder, version: str) -> dict[str, Message]:
    jobs: Any = b.new("GetJobsResponse")
    job_id = 4_700
    for name, number in b.states():
        for _ in range(2):
            job_id += 1
            jobs.jobs.append(b.job(job_id, number, name))
    for folded in SPUR_FOLDED:
        job_id += 1
        jobs.jobs.append(b.job(job_id, b.states()[1][1], b.states()[1][0], folded))
    nodes: Any = b.new("GetNodesResponse")
    for i in range(1, 6):
        nodes.nodes.append(b.node(i))
    metrics: Any = b.new("JobMetrics")
    metrics.total = 812
    for k, (_, number) in enumerate(b.states()):
        metrics.by_state.add(state=number, count=10 * k + 3)
    b.fill(metrics, "metrics")
    ping: Any = b.new("PingResponse")
    ping.hostname, ping.version = "spurctld-1", version
    ping.server_time.FromSeconds(int(BASE))
    ping.federation_peers.append("west@http://ctl-west:6817")
    return {
        "GetJobsResponse": jobs,
        "JobInfo": b.job(4_950, b.states()[1][1], b.states()[1][0]),
        "GetNodesResponse": nodes,
        "JobMetrics": metrics,
        "PingResponse": ping,
    }


def cargo_version(git_dir: Path, commit: str) -> str:
    """The workspace version at `commit`: what Ping's CARGO_PKG_VERSION answers."""
    text = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:Cargo.toml"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    for line in text.splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise SystemExit(f"no workspace version in Cargo.toml at {commit}")


def write(git_dir: Path, label: str, rev: str, out: Path) -> None:
    text, commit = proto_at(git_dir, rev)
    with tempfile.TemporaryDirectory(prefix="spurctl-golden-") as tmp:
        pool = compiled(text, Path(tmp))
        messages = answers(Builder(pool), cargo_version(git_dir, commit))
    target = out / label
    target.mkdir(parents=True, exist_ok=True)
    expected: dict[str, Any] = {
        "source": {
            "repository": "github.com/ROCm/spur",
            "rev": rev,
            "commit": commit,
            "path": PROTO,
            "sha256": hashlib.sha256(text).hexdigest(),
        },
        "spur_folded": SPUR_FOLDED,
    }
    for name, message in messages.items():
        (target / f"{name}.bin").write_bytes(message.SerializeToString(deterministic=True))
        expected[name] = json_format.MessageToDict(
            message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"{label}: {rev} ({commit[:12]}) -> {target}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spur-git", type=Path, required=True, help="a git directory of ROCm/spur")
    p.add_argument("--rev", action="append", help="LABEL=REV (repeatable)")
    p.add_argument("--out", type=Path, default=REPO / "tests" / "golden")
    args = p.parse_args()
    for spec in args.rev or DEFAULT_REVS:
        label, _, rev = spec.partition("=")
        write(args.spur_git, label, rev or label, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
