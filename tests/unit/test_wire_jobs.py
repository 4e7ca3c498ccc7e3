"""GetJobs' answer as a lazily converted Mapping[int, Job], and the fast paths around it.

A live view converts each job on first access; everything past the edge must
see exactly what an eager conversion would have given it.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from spurctl.errors import DocumentError
from spurctl.heap import gc_paused
from spurctl.model import (
    ACTIVE_STATES,
    Allocation,
    ControllerView,
    Device,
    Job,
    JobGlance,
    JobState,
    Node,
    NodeState,
    Placement,
    group_by_nodelist,
)
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources import wire
from spurctl.sources.documents import dump_json
from spurctl.sources.inventory_document import inventory_from_dict
from spurctl.sources.job_reads import JobRead
from spurctl.sources.wire import JobsFromPb, NodesFromPb, Shapes, time_from_pb
from spurctl_sim.encoders import job_to_pb, node_to_pb, time_to_pb


def answer_of(jobs: list[Job]) -> pb.GetJobsResponse:
    return pb.GetJobsResponse(jobs=[job_to_pb(j) for j in jobs])


def kept_encoded(msg: pb.JobInfo, shapes: wire.Shapes) -> wire.Encoded:
    """`msg` kept as a split read keeps it: read from its answer's bytes."""
    part = wire.JobRecords(pb.GetJobsResponse(jobs=[msg]).SerializeToString())
    kept: dict[int, wire.Encoded] = {}
    wire.keep_encoded(part, shapes, (), kept, {}, {})
    return kept[msg.job_id]


def counting(
    monkeypatch: pytest.MonkeyPatch, function: str, key: Callable[[Any], Any]
) -> list[Any]:
    """Record key(message) for each call of wire.`function` (a conversion), then convert."""
    seen: list[Any] = []
    real = getattr(wire, function)

    def recording(msg: Any, shapes: Shapes | None = None) -> Any:
        seen.append(key(msg))
        return real(msg, shapes)

    monkeypatch.setattr(wire, function, recording)
    return seen


def counting_conversions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return counting(monkeypatch, "job_from_pb", lambda msg: msg.job_id)


# -- the mapping -------------------------------------------------------------------


def test_a_missing_id_is_a_key_error_and_get_gives_the_default() -> None:
    jobs = JobsFromPb(answer_of([Job(7, JobState.RUNNING, "gpu001")]).jobs)
    with pytest.raises(KeyError):
        jobs[8]
    with pytest.raises(KeyError):
        jobs["7"]  # type: ignore[index]
    assert jobs.get(8) is None
    assert jobs.get(7) == Job(7, JobState.RUNNING, "gpu001")
    assert 7 in jobs and 8 not in jobs and "7" not in jobs
    assert len(JobsFromPb(pb.GetJobsResponse().jobs)) == 0


def test_iterating_ids_and_counting_convert_nothing_and_a_read_converts_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    converted = counting_conversions(monkeypatch)
    jobs = JobsFromPb(answer_of([Job(i, JobState.PENDING) for i in range(1, 51)]).jobs)
    assert list(jobs) == list(range(1, 51)) and len(jobs) == 50 and 50 in jobs
    assert max(jobs) == 50
    assert converted == []
    first = jobs[17]
    assert jobs[17] is first and jobs.get(17) is first
    assert converted == [17]


def test_placements_read_the_active_jobs_without_converting_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    converted = counting_conversions(monkeypatch)
    gpus = Allocation(16, 2048, {"gpu": (Device(0), Device(1))})
    every = [
        Job(i + 1, state, f"gpu[{i:03d}-{i + 1:03d}]", resources=gpus)
        for i, state in enumerate(JobState)
    ]
    already = Job(99, JobState.SUSPENDED, "gpu099", resources=gpus)
    jobs = JobsFromPb(answer_of(every).jobs, converted={99: already})
    placed = jobs.placements()
    assert converted == [], "a placement must not convert its job"
    expected = [j for j in every if j.state in ACTIVE_STATES] + [already]
    assert placed == [Placement(j.job_id, j.nodelist, j.resources) for j in expected]
    assert placed[0].resources.gpus == 2
    assert jobs.placements() is placed, "read once, kept"


