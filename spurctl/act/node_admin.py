"""The controller's node administration, the only writes spurctl sends to spurctld.

`UpdateNode` (drain, resume, labels) and `DeregisterNode`, always with `force=false`:
no function here can send `force=true`, which would evict the node's jobs to
NODE_FAIL. Each call goes to the Raft leader (a follower that cannot forward a write
answers UNAVAILABLE "not the Raft leader" with `x-spur-leader`: followed once), and
each is journaled by `NodeAdmin`: an intent before it is sent, an outcome after,
fsynced, so a crash at any step leaves a journal that tells which calls went out.
A call given what its plan saw of the node (`expect`) is sent only after a GetNode
from the leader, right before it, shows the node still so (its state, reason and
who set it): an admin or a health check may have changed it while the prompt was
open or the run waited, and spurctl never overwrites, lifts or removes what another
set. A changed node is left, with a `skipped` outcome naming what was seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from spurctl.decide.owner import Seen
from spurctl.errors import SpurctlError, redact
from spurctl.model import Node, NodeState
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import scrub
from spurctl.sources.rpc import describe_rpc_error, open_channel

if TYPE_CHECKING:
    from spurctl.act.journal import Journal
    from spurctl.sources.settings import Connection

LEADER_HEADER = "x-spur-leader"
T = TypeVar("T")


class AdminCallFailed(Exception):
    """A node administration call that did not go through; the message is secret-free.

    `code` is the gRPC status name (FAILED_PRECONDITION for DeregisterNode's refusal of
    a node a job runs on, NOT_FOUND for a node the controller does not have), or
    "UNKNOWN_OUTCOME" when the call may have been applied (no answer in time)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class NodeChanged(AdminCallFailed):
    """Not sent: the node read right before the call was no longer as the plan saw it
    (or could not be read). `now` is what was read (None: gone, or not read)."""

    def __init__(self, message: str, now: Node | None, *, read: bool = True) -> None:
        super().__init__("NODE_CHANGED", message)
        self.now = now
        self.read = read


