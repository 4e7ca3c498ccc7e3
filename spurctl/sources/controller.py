"""The controller client: Spur's SlurmController over gRPC, made safe to lean on.

- Several endpoints (HA): every call goes to the first that answers. spurctl
  only reads from the controller (its cancels go to agents), and a Spur
  follower serves or forwards reads itself, so no leader has to be found.
- A deadline on every RPC, no 4 MiB receive cap (a 200,000-job answer is ~30 MB).
- Every failure becomes one SpurctlError line naming the endpoint and what failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc
from google.protobuf import empty_pb2

from spurctl.errors import SpurctlError
from spurctl.gcpause import gc_paused
from spurctl.model import ControllerView, Job, Node, utcnow
from spurctl.proto import slurm_pb2 as pb
from spurctl.proto import slurm_pb2_grpc as pb_grpc
from spurctl.sources.settings import Connection
from spurctl.sources.wire import JobsFromPb, Shapes, job_from_pb, node_from_pb

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]
# Retryable on another endpoint: the endpoint is down, unreachable or too slow.
_ENDPOINT_FAILURES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def describe_rpc_error(err: grpc.RpcError, timeout: float) -> str:
    """A short, secret-free description of why a call failed."""
    code = err.code() if isinstance(err, grpc.Call) else None
    details = (err.details() if isinstance(err, grpc.Call) else "") or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"no answer within {timeout:g} s (raise --timeout if it is just slow)"
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"unreachable ({_unavailable_reason(details)})"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return credential_problem(details)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return f"permission denied ({details}); an admin credential may be needed"
    name = code.name if code is not None else "error"
    return f"{name}: {details}" if details else name


def _unavailable_reason(details: str) -> str:
    """grpc's connect failure, without the resolver chatter around the reason."""
    first = details.splitlines()[0] if details else "unavailable"
    if "resolving" in first or "DNS resolution failed" in first:
        return "cannot resolve the host name"
    _, marker, reason = first.rpartition("Failed to connect to remote host:")
    return reason.strip().lower() if marker and reason.strip() else first


def credential_problem(details: str) -> str:
    """Which of missing, expired or wrong key the controller's UNAUTHENTICATED means, and the fix.

    Spur's detail texts: "authentication required: ..." (none sent), "invalid
    credential: token expired", "invalid credential: invalid token:
    InvalidSignature" (signed with another key); the simulated cluster words the
    last one "bad signature".
    """
    said = details or "unauthenticated"
    lowered = said.lower()
    if "authentication required" in lowered or "no credential" in lowered:
        return (
            f"credential missing: the controller requires one ({said}); pass --token, "
            "set SPUR_AUTH_TOKEN, or write it to ~/.spur/token with mode 0600"
        )
    if "expired" in lowered:
        return (
            f"credential expired ({said}); get a fresh token (`spur token user`) "
            "and pass it with --token or SPUR_AUTH_TOKEN"
        )
    if "signature" in lowered:
        return (
            f"credential signed with the wrong key ({said}): it was not minted with this "
            "cluster's [auth] jwt_key; get a token from this cluster"
        )
    return f"credential rejected ({said}); check --token, SPUR_AUTH_TOKEN or ~/.spur/token"