def test_placements_keep_a_repeated_ids_last_record_only() -> None:
    first = Job(5, JobState.RUNNING, "gpu001")
    last = Job(5, JobState.COMPLETED, "gpu001")
    assert JobsFromPb(answer_of([first, last]).jobs).placements() == []
    again = JobsFromPb(answer_of([last, first]).jobs)
    assert again.placements() == [Placement(5, "gpu001", Allocation())]
    # A record in an answer wins over the same id converted earlier.
    stale = JobsFromPb(answer_of([last]).jobs, converted={5: first})
    assert stale.placements() == []


def test_a_plain_dict_view_places_its_active_jobs() -> None:
    jobs = {1: Job(1, JobState.RUNNING, "a"), 2: Job(2, JobState.COMPLETED, "a")}
    view = ControllerView("http://c", "v", datetime.now(UTC), jobs, {}, 2)
    assert view.active_placements() == [Placement(1, "a", Allocation())]


def test_an_encoded_job_reads_back_whole_and_is_converted_only_when_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpus = Allocation(16, 2048, {"gpu": (Device(3),)})
    run = Job(
        41, JobState.RUNNING, "gpu[001-002]", name="train", user="ana", resources=gpus,
        submit_time=datetime(2026, 12, 1, 9, 0, tzinfo=UTC),
        start_time=datetime(2026, 12, 1, 9, 0, 1, 250000, tzinfo=UTC),
    )  # fmt: skip
    ended = Job(42, JobState.COMPLETED, "gpu003")
    shapes = Shapes()
    kept = {j.job_id: kept_encoded(job_to_pb(j), shapes) for j in (run, ended)}
    converted = counting_conversions(monkeypatch)
    jobs = JobsFromPb(answer_of([Job(7, JobState.PENDING)]).jobs, shapes=shapes, encoded=kept)
    assert sorted(jobs) == [7, 41, 42] and len(jobs) == 3 and 41 in jobs and 43 not in jobs
    assert jobs.placements() == [Placement(41, "gpu[001-002]", gpus)]
    assert converted == [], "neither iterating nor placing converts an encoded job"
    assert jobs[41] == run and jobs.get(42) == ended and jobs.get(43) is None
    assert jobs[41] is jobs[41] and sorted(converted) == [41, 42]
    assert [p.job_id for p in jobs.placements()] == [41]
    more = jobs.with_more(answer_of([Job(99, JobState.PENDING)]).jobs)
    assert sorted(more) == [7, 41, 42, 99] and more[42] == ended
    assert more.placements() == [Placement(41, "gpu[001-002]", gpus)]
    fresh = JobsFromPb(answer_of([]).jobs, shapes=shapes, encoded=kept)
    placed = [Placement(41, "gpu[001-002]", gpus), Placement(98, "gpu009", Allocation())]
    for first_placed in (True, False):  # carried over once read, or read afresh: the same
        base = JobsFromPb(answer_of([]).jobs, shapes=shapes, encoded=kept)
        if first_placed:
            base.placements()
        two = [Job(98, JobState.PENDING), Job(98, JobState.RUNNING, "gpu009")]
        assert sorted(base.with_more(answer_of(two).jobs).placements()) == placed
    assert fresh.placements() == placed[:1]
    done = Job(41, JobState.COMPLETED, "gpu[001-002]")
    later = jobs.with_more(answer_of([done]).jobs)  # the later record replaces the kept one
    assert later[41] == done and len(later) == 3 and later.placements() == []
    assert jobs[41] == run, "the first map is unchanged"


def test_a_record_in_an_answer_wins_over_the_same_id_kept_encoded_or_converted() -> None:
    shapes = Shapes()
    running = Job(5, JobState.RUNNING, "gpu001")
    ended = Job(5, JobState.COMPLETED, "gpu001")
    later = JobsFromPb(
        answer_of([ended]).jobs,
        shapes=shapes,
        encoded={5: kept_encoded(job_to_pb(running), shapes)},
    )
    assert later[5] == ended and len(later) == 1 and later.placements() == []
    other = Job(6, JobState.SUSPENDED, "gpu002")
    both = JobsFromPb(
        [],
        converted={6: other},
        shapes=shapes,
        encoded={6: kept_encoded(job_to_pb(Job(6, JobState.RUNNING, "gpu009")), shapes)},
    )
    assert both[6] == other and len(both) == 1, "an id is kept one way only"
    assert both.placements() == [Placement(6, "gpu002", Allocation())]


