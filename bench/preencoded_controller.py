"""A Spur controller for benchmarks that costs nearly nothing: every answer is bytes encoded once.

    python bench/preencoded_controller.py --dir DIR [--nodes 20000 --jobs 200000 --held 100000]
        [--release v0.8.0|main-4cc3da8|0.9-0.11|newest]

The data is the simulated cluster's (`spurctl_sim.large` and
`ClusterState.encoded`, so each JobInfo carries the upstream fields a real
spurctld sends: 400-700 bytes), with inventories written for only a fraction
of the nodes (`--inventoried`, half by default). At start every JobInfo and
NodeInfo is encoded once, and indexes are built: job ids by state, by node
(the nodes a job's nodelist names) and the id order. A GetJobs answer is the
concatenation of its jobs' encodings, chosen through those indexes; each whole
answer is cached by its request's bytes, so a repeated request costs a dict
lookup. The controller's own time is then close to nothing, and a client's
time is its own.

Two ports serve the same data:

- `capped` refuses any answer over `--cap` bytes (spurctld's
  `MAX_GRPC_MESSAGE_SIZE`, 32 MiB) as tonic's encoder does: status
  OUT_OF_RANGE, "Error, encoded message length too large: found N bytes, the
  limit is: 33554432 bytes";
- `uncapped` answers anything (the floor's downloads).

RPCs served, as spurctld answers them (docs/spur-facts.md): Ping,
GetJobMetrics (total and by_state), GetJobs with `states`, `job_ids`, `nodes`
(and `user`, `partition`, `account`, `name`, through the simulated cluster's
own selection), GetJob (NOT_FOUND for an untracked id), GetNodes (with its
filters), GetNode. No authentication. `--release` plays one Spur release
(spurctl_sim.releases): release v0.8.0 skips GetJobsRequest.nodes and
drops the REQUEUED state from `states`, as its proto makes it, and Ping answers
its version. `spurctl.bench.Counters/Take` answers the requests served per
method since the last Take, as JSON, and starts counting again; `TakeWork` the
GetJobs answer bytes sent and an estimate of what spurctld would have spent on
those requests (`Answers.work_of`: job-map entries visited, id comparisons).
`--shape striped` serves issue 49's cluster (`spurctl_sim.striped_scenario`)
instead of `large()`.

`--lean` serves minimal JobInfo records instead: id, state, nodelist,
resources and the three times, nothing else (~60 bytes each), so the I/O is
small and a client's own CPU shows.

Prints one line, `ready {json}` (addresses, inventory file, sizes), then serves
until its standard input closes or it is sent SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from spurctl.model import Job, JobState
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl_sim import large
from spurctl_sim.controller_service import ANSWER_LIMIT, too_large
from spurctl_sim.encoders import allocation_to_pb, node_to_pb, time_to_pb
from spurctl_sim.releases import MAIN_4CC3DA8, SPUR_RELEASES, SpurRelease, as_received
from spurctl_sim.state import ClusterState, expand, framed
from spurctl_sim.striped_scenario import striped

MAX_GRPC_MESSAGE_SIZE = ANSWER_LIMIT  # spur-proto crates/spur-proto/src/lib.rs
MAX_GRPC_REQUEST_SIZE = 8 * 1024 * 1024
SERVICE = "slurm.SlurmController"
# Cached answers are kept while they fit this budget; past it an answer is built per call.
CACHE_BUDGET = 1 << 30


def _unframed(frame: bytes) -> bytes:
    """The message a `framed` frame carries (its field key and length dropped)."""
    size, pos = 0, 1
    for shift in range(0, 64, 7):
        byte = frame[pos]
        size |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            break
    assert len(frame) - pos == size
    return frame[pos:]


class Refused(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def lean_record(job: Job) -> bytes:
    """A JobInfo with only what an audit needs: id, state, nodelist, resources, times."""
    msg = pb.JobInfo(job_id=job.job_id, state=int(job.state), nodelist=job.nodelist)  # type: ignore[arg-type]
    time_to_pb(job.submit_time, msg.submit_time)
    time_to_pb(job.start_time, msg.start_time)
    time_to_pb(job.end_time, msg.end_time)
    allocation_to_pb(job.resources, msg.resources)
    return msg.SerializeToString()


class Answers:
    """Every answer's bytes, from encodings and indexes built once."""

    def __init__(self, state: ClusterState, lean: bool = False) -> None:
        self.state = state
        self.release: SpurRelease = state.spur_release
        self.hostname = state.hostname
        self.version = state.version
        self.served: dict[str, int] = {}
        self.work: dict[str, int] = {}  # what spurctld would spend serving them (work_of)
        with state.lock:
            jobs = list(state.jobs.values())
            nodes = list(state.nodes.values())
        encode = lean_record if lean else state.encoded
        self.job_frames: dict[int, bytes] = {j.job_id: framed(encode(j)) for j in jobs}
        self.order: list[int] = [j.job_id for j in jobs]
        self.state_of: dict[int, int] = {j.job_id: int(j.state) for j in jobs}
        self.by_state: dict[int, list[int]] = {}
        self.nodes_of: dict[int, frozenset[str]] = {}
        self.by_node: dict[str, list[int]] = {}
        for job in jobs:
            self.by_state.setdefault(int(job.state), []).append(job.job_id)
            try:
                names = expand(job.nodelist)
            except ValueError:
                names = frozenset()
            self.nodes_of[job.job_id] = names
            for name in names:
                self.by_node.setdefault(name, []).append(job.job_id)
        self.node_frames: dict[str, bytes] = {
            n.name: framed(node_to_pb(n).SerializeToString()) for n in nodes
        }
        total, counts = state.metrics()
        self.metrics = pb.JobMetrics(
            total=total,
            by_state=[
                pb.JobStateCount(state=int(s), count=counts.get(s, 0))  # type: ignore[arg-type]
                for s in JobState
                if self.release.knows(s)
            ],
        ).SerializeToString()
        self._cache: dict[tuple[str, bytes], tuple[int, bytes | None]] = {}
        self._cached_bytes = 0
        self._lock = threading.Lock()

    # -- selection -------------------------------------------------------------------

    def job_ids(self, req: pb.GetJobsRequest) -> list[int]:
        """The ids GetJobs answers `req` with, through the indexes (no per-job hostlist work),
        as this release decodes the request."""
        req = as_received(self.release, req)
        states = set(req.states)
        nodes = set(req.nodes)
        if req.job_ids:
            chosen = [i for i in dict.fromkeys(req.job_ids) if i in self.job_frames]
        elif nodes:
            chosen = sorted({i for n in nodes for i in self.by_node.get(n, ())})
        elif states:
            chosen = [i for s in sorted(states) for i in self.by_state.get(s, ())]
            states = set()  # already applied
        else:
            chosen = self.order
        if states:
            chosen = [i for i in chosen if self.state_of[i] in states]
        if nodes and req.job_ids:
            chosen = [i for i in chosen if not nodes.isdisjoint(self.nodes_of[i])]
        if req.user or req.partition or req.account or req.name:
            # Not used by spurctl's reads: the simulated cluster's own selection decides.
            allowed = {j.job_id for j in self.state.select_jobs(req)}
            chosen = [i for i in chosen if i in allowed]
        return chosen

    # -- answers -----------------------------------------------------------------------

    def _cached(
        self, method: str, request: bytes, cap: int | None, parts: Callable[[], Iterable[bytes]]
    ) -> bytes:
        key = (method, request)
        hit = self._cache.get(key)
        if hit is None:
            frames = list(parts())
            size = sum(len(f) for f in frames)
            body = None if cap is not None and size > cap else b"".join(frames)
            hit = (size, body)
            with self._lock:
                if body is None or self._cached_bytes + size <= CACHE_BUDGET:
                    self._cache[key] = hit
                    self._cached_bytes += 0 if body is None else size
        size, body = hit
        if cap is not None and size > cap:
            raise Refused(grpc.StatusCode.OUT_OF_RANGE, too_large(size, cap))
        if body is None:  # first asked on the capped port, over its cap
            body = b"".join(parts())
            with self._lock:
                if self._cached_bytes + size <= CACHE_BUDGET:
                    self._cache[key] = (size, body)
                    self._cached_bytes += size
        return body

    def work_of(self, method: str, request: bytes) -> dict[str, int]:
        """What spurctld spends on one request, estimated from its code (cluster.rs at
        v0.8.0 and main 4cc3da8, the same there): `map_entries`, the job-map entries it
        visits (GetJobMetrics and GetJobs make one pass; GetJobs one more per requested id
        it does not hold, get_job_for_display's array-parent search), and `id_compares`,
        at most each job's slice `contains` over the requested ids plus each requested
        id's search of the answer built so far."""
        n = len(self.job_frames)
        if method == "get_job_metrics":
            return {"map_entries": n}
        if method != "get_jobs":
            return {}
        req = pb.GetJobsRequest.FromString(request)
        ids = list(req.job_ids)
        if not ids:
            return {"map_entries": n}
        absent = sum(1 for i in set(ids) if i not in self.job_frames)
        answered = len(self.job_ids(req))
        return {"map_entries": n * (1 + absent), "id_compares": n * len(ids) + len(ids) * answered}

    def get_jobs(self, request: bytes, cap: int | None) -> bytes:
        def parts() -> Iterable[bytes]:
            frames = self.job_frames
            return [frames[i] for i in self.job_ids(pb.GetJobsRequest.FromString(request))]

        return self._cached("GetJobs", request, cap, parts)

    def get_nodes(self, request: bytes, cap: int | None) -> bytes:
        def parts() -> Iterable[bytes]:
            try:
                chosen = self.state.select_nodes(pb.GetNodesRequest.FromString(request))
            except ValueError as exc:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
            return [self.node_frames[n.name] for n in chosen]

        return self._cached("GetNodes", request, cap, parts)

    def get_job(self, request: bytes, cap: int | None) -> bytes:
        job_id = pb.GetJobRequest.FromString(request).job_id
        frame = self.job_frames.get(job_id)
        if frame is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"job {job_id} not found")
        return _unframed(frame)

    def get_node(self, request: bytes, cap: int | None) -> bytes:
        name = pb.GetNodeRequest.FromString(request).name
        frame = self.node_frames.get(name)
        if frame is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"node {name} not found")
        return _unframed(frame)

    def ping(self, request: bytes, cap: int | None) -> bytes:
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        return pb.PingResponse(
            hostname=self.hostname, server_time=now, version=self.version
        ).SerializeToString()

    def get_job_metrics(self, request: bytes, cap: int | None) -> bytes:
        return self.metrics

    def prepare(self) -> None:
        """Build the unfiltered answers now, so the first download does not pay the join."""
        self.get_jobs(b"", None)
        self.get_nodes(b"", None)


