"""spurd's SlurmAgent as the simulated cluster serves it, one server per node.

The agent's CancelJob demands the controller's credential (a valid user token is
told apart by its subject only) and GetNodeResources reports the node's total with
nothing as used, as the real agent does. An agent that has seen a controller term
(`SimCluster.agent_terms`, Spur #600's fencing, docs/spur-facts.md) refuses a cancel
that carries none, as every cancel spurctl sends does. The settings and the records of what was
received are the SimCluster's (server.py), read at each call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import grpc
from google.protobuf import empty_pb2

from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import credentials as auth
from spurctl_sim.encoders import resource_set_to_pb
from spurctl_sim.identity import Body, Identity
from spurctl_sim.node_admin import Refused as _Refused

if TYPE_CHECKING:
    from spurctl_sim.server import SimCluster


class AgentCancel(NamedTuple):
    """An agent CancelJob the agent accepted (it may have been a no-op for an unknown id)."""

    node: str
    job_id: int
    signal: int
    subject: str | None


def agent_handler(sim: SimCluster, node: str) -> grpc.GenericRpcHandler:
    """The SlurmAgent service of `node`'s spurd."""
    hint = "this agent only accepts calls carrying the cluster credential"

    def cancel(req: pb.AgentCancelJobRequest, identity: Identity | None) -> empty_pb2.Empty:
        # A valid user token verifies like the controller's; only the subject tells them apart.
        if identity is not None and identity.user != auth.CONTROLLER_SUBJECT:
            raise _Refused(
                grpc.StatusCode.PERMISSION_DENIED,
                "this RPC is reachable only by the cluster controller; caller "
                f"'{identity.user}' is not the controller — route the request through spurctld",
            )
        if sim.agent_terms.get(node, 0) > 0:
            # #600 agent_server.rs `check_term`: term 0 (unset, spurctl's request declares
            # no field 3) passes only until the agent has seen a real term.
            raise _Refused(
                grpc.StatusCode.FAILED_PRECONDITION,
                "unfenced request rejected after a real controller term was observed",
            )
        sim.state.agent_cancel(node, req.job_id, req.signal)
        sim.cancels.append(
            AgentCancel(node, req.job_id, req.signal, identity.user if identity else None)
        )
        return empty_pb2.Empty()

    def resources(req: empty_pb2.Empty, identity: Identity | None) -> pb.NodeResourcesResponse:
        # The real agent reports its total and leaves `used` empty.
        msg = pb.NodeResourcesResponse()
        resource_set_to_pb(sim.node(node).total, msg.total)
        msg.used.SetInParent()
        return msg

    def method(name: str, body: Body, req: Any, resp: Any) -> tuple[str, grpc.RpcMethodHandler]:
        return name, sim.method_handler(
            node,
            name,
            body,
            req,
            resp.SerializeToString,
            latency=lambda: sim.agent_latency,
            missing_hint=hint,
        )

    return grpc.method_handlers_generic_handler(
        "slurm.SlurmAgent",
        dict(
            [
                method("CancelJob", cancel, pb.AgentCancelJobRequest, empty_pb2.Empty),
                method("GetNodeResources", resources, empty_pb2.Empty, pb.NodeResourcesResponse),
            ]
        ),
    )