def kept_grouped(
    jobs: list[Job], shapes: Shapes
) -> tuple[dict[int, wire.Encoded], dict[str, list[Placement]]]:
    """`jobs` kept as one split-read answer: by id, and their placements by nodelist."""
    part = wire.JobRecords(answer_of(jobs).SerializeToString())
    kept: dict[int, wire.Encoded] = {}
    grouped: dict[str, list[Placement]] = {}
    wire.keep_encoded(part, shapes, (), kept, grouped, {})
    return kept, grouped


def test_the_glances_kept_with_a_read_are_the_tables_glances_less_what_replaced_them() -> None:
    shapes = Shapes()
    jobs = [
        Job(1, JobState.RUNNING, "gpu001", submit_time=datetime(2026, 1, 1, tzinfo=UTC)),
        Job(2, JobState.PENDING),
        Job(3, JobState.RUNNING, "gpu003"),
    ]
    part = wire.JobRecords(answer_of(jobs).SerializeToString())
    kept: dict[int, wire.Encoded] = {}
    glanced: dict[int, JobGlance] = {}
    wire.keep_encoded(part, shapes, {1, 2}, kept, {}, glanced)
    assert glanced.keys() == {1, 2}, "a glance for each wanted id, and only those"
    table = JobsFromPb([], shapes=shapes, encoded=kept, glanced=glanced)
    assert table.kept_glances() == {i: table.glance(i) for i in (1, 2)}
    # A later record of job 1 (it ended) wins: its kept glance is gone, in a new table
    # and in one a look-up made, and the glance it had is never answered again.
    ended = answer_of([Job(1, JobState.COMPLETED, "gpu001")]).jobs
    for later in (
        JobsFromPb(ended, shapes=shapes, encoded=kept, glanced=glanced),
        table.with_more(ended),
    ):
        assert later.kept_glances().keys() == {2}
        assert later.glance(1) is not None and later.glance(1).state is JobState.COMPLETED
    assert glanced.keys() == {1, 2}, "the read's own glances are left as kept"
    view = ControllerView("http://c", "v", datetime.now(UTC), table, {}, 3)
    assert view.kept_glances() is table.kept_glances()
    assert dataclasses.replace(view, jobs=dict(table.items())).kept_glances() == {}


def test_the_placements_by_nodelist_are_every_active_placement_grouped_however_kept() -> None:
    shapes = Shapes()
    jobs = [
        Job(1, JobState.RUNNING, "gpu001"),
        Job(2, JobState.COMPLETED, "gpu001"),
        Job(3, JobState.SUSPENDED, "gpu001"),
        Job(4, JobState.RUNNING, "gpu[001-002]"),
        Job(5, JobState.PENDING),
        Job(6, JobState.COMPLETING, ""),
    ]
    kept, grouped = kept_grouped(jobs, shapes)
    assert grouped == {
        "gpu001": [Placement(1, "gpu001", Allocation()), Placement(3, "gpu001", Allocation())],
        "gpu[001-002]": [Placement(4, "gpu[001-002]", Allocation())],
        "": [Placement(6, "", Allocation())],
    }
    table = JobsFromPb(
        answer_of([Job(7, JobState.RUNNING, "gpu002")]).jobs,
        converted={8: Job(8, JobState.RUNNING, "gpu001")},
        shapes=shapes,
        encoded=kept,
        grouped=grouped,
    )
    by_list = table.by_nodelist()
    assert by_list == group_by_nodelist(table.placements()) | {
        # Order within a group: the read's kept jobs, then the others'.
        "gpu001": [
            Placement(1, "gpu001", Allocation()),
            Placement(3, "gpu001", Allocation()),
            Placement(8, "gpu001", Allocation()),
        ]
    }
    assert len(grouped["gpu001"]) == 2, "the read's own groups are left as kept"
    assert sum(map(len, by_list.values())) == len(table.placements()) == 6