def handler(answers: Answers, cap: int | None) -> grpc.GenericRpcHandler:
    lock = threading.Lock()

    def method(body: Callable[[bytes, int | None], bytes]) -> grpc.RpcMethodHandler:
        name = body.__name__

        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            work = answers.work_of(name, request)
            with lock:
                answers.served[name] = answers.served.get(name, 0) + 1
                for k, v in work.items():
                    answers.work[k] = answers.work.get(k, 0) + v
            try:
                answer = body(request, cap)
            except Refused as refused:
                context.abort(refused.code, refused.details)
            if name == "get_jobs":
                with lock:
                    answers.work["getjobs_bytes"] = answers.work.get("getjobs_bytes", 0) + len(
                        answer
                    )
            if cap is not None and len(answer) > cap:  # GetJob/GetNode/Ping: never, but as tonic
                context.abort(grpc.StatusCode.OUT_OF_RANGE, too_large(len(answer), cap))
            return answer

        # No (de)serializers: the handler gets the request's bytes and returns the answer's.
        return grpc.unary_unary_rpc_method_handler(handle)

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Ping": method(answers.ping),
            "GetJobMetrics": method(answers.get_job_metrics),
            "GetJobs": method(answers.get_jobs),
            "GetJob": method(answers.get_job),
            "GetNodes": method(answers.get_nodes),
            "GetNode": method(answers.get_node),
        },
    )


