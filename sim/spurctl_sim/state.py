"""The simulated cluster's live state: the controller's jobs and nodes, and each agent's holdings.

Plain Python under one lock, no gRPC: the servers in server.py read and
change it, and so do tests through SimCluster's mutators. The controller keeps
node alloc_resources in step with its active jobs the way spurctld does (a
job's share is added when it becomes active with a nodelist and removed when it
stops), so a phantom allocation stays exactly what the scenario put there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import NamedTuple

import msgspec

from spurctl import spur_hostlist
from spurctl.model import (
    AgentProcess,
    Allocation,
    Holding,
    Inventory,
    Job,
    JobState,
    Node,
    NodeState,
    utcnow,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl_sim.encoders import job_to_pb
from spurctl_sim.nodelists import allocated, expand
from spurctl_sim.releases import MAIN_4CC3DA8, SpurRelease
from spurctl_sim.restarts import restart_agent
from spurctl_sim.scenario import (
    Scenario,
    add_allocations,
    busy_state,
    charged,
    node_share,
)

TERMINATING_SIGNALS = frozenset({0, 9, 15})  # graceful cancel, SIGKILL, SIGTERM
SIM_AGENT_PID = 2201  # every simulated node's spurd, as its inventory shows it


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint encoding of `n`."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = tuple(varint(n) for n in range(1 << 14))  # lengths and small counts


def framed(body: bytes) -> bytes:
    """`body` as one element of an answer's `repeated ... = 1` (GetJobsResponse.jobs,
    GetNodesResponse.nodes): answers are built by joining these."""
    return b"\x0a" + varint(len(body)) + body


def _key(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


# Upstream JobInfo fields spurctl's proto leaves out (docs/spur-facts.md, "What a real
# JobInfo carries"): (number, wire type). 0 = varint, 2 = length-delimited.
_TIME_LIMIT = _key(13, 2)  # google.protobuf.Duration
_RUN_TIME = _key(14, 2)  # google.protobuf.Duration
_CPUS_PER_TASK = _key(22, 0)
_WORK_DIR = _key(24, 2)
_COMMAND = _key(25, 2)
_EXIT_CODE = _key(30, 0)  # int32
_STDOUT_PATH = _key(31, 2)
_STDERR_PATH = _key(32, 2)
_EXIT_SIGNAL = _key(33, 0)  # int32
_STDIN_PATH = _key(35, 2)
_PRIORITY = _key(41, 0)
_QOS = _key(42, 2)
_COMMENT = _key(53, 2)
_REQ_GPUS = _key(55, 0)
_REQ_GPUS_DETAIL = _key(56, 2)
_DURATION_SECONDS = _key(1, 0)
_QOS_NAMES = ("normal", "high", "normal", "low")
_TIME_LIMITS_H = (4, 12, 24, 48, 72)


def _text(key: bytes, value: str) -> bytes:
    data = value.encode()
    n = len(data)
    return key + (_SMALL_VARINTS[n] if n < 16384 else varint(n)) + data


def _duration(key: bytes, seconds: int) -> bytes:
    inner = _DURATION_SECONDS + varint(seconds)
    return key + _SMALL_VARINTS[len(inner)] + inner


def upstream_extras(job: Job) -> bytes:
    """The JobInfo fields a real spurctld also sends for `job`, as raw protobuf bytes.

    Deterministic per job and plausible (paths under the user's home, a launch
    command line, a comment), so a record is as large as a real one (400-700
    bytes); spurctl's decoder skips them as unknown fields, as it does with a
    real controller's answer. Appended after the known fields: protobuf accepts
    fields in any order.
    """
    jid = job.job_id
    user = job.user or "root"
    name = job.name or f"job{jid}"
    run = f"{name}-{jid}"
    work_dir = f"/home/{user}/runs/{run}"
    gpus = sum(d.count for d in job.resources.devices.get("gpu", ()))
    nodes = max(job.num_nodes, 1)
    per_node = gpus // nodes
    command = (
        f"{work_dir}/launch.sh torchrun --nnodes={nodes} --nproc-per-node={max(per_node, 1)} "
        f"train.py --config configs/{name}.yaml --seed {jid % 9973}"
    )
    comment = (
        f"sweep {name} trial {jid % 97} for {job.account or 'default'}, "
        f"pipeline ci-{jid % 1000:03d}"
    )
    ran = None
    if job.start_time is not None and job.end_time is not None:
        ran = max(int((job.end_time - job.start_time).total_seconds()), 0)
    limit = _TIME_LIMITS_H[jid % len(_TIME_LIMITS_H)] * 3600
    if ran is not None and ran > limit:  # the limit a run reached is at least its run time
        limit = -(-ran // 3600) * 3600
    parts = [
        _duration(_TIME_LIMIT, limit),
        _CPUS_PER_TASK + varint(max(job.resources.cpus // max(job.num_tasks, 1), 1)),
        _text(_WORK_DIR, work_dir),
        _text(_COMMAND, command),
        _text(_STDOUT_PATH, f"{work_dir}/slurm-{jid}.out"),
        _text(_STDERR_PATH, f"{work_dir}/slurm-{jid}.err"),
        _text(_STDIN_PATH, "/dev/null"),
        _PRIORITY + _SMALL_VARINTS[1000 + jid % 5000],
        _text(_QOS, _QOS_NAMES[jid % len(_QOS_NAMES)]),
        _text(_COMMENT, comment),
    ]
    if ran is not None:
        parts.append(_duration(_RUN_TIME, ran))
    if job.state is JobState.FAILED:
        parts.append(_EXIT_CODE + varint(1))
    elif job.state is JobState.OUT_OF_MEMORY:
        parts.append(_EXIT_SIGNAL + varint(9))
    if gpus:
        parts.append(_REQ_GPUS + varint(gpus))
        parts.append(
            _text(_REQ_GPUS_DETAIL, f"gpu:{per_node}/node" if nodes > 1 else f"gpu:{gpus}")
        )
    return b"".join(parts)


class HeartbeatDecision(NamedTuple):
    """spurctld's verdict on one held id of one heartbeat (docs/spur-facts.md, arms 1-7)."""

    node: str
    reported_as: str
    job_id: int
    arm: int
    reclaim: bool