def test_a_record_that_wins_over_a_kept_one_regroups_the_placements() -> None:
    shapes = Shapes()
    kept, grouped = kept_grouped(
        [Job(1, JobState.RUNNING, "gpu001"), Job(2, JobState.RUNNING, "gpu002")], shapes
    )
    # Job 1 ended after the read kept it running: its later record wins, and leaves no
    # placement behind in the groups the read made.
    later = answer_of([Job(1, JobState.COMPLETED, "gpu001")]).jobs
    table = JobsFromPb(later, shapes=shapes, encoded=kept, grouped=grouped)
    assert table.by_nodelist() == {"gpu002": [Placement(2, "gpu002", Allocation())]}
    # The same through a look-up's records added to a table (`with_more`).
    base = JobsFromPb([], shapes=shapes, encoded=kept, grouped=grouped)
    more = base.with_more(later)
    assert more.by_nodelist() == {"gpu002": [Placement(2, "gpu002", Allocation())]}
    added = base.with_more(answer_of([Job(9, JobState.RUNNING, "gpu002")]).jobs)
    assert sorted(added.by_nodelist()["gpu002"]) == [
        Placement(2, "gpu002", Allocation()),
        Placement(9, "gpu002", Allocation()),
    ]
    assert added.by_nodelist().keys() == {"gpu001", "gpu002"}
    assert base.by_nodelist() == grouped, "the table it was made from is unchanged"


def test_an_id_a_split_read_keeps_twice_is_placed_once_by_its_later_record() -> None:
    read = JobRead(wanted=lambda: frozenset())
    read.keep(wire.JobRecords(answer_of([Job(1, JobState.RUNNING, "gpu001")]).SerializeToString()))
    assert read.grouped is not None
    read.keep(wire.JobRecords(answer_of([Job(1, JobState.RUNNING, "gpu002")]).SerializeToString()))
    assert read.grouped is None, "grouped twice: the groups are not the kept jobs' any more"
    table = JobsFromPb([], shapes=read.shapes, encoded=read.encoded, grouped=read.grouped)
    assert table.by_nodelist() == {"gpu002": [Placement(1, "gpu002", Allocation())]}


def test_the_ids_a_table_lacks_count_every_way_a_job_is_kept_and_convert_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shapes = Shapes()
    table = JobsFromPb(
        answer_of([Job(1, JobState.PENDING)]).jobs,
        converted={2: Job(2, JobState.RUNNING, "gpu001")},
        shapes=shapes,
        encoded={3: kept_encoded(job_to_pb(Job(3, JobState.RUNNING, "gpu002")), shapes)},
    )
    converted = counting_conversions(monkeypatch)
    asked = [1, 2, 3, 4, 5, 4]
    assert table.lacking(asked) == {4, 5} == {i for i in asked if i not in table}
    assert table.lacking(iter(asked)) == {4, 5}, "any iterable, read once"
    assert table.lacking([]) == set()
    assert converted == []
    dict_view = ControllerView("http://c", "v", datetime.now(UTC), dict(table.items()), {}, 3)
    live_view = dataclasses.replace(dict_view, jobs=table)
    assert dict_view.lacking(asked) == live_view.lacking(asked) == {4, 5}


def test_nodes_are_converted_when_read_and_their_allocations_without_converting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    converted = counting(monkeypatch, "node_from_pb", lambda msg: msg.name)
    busy = Allocation(8, 512, {"gpu": (Device(0),)})
    every = [
        Node("gpu001", NodeState.ALLOCATED, alloc=busy),
        Node("gpu002", NodeState.IDLE),
        Node("gpu001", NodeState.DRAIN, alloc=busy),  # a repeated name: the last record wins
    ]
    answer = pb.GetNodesResponse(nodes=[node_to_pb(n) for n in every])
    # From decoded messages, or from the answer's bytes as a view reads it (with glimpses).
    for nodes in (NodesFromPb(answer.nodes), NodesFromPb.decode(answer.SerializeToString())):
        converted.clear()
        assert list(nodes) == ["gpu001", "gpu002"] and len(nodes) == 2
        assert "gpu002" in nodes and "gpu003" not in nodes and nodes.get("gpu003") is None
        assert nodes.allocations() == {"gpu001": busy, "gpu002": Allocation()}
        assert converted == [], "allocations are read without converting a node"
        assert nodes["gpu001"] == every[2] and nodes.get("gpu002") == every[1]
        assert nodes["gpu001"] is nodes["gpu001"] and converted == ["gpu001", "gpu002"]
    view = ControllerView("http://c", "v", datetime.now(UTC), {}, {"a": every[0]}, 0)
    assert view.node_allocations() == {"a": busy}