def counters(answers: Answers) -> grpc.GenericRpcHandler:
    """`spurctl.bench.Counters/Take`: the requests served per method since the last Take."""

    def take(request: bytes, context: grpc.ServicerContext) -> bytes:
        served, answers.served = answers.served, {}
        return json.dumps(served).encode()

    def take_work(request: bytes, context: grpc.ServicerContext) -> bytes:
        work, answers.work = answers.work, {}
        return json.dumps(work).encode()

    return grpc.method_handlers_generic_handler(
        "spurctl.bench.Counters",
        {
            "Take": grpc.unary_unary_rpc_method_handler(take),
            "TakeWork": grpc.unary_unary_rpc_method_handler(take_work),
        },
    )


def serve(answers: Answers, cap: int | None) -> tuple[grpc.Server, int]:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        handlers=[handler(answers, cap), counters(answers)],
        options=[
            ("grpc.max_send_message_length", -1),
            ("grpc.max_receive_message_length", MAX_GRPC_REQUEST_SIZE),
            ("grpc.so_reuseport", 0),
        ],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def inventoried(names: list[str], fraction: float) -> list[str]:
    """An evenly spread `fraction` of `names` (every other node at 0.5)."""
    return [n for i, n in enumerate(names) if int((i + 1) * fraction) > int(i * fraction)]


