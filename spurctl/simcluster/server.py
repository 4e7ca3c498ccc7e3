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
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NamedTuple

import grpc
from google.protobuf import empty_pb2, timestamp_pb2

from spurctl.model import Holding, Inventory, Job, JobState, Node, utcnow
from spurctl.proto import slurm_pb2 as pb
from spurctl.simcluster import node_admin
from spurctl.simcluster.node_admin import Refused as _Refused
from spurctl.simcluster.releases import MAIN_4CC3DA8, SpurRelease, as_received
from spurctl.simcluster.scenario import Scenario
from spurctl.simcluster.state import ClusterState, HeartbeatDecision, framed
from spurctl.sources import credentials as auth
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl.sources.wire import job_to_pb, node_to_pb, resource_set_to_pb

AuthMode = Literal["disabled", "permissive", "required"]
AUTH_MODES: tuple[AuthMode, ...] = ("disabled", "permissive", "required")
# spur.conf `[controller] job_info_visibility`: what GetJob shows a non-admin caller
# of another user's job (redacted: the job without nodelist and resources).
Visibility = Literal["redacted", "owner_only", "full"]
VISIBILITIES: tuple[Visibility, ...] = ("redacted", "owner_only", "full")
LEADER_HEADER = "x-spur-leader"
# spur-proto MAX_GRPC_MESSAGE_SIZE: spurctld's encoder refuses a larger answer.
ANSWER_LIMIT = 32 * 1024 * 1024


def too_large(size: int, limit: int) -> str:
    """tonic 0.14's refusal of an answer over its encoding limit (codec/encode.rs)."""
    return (
        f"Error, encoded message length too large: found {size} bytes, the limit is: {limit} bytes"
    )


# spurctld's jsonwebtoken validation tolerates 60 s of clock skew on exp.
TOKEN_LEEWAY_S = 60
# Stopping with a grace period sends clients a clean GOAWAY; without one, every
# open client channel in the process logs a "Got goaway ... Cancelling all calls".
_STOP_GRACE_S = 0.2

_SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.so_reuseport", 0),
]


class AgentCancel(NamedTuple):
    """An agent CancelJob the agent accepted (it may have been a no-op for an unknown id)."""

    node: str
    job_id: int
    signal: int
    subject: str | None


class ControllerCancel(NamedTuple):
    """A controller CancelJob that cancelled the job cluster-wide."""

    job_id: int
    signal: int
    user: str
    subject: str | None


class Refusal(NamedTuple):
    """A call answered with an error status; `endpoint` is "controller" or the node name."""

    endpoint: str
    method: str
    code: grpc.StatusCode
    detail: str


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    uid: int
    admin: bool


def _passthrough(body: bytes) -> bytes:
    return body


