"""Conversion between Spur's protobuf messages and spurctl's model.

This is the edge: past it, nothing sees a protobuf message. The reverse
direction (model -> message) serves the simulated cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from spurctl.model import (
    Allocation,
    Device,
    Gpu,
    Job,
    JobState,
    Node,
    NodeState,
    ResourceSet,
)
from spurctl.proto import slurm_pb2 as pb


def time_from_pb(ts: Timestamp) -> datetime | None:
    """An unset (zero) Timestamp is None."""
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC)


def time_to_pb(value: datetime | None, out: Timestamp) -> None:
    if value is not None:
        out.FromDatetime(value.astimezone(UTC))


def _job_state(value: int) -> JobState:
    try:
        return JobState(value)
    except ValueError:
        # A state this spurctl does not know: treat as not started, which every
        # decision spares (an unknown state must never turn into a reclaim).
        return JobState.PENDING


def _node_state(value: int) -> NodeState:
    try:
        return NodeState(value)
    except ValueError:
        return NodeState.UNKNOWN


def allocation_from_pb(msg: pb.ResourceAllocations) -> Allocation:
    return Allocation(
        cpus=msg.cpus,
        memory_mb=msg.memory_mb,
        devices={
            name: tuple(Device(d.device_id, d.count) for d in alloc.devices)
            for name, alloc in msg.devices.items()
        },
    )


def allocation_to_pb(alloc: Allocation, out: pb.ResourceAllocations) -> None:
    out.cpus = alloc.cpus
    out.memory_mb = alloc.memory_mb
    for name, devices in alloc.devices.items():
        entry = out.devices[name]
        for d in devices:
            entry.devices.add(device_id=d.device_id, count=d.count)


def resource_set_from_pb(msg: pb.ResourceSet) -> ResourceSet:
    return ResourceSet(
        cpus=msg.cpus,
        memory_mb=msg.memory_mb,
        gpus=tuple(Gpu(g.device_id, g.gpu_type, g.memory_mb) for g in msg.gpus),
        generic=dict(msg.generic),
    )


def resource_set_to_pb(rs: ResourceSet, out: pb.ResourceSet) -> None:
    out.cpus = rs.cpus
    out.memory_mb = rs.memory_mb
    for g in rs.gpus:
        out.gpus.add(device_id=g.device_id, gpu_type=g.gpu_type, memory_mb=g.memory_mb)
    for k, v in rs.generic.items():
        out.generic[k] = v


def job_from_pb(msg: pb.JobInfo) -> Job:
    return Job(
        job_id=msg.job_id,
        state=_job_state(msg.state),
        nodelist=msg.nodelist,
        name=msg.name,
        user=msg.user,
        uid=msg.uid,
        partition=msg.partition,
        account=msg.account,
        state_reason=msg.state_reason,
        submit_time=time_from_pb(msg.submit_time),
        start_time=time_from_pb(msg.start_time),
        end_time=time_from_pb(msg.end_time),
        num_nodes=msg.num_nodes,
        num_tasks=msg.num_tasks,
        resources=allocation_from_pb(msg.resources),
        array_job_id=msg.array_job_id,
        array_task_id=msg.array_task_id,
    )


def job_to_pb(job: Job) -> pb.JobInfo:
    msg = pb.JobInfo(
        job_id=job.job_id,
        name=job.name,
        user=job.user,
        uid=job.uid,
        partition=job.partition,
        account=job.account,
        state=int(job.state),  # type: ignore[arg-type]
        state_reason=job.state_reason,
        num_nodes=job.num_nodes,
        num_tasks=job.num_tasks,
        nodelist=job.nodelist,
        array_job_id=job.array_job_id,
        array_task_id=job.array_task_id,
    )
    time_to_pb(job.submit_time, msg.submit_time)
    time_to_pb(job.start_time, msg.start_time)
    time_to_pb(job.end_time, msg.end_time)
    allocation_to_pb(job.resources, msg.resources)
    return msg


def node_from_pb(msg: pb.NodeInfo) -> Node:
    return Node(
        name=msg.name,
        state=_node_state(msg.state),
        state_reason=msg.state_reason,
        partitions=tuple(msg.partitions),
        total=resource_set_from_pb(msg.total_resources),
        alloc=allocation_from_pb(msg.alloc_resources),
        boot_time=time_from_pb(msg.boot_time),
        last_busy=time_from_pb(msg.last_busy),
        agent_start_time=time_from_pb(msg.slurmd_start_time),
        labels=dict(msg.labels),
    )


def node_to_pb(node: Node) -> pb.NodeInfo:
    msg = pb.NodeInfo(
        name=node.name,
        state=int(node.state),  # type: ignore[arg-type]
        state_reason=node.state_reason,
        partitions=list(node.partitions),
    )
    resource_set_to_pb(node.total, msg.total_resources)
    allocation_to_pb(node.alloc, msg.alloc_resources)
    time_to_pb(node.boot_time, msg.boot_time)
    time_to_pb(node.last_busy, msg.last_busy)
    time_to_pb(node.agent_start_time, msg.slurmd_start_time)
    for k, v in node.labels.items():
        msg.labels[k] = v
    return msg
