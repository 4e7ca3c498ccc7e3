"""Stubs whose answers never carry a registered secret past the wire.

A controller or agent may echo the caller's token in any string it sends (a
version, a node or job name, an error). Redacting at the edge, before anything
lays the text out, means no table can fold a secret across two lines where the
output sink's own redaction (render/sink.py) would no longer see it whole.
An answer is checked as raw bytes first (a substring search per secret), so the
common answer is decoded exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from spurctl.errors import SpurctlError, carries_secret, redact
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.wire import JobRecords, NodesFromPb


def scrubbed(message: Message) -> Message:
    """`message` with every string in it (nested, repeated, map keys and values) redacted."""
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                value[:] = [redact(v) for v in value]
            else:
                setattr(message, field.name, redact(value))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            entry = field.message_type
            assert entry is not None
            if entry.GetOptions().map_entry:
                _scrub_map(value, entry.fields_by_name["value"])
            elif field.is_repeated:
                for item in value:
                    scrubbed(item)
            else:
                scrubbed(value)
    return message


def _scrub_map(mapping: Any, value_field: FieldDescriptor) -> None:
    keys = list(mapping.keys())
    if value_field.type == FieldDescriptor.TYPE_MESSAGE:
        items = []
        for k in keys:
            copy = type(mapping[k])()
            copy.CopyFrom(mapping[k])
            items.append((k, scrubbed(copy)))
        mapping.clear()
        for k, v in items:
            mapping[redact(k) if isinstance(k, str) else k].CopyFrom(v)
        return
    plain = {k: mapping[k] for k in keys}
    mapping.clear()
    for k, v in plain.items():
        mapping[redact(k) if isinstance(k, str) else k] = redact(v) if isinstance(v, str) else v


def _reader(cls: type[Message]) -> Callable[[bytes], Message]:
    parse = cls.FromString

    def read(data: bytes) -> Message:
        answer = parse(data)
        return scrubbed(answer) if carries_secret(data) else answer

    return read


# As grpc's generated stubs pass it: the method path is registered once, not per call.
_REGISTERED: dict[str, Any] = {"_registered_method": True}


def stub(channel: grpc.Channel, service: str, *, encoded: bool = False) -> Any:
    """A client stub for `service` (as grpc's generated one) whose answers are scrubbed.

    `encoded`: its answers are the bytes as they came, for `reader(method)` to decode.
    """
    descriptor = pb.DESCRIPTOR.services_by_name[service]
    methods = {}
    for method in descriptor.methods:
        request = message_factory.GetMessageClass(method.input_type)
        methods[method.name] = channel.unary_unary(
            f"/{descriptor.full_name}/{method.name}",
            request_serializer=request.SerializeToString,
            response_deserializer=None if encoded else reader(service, method.name),
            **_REGISTERED,
        )
    return SimpleNamespace(**methods)


def job_records(answer: bytes) -> JobRecords:
    """A GetJobs answer as a split read keeps it (wire.JobRecords), scrubbed: one that
    carries a secret is decoded, scrubbed and encoded again first."""
    if carries_secret(answer):
        answer = scrubbed(pb.GetJobsResponse.FromString(answer)).SerializeToString()
    return JobRecords(answer)


def node_table(answer: bytes) -> NodesFromPb:
    """A GetNodes answer as a view keeps it (wire.NodesFromPb.decode), scrubbed as
    `reader` scrubs."""
    if carries_secret(answer):
        answer = scrubbed(pb.GetNodesResponse.FromString(answer)).SerializeToString()
    return NodesFromPb.decode(answer)


def decoded(url: str, method: str, decode: Callable[[bytes], Any], answer: bytes) -> Any:
    """`decode(answer)`, one line naming the controller when it is not Spur's answer."""
    try:
        return decode(answer)
    except DecodeError as exc:
        raise SpurctlError(
            f"controller {url} failed {method}: its answer is not Spur's "
            f"({redact(str(exc))}); check that {url} is spurctld's address"
        ) from None


def reader(service: str, method: str) -> Callable[[bytes], Message]:
    """Decode `method`'s answer, scrubbed."""
    found = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    return _reader(message_factory.GetMessageClass(found.output_type))
