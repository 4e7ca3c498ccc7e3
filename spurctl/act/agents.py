"""The node agent's CancelJob: the only way spurctl ever stops a run.

It is sent to ONE node's agent with signal 0 (graceful: SIGTERM, delayed
SIGKILL, releases a still-launching reservation). Never the controller's
CancelJob, which would cancel the job cluster-wide and kill a legitimate run
on another node.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc

from spurctl.errors import redact, register_secret
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import scrub
from spurctl.sources.agent_endpoints import AddressError, dial_target
from spurctl.sources.credentials import CONTROLLER_SUBJECT, MAX_LIFETIME_S, mint
from spurctl.sources.rpc import CHANNEL_OPTIONS, describe_rpc_error

GRACEFUL = 0

# A minted credential is reused for at most this long (it lives MAX_LIFETIME_S):
# a fresh one per cancel would register thousands of secrets in a large reclaim.
REUSE_S = 60.0


class AgentError(Exception):
    """A cancel that did not go through; the message is secret-free."""


class TermRefused(AgentError):
    """The agent fences cancels by the controller's Raft term (Spur #600) and refused ours,
    which carries none: it will refuse every other cancel spurctl sends it too."""


# Spur #600 agent_server.rs `check_term`: "unfenced request rejected after a real controller
# term was observed", "stale controller term N (highest seen M); ...".
TERM_REFUSAL = "controller term"


class AgentPool:
    """One channel per agent address, shared by the threads sending cancels."""

    def __init__(self, *, jwt_key: str | None, timeout: float) -> None:
        self._jwt_key = jwt_key
        self._timeout = timeout
        self._lock = threading.Lock()
        self._stubs: dict[str, Any] = {}
        self._channels: list[grpc.Channel] = []
        self._token: str | None = None
        self._minted_at = 0.0

    def _stub(self, address: str) -> Any:
        with self._lock:
            stub = self._stubs.get(address)
            if stub is None:
                # Dialled in the one form the endpoint check read (agent_endpoints).
                target = dial_target(address)
                channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
                self._channels.append(channel)
                stub = self._stubs[address] = scrub.stub(channel, "SlurmAgent")
            return stub

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        if not self._jwt_key:
            return ()
        # Short-lived (the agent checks exp), kept in memory only, and registered as a
        # secret before it is first sent: an agent error that echoes the request's
        # metadata must not carry it into the journal or any output.
        with self._lock:
            now = time.monotonic()
            if self._token is None or now - self._minted_at >= REUSE_S:
                token = mint(self._jwt_key, CONTROLLER_SUBJECT, lifetime_s=MAX_LIFETIME_S)
                register_secret(token)
                self._token, self._minted_at = token, now
            return (("authorization", f"Bearer {self._token}"),)

    def cancel(self, address: str, job_id: int) -> None:
        """AgentCancelJob(job_id, signal 0) to this agent only; AgentError on failure."""
        request = pb.AgentCancelJobRequest(job_id=job_id, signal=GRACEFUL)
        try:
            stub = self._stub(address)
        except AddressError as exc:  # the plan's check refuses these first; never dialled
            raise AgentError(redact(f"agent address {address!r} {exc}: not sent")) from None
        try:
            stub.CancelJob(request, timeout=self._timeout, metadata=self._metadata())
        except grpc.RpcError as err:
            why = describe_rpc_error(err, self._timeout)
            code = err.code() if isinstance(err, grpc.Call) else None
            details = (err.details() or "") if isinstance(err, grpc.Call) else ""
            if code == grpc.StatusCode.FAILED_PRECONDITION and TERM_REFUSAL in details:
                raise TermRefused(redact(f"agent {address}: {_refused_term(why)}")) from None
            if isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAUTHENTICATED:
                why = _refused_credential(err.details() or "")
            elif isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAVAILABLE:
                why += "; check that spurd runs there and its address (--agent-map, --agent-port)"
            elif isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                # The request may have reached spurd before the deadline: not "not sent".
                why += "; the cancel may still have been applied: check the node"
            raise AgentError(redact(f"agent {address}: {why}")) from None

    def close(self) -> None:
        for ch in self._channels:
            ch.close()


def _refused_term(why: str) -> str:
    """What an agent's term refusal means, and what is left to do."""
    return (
        f"refused the cancel for its controller term ({why}): this spurd accepts cancels "
        "only with the term of the controller leader that sends them (Spur #600), which "
        "spurctl's cancel does not carry; not applied, and not retried: the controller's own "
        "reclaim can free it, or `spurctl drain` keeps jobs off the node meanwhile"
    )


# spur-core auth.rs authenticate_bearer's answer when the daemon has no key at all
# (docs/spur-facts.md, "Authentication").
NO_KEY_CONFIGURED = "no auth.jwt_key is configured"


def _refused_credential(details: str) -> str:
    """Why an agent refused the controller credential spurctl minted, and the fix."""
    if NO_KEY_CONFIGURED in details:
        # Not the key file: the node cannot verify any credential, and lets none through.
        return (
            f"agent refused the credential ({details}): that node's spurd has no [auth] "
            "jwt_key configured, so it refuses every token while an anonymous call would "
            "pass (auth.mode permissive); the key file is not at fault: set the cluster's "
            "jwt_key in that node's spur.conf (spurd reads it only when it starts, and a "
            "restart leaves its runs untracked, Spur #803)"
        )
    return (
        f"agent refused the controller credential ({details}); "
        "check --jwt-key-file / SPUR_JWT_KEY_FILE / spur.conf [auth] jwt_key"
    )
