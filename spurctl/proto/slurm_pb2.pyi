import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_PENDING: _ClassVar[JobState]
    JOB_RUNNING: _ClassVar[JobState]
    JOB_COMPLETING: _ClassVar[JobState]
    JOB_COMPLETED: _ClassVar[JobState]
    JOB_FAILED: _ClassVar[JobState]
    JOB_CANCELLED: _ClassVar[JobState]
    JOB_TIMEOUT: _ClassVar[JobState]
    JOB_NODE_FAIL: _ClassVar[JobState]
    JOB_PREEMPTED: _ClassVar[JobState]
    JOB_SUSPENDED: _ClassVar[JobState]
    JOB_DEADLINE: _ClassVar[JobState]
    JOB_OUT_OF_MEMORY: _ClassVar[JobState]
    JOB_REQUEUED: _ClassVar[JobState]

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_IDLE: _ClassVar[NodeState]
    NODE_ALLOCATED: _ClassVar[NodeState]
    NODE_MIXED: _ClassVar[NodeState]
    NODE_DOWN: _ClassVar[NodeState]
    NODE_DRAIN: _ClassVar[NodeState]
    NODE_DRAINING: _ClassVar[NodeState]
    NODE_ERROR: _ClassVar[NodeState]
    NODE_UNKNOWN: _ClassVar[NodeState]
    NODE_SUSPENDED: _ClassVar[NodeState]
JOB_PENDING: JobState
JOB_RUNNING: JobState
JOB_COMPLETING: JobState
JOB_COMPLETED: JobState
JOB_FAILED: JobState
JOB_CANCELLED: JobState
JOB_TIMEOUT: JobState
JOB_NODE_FAIL: JobState
JOB_PREEMPTED: JobState
JOB_SUSPENDED: JobState
JOB_DEADLINE: JobState
JOB_OUT_OF_MEMORY: JobState
JOB_REQUEUED: JobState
NODE_IDLE: NodeState
NODE_ALLOCATED: NodeState
NODE_MIXED: NodeState
NODE_DOWN: NodeState
NODE_DRAIN: NodeState
NODE_DRAINING: NodeState
NODE_ERROR: NodeState
NODE_UNKNOWN: NodeState
NODE_SUSPENDED: NodeState

class AllocatedDevice(_message.Message):
    __slots__ = ("device_id", "count")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    count: int
    def __init__(self, device_id: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class DeviceAllocations(_message.Message):
    __slots__ = ("devices",)
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[AllocatedDevice]
    def __init__(self, devices: _Optional[_Iterable[_Union[AllocatedDevice, _Mapping]]] = ...) -> None: ...

class ResourceAllocations(_message.Message):
    __slots__ = ("cpus", "memory_mb", "devices")
    class DevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DeviceAllocations
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DeviceAllocations, _Mapping]] = ...) -> None: ...
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    cpus: int
    memory_mb: int
    devices: _containers.MessageMap[str, DeviceAllocations]
    def __init__(self, cpus: _Optional[int] = ..., memory_mb: _Optional[int] = ..., devices: _Optional[_Mapping[str, DeviceAllocations]] = ...) -> None: ...

class GpuResource(_message.Message):
    __slots__ = ("device_id", "gpu_type", "memory_mb")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    gpu_type: str
    memory_mb: int
    def __init__(self, device_id: _Optional[int] = ..., gpu_type: _Optional[str] = ..., memory_mb: _Optional[int] = ...) -> None: ...

class ResourceSet(_message.Message):
    __slots__ = ("cpus", "memory_mb", "gpus", "generic")
    class GenericEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CPUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    GENERIC_FIELD_NUMBER: _ClassVar[int]
    cpus: int
    memory_mb: int
    gpus: _containers.RepeatedCompositeFieldContainer[GpuResource]
    generic: _containers.ScalarMap[str, int]
    def __init__(self, cpus: _Optional[int] = ..., memory_mb: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[GpuResource, _Mapping]]] = ..., generic: _Optional[_Mapping[str, int]] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "name", "user", "uid", "partition", "account", "state", "state_reason", "submit_time", "start_time", "end_time", "num_nodes", "num_tasks", "nodelist", "resources", "array_job_id", "array_task_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    ARRAY_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    name: str
    user: str
    uid: int
    partition: str
    account: str
    state: JobState
    state_reason: str
    submit_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    num_nodes: int
    num_tasks: int
    nodelist: str
    resources: ResourceAllocations
    array_job_id: int
    array_task_id: int
    def __init__(self, job_id: _Optional[int] = ..., name: _Optional[str] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., partition: _Optional[str] = ..., account: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., state_reason: _Optional[str] = ..., submit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., num_nodes: _Optional[int] = ..., num_tasks: _Optional[int] = ..., nodelist: _Optional[str] = ..., resources: _Optional[_Union[ResourceAllocations, _Mapping]] = ..., array_job_id: _Optional[int] = ..., array_task_id: _Optional[int] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("name", "state", "state_reason", "partitions", "total_resources", "alloc_resources", "boot_time", "last_busy", "slurmd_start_time", "labels", "reason_uid")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    ALLOC_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    BOOT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_BUSY_FIELD_NUMBER: _ClassVar[int]
    SLURMD_START_TIME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REASON_UID_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: NodeState
    state_reason: str
    partitions: _containers.RepeatedScalarFieldContainer[str]
    total_resources: ResourceSet
    alloc_resources: ResourceAllocations
    boot_time: _timestamp_pb2.Timestamp
    last_busy: _timestamp_pb2.Timestamp
    slurmd_start_time: _timestamp_pb2.Timestamp
    labels: _containers.ScalarMap[str, str]
    reason_uid: int
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., state_reason: _Optional[str] = ..., partitions: _Optional[_Iterable[str]] = ..., total_resources: _Optional[_Union[ResourceSet, _Mapping]] = ..., alloc_resources: _Optional[_Union[ResourceAllocations, _Mapping]] = ..., boot_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_busy: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., slurmd_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., reason_uid: _Optional[int] = ...) -> None: ...