class ControllerClient:
    """SlurmController reads with failover and deadlines."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._urls = list(conn.controllers)
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, pb_grpc.SlurmControllerStub] = {}
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {conn.token}"),) if conn.token else ()
        )
        self.address: str = self._urls[0]

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
        self._stubs.clear()

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------

    def _stub(self, url: str) -> pb_grpc.SlurmControllerStub:
        stub = self._stubs.get(url)
        if stub is None:
            scheme, _, target = url.partition("://")
            if scheme == "https":
                creds = grpc.ssl_channel_credentials(root_certificates=self._conn.tls_ca)
                channel = grpc.secure_channel(target, creds, options=CHANNEL_OPTIONS)
            else:
                channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
            self._channels[url] = channel
            stub = self._stubs[url] = pb_grpc.SlurmControllerStub(channel)
        return stub

    def _order(self) -> list[str]:
        """The endpoint that last answered first, then the rest in configured order."""
        return [self.address] + [u for u in self._urls if u != self.address]

    def _invoke(self, url: str, method: str, request: Any) -> Any:
        return getattr(self._stub(url), method)(
            request, timeout=self._conn.timeout, metadata=self._metadata
        )

    def read_later(
        self, method: str, request: Any, *, missing_ok: bool = False
    ) -> Callable[[], Any]:
        """Send a read now, collect its answer by calling the result.

        The endpoint that answered last serves it; if that endpoint fails as an
        endpoint (down, too slow), collecting falls back to `read`, which tries
        every endpoint. `missing_ok` as for `read`.
        """
        url = self.address
        future = getattr(self._stub(url), method).future(
            request, timeout=self._conn.timeout, metadata=self._metadata
        )

        def collect() -> Any:
            try:
                answer = future.result()
            except grpc.RpcError as err:
                if missing_ok and _not_found(err):
                    return None
                if isinstance(err, grpc.Call) and err.code() in _ENDPOINT_FAILURES:
                    return self.read(method, request, missing_ok=missing_ok)
                raise self._failure(url, method, err) from None
            return answer

        return collect

    def read(self, method: str, request: Any, *, missing_ok: bool = False) -> Any:
        """A read: the first endpoint that answers serves it.

        With `missing_ok`, NOT_FOUND is an answer (None), not a failure.
        """
        failures: list[str] = []
        for url in self._order():
            try:
                answer = self._invoke(url, method, request)
            except grpc.RpcError as err:
                if missing_ok and _not_found(err):
                    self.address = url
                    return None
                if isinstance(err, grpc.Call) and err.code() in _ENDPOINT_FAILURES:
                    failures.append(f"{url}: {describe_rpc_error(err, self._conn.timeout)}")
                    continue
                raise self._failure(url, method, err) from None
            self.address = url
            return answer
        raise SpurctlError(self._all_failed(method, failures))

    def _failure(self, url: str, method: str, err: grpc.RpcError) -> SpurctlError:
        return SpurctlError(
            f"controller {url} failed {method}: {describe_rpc_error(err, self._conn.timeout)}"
        )

    def _all_failed(self, method: str, failures: Sequence[str]) -> str:
        which = "the controller" if len(self._urls) == 1 else "no controller endpoint"
        verb = "did not answer" if len(self._urls) == 1 else "answered"
        return (
            f"{which} {verb} {method}: {'; '.join(failures)}; "
            "check --controller / SPUR_CONTROLLER_ADDR and that spurctld is running"
        )

    # -- the calls spurctl makes ----------------------------------------------------

    def ping(self) -> pb.PingResponse:
        return self.read("Ping", empty_pb2.Empty())

    def get_jobs(self) -> JobsFromPb:
        """Every job the caller may see, each converted to a Job when first read."""
        answer = self.read("GetJobs", pb.GetJobsRequest())
        return JobsFromPb(answer.jobs)

    def jobs_total(self) -> int:
        return int(self.read("GetJobMetrics", empty_pb2.Empty()).total)

    def get_job(self, job_id: int) -> Job | None:
        """The job, or None when the controller answers NOT_FOUND (untracked)."""
        answer = self.read("GetJob", pb.GetJobRequest(job_id=job_id), missing_ok=True)
        return None if answer is None else job_from_pb(answer)

    def confirm(self, job_ids: Iterable[int], *, batch: int = 64) -> dict[int, Job | None]:
        """GetJob for each id, in parallel batches: Job, or None for NOT_FOUND.

        A slow or lost endpoint fails no id: each falls back to the failover path.
        """
        ids = sorted(set(job_ids))
        out: dict[int, Job | None] = {}
        for start in range(0, len(ids), batch):
            pending = [
                (i, self.read_later("GetJob", pb.GetJobRequest(job_id=i), missing_ok=True))
                for i in ids[start : start + batch]
            ]
            for job_id, collect in pending:
                answer = collect()
                out[job_id] = None if answer is None else job_from_pb(answer)
        return out

    def view(self) -> ControllerView:
        """One consistent-enough picture: version, jobs, nodes, and the unscoped total.

        JobMetrics is read after GetJobs: jobs submitted in between can only make
        the view look incomplete (which spares more), never hide a scoped answer.
        """
        version = self.ping().version
        jobs = self.get_jobs()
        # While the controller builds its node list, convert the active jobs: every
        # audit reads them, and this process would otherwise wait idle.
        nodes_answer = self.read_later("GetNodes", pb.GetNodesRequest())
        with gc_paused():
            jobs.active()  # converted once, kept for the classifier
        nodes = _nodes(nodes_answer())
        total = self.jobs_total()
        return ControllerView(
            address=self.address,
            version=version,
            taken_at=utcnow(),
            jobs=jobs,
            nodes=nodes,
            jobs_total=total,
        )


def _not_found(err: grpc.RpcError) -> bool:
    return isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.NOT_FOUND


def _nodes(answer: pb.GetNodesResponse) -> dict[str, Node]:
    shapes = Shapes()
    with gc_paused():
        return {n.name: node_from_pb(n, shapes) for n in answer.nodes}