class JournalUnwritable(SpurctlError):
    """The journal could not record a step: nothing more is sent. `sent`: the call whose
    outcome it could not record went out (what it changed is the caller's to undo)."""

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class ControllerWriter:
    """UpdateNode and DeregisterNode to the leader, with the operator's credential."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {conn.token}"),) if conn.token else ()
        )
        self.leader: str | None = None  # the endpoint that last took a write

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._stubs.clear()

    def __enter__(self) -> ControllerWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _stub(self, url: str) -> Any:
        stub = self._stubs.get(url)
        if stub is None:
            channel = self._channels[url] = open_channel(url, self._conn.tls_ca)
            stub = self._stubs[url] = scrub.stub(channel, "SlurmController")
        return stub

    def _write(self, method: str, request: Any, *, applies: bool = True) -> Any:
        """Send one write: the endpoint that last took one first, then the others; a
        follower's leader hint is followed once. Only a call that provably never reached
        a controller (UNAVAILABLE) is tried elsewhere: one that may have been applied is
        never sent twice."""
        urls = list(
            dict.fromkeys([*([self.leader] if self.leader else []), *self._conn.controllers])
        )
        failures: list[str] = []
        followed = False
        while urls:
            url = urls.pop(0)
            try:
                answer = getattr(self._stub(url), method)(
                    request, timeout=self._conn.timeout, metadata=self._metadata
                )
            except grpc.RpcError as err:
                code = err.code() if isinstance(err, grpc.Call) else None
                why = describe_rpc_error(err, self._conn.timeout)
                hint = _leader_hint(err)
                if code == grpc.StatusCode.UNAVAILABLE and hint and not followed:
                    followed = True
                    scheme = url.partition("://")[0] or "http"
                    urls.insert(0, f"{scheme}://{hint}")
                    failures.append(f"{url}: not the leader, {hint} is")
                    continue
                if code == grpc.StatusCode.UNAVAILABLE:
                    failures.append(f"{url}: {why}")
                    continue
                if code == grpc.StatusCode.DEADLINE_EXCEEDED and not applies:  # a read
                    raise AdminCallFailed(
                        "UNAVAILABLE", redact(f"controller {url}: {why}")
                    ) from None
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise AdminCallFailed(
                        "UNKNOWN_OUTCOME",
                        redact(f"controller {url}: {why}; the {method} may still have been "
                               "applied: check the node with `spur node show`"),
                    ) from None  # fmt: skip
                name = code.name if code is not None else "UNKNOWN"
                details = redact((err.details() if isinstance(err, grpc.Call) else "") or "")
                raise AdminCallFailed(
                    name, redact(f"controller {url} refused {method}: {details or why}")
                ) from None
            self.leader = url
            return answer
        raise AdminCallFailed(
            "UNAVAILABLE",
            redact(f"no controller took {method}: {'; '.join(failures)}; nothing was applied"),
        )

    def update_node(
        self,
        name: str,
        *,
        state: NodeState | None = None,
        reason: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        request = pb.UpdateNodeRequest(name=name, labels=dict(labels or {}))
        if state is not None:
            request.state = int(state)  # type: ignore[assignment]
            request.reason = reason or ""
        self._write("UpdateNode", request)

    def get_node(self, name: str) -> Node | None:
        """The node as the endpoint that takes the writes has it (GetNode); None when it has
        no such node. AdminCallFailed when it cannot be read."""
        from spurctl.sources.wire import node_from_pb

        try:
            answer = self._write("GetNode", pb.GetNodeRequest(name=name), applies=False)
        except AdminCallFailed as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise
        return node_from_pb(answer)

    def deregister_node(self, name: str, reason: str) -> int:
        """DeregisterNode(force=false): the controller refuses it (FAILED_PRECONDITION)
        while an active job lists the node. Returns the evicted job count (0 without force)."""
        answer = self._write(
            "DeregisterNode", pb.DeregisterNodeRequest(name=name, force=False, reason=reason)
        )
        return int(answer.evicted_jobs_count)


def _leader_hint(err: grpc.RpcError) -> str | None:
    if not isinstance(err, grpc.Call):
        return None
    for key, value in err.trailing_metadata() or ():
        if key == LEADER_HEADER and isinstance(value, str) and value.strip():
            return value.strip()
    return None


@dataclass(frozen=True, slots=True)
class Step:
    """One journaled call: the node, the finding kind it serves, the command (`repair`,
    `drain`, `resume`), the step of it, and the call as the operator would read it."""

    node: str
    kind: str
    action: str
    step: str
    call: str
    # Fields the intent carries besides (what a repair must put back, the charge it saw).
    extra: Mapping[str, Any] | None = None
    # The job the finding names (drain), 0 for the node as a whole.
    job_id: int = 0


class NodeAdmin:
    """Controller writes, each journaled: an intent before, an outcome after.

    `send` returns the call's answer, or raises AdminCallFailed after journaling the
    failure; a journal that cannot be written raises JournalUnwritable before anything
    more is sent. A restore (`restore=True`: putting back what a run took from a node)
    is sent even when the journal cannot take its records: what it puts back is in the
    journal already, so the next run settles the record; `unwritable` says why it lacks them.
    """

    def __init__(self, writer: ControllerWriter, journal: Journal) -> None:
        self.writer = writer
        self.journal = journal
        # The journal's failure a restore went on without (None: every record written).
        self.unwritable: str | None = None
        # The calls that went out and the journal does not record.
        self.unrecorded: list[str] = []

    def _fields(self, step: Step) -> dict[str, Any]:
        return {"action": step.action, "step": step.step, "call": step.call, **(step.extra or {})}

    def _failed(self, exc: OSError, *, restore: bool, sent: bool = False) -> None:
        if not restore:
            raise JournalUnwritable(_unwritable(self.journal, exc), sent=sent) from exc
        self.unwritable = self.unwritable or f"journal {self.journal.path}: {exc.strerror or exc}"

    def intent(self, step: Step, *, restore: bool = False) -> None:
        try:
            self.journal.intent(step.node, step.job_id, step.kind, self._fields(step))
        except OSError as exc:
            self._failed(exc, restore=restore)

    def outcome(
        self, step: Step, result: str, detail: str, *, confirmed: bool | None = None,
        restore: bool = False, sent: bool = False,
    ) -> None:  # fmt: skip
        """Journal a step's outcome (`sent`: its call went out, for JournalUnwritable)."""
        fields = {"action": step.action, "step": step.step}
        try:
            self.journal.outcome(
                step.node, step.job_id, step.kind, result, redact(detail),
                confirmed=confirmed, extra=fields,
            )  # fmt: skip
        except OSError as exc:
            if sent:
                self.unrecorded.append(step.call)
            self._failed(exc, restore=restore, sent=sent)

    def send(
        self,
        step: Step,
        call: Callable[[ControllerWriter], T],
        done: str,
        confirm: Callable[[], bool] | None = None,
        *,
        expect: Seen,
        restore: bool = False,
    ) -> T:
        """Journal the intent, make the call, journal its outcome (`done` when it went
        through; the error when it did not, `unknown: ...` when it may have). `confirm`
        reads the node back: whether it shows what the call asked for (the outcome's
        `confirmed`). The node is read first, and the call is sent only while it is
        still as `expect` says (NodeChanged, after a `skipped` outcome, otherwise):
        no call goes out without that read. `restore`: sent whether or not the journal
        takes its records."""
        self._still(step, expect, restore=restore)
        self.intent(step, restore=restore)
        try:
            answer = call(self.writer)
        except AdminCallFailed as exc:
            detail = f"unknown: {exc.message}" if exc.code == "UNKNOWN_OUTCOME" else exc.message
            self.outcome(step, "failed", detail, restore=restore)
            raise
        except Exception as exc:  # whatever broke, the journal must close the intent
            self.outcome(step, "failed", f"unknown: {type(exc).__name__}: {exc}", restore=restore)
            raise AdminCallFailed("UNKNOWN_OUTCOME", redact(f"{step.call}: {exc}")) from exc
        shown: bool | None = None
        if confirm is not None:
            try:
                shown = confirm()
            except Exception:  # a read that failed shows nothing either way
                shown = False
        self.outcome(step, "sent", done, confirmed=shown, restore=restore, sent=True)
        return answer

    def _still(self, step: Step, expect: Seen, *, restore: bool = False) -> None:
        """Read the node right before `step`'s call; NodeChanged (journaled as skipped)
        unless it is still as the plan saw it. A read that failed is journaled `failed`,
        not `skipped`: nothing says the node changed (a controller away), so a repair's
        step is still owed and the next run takes it up (decide/repair.repair_progress)."""
        try:
            now = self.writer.get_node(step.node)
        except AdminCallFailed as exc:
            why = f"{step.node} could not be read right before the call ({exc.message})"
            self.outcome(step, "failed", f"not sent: {why}", restore=restore)
            raise NodeChanged(why, None, read=False) from None
        change = expect.change(now)
        if change is None:
            return
        why = (
            f"{step.node} changed since the plan saw it {expect.describe()}: {change}; "
            "left as it is"
        )
        self.outcome(step, "skipped", f"not sent: {why}", restore=restore)
        raise NodeChanged(why, now)


def _unwritable(journal: Journal, exc: OSError) -> str:
    return (
        f"journal {journal.path}: {exc.strerror or exc}; stopped before the next call (free "
        "space, or pass --journal PATH elsewhere); `spurctl journal` shows what was sent"
    )
