"""A simulated Spur cluster on loopback: spurctld and one spurd per node, over real gRPC.

It answers like the real daemons, inconvenient parts included (docs/spur-facts.md):
GetJobs is scoped to a presented credential's subject, admins too, while
JobMetrics.total counts every job; GetJob answers NOT_FOUND for untracked ids
and redacts another user's nodelist; a follower refuses writes with the
leader's address in `x-spur-leader`; answers have no size cap; the agent's
CancelJob demands the controller's credential and GetNodeResources reports
nothing as used.

Every server runs on one asyncio event loop in one background thread: a gRPC
handler cannot tell which local port a call came in on, so each node needs its
own server, and grpc.aio servers cost a listening socket each rather than a
thread pool each (1,000 agents start in well under a second).

The services are controller_service.py (SlurmController) and agent_service.py
(SlurmAgent); identity.py rules on who a call comes from.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import grpc

from spurctl.model import Holding, Inventory, Job, Node, NodeState, utcnow
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl_sim import liveness, node_admin
from spurctl_sim.agent_service import AgentCancel, agent_handler
from spurctl_sim.controller_service import (
    ANSWER_LIMIT,
    VISIBILITIES,
    ControllerCancel,
    ControllerService,
    Visibility,
)
from spurctl_sim.identity import AUTH_MODES, AuthMode, Body, authenticate
from spurctl_sim.node_admin import Refused as _Refused
from spurctl_sim.releases import MAIN_4CC3DA8, SpurRelease
from spurctl_sim.scenario import Scenario
from spurctl_sim.state import ClusterState, HeartbeatDecision

# Stopping with a grace period sends clients a clean GOAWAY; without one, every
# open client channel in the process logs a "Got goaway ... Cancelling all calls".
_STOP_GRACE_S = 0.2

_SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.so_reuseport", 0),
]


class Refusal(NamedTuple):
    """A call answered with an error status; `endpoint` is "controller" or the node name."""

    endpoint: str
    method: str
    code: grpc.StatusCode
    detail: str


def _echo(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """A call's metadata as a careless server's error path prints it."""
    return "; ".join(
        f"{k}={v if isinstance(v, str) else v.decode(errors='replace')}"
        for k, v in context.invocation_metadata() or ()
    )


class SimCluster:
    """spurctld plus one spurd per node, serving a Scenario on 127.0.0.1.

    `agents`: True for an agent on every node, False for none, or the node names
    that run one; a node without a running agent neither answers nor heartbeats.
    `agent_auth` is the agents' `[auth] mode` when it differs from the
    controller's (each daemon reads its own spur.conf, e.g. agents that already
    demand the credential next to a controller that still answers anonymously).
    `keyless` names the endpoints ("controller", or node names) whose spur.conf has
    no `[auth] jwt_key`: there, as in Spur's `authenticate_bearer`, any presented
    token is refused ("a token was presented but no auth.jwt_key is configured")
    while an anonymous call passes unless the mode is `required`.
    `heartbeat_reclaim` makes `heartbeat()` apply spurctld's heartbeat reclaim (without
    it the controller reclaims nothing); `heartbeat_interval` runs it in the background.
    `agent_echo` (a fault, settable at any time) makes every agent fail each call with
    an error whose details echo the call's `authorization` metadata, as a careless
    server's error path might; `controller_echo` makes every refusal of the
    controller's (a bad credential, a follower's) echo it too. Records of what was
    received: `cancels` (agent CancelJob), `controller_cancels`, `refusals`,
    `heartbeat_reclaims`. `agent_terms` (settable at any time): the highest controller
    term each named node's agent has seen, under Spur #600's term fencing (not merged):
    such an agent refuses every cancel without a term. `job_info_visibility` is the
    controller's setting of that name: under `owner_only`, GetJob answers NOT_FOUND to
    a non-admin caller for another user's job, exactly as for an untracked id.
    `spur_release` is the Spur it plays (spurctl_sim/releases.py: GetJobs' filters,
    JobMetrics, Ping's version, the heartbeat reclaim's arms, what a graceful spurd
    restart does).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        auth: AuthMode = "disabled",
        agent_auth: AuthMode | None = None,
        jwt_key: str | None = None,
        follower_of: str | None = None,
        heartbeat_reclaim: bool = False,
        heartbeat_interval: float | None = None,
        agents: bool | Iterable[str] = True,
        agent_latency: float = 0.0,
        controller_latency: float = 0.0,
        job_info_visibility: Visibility = "redacted",
        agent_echo: bool = False,
        controller_echo: bool = False,
        answer_limit: int | None = ANSWER_LIMIT,
        nodes_answer_limit: int | None = ANSWER_LIMIT,
        keyless: Iterable[str] = (),
        spur_release: SpurRelease = MAIN_4CC3DA8,
    ) -> None:
        if job_info_visibility not in VISIBILITIES:
            raise ValueError(
                f"job_info_visibility must be one of {', '.join(VISIBILITIES)}, "
                f"got {job_info_visibility!r}"
            )
        self.job_info_visibility: Visibility = job_info_visibility
        agent_auth = auth if agent_auth is None else agent_auth
        for mode in (auth, agent_auth):
            if mode not in AUTH_MODES:
                raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}, got {mode!r}")
            if mode != "disabled" and not jwt_key:
                raise ValueError(f"auth mode {mode!r} needs a jwt_key")
        self.state = ClusterState(scenario, spur_release)
        self.spur_release = spur_release
        self.auth_mode: AuthMode = auth
        self.agent_auth_mode: AuthMode = agent_auth
        self._jwt_key = jwt_key or ""
        self.keyless = frozenset(keyless)
        self.follower_of = follower_of
        self.heartbeat_reclaim, self.heartbeat_interval = heartbeat_reclaim, heartbeat_interval
        self.agent_latency, self.controller_latency = agent_latency, controller_latency
        self.agent_echo, self.controller_echo = agent_echo, controller_echo
        # spurctld refuses to encode an answer larger than this (None: no limit). Tests
        # shrink the job answers' limit to make a small cluster split as a large one
        # must; node answers keep their own (20,000 nodes encode to ~6 MB).
        self.answer_limit = answer_limit
        self.nodes_answer_limit = nodes_answer_limit
        if agents is True:
            wanted = list(self.state.nodes)
        elif agents is False:
            wanted = []
        else:
            wanted = list(dict.fromkeys(agents))
            unknown = [n for n in wanted if n not in self.state.nodes]
            if unknown:
                raise ValueError(f"agents names node {unknown[0]!r}, which is not in the scenario")
        self._agents_up: dict[str, None] = dict.fromkeys(wanted)

        self.agent_terms: dict[str, int] = {}
        self.cancels: list[AgentCancel] = []
        self.controller_cancels: list[ControllerCancel] = []
        self.refusals: list[Refusal] = []
        # Every GetJobs request as received, and the size of every GetJobs answer sent.
        self.job_requests: list[pb.GetJobsRequest] = []
        self.answer_sizes: list[int] = []
        self.heartbeat_reclaims: list[HeartbeatDecision] = []

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._controller: grpc.aio.Server | None = None
        self._controller_port = 0
        self._agent_servers: dict[str, grpc.aio.Server] = {}
        self._agent_ports: dict[str, int] = {}
        self._heartbeat_task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> SimCluster:
        if self._loop is not None:
            raise RuntimeError("this SimCluster is already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="spurctl-simcluster", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._run(self._start_servers())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._run(self._stop_servers())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _start_servers(self) -> None:
        await self._serve_controller(0)
        for node in self._agents_up:
            await self._serve_agent(node)
        if self.heartbeat_interval:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._beat())

    async def _stop_servers(self) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            self._heartbeat_task = None
        servers = [s for s in (self._controller, *self._agent_servers.values()) if s is not None]
        await asyncio.gather(*(s.stop(_STOP_GRACE_S) for s in servers))
        self._controller = None
        self._agent_servers.clear()
        self._agent_ports.clear()

    async def _beat(self) -> None:
        assert self.heartbeat_interval
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            self.heartbeat()

    # -- where things are ----------------------------------------------------------

    @property
    def controller_address(self) -> str:
        if not self._controller_port:
            raise RuntimeError("start the SimCluster first")
        return f"http://127.0.0.1:{self._controller_port}"

    def agent_map(self) -> dict[str, str]:
        """node -> "127.0.0.1:port" for every agent serving now."""
        return {node: f"127.0.0.1:{port}" for node, port in self._agent_ports.items()}

    @property
    def next_job_id(self) -> int:
        """The controller's true watermark (Spur does not expose it over RPC)."""
        return self.state.next_job_id

    # -- what the agents hold --------------------------------------------------------

    def inventory(self, node: str) -> Inventory:
        """What `node` holds now, as `spurctl node-inventory` on it would report."""
        return self.state.inventory(node)

    def inventories(self) -> list[Inventory]:
        collected = utcnow()
        return [self.state.inventory(node, collected) for node in self.state.held]

    def write_inventories(self, path: Path) -> Path:
        """Every node's inventory as JSON Lines (`spurctl.inventory/v1`, one node a line)."""
        lines = [json.dumps(inventory_to_dict(inv)) for inv in self.inventories()]
        # Written aside and renamed, so a reader never sees half a file.
        partial = path.with_name(path.name + ".partial")
        partial.write_text("".join(line + "\n" for line in lines))
        partial.replace(path)
        return path

    def holdings(self, node: str) -> tuple[Holding, ...]:
        return self.state.inventory(node).held

    def job(self, job_id: int) -> Job | None:
        with self.state.lock:
            return self.state.jobs.get(job_id)

    def node(self, name: str) -> Node:
        with self.state.lock:
            return self.state.nodes[name]

    # -- mutators for tests --------------------------------------------------------------

    def restart_agent(
        self, node: str, at: datetime, *, graceful: bool = False, requeue: bool = False
    ) -> list[int]:
        """Restart `node`'s spurd at `at`, a crash or `graceful`: ClusterState.restart_agent."""
        return self.state.restart_agent(node, at, graceful=graceful, requeue=requeue)

    def requeue(self, job_id: int, nodelist: str) -> Job:
        """Restart a tracked job on `nodelist` (RUNNING) or, with "", make it PENDING again."""
        return self.state.requeue(job_id, nodelist)

    def set_job(self, job: Job) -> None:
        self.state.set_job(job)

    def forget_job(self, job_id: int) -> Job:
        """Age a job out of the controller's map; its id stays below next_job_id."""
        return self.state.forget_job(job_id)

    def hold(self, node: str, holding: Holding) -> None:
        self.state.hold(node, holding)

    def release(self, node: str, job_id: int) -> bool:
        return self.state.release(node, job_id)

    def admin_update(
        self, node: str, state: NodeState, reason: str = "", *, uid: int = 1000
    ) -> Node:
        """An admin's (or a health check's) UpdateNode as spurctld applies it, from `uid`
        (`spur node update NAME state=drain reason=...` by another person than spurctl)."""
        return node_admin.update_node(self.state, node, state, reason, uid=uid)

    def unlist_node(self, node: str) -> None:
        """GetNodes stops listing `node` while the jobs placed there keep naming it (a node
        dropped from the controller's node list under a running job)."""
        with self.state.lock:
            self.state.unlisted.add(node)
            self.state.generation += 1

    def stop_agent(self, node: str) -> None:
        """The node's spurd goes away: its port closes and it stops heartbeating."""
        self._agents_up.pop(node, None)
        server = self._agent_servers.pop(node, None)
        self._agent_ports.pop(node, None)
        if server is not None:
            self._run(server.stop(_STOP_GRACE_S))

    def lose_heartbeat(self, node: str, at: datetime | None = None) -> list[int]:
        """The node's spurd stops and the controller times its heartbeat out
        (spurctl_sim/liveness.py): DOWN, an admin hold's reason kept. Returns the evicted ids."""
        self.stop_agent(node)
        return liveness.heartbeat_lost(self.state, node, at or utcnow())

    def start_agent(self, node: str, at: datetime | None = None) -> None:
        """The node's spurd starts again at `at` (its port served, its heartbeat back): a
        locked DOWN stays DOWN (spurctl_sim/liveness.py)."""
        liveness.heartbeat_back(self.state, node, at or utcnow())
        if node not in self._agents_up:
            self._agents_up[node] = None
            self._run(self._serve_agent(node))

    async def _serve_agent(self, node: str) -> None:
        server = grpc.aio.server(handlers=[agent_handler(self, node)], options=_SERVER_OPTIONS)
        self._agent_ports[node] = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._agent_servers[node] = server

    def stop_controller(self) -> None:
        """spurctld goes away (a restart, a failover): its port closes; agents' heartbeats
        reach nothing, so no removed node registers again until `start_controller`."""
        server, self._controller = self._controller, None
        if server is not None:
            self._run(server.stop(_STOP_GRACE_S))

    def start_controller(self) -> None:
        """spurctld back on the port it had, with the state it had (Raft kept it)."""
        if self._controller is None:
            self._run(self._serve_controller(self._controller_port))

    async def _serve_controller(self, port: int) -> None:
        server = grpc.aio.server(
            handlers=[ControllerService(self).handler()], options=_SERVER_OPTIONS
        )
        self._controller_port = server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        self._controller = server

    # -- the controller's heartbeat reclaim -------------------------------------------

    def heartbeat(self) -> list[HeartbeatDecision]:
        """One heartbeat from every running agent: one whose node record was removed registers
        again (spurctl_sim/node_admin.py), and the held ids are decided as spurctld would (its
        release's arms: #580 or #623). Reclaimable holdings are released (the agent
        CancelJob, signal 0) and appended to `heartbeat_reclaims`. Returns every decision,
        spared ones included; a controller without `heartbeat_reclaim` decides nothing."""
        if self._controller is None:  # spurctld is away: the heartbeats reach nothing
            return []
        node_admin.reregister(self.state, list(self._agents_up), utcnow())
        if not self.heartbeat_reclaim:
            return []
        with self.state.lock:
            decisions = self.state.reclaim_decisions(list(self._agents_up))
            for d in decisions:
                if d.reclaim and self.state.agent_cancel(d.node, d.job_id, 0):
                    self.heartbeat_reclaims.append(d)
        return decisions

    # -- one call, as both daemons serve it -------------------------------------------

    def method_handler(
        self,
        endpoint: str,
        method: str,
        body: Body,
        request_type: Any,
        serialize: Callable[[Any], bytes],
        *,
        latency: Callable[[], float],
        missing_hint: str,
        offload: bool = False,
    ) -> grpc.RpcMethodHandler:
        """One call of `method` on `endpoint` ("controller" or a node name), as both daemons
        serve it (controller_service.py and agent_service.py build theirs here): the latency,
        the bearer ruling (identity.py), the echo faults, then `body`; a refusal is recorded
        in `refusals` and answered with its status."""
        mode = self.auth_mode if endpoint == "controller" else self.agent_auth_mode

        async def handle(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            delay = latency()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                identity = authenticate(
                    context.invocation_metadata(),
                    mode=mode,
                    missing_hint=missing_hint,
                    endpoint=endpoint,
                    keyless=self.keyless,
                    jwt_key=self._jwt_key,
                    admins=self.state.admins,
                )
                if endpoint != "controller" and self.agent_echo:
                    raise _Refused(
                        grpc.StatusCode.INTERNAL,
                        f"{method} failed; request metadata: {_echo(context)}",
                    )
                if offload:
                    loop = asyncio.get_running_loop()
                    return await loop.run_in_executor(None, body, request, identity)
                return body(request, identity)
            except _Refused as refused:
                if endpoint == "controller" and self.controller_echo:
                    refused.detail = f"{refused.detail}; request metadata: {_echo(context)}"
                self.refusals.append(Refusal(endpoint, method, refused.code, refused.detail))
                error = refused
            await context.abort(error.code, error.detail, trailing_metadata=error.trailing)

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=request_type.FromString, response_serializer=serialize
        )