def spur_reclaim_arm(job: Job | None, reported_as: str, job_id: int, next_job_id: int) -> int:
    """Which arm of spurctld's post-#623 `is_reclaimable` decides `job_id` held on `reported_as`.

    The node is the host name the agent reports, compared by exact string
    equality with the job's allocated nodes: a node reporting its FQDN reads as
    not allocated to its own job, which is the hazard this reproduces.
    """
    if job is None:
        return 6 if job_id < next_job_id else 7
    if job.state.terminal:
        return 1
    if job.state.active:
        if not job.nodelist:
            return 3
        return 5 if reported_as in expand(job.nodelist) else 2
    return 4


@dataclasses.dataclass(frozen=True, slots=True)
class CancelTiming:
    """How long spurd takes to free a run it cancels (docs/spur-facts.md, "The agent's
    CancelJob"): SIGTERM, SIGKILL `grace_s` later, and the job released at the monitor's
    next tick (every `monitor_s`) after the run exits. `scaled` keeps tests fast."""

    grace_s: float = 5.0
    monitor_s: float = 2.0

    def scaled(self, factor: float) -> CancelTiming:
        return CancelTiming(self.grace_s * factor, self.monitor_s * factor)


class ClusterState:
    """Everything the simulated controller and agents know, behind `lock`."""

    def __init__(self, scenario: Scenario, spur_release: SpurRelease = MAIN_4CC3DA8) -> None:
        scenario.check()
        self.lock = threading.RLock()
        self.spur_release = spur_release
        self.version = spur_release.version or scenario.version
        self.hostname = scenario.hostname
        self.users = dict(scenario.users)
        self.admins = frozenset(scenario.admins)
        self.inventory_names = dict(scenario.inventory_names)
        # Each node's spurd start as its inventory shows it: slurmd_start_time changing
        # later (as a test may make it lie) does not move it; restart_agent does.
        self.agent_started_at = dict(scenario.agent_started_at)
        # Nodes whose spurd is not running (spurctl_sim/liveness.py): a scan finds none.
        self.spurd_stopped: set[str] = set()
        # Nodes DOWN `Not responding` that kept an admin hold's lock (release v0.8.0, before
        # #624: spurctl_sim/liveness.py); an UpdateNode, a DrainNode or a new record ends it.
        self.locked_not_responding: set[str] = set()
        self.target_names = {n: list(v) for n, v in scenario.target_names.items()}
        self.next_job_id = scenario.next_job_id
        self.jobs: dict[int, Job] = {j.job_id: spur_release.played(j) for j in scenario.jobs}
        self.nodes: dict[str, Node] = {n.name: n for n in scenario.nodes}
        # DeregisterNode: removed records, until each node's spurd registers again
        # (spurctl_sim/node_admin.py), unless its registration is refused.
        self.removed: dict[str, Node] = {}
        self.registration_refused: dict[str, str] = {}
        # Nodes whose spurd heartbeats the moment their record goes: registered again
        # before DeregisterNode answers (the earliest a heartbeat can land).
        self.back_at_once: set[str] = set()
        self.deregistrations: list[tuple[str, bool, str]] = []  # (node, force, reason)
        # A fault: `remove_node` fails past its running-jobs check (a Raft propose failure),
        # answered FAILED_PRECONDITION with this text as spurctld maps every such error.
        self.remove_failure: str | None = None
        # Partitions from labels, the default one, each node's listed (hostlist) ones, and
        # the jobs waiting for any node (spurctl_sim/registration.py).
        self.partition_selectors = {p: dict(v) for p, v in scenario.partition_selectors.items()}
        self.default_partition = scenario.default_partition
        self.listed_partitions = {n.name: n.partitions for n in scenario.nodes}
        self.waiting = list(scenario.waiting)
        # A fault: UpdateNode's labels ("labels") or state ("state") answered INTERNAL with
        # this text, as spurctld answers update_node_labels' and update_node_state's errors;
        # nothing of that part applied (a state sent with labels is applied first).
        self.update_failure: dict[str, str] = {}
        # The labels each node's spurd registers with (an admin's UpdateNode adds others).
        self.agent_labels = {n.name: dict(n.labels) for n in scenario.nodes}
        # Nodes GetNodes no longer lists while jobs still name them (`unlist_node`).
        self.unlisted: set[str] = set()
        self.held: dict[str, dict[int, Holding]] = {name: {} for name in self.nodes}
        for node, holdings in scenario.holdings.items():
            self.held[node] = {h.job_id: h for h in holdings}
        # None: an agent cancel frees a run at once. Set: as spurd does (CancelTiming).
        self.cancel_timing: CancelTiming | None = None
        # (node, job id) of the runs that ignore SIGTERM: freed only after the SIGKILL grace.
        self.ignores_sigterm: set[tuple[str, int]] = set()
        self.generation = 0  # bumped on every change, so a watcher can tell
        # How far the controller's clock (Ping's server_time) is off this host's: a test
        # sets it to skew the controller's clock, or moves it as a watch's fake clock moves.
        self.clock_offset = timedelta(0)
        self._encoded: dict[int, bytes] = {}
        self._by_node: dict[str, set[int]] | None = None  # see _node_index

    # -- controller reads --------------------------------------------------------

    def select_jobs(self, req: pb.GetJobsRequest) -> list[Job]:
        """GetJobs' filters, as spurctld applies them (an empty filter matches all).

        `job_ids` and `nodes` narrow the candidates first (by id, and through the
        node -> job ids index), so a targeted read costs what it selects, not a
        hostlist expansion of every job.
        """
        states = {JobState(s) for s in req.states if s in JobState._value2member_map_}
        ids = set(req.job_ids)
        wanted_nodes = set(req.nodes)
        names = {n.strip() for n in req.name.split(",")} if req.name else set()
        with self.lock:
            if wanted_nodes:
                index = self._node_index()
                on_nodes: set[int] = set()
                for name in wanted_nodes:
                    on_nodes.update(index.get(name, ()))
                ids = ids & on_nodes if ids else on_nodes
                if not ids:
                    return []
            candidates = (
                [self.jobs[i] for i in sorted(ids) if i in self.jobs]
                if ids or wanted_nodes
                else list(self.jobs.values())
            )
        return [
            j
            for j in candidates
            if (not states or j.state in states)
            and (not req.user or j.user == req.user)
            and (not req.partition or j.partition == req.partition)
            and (not req.account or j.account == req.account)
            and (not names or j.name in names)
        ]

    def _node_index(self) -> dict[str, set[int]]:
        """node name -> ids of the jobs whose nodelist names it; built on first use (under
        `lock`), then kept in step by set_job and forget_job."""
        if self._by_node is None:
            index: dict[str, set[int]] = {}
            for job in self.jobs.values():
                for name in allocated(job):
                    index.setdefault(name, set()).add(job.job_id)
            self._by_node = index
        return self._by_node

    def _index_job(self, job: Job, *, sign: int) -> None:
        if self._by_node is None:
            return
        for name in allocated(job):
            if sign > 0:
                self._by_node.setdefault(name, set()).add(job.job_id)
            else:
                held = self._by_node.get(name)
                if held is not None:
                    held.discard(job.job_id)

    def encoded(self, job: Job) -> bytes:
        """JobInfo bytes as a real spurctld sends them: the fields spurctl reads, then the
        ones it does not (`upstream_extras`). Cached per job: a 200,000-job answer is re-sent
        without re-encoding."""
        cached = self._encoded.get(job.job_id)
        if cached is None or self.jobs.get(job.job_id) is not job:
            cached = job_to_pb(job).SerializeToString() + upstream_extras(job)
            if self.jobs.get(job.job_id) is job:
                self._encoded[job.job_id] = cached
        return cached

    def metrics(self) -> tuple[int, Counter[JobState]]:
        with self.lock:
            return len(self.jobs), Counter(j.state for j in self.jobs.values())

    def select_nodes(self, req: pb.GetNodesRequest) -> list[Node]:
        allowed = expand(req.nodelist) if req.nodelist.strip() else None
        states = set(req.states)
        with self.lock:
            nodes = [n for n in self.nodes.values() if n.name not in self.unlisted]
        return [
            n
            for n in nodes
            if (allowed is None or n.name in allowed)
            and (not req.partition or req.partition in n.partitions)
            and (not states or int(n.state) in states)
        ]

    # -- agents --------------------------------------------------------------------

    def reported_name(self, node: str) -> str:
        return self.inventory_names.get(node, node)

    def inventory(self, node: str, collected_at: datetime | None = None) -> Inventory:
        with self.lock:
            if node not in self.held:  # a node whose record was removed still runs its agent
                raise KeyError(f"no node {node!r} in this cluster")
            held = tuple(sorted(self.held[node].values(), key=lambda h: h.job_id))
            agent_start = self.agent_started_at.get(node)
            stopped = node in self.spurd_stopped
            targets = self.target_names.get(node)
            if targets is None:  # spurd sets SPUR_TARGET_NODE on every job process it launches
                targets = [node] if any(h.pids for h in held) else []
        names = tuple(sorted(set(targets)))
        name = self.reported_name(node)
        return Inventory(
            node=name,
            collected_at=collected_at or utcnow(),
            source="simulated",
            held=held,
            agent=None
            if agent_start is None or stopped
            else AgentProcess(SIM_AGENT_PID, agent_start),
            hostname=name,
            target_node=names[0] if len(names) == 1 else None,
            target_nodes=names,
            agent_checked=agent_start is not None or stopped,
        )

    def restart_agent(
        self, node: str, at: datetime, *, graceful: bool = False, requeue: bool = False
    ) -> list[int]:
        """spurd restarts on `node` at `at`, a crash or `graceful`, as this cluster's Spur
        release handles it (spurctl_sim/restarts.py); returns the ids the controller evicted."""
        self._known_node(node)
        return restart_agent(self, node, at, graceful=graceful, requeue=requeue)

    def agent_cancel(self, node: str, job_id: int, signal: int) -> bool:
        """spurd's CancelJob: True when the holding is gone, or will be, because of this call.

        It acts only on a job spurd runs (docs/spur-facts.md, "The agent's CancelJob"):
        signal 0 (graceful), SIGTERM and SIGKILL end a run it launched. For any
        other id it only frees an allocation entry, which a holding with no process
        and no recorded trace stands for here (a reservation), and answers Ok:
        a holding whose only traces are an empty cgroup or a spool directory stays,
        and so does a run begun before the node's spurd started (Spur #803: the
        restarted agent's running map does not have it, though its processes live on).
        With `cancel_timing` set, a run is freed as spurd frees it: after the
        monitor's tick, or the SIGKILL grace first for one that ignores SIGTERM.
        """
        with self.lock:
            holding = self.held[node].get(job_id)
            if holding is not None and holding.tracked_pids and signal in TERMINATING_SIGNALS:
                # The cgroup holds pre-restart orphans beside spurd's own run: the cancel
                # (no run attempt, Spur #592) stops spurd's run, and the orphans stay.
                own = set(holding.tracked_pids)
                left = tuple(p for p in holding.pids if p not in own)
                if left:
                    self.held[node][job_id] = msgspec.structs.replace(
                        holding, pids=left, tracked_pids=()
                    )
                    self.generation += 1
                    return True
            if holding is None or self._orphaned(node, holding):
                return False
            if not holding.pids:
                if holding.traces:
                    return False  # a trace, not a run: nothing in spurd's map to act on
                del self.held[node][job_id]  # release_job frees the reservation
                self.generation += 1
                return True
            if signal not in TERMINATING_SIGNALS:
                return False
            timing = self.cancel_timing
            if timing is None:
                del self.held[node][job_id]
                self.generation += 1
                return True
            stubborn = (node, job_id) in self.ignores_sigterm and signal != 9
            delay = timing.monitor_s + (timing.grace_s if stubborn else 0.0)
            timer = threading.Timer(delay, self._exited, (node, holding))
            timer.daemon = True
            timer.start()
            return True

    def _exited(self, node: str, holding: Holding) -> None:
        """spurd's monitor noticed the run's exit: it releases the job (if still this run)."""
        with self.lock:
            if self.held[node].get(holding.job_id) is holding:
                del self.held[node][holding.job_id]
                self.generation += 1

    def _orphaned(self, node: str, holding: Holding) -> bool:
        agent_start = self.agent_started_at.get(node)
        started = holding.started_at
        return agent_start is not None and started is not None and started < agent_start

    def hold(self, node: str, holding: Holding) -> None:
        with self.lock:
            self._known_node(node)
            self.held[node][holding.job_id] = holding
            self.generation += 1

    def release(self, node: str, job_id: int) -> bool:
        with self.lock:
            self._known_node(node)
            gone = self.held[node].pop(job_id, None) is not None
            self.generation += gone
            return gone

    # -- controller writes ---------------------------------------------------------

    def set_job(self, job: Job) -> None:
        """Insert or replace a job, moving its share of node allocations with it (none for a
        nodelist the simulator cannot read: `allocated`)."""
        with self.lock:
            new_nodes = allocated(job) if job.state.active else frozenset()
            for name in new_nodes:
                self._known_node(name)
            old = self.jobs.get(job.job_id)
            if old is not None:
                if old.state.active:
                    self._charge(old, allocated(old), sign=-1)
                self._index_job(old, sign=-1)
            self.jobs[job.job_id] = job
            self._index_job(job, sign=1)
            self._charge(job, new_nodes, sign=1)
            self._encoded.pop(job.job_id, None)
            self.next_job_id = max(self.next_job_id, job.job_id + 1)
            self.generation += 1

    def requeue(self, job_id: int, nodelist: str, now: datetime | None = None) -> Job:
        """The controller restarts a job under the same id: RUNNING on `nodelist`, or PENDING.

        The new nodes' agents hold the new run; nodes that held the old run keep
        holding it (nothing tells them), which is how the incident began.
        """
        now = now or utcnow()
        # spurctld keeps the nodes it placed the job on and writes them with `compress`.
        nodelist = spur_hostlist.compress(spur_hostlist.expand(nodelist))
        with self.lock:
            job = self._tracked(job_id)
            if nodelist:
                new = msgspec.structs.replace(
                    job,
                    state=JobState.RUNNING,
                    nodelist=nodelist,
                    state_reason="",
                    start_time=now,
                    end_time=None,
                )
            else:
                new = msgspec.structs.replace(
                    job,
                    state=JobState.PENDING,
                    nodelist="",
                    state_reason="requeued",
                    start_time=None,
                    end_time=None,
                )
            self.set_job(new)
            share = node_share(new)
            gpus = tuple(d.device_id for d in share.devices.get("gpu", ()))
            for name in sorted(expand(nodelist)):
                if job_id not in self.held[name]:
                    self.held[name][job_id] = Holding(
                        job_id=job_id,
                        cpus=share.cpus,
                        memory_mb=share.memory_mb,
                        gpus=gpus,
                        pids=(30_000 + job_id % 100_000,),
                        started_at=now,
                    )
            return new

    def forget_job(self, job_id: int) -> Job:
        """Age a job out of the controller's map (its id stays issued: below next_job_id)."""
        with self.lock:
            job = self._tracked(job_id)
            if job.state.active:
                self._charge(job, allocated(job), sign=-1)
            del self.jobs[job_id]
            self._index_job(job, sign=-1)
            self._encoded.pop(job_id, None)
            self.generation += 1
            return job

    def cancel_job(self, job_id: int, now: datetime | None = None) -> tuple[Job, list[str]]:
        """Controller-wide cancel: CANCELLED, allocation freed, every allocated agent told.

        Returns the job as it was and the nodes whose holding the cancel released.
        """
        now = now or utcnow()
        with self.lock:
            job = self._tracked(job_id)
            self.set_job(
                msgspec.structs.replace(
                    job, state=JobState.CANCELLED, end_time=now, state_reason="cancelled"
                )
            )
            released = [
                name
                for name in sorted(allocated(job))
                if name in self.held and self.agent_cancel(name, job_id, 0)
            ]
            return job, released

    def evict_for_down(self, name: str, at: datetime | None = None) -> list[int]:
        """What spurctld does with an admin's UpdateNode(state=DOWN) (cluster.rs
        `update_node_state`, the NodeStateChange to Down): every active job on `name` goes
        to NODE_FAIL (reason NodeDown) and is freed on all its nodes, and no cancel goes
        to any agent, so every node keeps holding its run. Returns the evicted ids."""
        at = at or utcnow()
        with self.lock:
            evicted = sorted(
                j.job_id for j in self.jobs.values() if j.state.active and name in allocated(j)
            )
            for job_id in evicted:
                self.set_job(
                    msgspec.structs.replace(
                        self.jobs[job_id], state=JobState.NODE_FAIL, end_time=at,
                        state_reason="NodeDown",
                    )
                )  # fmt: skip
            return evicted

    def refuse_registration(self, node: str, why: str) -> None:
        """`node`'s spurd can no longer register (its join token expired, say): once its
        record is removed it never comes back."""
        with self.lock:
            self.registration_refused[node] = why

    @contextlib.contextmanager
    def registration_held(self, node: str) -> Iterator[None]:
        """`node`'s spurd does not register while the block runs: a test keeps a removed node
        away until what it runs is over, however late the run's reads come on a loaded
        machine (no race with the heartbeat). After the block it registers at its spurd's
        next heartbeat."""
        self.refuse_registration(node, "held back until the test's block is over")
        try:
            yield
        finally:
            with self.lock:
                self.registration_refused.pop(node, None)

    # -- the controller's heartbeat reclaim --------------------------------------------

    def reclaim_decisions(self, reporting: Iterable[str]) -> list[HeartbeatDecision]:
        """spurctld's decision for every id the `reporting` nodes' agents hold, using the TRUE
        next_job_id and the host name each agent reports."""
        with self.lock:
            out = []
            for node in reporting:
                reported = self.reported_name(node)
                for job_id in sorted(self.held[node]):
                    arm = spur_reclaim_arm(
                        self.jobs.get(job_id), reported, job_id, self.next_job_id
                    )
                    reclaim = arm in self.spur_release.reclaim_arms
                    out.append(HeartbeatDecision(node, reported, job_id, arm, reclaim))
            return out

    # -- helpers -----------------------------------------------------------------------

    def _known_node(self, name: str) -> Node:
        node = self.nodes.get(name)
        if node is None:
            raise KeyError(f"no node {name!r} in this cluster")
        return node

    def _tracked(self, job_id: int) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise KeyError(f"job {job_id} is not tracked by the controller")
        return job

    def _charge(self, job: Job, nodes: Iterable[str], *, sign: int) -> None:
        if not job.state.active:
            return
        share = node_share(job)
        for name in nodes:
            node = self.nodes.get(name)
            if node is None:  # removed (DeregisterNode): no record left to charge
                continue
            alloc: Allocation = add_allocations(node.alloc, share, sign=sign)
            state = busy_state(node, alloc)
            if state is NodeState.DRAINING and not charged(alloc):
                state = NodeState.DRAIN  # deallocate_job_slices: the only way DRAINING ends
            self.nodes[name] = dataclasses.replace(node, alloc=alloc, state=state)