class GetJobsRequest(_message.Message):
    __slots__ = ("states", "user", "partition", "account", "job_ids", "name", "nodes")
    STATES_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[JobState]
    user: str
    partition: str
    account: str
    job_ids: _containers.RepeatedScalarFieldContainer[int]
    name: str
    nodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, states: _Optional[_Iterable[_Union[JobState, str]]] = ..., user: _Optional[str] = ..., partition: _Optional[str] = ..., account: _Optional[str] = ..., job_ids: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ..., nodes: _Optional[_Iterable[str]] = ...) -> None: ...

class GetJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobInfo]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobInfo, _Mapping]]] = ...) -> None: ...

class GetJobsRecords(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, jobs: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetJobsGlimpses(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobGlimpse]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobGlimpse, _Mapping]]] = ...) -> None: ...

class JobGlimpse(_message.Message):
    __slots__ = ("job_id", "state", "submit_time", "nodelist", "resources")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    state: JobState
    submit_time: _timestamp_pb2.Timestamp
    nodelist: str
    resources: bytes
    def __init__(self, job_id: _Optional[int] = ..., state: _Optional[_Union[JobState, str]] = ..., submit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., nodelist: _Optional[str] = ..., resources: _Optional[bytes] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class GetNodesRequest(_message.Message):
    __slots__ = ("states", "partition", "nodelist")
    STATES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[NodeState]
    partition: str
    nodelist: str
    def __init__(self, states: _Optional[_Iterable[_Union[NodeState, str]]] = ..., partition: _Optional[str] = ..., nodelist: _Optional[str] = ...) -> None: ...

class GetNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...

class GetNodesRecords(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, nodes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetNodesGlimpses(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeGlimpse]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeGlimpse, _Mapping]]] = ...) -> None: ...

class NodeGlimpse(_message.Message):
    __slots__ = ("name", "alloc_resources")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOC_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    name: str
    alloc_resources: bytes
    def __init__(self, name: _Optional[str] = ..., alloc_resources: _Optional[bytes] = ...) -> None: ...

class GetNodeRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "signal", "user")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    signal: int
    user: str
    def __init__(self, job_id: _Optional[int] = ..., signal: _Optional[int] = ..., user: _Optional[str] = ...) -> None: ...

class UpdateNodeRequest(_message.Message):
    __slots__ = ("name", "state", "reason", "labels", "remove_labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_LABELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: NodeState
    reason: str
    labels: _containers.ScalarMap[str, str]
    remove_labels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., reason: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., remove_labels: _Optional[_Iterable[str]] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ("actual_state", "running_jobs")
    ACTUAL_STATE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    actual_state: str
    running_jobs: int
    def __init__(self, actual_state: _Optional[str] = ..., running_jobs: _Optional[int] = ...) -> None: ...

class DeregisterNodeRequest(_message.Message):
    __slots__ = ("name", "force", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    force: bool
    reason: str
    def __init__(self, name: _Optional[str] = ..., force: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class DeregisterNodeResponse(_message.Message):
    __slots__ = ("evicted_jobs_count",)
    EVICTED_JOBS_COUNT_FIELD_NUMBER: _ClassVar[int]
    evicted_jobs_count: int
    def __init__(self, evicted_jobs_count: _Optional[int] = ...) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("hostname", "server_time", "version", "federation_peers")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FEDERATION_PEERS_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    server_time: _timestamp_pb2.Timestamp
    version: str
    federation_peers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hostname: _Optional[str] = ..., server_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[str] = ..., federation_peers: _Optional[_Iterable[str]] = ...) -> None: ...

class JobStateCount(_message.Message):
    __slots__ = ("state", "count")
    STATE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    state: JobState
    count: int
    def __init__(self, state: _Optional[_Union[JobState, str]] = ..., count: _Optional[int] = ...) -> None: ...

class JobMetrics(_message.Message):
    __slots__ = ("total", "by_state")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BY_STATE_FIELD_NUMBER: _ClassVar[int]
    total: int
    by_state: _containers.RepeatedCompositeFieldContainer[JobStateCount]
    def __init__(self, total: _Optional[int] = ..., by_state: _Optional[_Iterable[_Union[JobStateCount, _Mapping]]] = ...) -> None: ...

class AgentCancelJobRequest(_message.Message):
    __slots__ = ("job_id", "signal")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    signal: int
    def __init__(self, job_id: _Optional[int] = ..., signal: _Optional[int] = ...) -> None: ...

class NodeResourcesResponse(_message.Message):
    __slots__ = ("total", "used")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    total: ResourceSet
    used: ResourceAllocations
    def __init__(self, total: _Optional[_Union[ResourceSet, _Mapping]] = ..., used: _Optional[_Union[ResourceAllocations, _Mapping]] = ...) -> None: ...