def write_inventories(state: ClusterState, names: list[str], path: Path) -> int:
    """The named nodes' inventories as JSON Lines; returns the number of holdings written."""
    collected = None
    lines, held = [], 0
    for name in names:
        inv = state.inventory(name, collected)
        collected = inv.collected_at
        held += len(inv.held)
        lines.append(json.dumps(inventory_to_dict(inv)) + "\n")
    path.write_text("".join(lines))
    return held


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--held", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--inventoried", type=float, default=0.5, help="fraction of nodes with an inventory"
    )
    p.add_argument("--cap", type=int, default=MAX_GRPC_MESSAGE_SIZE, help="the capped port's limit")
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--lean", action="store_true", help="minimal JobInfo records (lean_record)")
    p.add_argument("--release", choices=list(SPUR_RELEASES), default=MAIN_4CC3DA8.name)
    p.add_argument(
        "--shape", choices=("large", "striped"), default="large",
        help="large(): a busy cluster; striped(): issue 49's (ended and running jobs "
        "alternating id by id, --held unused)",
    )  # fmt: skip
    args = p.parse_args()

    started = time.perf_counter()
    if args.shape == "striped":
        scenario = striped(args.nodes, args.jobs, seed=args.seed)
    else:
        scenario = large(args.nodes, args.jobs, args.held, args.seed)
    state = ClusterState(scenario, SPUR_RELEASES[args.release])
    built = time.perf_counter()
    answers = Answers(state, lean=args.lean)
    answers.prepare()
    encoded = time.perf_counter()
    args.dir.mkdir(parents=True, exist_ok=True)
    inventory = args.dir / "inventory.jsonl"
    with_inventory = inventoried(list(state.nodes), args.inventoried)
    held = write_inventories(state, with_inventory, inventory)
    records = [len(_unframed(f)) for f in answers.job_frames.values()]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    capped, capped_port = serve(answers, args.cap)
    uncapped, uncapped_port = serve(answers, None)
    try:
        ready: dict[str, Any] = {
            "capped": f"http://127.0.0.1:{capped_port}",
            "uncapped": f"http://127.0.0.1:{uncapped_port}",
            "inventory": str(inventory),
            "nodes": len(state.nodes),
            "inventoried_nodes": len(with_inventory),
            "jobs": len(state.jobs),
            "held": held,
            "held_all": sum(len(h) for h in state.held.values()),
            "cap": args.cap,
            "release": args.release,
            "version": state.version,
            "jobs_answer_bytes": len(answers.get_jobs(b"", None)),
            "record_bytes_mean": round(sum(records) / max(len(records), 1), 1),
            "record_bytes_min": min(records, default=0),
            "record_bytes_max": max(records, default=0),
            "build_s": round(built - started, 2),
            "encode_s": round(encoded - built, 2),
            "pid": os.getpid(),
        }
        print("ready " + json.dumps(ready), flush=True)
        # Either the parent closes our stdin (it exited, or is done) or it signals us.
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        stop.wait()
    finally:
        capped.stop(0.2)
        uncapped.stop(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