def test_a_repeated_id_keeps_its_last_record_in_reads_and_in_placements() -> None:
    first = Job(5, JobState.RUNNING, "gpu001")
    last = Job(5, JobState.COMPLETED, "gpu001")
    jobs = JobsFromPb(answer_of([first, Job(6, JobState.RUNNING, "gpu002"), last]).jobs)
    assert len(jobs) == 2 and jobs[5] == last
    assert [p.job_id for p in jobs.placements()] == [6]
    again = JobsFromPb(answer_of([last, first]).jobs)
    assert again.placements() == [Placement(5, "gpu001", first.resources)] and again[5] == first


def test_the_mapping_outlives_the_answer_it_was_made_from() -> None:
    jobs = JobsFromPb(answer_of([Job(i, JobState.RUNNING, "n1") for i in range(1, 4)]).jobs)
    gc.collect()
    assert jobs[2] == Job(2, JobState.RUNNING, "n1")


def test_jobs_with_the_same_resources_share_one_record_and_others_do_not() -> None:
    gpus01 = Allocation(32, 1024, {"gpu": (Device(0), Device(1))})
    gpus23 = Allocation(32, 1024, {"gpu": (Device(2), Device(3))})
    jobs = JobsFromPb(
        answer_of(
            [
                Job(1, JobState.RUNNING, resources=gpus01),
                Job(2, JobState.RUNNING, resources=dataclasses.replace(gpus01)),
                Job(3, JobState.RUNNING, resources=gpus23),
                Job(4, JobState.PENDING),
            ]
        ).jobs
    )
    assert jobs[1].resources == gpus01 and jobs[1].resources is jobs[2].resources
    assert jobs[3].resources == gpus23
    assert jobs[4].resources == Allocation() and jobs[4].resources.empty


def test_an_unknown_state_from_a_newer_spur_reads_as_pending() -> None:
    msg = job_to_pb(Job(9, JobState.RUNNING, "gpu001"))
    raw = msg.SerializeToString().replace(b"\x38\x01", b"\x38\x63")  # field 7 (state) = 99
    answer = pb.GetJobsResponse(jobs=[pb.JobInfo.FromString(raw)])
    assert JobsFromPb(answer.jobs)[9].state is JobState.PENDING
    assert JobsFromPb(answer.jobs).placements() == []


