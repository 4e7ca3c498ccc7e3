"""Reading GetJobs through the node filter (`nodes`, 0.9.0 on): by state, and a state
too large for one answer node by node.

The controller client (sources/controller.py) reads a view this way where Ping's
version has the filter (releases.filters_for); sources/id_ranges.py is the other way,
by job-id range, for every release. The states are asked in one request when
JobMetrics says the answer fits; otherwise one state at a time, and a state still
too large node by node, a refused node list halved. A controller that ignores the
filter is caught on its first answer, or on the first refusal (a node no node is
named), and the view is read again by id (FilterIgnored). What no node's answer can
reach (a job with no nodelist yet, or naming only nodes GetNodes does not list) is
asked for by id. docs/spur-facts.md, "How spurctl reads each release", says why.

It lives beside the client, not in it, as id_ranges.py does: the client sends, fails
over and counts the request budget; this is the plan of what to ask.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from spurctl.model import JobState
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import scrub
from spurctl.sources.id_ranges import AnswerTooLarge, Pending
from spurctl.sources.job_reads import (
    BY_ACTIVITY,
    NO_SUCH_NODE,
    NOT_STARTED,
    FilterIgnored,
    JobRead,
    filter_ignored_note,
    gaps,
    off_the_nodes,
)
from spurctl.sources.wire import JobRecords

# Planning a split: bytes per JobInfo assumed (real ones are 400-700 bytes). A guess
# that is wrong only costs one refused answer and a finer split.
BYTES_PER_JOB = 1024


class Reads(Protocol):
    """The controller reads a node split needs (ControllerClient's; `request` takes
    each GetJobs request from the audit's request budget)."""

    @property
    def scoped(self) -> bool: ...

    def request(self, parts: int = 1, **filters: Any) -> pb.GetJobsRequest: ...

    def read(
        self,
        method: str,
        request: Any,
        *,
        missing_ok: bool = False,
        decode: Callable[[bytes], Any] | None = None,
    ) -> Any: ...

    def read_later(
        self,
        method: str,
        request: Any,
        *,
        missing_ok: bool = False,
        decode: Callable[[bytes], Any] | None = None,
    ) -> Pending: ...

    def ids_in_batches(
        self, ids: Sequence[int], states: Sequence[int] = ()
    ) -> tuple[list[pb.JobInfo], list[int]]: ...

    def probe_above(self, highest: int) -> list[pb.JobInfo]: ...


def read_by_node(
    reads: Reads,
    everything: bool,
    counts: Counter[JobState],
    node_names: Callable[[], Sequence[str]],
    into: JobRead,
    meanwhile: Callable[[], None],
    *,
    version: str,
    planned: int,
) -> None:
    """A view's job reads through the `nodes` filter, added to `into`.

    `everything`: every state (a snapshot, the checklist), then the ids between those
    read for the jobs no node filter reaches; else the states that can hold a node now
    or soon, and (unscoped) the active jobs no node's answer held, by id. Then the ids
    above the highest read (the watermark's). `counts`: JobMetrics.by_state, which
    plans the split; `planned`: the bytes one answer is planned to hold; `version`:
    Ping's, for the note a controller that ignores the filter gets. `node_names` is
    called only when a state must be split; `meanwhile` runs once a split's parts are
    sent, before the first is awaited. Raises FilterIgnored.
    """
    split = _NodeSplit(reads, version, planned)
    if everything:
        split.jobs_in(tuple(JobState), counts, node_names, into, meanwhile)
        if into.unread:  # jobs no node filter reaches: ask for the ids between those read
            between = gaps(into.ids())
            if between is not None:
                into.messages += reads.ids_in_batches(between)[0]
                into.unread = Counter()
            into.messages += reads.probe_above(into.highest())
        return
    split.jobs_in(BY_ACTIVITY, counts, node_names, into, meanwhile)
    split.jobs_in(NOT_STARTED, counts, node_names, into, meanwhile)
    into.messages += reads.probe_above(into.highest())
    if not reads.scoped:  # a scoped answer by id proves nothing more
        _find_unreached(reads, into)


class _NodeSplit:
    """One view's node-split reads: the first refusal of the view checks the filter."""

    def __init__(self, reads: Reads, version: str, planned: int) -> None:
        self._reads, self._version, self._planned = reads, version, planned
        self._filter_checked = False

    def _answer(self, **filters: Any) -> list[pb.JobInfo]:
        return list(self._reads.read("GetJobs", self._reads.request(**filters)).jobs)

    def jobs_in(
        self,
        states: Sequence[JobState],
        counts: Counter[JobState],
        node_names: Callable[[], Sequence[str]],
        into: JobRead,
        meanwhile: Callable[[], None],
    ) -> None:
        """The jobs in `states`, every answer under the cap, added to `into`.

        One request when the counts say it fits; else one per state, and a state still
        too large is read node by node (`nodes` filter, halved as needed), each part
        kept as it arrives (`JobRead.keep`) so that its answer can be let go; `meanwhile`
        runs once the parts are sent, before the first is awaited. A job without
        a nodelist is in no node's answer: what a node split left unread is counted
        by state (`counts` minus what was read). The first part's answer is checked:
        a job on none of its nodes raises FilterIgnored.
        """
        expected = sum(counts[s] for s in states)
        if expected * BYTES_PER_JOB <= self._planned:
            try:
                into.messages += self._answer(states=[int(s) for s in states])
                return
            except AnswerTooLarge:
                pass
        for state in states:
            if len(states) > 1 and counts[state] * BYTES_PER_JOB <= self._planned:
                try:
                    into.messages += self._answer(states=[int(state)])
                    continue
                except AnswerTooLarge:
                    pass
            nodes = node_names()
            parts = max(2, math.ceil(counts[state] * BYTES_PER_JOB / self._planned))
            size = max(1, math.ceil(len(nodes) / parts))
            # The planned parts in flight together; a part refused for its size is
            # halved and read again, one request at a time.
            chunks = [nodes[start : start + size] for start in range(0, len(nodes), size)]
            # The budget is taken for all the parts at once, with the first (all or none).
            requests = [
                self._reads.request(0 if i else len(chunks), states=[int(state)], nodes=chunk)
                for i, chunk in enumerate(chunks)
            ]
            pending = [
                (chunk, self._reads.read_later("GetJobs", request, decode=scrub.job_records))
                for chunk, request in zip(chunks, requests, strict=True)
            ]
            meanwhile()  # this process's own work, while the answers are on their way
            found: set[int] = set()
            for chunk, collect in pending:
                try:
                    part = collect()
                except AnswerTooLarge:
                    part = self._split(state, chunk, into.notes)
                off = off_the_nodes(part.glimpses(), chunk) if not found else None
                if off is not None:
                    for _, later in pending:
                        later.cancel()
                    raise FilterIgnored(filter_ignored_note(self._version, off))
                found |= into.keep(part)
                del part
            into.unread[state] = max(0, counts[state] - len(found))

    def _split(self, state: JobState, nodes: Sequence[str], notes: list[str]) -> JobRecords:
        """The jobs in `state` on `nodes`, whose answer was refused for its size, asked for
        half the nodes at a time; the first refusal of a view checks the filter first."""
        if not self._filter_checked:
            self._filter_checked = True
            try:
                ignored = self._answer(states=[int(state)], nodes=[NO_SUCH_NODE])
            except AnswerTooLarge:
                ignored = [pb.JobInfo()]
            if ignored:  # a job on a node no node is named: the filter filtered nothing
                raise FilterIgnored(filter_ignored_note(self._version, None))
        if len(nodes) == 1:
            notes.append(
                f"the {state.name} jobs on {nodes[0]} are over spurctld's 32 MiB answer "
                "limit by themselves and were not read"
            )
            return JobRecords()
        half = len(nodes) // 2
        return self._by_nodes(state, nodes[:half], notes) + self._by_nodes(
            state, nodes[half:], notes
        )

    def _by_nodes(self, state: JobState, nodes: Sequence[str], notes: list[str]) -> JobRecords:
        try:
            request = self._reads.request(states=[int(state)], nodes=list(nodes))
            return self._reads.read("GetJobs", request, decode=scrub.job_records)
        except AnswerTooLarge:
            return self._split(state, nodes, notes)


def _find_unreached(reads: Reads, read: JobRead) -> None:
    """Read by id the active jobs a node split reached in no node's answer.

    Such a job has no nodelist yet, or names only nodes GetNodes does not list, and
    only its record tells which (the second makes the view incomplete). Asked for
    among the ids below the highest read (the oldest job still running may be older
    than every job read), in the states left short, when there are few enough of
    them; what stays unread is counted in `read.unread`.
    """
    short = [int(s) for s in BY_ACTIVITY if read.unread[s]]
    if not short:
        return
    between = gaps(read.ids(), low=1)
    if between is None:
        return
    found, _ = reads.ids_in_batches(between, short)
    read.messages += found
    for s in BY_ACTIVITY:
        if read.unread[s]:
            got = sum(1 for m in found if m.state == int(s))
            read.unread[s] = max(0, read.unread[s] - got)
