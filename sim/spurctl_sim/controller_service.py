"""spurctld's SlurmController as the simulated cluster serves it.

GetJobs is scoped to a presented credential's subject, admins too, while
JobMetrics.total counts every job; GetJob answers NOT_FOUND for untracked ids and
redacts another user's nodelist (`job_info_visibility`); a follower refuses writes
with the leader's address in `x-spur-leader`; an answer larger than spurctld will
encode is refused in tonic's words. The settings and the records of what was
received are the SimCluster's (server.py), read at each call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import grpc
from google.protobuf import empty_pb2, timestamp_pb2

from spurctl.model import JobState, utcnow
from spurctl.proto import slurm_pb2 as pb
from spurctl_sim import node_admin
from spurctl_sim.encoders import job_to_pb, node_to_pb, time_to_pb
from spurctl_sim.identity import Body, Identity
from spurctl_sim.node_admin import Refused as _Refused
from spurctl_sim.releases import as_received
from spurctl_sim.state import ClusterState, framed

if TYPE_CHECKING:
    from spurctl_sim.server import SimCluster

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


class ControllerCancel(NamedTuple):
    """A controller CancelJob that cancelled the job cluster-wide."""

    job_id: int
    signal: int
    user: str
    subject: str | None


def _passthrough(body: bytes) -> bytes:
    return body


class ControllerService:
    """The SlurmController service of `sim`'s spurctld."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim

    def handler(self) -> grpc.GenericRpcHandler:
        hint = "pass a token (see `spur token user`)"

        def method(
            name: str, body: Body, req: Any, resp: Any = None, *, offload: bool = False
        ) -> tuple[str, grpc.RpcMethodHandler]:
            serialize = resp.SerializeToString if resp is not None else _passthrough
            return name, self.sim.method_handler(
                "controller",
                name,
                body,
                req,
                serialize,
                latency=lambda: self.sim.controller_latency,
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
        self.sim.job_requests.append(pb.GetJobsRequest.FromString(req.SerializeToString()))
        req = as_received(self.sim.spur_release, req)
        # spurctld overwrites the asserted user with the credential's subject, admins too.
        if identity is not None:
            req.user = identity.user
        # GetJobsResponse is `repeated JobInfo jobs = 1`: concatenate cached encodings.
        parts = []
        for job in self.sim.state.select_jobs(req):
            body = self.sim.state.encoded(job)
            parts.append(framed(body))
        answer = b"".join(parts)
        self._check_size(len(answer), self.sim.answer_limit)
        self.sim.answer_sizes.append(len(answer))
        return answer

    @staticmethod
    def _check_size(size: int, limit: int | None) -> None:
        """spurctld's encoder refuses an answer over MAX_GRPC_MESSAGE_SIZE (tonic's words)."""
        if limit is not None and size > limit:
            raise _Refused(grpc.StatusCode.OUT_OF_RANGE, too_large(size, limit))

    def _get_job(self, req: pb.GetJobRequest, identity: Identity | None) -> pb.JobInfo:
        job = self.sim.job(req.job_id)
        if job is None:
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"job {req.job_id} not found")
        if identity is not None and not identity.admin and identity.user != job.user:
            if self.sim.job_info_visibility == "owner_only":
                # Indistinguishable from an untracked id, on purpose.
                raise _Refused(grpc.StatusCode.NOT_FOUND, f"job {req.job_id} not found")
            if self.sim.job_info_visibility == "redacted":
                # Upstream blanks the paths, command and comment too: the lean record.
                msg = job_to_pb(job)
                msg.nodelist = ""
                msg.ClearField("resources")
                return msg
        # The whole real-sized record, as GetJobs sends it (unknown fields kept).
        return pb.JobInfo.FromString(self.sim.state.encoded(job))

    def _get_nodes(self, req: pb.GetNodesRequest, identity: Identity | None) -> pb.GetNodesResponse:
        try:
            nodes = self.sim.state.select_nodes(req)
        except ValueError as exc:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        answer = pb.GetNodesResponse(nodes=[node_to_pb(n) for n in nodes])
        self._check_size(answer.ByteSize(), self.sim.nodes_answer_limit)
        return answer

    def _get_node(self, req: pb.GetNodeRequest, identity: Identity | None) -> pb.NodeInfo:
        with self.sim.state.lock:
            node = self.sim.state.nodes.get(req.name)
        if node is None:
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"node {req.name} not found")
        return node_to_pb(node)

    def _ping(self, req: empty_pb2.Empty, identity: Identity | None) -> pb.PingResponse:
        now = timestamp_pb2.Timestamp()
        time_to_pb(utcnow() + self.sim.state.clock_offset, now)
        return pb.PingResponse(
            hostname=self.sim.state.hostname, server_time=now, version=self.sim.state.version
        )

    def _metrics(self, req: empty_pb2.Empty, identity: Identity | None) -> pb.JobMetrics:
        total, by_state = self.sim.state.metrics()
        return pb.JobMetrics(
            total=total,
            by_state=[
                pb.JobStateCount(state=int(s), count=by_state.get(s, 0))  # type: ignore[arg-type]
                for s in JobState
                if self.sim.spur_release.knows(s)
            ],
        )

    def _cancel_job(self, req: pb.CancelJobRequest, identity: Identity | None) -> empty_pb2.Empty:
        self._leader_only()
        user = identity.user if identity is not None else req.user
        with self.sim.state.lock:
            job = self.sim.state.jobs.get(req.job_id)
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
            self.sim.state.cancel_job(req.job_id)
            self.sim.controller_cancels.append(
                ControllerCancel(req.job_id, req.signal, user, identity.user if identity else None)
            )
        return empty_pb2.Empty()

    def _leader_only(self) -> None:
        if self.sim.follower_of:
            raise _Refused(
                grpc.StatusCode.UNAVAILABLE,
                "not the Raft leader",
                trailing=((LEADER_HEADER, self.sim.follower_of),),
            )

    def _admin(self, rpc: Callable[[ClusterState, Any, int], Any], admin_only: str = "") -> Body:
        """A node administration RPC (spurctl_sim/node_admin.py) on the leader, given the
        caller's uid (0 when anonymous); `admin_only` names an operation spurctld gates on a
        verified admin (at 4cc3da8 UpdateNode is; DrainNode and DeregisterNode are not)."""

        def body(req: Any, identity: Identity | None) -> Any:
            self._leader_only()
            if admin_only and identity is not None and not identity.admin:
                raise _Refused(
                    grpc.StatusCode.PERMISSION_DENIED, f"{admin_only} requires cluster admin"
                )
            return rpc(self.sim.state, req, identity.uid if identity is not None else 0)

        return body
