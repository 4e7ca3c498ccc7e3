"""The controller client: Spur's SlurmController over gRPC, made safe to lean on.

- Several endpoints (HA): every call goes to the first that answers. spurctl
  only reads from the controller (its cancels go to agents), and a Spur
  follower serves or forwards reads itself, so no leader has to be found.
- A deadline on every RPC, no 4 MiB receive cap on spurctl's side.
- Every answer stays under spurctld's own 32 MiB send cap (spur-proto
  MAX_GRPC_MESSAGE_SIZE): an audit asks only for the jobs that can hold a node
  (GetJobs `states`) and for other held ids by id (`job_ids`, in small batches);
  an answer refused for its size is split by state, then by node where the
  controller's version has that filter (0.9.0 on: sources/node_split.py), else
  by job-id range (sources/id_ranges.py), never failed; one audit sends at most
  REQUEST_BUDGET GetJobs requests, and says so when that cut its read short.
- Every failure becomes one SpurctlError line naming the endpoint and what failed
  (sources/rpc.py, which also opens the channels).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import grpc
from google.protobuf import empty_pb2

from spurctl.errors import SpurctlError
from spurctl.heap import gc_paused
from spurctl.model import (
    ACTIVE_STATES,
    MAX_JOB_ID,
    ControllerView,
    Job,
    JobState,
    utcnow,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.releases import Filters, filters_for
from spurctl.sources import scrub
from spurctl.sources.id_ranges import AnswerTooLarge, read_by_id
from spurctl.sources.job_reads import (
    BY_ACTIVITY,
    LOOKUP_BATCH,
    NOT_STARTED,
    BudgetSpent,
    FilterIgnored,
    JobRead,
    RequestBudget,
    every_job,
    off_list,
    off_list_note,
    unread_note,
)
from spurctl.sources.node_split import read_by_node
from spurctl.sources.rpc import describe_rpc_error, open_channel
from spurctl.sources.settings import Connection
from spurctl.sources.wire import (
    JobsFromPb,
    NodesFromPb,
    counts_from_pb,
    job_from_pb,
    time_from_pb,
)
from spurctl.sources.wrong_endpoint import CHECK_ADDRESS, NOT_A_CONTROLLER, not_a_controller

# Retryable on another endpoint: the endpoint is down, unreachable or too slow.
_ENDPOINT_FAILURES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# Asked again through `read`, which tries every endpoint and names one that is no controller.
_ELSEWHERE = (*_ENDPOINT_FAILURES, grpc.StatusCode.UNIMPLEMENTED)
# spurctld refuses to encode an answer over this (spur-proto MAX_GRPC_MESSAGE_SIZE);
# tonic reports it as OUT_OF_RANGE "Error, encoded message length too large".
ANSWER_LIMIT = 32 * 1024 * 1024
_TOO_LARGE = (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED)
# Planning a split (node_split.py, id_ranges.py): the share of the cap one answer is
# planned to fill. A guess that is wrong only costs one refused answer and a finer split.
_PLANNED_ANSWER = ANSWER_LIMIT // 2
# GetJobs requests one audit may send (its view and look-ups; GetJob, a lookup in a map,
# is not counted): a 20,000-node audit sends a few dozen (bench/README.md, "Every
# release"); a controller that filters less than asked must never be read without end.
REQUEST_BUDGET = 1024
# Ids above the highest one read are probed this many at a time, at most this many
# times, for the watermark (the newest jobs may all have ended already).
_PROBE_BATCH = 64
_PROBE_ROUNDS = 16
# Turns an answer's bytes into what a read collects, scrubbed (scrub.reader, scrub.job_records).
Decode = Callable[[bytes], Any]


class Later:
    """A read on its way: call it for the answer, or cancel it."""

    __slots__ = ("_collect", "cancel")

    def __init__(self, collect: Callable[[], Any], cancel: Callable[[], object]) -> None:
        self._collect, self.cancel = collect, cancel

    def __call__(self) -> Any:
        return self._collect()


class ControllerClient:
    """SlurmController reads with failover and deadlines."""

    request_budget = REQUEST_BUDGET

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._urls = list(conn.controllers)
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self._raw_stubs: dict[str, Any] = {}
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {conn.token}"),) if conn.token else ()
        )
        self.address: str = self._urls[0]
        self._failovers: list[str] = []
        self._budget = RequestBudget(self.request_budget)
        self._shared: list[JobsFromPb] | None = None

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
        self._stubs.clear()
        self._raw_stubs.clear()

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------

    def _stub(self, url: str, *, encoded: bool = False) -> Any:
        if encoded:
            raw = self._raw_stubs.get(url)
            if raw is None:
                self._stub(url)
                raw = self._raw_stubs[url] = scrub.stub(
                    self._channels[url], "SlurmController", encoded=True
                )
            return raw
        stub = self._stubs.get(url)
        if stub is None:
            channel = self._channels[url] = open_channel(url, self._conn.tls_ca)
            stub = self._stubs[url] = scrub.stub(channel, "SlurmController")
        return stub

    def _order(self) -> list[str]:
        """The endpoint that last answered first, then the rest in configured order."""
        return [self.address] + [u for u in self._urls if u != self.address]

    def _invoke(self, url: str, method: str, request: Any, decode: Decode | None = None) -> Any:
        call = getattr(self._stub(url, encoded=decode is not None), method)
        answer = call(request, timeout=self._conn.timeout, metadata=self._metadata)
        return answer if decode is None else scrub.decoded(url, method, decode, answer)

    def read_later(
        self, method: str, request: Any, *, missing_ok: bool = False, decode: Decode | None = None
    ) -> Later:
        """Send a read now, collect its answer by calling the result (or cancel it).

        The endpoint that answered last serves it; if that endpoint fails as an
        endpoint (down, too slow), collecting falls back to `read`, which tries
        every endpoint. `missing_ok` as for `read`.

        The answer stays encoded until it is collected: a split read's parts, in
        flight together, hold their bytes rather than their decoded messages, which
        grpc would build as each arrives (a 20,000-node audit's peak was 338-378 MiB,
        now 303-340: bench/README.md, "A watch that runs for days"). `decode`: as scrub.reader.
        """
        url = self.address
        future = getattr(self._stub(url, encoded=True), method).future(
            request, timeout=self._conn.timeout, metadata=self._metadata
        )
        read = decode or scrub.reader("SlurmController", method)

        def collect() -> Any:
            try:
                encoded = future.result()
            except grpc.RpcError as err:
                if missing_ok and _not_found(err):
                    return None
                if isinstance(err, grpc.Call) and err.code() in _ELSEWHERE:
                    return self.read(method, request, missing_ok=missing_ok, decode=decode)
                if isinstance(err, grpc.Call) and err.code() in _TOO_LARGE:
                    raise self._too_large(url, method, err) from None
                raise self._failure(url, method, err) from None
            return scrub.decoded(url, method, read, encoded)

        return Later(collect, future.cancel)

    def read(
        self, method: str, request: Any, *, missing_ok: bool = False, decode: Decode | None = None
    ) -> Any:
        """A read: the first endpoint that answers serves it.

        With `missing_ok`, NOT_FOUND is an answer (None), not a failure.
        """
        failures: list[str] = []
        for url in self._order():
            try:
                answer = self._invoke(url, method, request, decode)
            except grpc.RpcError as err:
                if missing_ok and _not_found(err):
                    self.address = url
                    return None
                failure = self._endpoint_failure(url, method, err)
                if failure is not None:
                    failures.append(failure)
                    continue
                if isinstance(err, grpc.Call) and err.code() in _TOO_LARGE:
                    self.address = url
                    raise self._too_large(url, method, err) from None
                raise self._failure(url, method, err) from None
            if failures and url != self.address:
                # One note per failover, however many reads it served: the view says it.
                self._failovers.append(
                    f"controller failover: {'; '.join(failures)}; {url} answered"
                )
            self.address = url
            return answer
        raise SpurctlError(self._all_failed(method, failures))

    def _endpoint_failure(self, url: str, method: str, err: grpc.RpcError) -> str | None:
        """`url: why` when the endpoint failed rather than the call (down, too slow, not a
        Spur controller at all: sources/wrong_endpoint.py), so another may serve; else None."""
        wrong = not_a_controller(url, method, err, self._conn.timeout)
        if wrong is not None:
            return wrong
        if isinstance(err, grpc.Call) and err.code() in _ENDPOINT_FAILURES:
            return f"{url}: {describe_rpc_error(err, self._conn.timeout)}"
        return None

    def _too_large(self, url: str, method: str, err: grpc.RpcError) -> AnswerTooLarge:
        return AnswerTooLarge(
            f"controller {url} refused to send its {method} answer: "
            f"{describe_rpc_error(err, self._conn.timeout)}"
        )

    def _failure(self, url: str, method: str, err: grpc.RpcError) -> SpurctlError:
        return SpurctlError(
            f"controller {url} failed {method}: {describe_rpc_error(err, self._conn.timeout)}"
        )

    def _all_failed(self, method: str, failures: Sequence[str]) -> str:
        if len(self._urls) == 1 and failures[0].startswith(f"{self._urls[0]} {NOT_A_CONTROLLER}"):
            return f"{failures[0]}; {CHECK_ADDRESS}"
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
        """Every job the caller may see, read in answers under the cap."""
        jobs = self.view(everything=True).jobs
        assert isinstance(jobs, JobsFromPb)
        return jobs

    def job_counts(self) -> tuple[int, Counter[JobState]]:
        """JobMetrics: how many jobs the controller has, in all and in each state, unscoped."""
        return counts_from_pb(self.read("GetJobMetrics", empty_pb2.Empty()))

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

    @property
    def scoped(self) -> bool:
        """Whether spurctld scopes GetJobs to a credential's user (it does whenever one
        is presented, admins too)."""
        return bool(self._conn.token)

    # -- reading jobs under the cap -------------------------------------------------------

    def request(self, parts: int = 1, **filters: Any) -> pb.GetJobsRequest:
        """A GetJobs request, taking `parts` from the budget: 1 for a request sent alone;
        for requests sent together, all of them with the first and 0 with each other
        (node_split.Reads)."""
        self._budget.take(parts)
        return pb.GetJobsRequest(**filters)

    def _answer(self, **filters: Any) -> list[pb.JobInfo]:
        return list(self.read("GetJobs", self.request(**filters)).jobs)

    def answer(self, states: Sequence[int], job_ids: Sequence[int]) -> list[pb.JobInfo]:
        """GetJobs by state and id only, which every release filters (id_ranges.Jobs)."""
        return self._answer(states=list(states), job_ids=list(job_ids))

    def answer_later(self, states: Sequence[int], job_ids: Sequence[int]) -> Later:
        """GetJobs by state and id, sent now, collected (as JobRecords) by calling the result."""
        request = self.request(states=list(states), job_ids=list(job_ids))
        return self.read_later("GetJobs", request, decode=scrub.job_records)

    def by_ids(self, ids: Sequence[int], states: Sequence[int] = ()) -> list[pb.JobInfo]:
        """GetJobs for these ids (in `states`, when given), halving a batch whose answer
        is refused for its size."""
        try:
            return self._answer(job_ids=list(ids), states=list(states))
        except AnswerTooLarge:
            if len(ids) == 1:
                raise
        half = len(ids) // 2
        return self.by_ids(ids[:half], states) + self.by_ids(ids[half:], states)

    def ids_in_batches(
        self, ids: Sequence[int], states: Sequence[int] = ()
    ) -> tuple[list[pb.JobInfo], list[int]]:
        """GetJobs by id (in `states`, when given), LOOKUP_BATCH ids per request, the
        requests in flight together: the jobs found, and the ids asked (all of them,
        unless the request budget ran out first)."""
        batches = [ids[i : i + LOOKUP_BATCH] for i in range(0, len(ids), LOOKUP_BATCH)]
        pending = []
        for batch in batches:
            try:
                request = self.request(job_ids=batch, states=list(states))
            except BudgetSpent:
                break
            pending.append((batch, self.read_later("GetJobs", request)))
        found: list[pb.JobInfo] = []
        asked: list[int] = []
        for batch, collect in pending:
            try:
                try:
                    found.extend(collect().jobs)
                except AnswerTooLarge:
                    found.extend(self.by_ids(batch, states))
            except BudgetSpent:
                continue
            asked.extend(batch)
        return found, asked

    def probe_above(self, highest: int) -> list[pb.JobInfo]:
        """Jobs with ids above `highest` (ended ones the state read skipped): the
        watermark is one above the highest tracked id."""
        found: list[pb.JobInfo] = []
        for _ in range(_PROBE_ROUNDS):
            if highest >= MAX_JOB_ID:
                break  # job ids are uint32: nothing lies above the last one
            answer = self.by_ids(
                range(highest + 1, min(highest + 1 + _PROBE_BATCH, MAX_JOB_ID + 1))
            )
            if not answer:
                break
            found.extend(answer)
            highest = max(m.job_id for m in answer)
        return found

    def active_jobs(self) -> JobsFromPb:
        """Every running, completing and suspended job, read as an audit reads them where
        the controller cannot filter by node: by state, and a state too large for one
        answer by job-id range (id_ranges.read_by_id), within a request budget of its own.
        Inside `sharing()` one read serves every call. SpurctlError when the budget
        stopped the read: what it lacks cannot be told."""
        if self._shared is not None and self._shared:
            return self._shared[0]
        _, counts = self.job_counts()
        read = JobRead()
        # Its own budget: an audit's, on the same client, is left as it was.
        kept, self._budget = self._budget, RequestBudget(self.request_budget)
        try:
            read_by_id(
                self, BY_ACTIVITY, counts, read, requeued_known=True,
                planned=_PLANNED_ANSWER, scoped=self.scoped,
            )  # fmt: skip
        except BudgetSpent:
            raise SpurctlError(f"controller {self.address}: {self._budget.note()}") from None
        finally:
            self._budget = kept
        jobs = JobsFromPb(read.messages, read.converted, read.shapes)
        if self._shared is not None:
            self._shared.append(jobs)
        return jobs

    @contextmanager
    def sharing(self) -> Iterator[None]:
        """Within it, `active_jobs` is read once: one pass of a run over many nodes (a
        repair's plan, its re-reads after the drain) reads the controller once, not once
        a node."""
        self._shared = []
        try:
            yield
        finally:
            self._shared = None

    def look_up(self, view: ControllerView, job_ids: Iterable[int]) -> ControllerView:
        """`view` with the jobs `job_ids` name, asked for by id (GetJobs `job_ids`, in
        batches of LOOKUP_BATCH). Without a credential the answers are unscoped, so an id
        asked and not returned is untracked (recorded in `asked_ids`); with one, absence
        proves nothing and the ids are not recorded. The request budget may leave ids
        unasked: the view then says so (`cut_short`)."""
        ids = sorted(view.lacking(job_ids))
        if not ids or not isinstance(view.jobs, JobsFromPb):
            return view
        found, asked_now = self.ids_in_batches(ids)
        asked = view.asked_ids if self.scoped else view.asked_ids | frozenset(asked_now)
        view = replace(view, jobs=view.jobs.with_more(found), asked_ids=asked)
        return self.cut_short(view)

    def cut_short(self, view: ControllerView) -> ControllerView:
        """`view`, marked incomplete with the budget's one line when the request budget
        stopped this audit's reads (its view or look-ups)."""
        if not self._budget.hit or view.cut_short:
            return view
        return replace(view, cut_short=True, read_notes=(*view.read_notes, self._budget.note()))

    def view(
        self,
        *,
        everything: bool = False,
        wanted: Callable[[], Collection[int] | None] | None = None,
    ) -> ControllerView:
        """One consistent-enough picture: version, jobs, nodes, and the unscoped counts.

        An audit's view (`everything` False) holds the jobs that can hold a node now or
        soon (running, completing, suspended; pending, preempted, requeued) and the
        ended ones above them; held ids outside it are asked for with `look_up`. Its
        completeness is the running, completing and suspended jobs read against
        JobMetrics.by_state, read after them: jobs that change state in between can
        only make it look incomplete (which spares more), never hide a scoped answer.
        `everything` reads every job (a snapshot, the post-wipe checklist).

        A state too large for one answer is read node by node where the controller's
        version has that filter (0.9.0 on) and its first node-split answer shows it
        applied (node_split.read_by_node), else by job-id range (id_ranges.read_by_id).
        The view's reads and its look-ups send at most `request_budget` GetJobs
        requests; a read the budget stopped leaves the view incomplete (`cut_short`).

        `wanted`, asked once a split read's first answer is in, names the jobs worth a
        glance (`ControllerView.glance`) as they arrive: an audit's held ids, once its
        inventories are read (None: every job is converted whole as it arrives). The
        jobs are kept encoded, with their placements, and converted only if something
        reads them: the node checks need every active job's placement, most holdings a
        glance at their job, and only the few holdings that are not plainly healthy the
        job whole.
        """
        ping = self.ping()
        version = ping.version
        self._budget = RequestBudget(self.request_budget)
        filters = filters_for(version)
        _, planning = self.job_counts()
        nodes_answer = self.read_later("GetNodes", pb.GetNodesRequest(), decode=scrub.node_table)
        nodes_read: list[NodesFromPb] = []

        def node_table() -> NodesFromPb:
            if not nodes_read:
                nodes_read.append(nodes_answer())
            return nodes_read[0]

        def node_names() -> list[str]:  # only a split by node waits for them
            return list(node_table())

        def read_allocations() -> None:
            # While a split read's answers are on their way: every audit's node checks
            # read every node's allocation.
            with gc_paused():
                node_table().allocations()

        read = JobRead(wanted=wanted or every_job)
        try:
            if filters.nodes:
                try:
                    read_by_node(
                        self, everything, planning, node_names, read, read_allocations,
                        version=version, planned=_PLANNED_ANSWER,
                    )  # fmt: skip
                except FilterIgnored as ignored:  # start again, without the filter
                    read = JobRead(wanted=read.wanted, notes=[str(ignored)])
                    filters = Filters(nodes=False, requeued=filters.requeued)
            if not filters.nodes:
                states = tuple(JobState) if everything else BY_ACTIVITY + NOT_STARTED
                probed = read_by_id(
                    self, states, planning, read, requeued_known=filters.requeued,
                    planned=_PLANNED_ANSWER, scoped=self.scoped,
                )  # fmt: skip
                if not everything and not probed:
                    read.messages += self.probe_above(read.highest())
        except BudgetSpent:
            pass  # the budget's note below says it
        if self._budget.hit:
            read.notes.append(self._budget.note())
        jobs = JobsFromPb(
            read.messages, read.converted, read.shapes, read.encoded, read.grouped, read.glanced
        )
        unread, notes = read.unread, read.notes
        # While the controller builds its node list, group the active jobs' placements by
        # nodelist: every audit's node checks read them so, and the off-list check below.
        with gc_paused():
            by_nodelist = jobs.by_nodelist()  # read once, kept
        read_active = sum(map(len, by_nodelist.values()))
        nodes = node_table()
        total, after = self.job_counts()
        expected = sum(after[s] for s in ACTIVE_STATES)
        if self.scoped and sum(after.values()) < total:
            # by_state does not account for every job (a controller that leaves it out):
            # a scoped answer cannot be checked, so it is not taken as complete.
            expected = max(expected, read_active + 1)
            notes.append(
                "JobMetrics.by_state does not count every job, so what a credential-scoped "
                "GetJobs left out cannot be told"
            )
        if unread and not self.scoped:
            # An unscoped read node by node returns every job naming a listed node: what
            # it left unread names none (no nodelist yet, or only unlisted nodes), so it
            # explains no listed node's allocation.
            expected -= sum(unread[s] for s in ACTIVE_STATES)
        notes += [unread_note(state, n, everything) for state, n in sorted(unread.items()) if n]
        unlisted = off_list(by_nodelist, nodes)
        if unlisted:
            # The node list lacks a node a job runs on: that node is in no audit's scope.
            expected = max(expected, read_active + 1)
            notes.append(off_list_note(unlisted))
        notes[:0], self._failovers = self._failovers, []  # said once, by the view after it
        return ControllerView(
            address=self.address,
            version=version,
            taken_at=utcnow(),
            jobs=jobs,
            nodes=nodes,
            jobs_total=total,
            bounded=not everything,
            active_read=read_active,
            active_expected=expected,
            read_notes=tuple(notes),
            cut_short=self._budget.hit,
            clock=_server_time(ping),
        )


def _server_time(ping: pb.PingResponse) -> datetime | None:
    """The controller's clock in its Ping answer; None when unset or not a time."""
    try:
        return time_from_pb(ping.server_time)
    except (ValueError, OverflowError, OSError):
        return None


def _not_found(err: grpc.RpcError) -> bool:
    return isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.NOT_FOUND
