"""The model as Spur's protobuf messages: what the simulated cluster answers with.

The reverse of sources/wire.py (message -> model), for the simulator, the
benchmarks' controllers and the tests that build a controller's answer; spurctl's
admin side only ever decodes.
"""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from spurctl.model import Allocation, Job, Node, ResourceSet
from spurctl.proto import slurm_pb2 as pb


def time_to_pb(value: datetime | None, out: Timestamp) -> None:
    if value is not None:
        out.FromDatetime(value.astimezone(UTC))


def allocation_to_pb(alloc: Allocation, out: pb.ResourceAllocations) -> None:
    out.cpus = alloc.cpus
    out.memory_mb = alloc.memory_mb
    for name, devices in alloc.devices.items():
        entry = out.devices[name]
        for d in devices:
            entry.devices.add(device_id=d.device_id, count=d.count)


def resource_set_to_pb(rs: ResourceSet, out: pb.ResourceSet) -> None:
    out.cpus = rs.cpus
    out.memory_mb = rs.memory_mb
    for g in rs.gpus:
        out.gpus.add(device_id=g.device_id, gpu_type=g.gpu_type, memory_mb=g.memory_mb)
    for k, v in rs.generic.items():
        out.generic[k] = v


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
    if node.reason_uid is not None:
        msg.reason_uid = node.reason_uid
    return msg