Body = Callable[[Any, Identity | None], Any]


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
    `heartbeat_reclaims`. `job_info_visibility` is the controller's setting of that
    name: under `owner_only`, GetJob answers NOT_FOUND to a non-admin caller for
    another user's job, exactly as for an untracked id. `spur_release` is the Spur it
    plays (simcluster/releases.py: GetJobs' filters, JobMetrics, Ping's version, the
    heartbeat reclaim's arms, what a graceful spurd restart does).
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
        self._controller = grpc.aio.server(
            handlers=[self._controller_handler()], options=_SERVER_OPTIONS
        )
        self._controller_port = self._controller.add_insecure_port("127.0.0.1:0")
        await self._controller.start()
        for node in self._agents_up:
            server = grpc.aio.server(handlers=[self._agent_handler(node)], options=_SERVER_OPTIONS)
            self._agent_ports[node] = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            self._agent_servers[node] = server
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
        if self._controller is None:
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

    # -- the controller's heartbeat reclaim -------------------------------------------

    def heartbeat(self) -> list[HeartbeatDecision]:
        """One heartbeat from every running agent: one whose node record was removed registers
        again (simcluster/node_admin.py), and the held ids are decided as spurctld would (its
        release's arms: #580 or #623). Reclaimable holdings are released (the agent
        CancelJob, signal 0) and appended to `heartbeat_reclaims`. Returns every decision,
        spared ones included; a controller without `heartbeat_reclaim` decides nothing."""
        node_admin.reregister(self.state, list(self._agents_up), utcnow())
        if not self.heartbeat_reclaim:
            return []
        with self.state.lock:
            decisions = self.state.reclaim_decisions(list(self._agents_up))
            for d in decisions:
                if d.reclaim and self.state.agent_cancel(d.node, d.job_id, 0):
                    self.heartbeat_reclaims.append(d)
        return decisions

    # -- authentication ------------------------------------------------------------------

    def _authenticate(
        self, metadata: Any, *, mode: AuthMode, missing_hint: str, endpoint: str = "controller"
    ) -> Identity | None:
        """spurctld/spurd's bearer ruling: an identity, None (anonymous), or a refusal."""
        header = next((str(v) for k, v in metadata or () if k == "authorization"), None)
        if header is None:
            if mode == "required":
                raise _Refused(
                    grpc.StatusCode.UNAUTHENTICATED, f"authentication required: {missing_hint}"
                )
            return None
        # As in Spur, a header that is not "Bearer <token>" is refused in every mode.
        try:
            token = auth.bearer_token(header)
        except auth.CredentialError as exc:
            raise _Refused(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None
        if mode == "disabled":
            return None
        if endpoint in self.keyless:
            # spur-core auth.rs authenticate_bearer: no key, so no token can be verified.
            raise _Refused(
                grpc.StatusCode.UNAUTHENTICATED,
                "a token was presented but no auth.jwt_key is configured",
            )
        try:
            claims = auth.verify(token, self._jwt_key, leeway_s=TOKEN_LEEWAY_S)
        except auth.CredentialError as exc:
            raise _Refused(grpc.StatusCode.UNAUTHENTICATED, f"invalid credential: {exc}") from None
        admin = claims.admin or claims.sub == "root" or claims.sub in self.state.admins
        return Identity(claims.sub, claims.uid, admin)

    def _leader_only(self) -> None:
        if self.follower_of:
            raise _Refused(
                grpc.StatusCode.UNAVAILABLE,
                "not the Raft leader",
                trailing=((LEADER_HEADER, self.follower_of),),
            )

    # -- plumbing ------------------------------------------------------------------------

    def _method(
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
        mode = self.auth_mode if endpoint == "controller" else self.agent_auth_mode

        async def handle(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            delay = latency()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                identity = self._authenticate(
                    context.invocation_metadata(),
                    mode=mode,
                    missing_hint=missing_hint,
                    endpoint=endpoint,
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

    # -- SlurmController -------------------------------------------------------------------

    def _controller_handler(self) -> grpc.GenericRpcHandler:
        hint = "pass a token (see `spur token user`)"

        def method(
            name: str, body: Body, req: Any, resp: Any = None, *, offload: bool = False
        ) -> tuple[str, grpc.RpcMethodHandler]:
            serialize = resp.SerializeToString if resp is not None else _passthrough
            return name, self._method(
                "controller",
                name,
                body,
                req,
                serialize,
                latency=lambda: self.controller_latency,
                missing_hint=hint,
                offload=offload,
            )

        return grpc.method_handlers_generic_handler(
            "slurm.SlurmController",
            dict(
                [
                    method("GetJobs", self._get_jobs, pb.GetJobsRequest, offload=True),
                    method("GetJob", self._get_job, pb.GetJobRequest, pb.JobInfo),
                    method(
                        "GetNodes",
                        self._get_nodes,
                        pb.GetNodesRequest,
                        pb.GetNodesResponse,
                        offload=True,
                    ),
                    method("GetNode", self._get_node, pb.GetNodeRequest, pb.NodeInfo),
                    method("Ping", self._ping, empty_pb2.Empty, pb.PingResponse),
                    method("GetJobMetrics", self._metrics, empty_pb2.Empty, pb.JobMetrics),
                    method("CancelJob", self._cancel_job, pb.CancelJobRequest, empty_pb2.Empty),
                    method(
                        "UpdateNode",
                        self._admin(node_admin.update_node_rpc, "update node"),
                        pb.UpdateNodeRequest,
                        empty_pb2.Empty,
                    ),
                    method(
                        "DrainNode",
                        self._admin(node_admin.drain_node_rpc),
                        pb.DrainNodeRequest,
                        pb.DrainNodeResponse,
                    ),
                    method(
                        "DeregisterNode",
                        self._admin(node_admin.deregister_node_rpc),
                        pb.DeregisterNodeRequest,
                        pb.DeregisterNodeResponse,
                    ),
                ]
            ),
        )

    def _get_jobs(self, req: pb.GetJobsRequest, identity: Identity | None) -> bytes:
        self.job_requests.append(pb.GetJobsRequest.FromString(req.SerializeToString()))
        req = as_received(self.spur_release, req)
        # spurctld overwrites the asserted user with the credential's subject, admins too.
        if identity is not None:
            req.user = identity.user
        # GetJobsResponse is `repeated JobInfo jobs = 1`: concatenate cached encodings.
        parts = []
        for job in self.state.select_jobs(req):
            body = self.state.encoded(job)
            parts.append(framed(body))
        answer = b"".join(parts)
        self._check_size(len(answer), self.answer_limit)
        self.answer_sizes.append(len(answer))
        return answer

    @staticmethod
    def _check_size(size: int, limit: int | None) -> None:
        """spurctld's encoder refuses an answer over MAX_GRPC_MESSAGE_SIZE (tonic's words)."""
        if limit is not None and size > limit:
            raise _Refused(grpc.StatusCode.OUT_OF_RANGE, too_large(size, limit))

    def _get_job(self, req: pb.GetJobRequest, identity: Identity | None) -> pb.JobInfo:
        job = self.job(req.job_id)
        if job is None:
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"job {req.job_id} not found")
        if identity is not None and not identity.admin and identity.user != job.user:
            if self.job_info_visibility == "owner_only":
                # Indistinguishable from an untracked id, on purpose.
                raise _Refused(grpc.StatusCode.NOT_FOUND, f"job {req.job_id} not found")
            if self.job_info_visibility == "redacted":
                # Upstream blanks the paths, command and comment too: the lean record.
                msg = job_to_pb(job)
                msg.nodelist = ""
                msg.ClearField("resources")
                return msg
        # The whole real-sized record, as GetJobs sends it (unknown fields kept).
        return pb.JobInfo.FromString(self.state.encoded(job))

    def _get_nodes(self, req: pb.GetNodesRequest, identity: Identity | None) -> pb.GetNodesResponse:
        try:
            nodes = self.state.select_nodes(req)
        except ValueError as exc:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        answer = pb.GetNodesResponse(nodes=[node_to_pb(n) for n in nodes])
        self._check_size(answer.ByteSize(), self.nodes_answer_limit)
        return answer

    def _get_node(self, req: pb.GetNodeRequest, identity: Identity | None) -> pb.NodeInfo:
        with self.state.lock:
            node = self.state.nodes.get(req.name)
        if node is None:
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"node {req.name} not found")
        return node_to_pb(node)

    def _ping(self, req: empty_pb2.Empty, identity: Identity | None) -> pb.PingResponse:
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        return pb.PingResponse(
            hostname=self.state.hostname, server_time=now, version=self.state.version
        )

    def _metrics(self, req: empty_pb2.Empty, identity: Identity | None) -> pb.JobMetrics:
        total, by_state = self.state.metrics()
        return pb.JobMetrics(
            total=total,
            by_state=[
                pb.JobStateCount(state=int(s), count=by_state.get(s, 0))  # type: ignore[arg-type]
                for s in JobState
                if self.spur_release.knows(s)
            ],
        )

    def _cancel_job(self, req: pb.CancelJobRequest, identity: Identity | None) -> empty_pb2.Empty:
        self._leader_only()
        user = identity.user if identity is not None else req.user
        with self.state.lock:
            job = self.state.jobs.get(req.job_id)
            if job is None:
                raise _Refused(grpc.StatusCode.INTERNAL, f"job {req.job_id} not found")
            if job.state.terminal:
                raise _Refused(
                    grpc.StatusCode.INTERNAL,
                    f"job {req.job_id} is already {job.state.name.title().replace('_', '')}",
                )
            # spurctld: only the owner, root or an internal (empty) user may cancel.
            if user not in ("", "root", job.user):
                raise _Refused(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"user {user} cannot cancel job owned by {job.user}",
                )
            self.state.cancel_job(req.job_id)
            self.controller_cancels.append(
                ControllerCancel(req.job_id, req.signal, user, identity.user if identity else None)
            )
        return empty_pb2.Empty()

    def _admin(self, rpc: Callable[[ClusterState, Any], Any], admin_only: str = "") -> Body:
        """A node administration RPC (simcluster/node_admin.py) on the leader; `admin_only`
        names an operation spurctld gates on a verified admin (at 4cc3da8 UpdateNode is;
        DrainNode and DeregisterNode are not)."""

        def body(req: Any, identity: Identity | None) -> Any:
            self._leader_only()
            if admin_only and identity is not None and not identity.admin:
                raise _Refused(
                    grpc.StatusCode.PERMISSION_DENIED, f"{admin_only} requires cluster admin"
                )
            return rpc(self.state, req)

        return body

    # -- SlurmAgent ---------------------------------------------------------------------------

    def _agent_handler(self, node: str) -> grpc.GenericRpcHandler:
        hint = "this agent only accepts calls carrying the cluster credential"

        def cancel(req: pb.AgentCancelJobRequest, identity: Identity | None) -> empty_pb2.Empty:
            # A valid user token verifies like the controller's; only the subject tells them apart.
            if identity is not None and identity.user != auth.CONTROLLER_SUBJECT:
                raise _Refused(
                    grpc.StatusCode.PERMISSION_DENIED,
                    "this RPC is reachable only by the cluster controller; caller "
                    f"'{identity.user}' is not the controller — route the request through spurctld",
                )
            self.state.agent_cancel(node, req.job_id, req.signal)
            self.cancels.append(
                AgentCancel(node, req.job_id, req.signal, identity.user if identity else None)
            )
            return empty_pb2.Empty()

        def resources(req: empty_pb2.Empty, identity: Identity | None) -> pb.NodeResourcesResponse:
            # The real agent reports its total and leaves `used` empty.
            msg = pb.NodeResourcesResponse()
            resource_set_to_pb(self.node(node).total, msg.total)
            msg.used.SetInParent()
            return msg

        def method(name: str, body: Body, req: Any, resp: Any) -> tuple[str, grpc.RpcMethodHandler]:
            return name, self._method(
                node,
                name,
                body,
                req,
                resp.SerializeToString,
                latency=lambda: self.agent_latency,
                missing_hint=hint,
            )

        return grpc.method_handlers_generic_handler(
            "slurm.SlurmAgent",
            dict(
                [
                    method("CancelJob", cancel, pb.AgentCancelJobRequest, empty_pb2.Empty),
                    method(
                        "GetNodeResources", resources, empty_pb2.Empty, pb.NodeResourcesResponse
                    ),
                ]
            ),
        )