def test_reading_from_several_threads_gives_one_answer_per_id() -> None:
    jobs = JobsFromPb(answer_of([Job(i, JobState.RUNNING, "n") for i in range(1, 2001)]).jobs)
    seen: list[dict[int, Job]] = []

    def read_all() -> None:
        seen.append({i: jobs[i] for i in jobs})

    threads = [threading.Thread(target=read_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a reader never finished"
    assert all(s == seen[0] for s in seen) and len(seen[0]) == 2000


# -- timestamps ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "nanos", "expected"),
    [
        (0, 0, None),
        (1_764_000_000, 0, datetime(2025, 11, 24, 16, 0, tzinfo=UTC)),
        (1_764_000_000, 123_456_789, datetime(2025, 11, 24, 16, 0, 0, 123_456, tzinfo=UTC)),
        (1_764_000_000, 999_999_999, datetime(2025, 11, 24, 16, 0, 0, 999_999, tzinfo=UTC)),
        (0, 5_000, datetime(1970, 1, 1, 0, 0, 0, 5, tzinfo=UTC)),
    ],
)
def test_timestamps_convert_exactly_truncating_below_a_microsecond(
    seconds: int, nanos: int, expected: datetime | None
) -> None:
    assert time_from_pb(Timestamp(seconds=seconds, nanos=nanos)) == expected


def test_a_microsecond_time_round_trips_through_the_wire() -> None:
    value = datetime(2026, 12, 1, 22, 14, 5, 654_321, tzinfo=UTC)
    ts = Timestamp()
    time_to_pb(value, ts)
    back = time_from_pb(ts)
    assert back == value and back is not None and back.tzinfo is UTC


# -- what reads the view ---------------------------------------------------------------


@pytest.mark.parametrize("state", ["NODE_FAIL", "JOB_NODE_FAIL", "node_fail", "OUT_OF_MEMORY"])
def test_a_snapshot_job_reads_back_whatever_its_state_is_called(state: str) -> None:
    from spurctl.sources.documents import job_from_dict

    job = job_from_dict({"job_id": 3, "state": state}, where="j")
    assert job.state.name == state.upper().removeprefix("JOB_")


# -- inventory holdings: JSON text and dicts read alike, and a refusal says what is wrong ----


def holding_doc(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": 4711,
        "cpus": 16,
        "memory_mb": 65536,
        "gpus": [0, 1],
        "pids": [81234],
        "started_at": "2026-12-01T22:14:05Z",
    }
    base.update(fields)
    return {"schema": "spurctl.inventory/v1", "node": "gpu017", "held": [base]}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"cpus": None, "memory_mb": None, "gpus": None, "pids": None, "started_at": None},
        {"gpus": [], "pids": []},
        {"started_at": "2026-12-01T23:14:05+01:00"},
        {"started_at": "2026-12-01T22:14:05"},
        {"started_at": "2026-12-01T22:14:05.250000Z"},
    ],
)
def test_a_valid_holding_reads_the_same_from_json_text_and_from_a_dict(
    fields: dict[str, Any],
) -> None:
    # One declaration reads both (msgspec), in place of a fast and a slow path.
    from spurctl.model import parse_time
    from spurctl.sources.inventory_document import parse_inventory_text

    doc = holding_doc(**fields)
    (from_text,) = parse_inventory_text(json.dumps(doc), name="w")
    from_dict = inventory_from_dict(doc, where="w")
    assert from_text == from_dict
    (held,) = from_text.held
    assert held.started_at == parse_time(doc["held"][0]["started_at"])
    assert held.started_at is None or held.started_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"job_id": True}, "field 'job_id' must be a non-negative integer, got True"),
        ({"job_id": None}, "missing integer field 'job_id'"),
        ({"job_id": -1}, "field 'job_id' must be a non-negative integer"),
        ({"job_id": 2**32}, "job_id 4294967296 is out of range"),
        ({"cpus": "16"}, "field 'cpus' must be a non-negative integer or null"),
        ({"memory_mb": False}, "field 'memory_mb' must be a non-negative integer or null"),
        ({"gpus": [0, True]}, "field 'gpus' must be a list of non-negative integers"),
        ({"gpus": [0, -1]}, "field 'gpus' must be a list of non-negative integers"),
        ({"pids": "81234"}, "field 'pids' must be a list of non-negative integers"),
        ({"pids": [1.5]}, "field 'pids' must be a list of non-negative integers"),
        ({"started_at": "yesterday"}, "field 'started_at' is not an RFC 3339 time"),
        ({"started_at": 1764000000}, "field 'started_at' is not an RFC 3339 time"),
    ],
)
def test_a_bad_holding_is_refused_with_what_is_wrong_and_where(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(DocumentError, match=r"^inv\.jsonl: line 3: held\[0\]: ") as caught:
        inventory_from_dict(holding_doc(**fields), where="inv.jsonl: line 3")
    assert message in str(caught.value)


def test_a_holding_that_is_not_an_object_is_refused() -> None:
    doc = holding_doc()
    doc["held"].append([4712])
    with pytest.raises(DocumentError, match=r"held\[1\]: expected a JSON object, got list"):
        inventory_from_dict(doc, where="x")


# -- the collector pause -----------------------------------------------------------------


def test_gc_paused_nests_overlaps_across_threads_and_restores_the_collector() -> None:
    assert gc.isenabled()
    inner_done = threading.Event()
    outer_may_end = threading.Event()

    def other_thread() -> None:
        with gc_paused():
            outer_may_end.set()
            inner_done.wait(5)
            assert not gc.isenabled()

    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        t = threading.Thread(target=other_thread)
        t.start()
        outer_may_end.wait(5)
    assert not gc.isenabled(), "the other thread's pause is still open"
    inner_done.set()
    t.join(timeout=10)
    assert not t.is_alive(), "the other thread's pause never closed"
    assert gc.isenabled()


def test_gc_paused_leaves_a_disabled_collector_disabled_and_survives_an_error() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    boom: Callable[[], None] = lambda: 1 / 0  # noqa: E731
    with pytest.raises(ZeroDivisionError), gc_paused():
        boom()
    assert gc.isenabled()


def test_objects_made_during_a_pause_are_still_collected_when_they_form_cycles() -> None:
    with gc_paused():
        a: list[Any] = []
        a.append(a)
        marker = dump_json({"cycle": "made while paused"})
    del a
    assert gc.collect() >= 1
    assert marker


def test_more_jobs_keep_what_was_converted_and_a_later_record_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    converted = counting_conversions(monkeypatch)
    first = JobsFromPb(
        answer_of([Job(1, JobState.RUNNING, "gpu001"), Job(2, JobState.RUNNING, "gpu002")]).jobs
    )
    assert first[1].state is JobState.RUNNING and first[2].nodelist == "gpu002"
    more = first.with_more(
        answer_of([Job(2, JobState.COMPLETED, "gpu002"), Job(3, JobState.PENDING, "")]).jobs
    )
    assert sorted(more) == [1, 2, 3] and len(more) == 3
    assert more[1] is first[1]  # shared, not converted again
    assert more[2].state is JobState.COMPLETED  # the later record
    assert first[2].state is JobState.RUNNING  # the first mapping is unchanged
    assert converted.count(1) == 1 and converted.count(2) == 2


def test_jobs_converted_as_their_answer_arrived_count_and_a_record_replaces_them() -> None:
    early = {
        1: Job(1, JobState.RUNNING, "gpu001"),
        2: Job(2, JobState.RUNNING, "gpu002"),
    }
    jobs = JobsFromPb(answer_of([Job(2, JobState.COMPLETED, "gpu002")]).jobs, converted=early)
    assert sorted(jobs) == [1, 2] and len(jobs) == 2 and 1 in jobs and 3 not in jobs
    assert jobs[1] is early[1] and jobs.get(1) is early[1] and jobs.get(3) is None
    assert jobs[2].state is JobState.COMPLETED  # the record wins over the early one
    assert [p.job_id for p in jobs.placements()] == [1]
    more = jobs.with_more(answer_of([Job(1, JobState.COMPLETING, "gpu001")]).jobs)
    assert more[1].state is JobState.COMPLETING and len(more) == 2
    assert [p.job_id for p in more.placements()] == [1]


def test_a_look_ups_records_join_the_groups_already_read_without_changing_them() -> None:
    shapes = Shapes()
    kept, grouped = kept_grouped([Job(1, JobState.RUNNING, "gpu001")], shapes)
    base = JobsFromPb(
        answer_of([Job(2, JobState.RUNNING, "gpu002")]).jobs,
        shapes=shapes,
        encoded=kept,
        grouped=grouped,
    )
    before = {k: list(v) for k, v in base.by_nodelist().items()}

    def regrouped(table: JobsFromPb) -> dict[str, list[Placement]]:
        return {k: sorted(v) for k, v in table.by_nodelist().items()}

    added = base.with_more(answer_of([Job(3, JobState.RUNNING, "gpu001")]).jobs)
    assert regrouped(added) == {
        k: sorted(v) for k, v in group_by_nodelist(added.placements()).items()
    }
    assert len(added.by_nodelist()["gpu001"]) == 2
    # A look-up's record of a job the table has (job 2 ended) is grouped again, not carried.
    ended = base.with_more(answer_of([Job(2, JobState.COMPLETED, "gpu002")]).jobs)
    assert regrouped(ended) == {"gpu001": [Placement(1, "gpu001", Allocation())]}
    assert {k: list(v) for k, v in base.by_nodelist().items()} == before
