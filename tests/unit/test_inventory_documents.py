"""The inventory document is declared once (msgspec) and read the one way.

Whatever the model can hold reads back unchanged from what spurctl writes, and
every kind of bad record is refused naming the file, the line, the field's path
and what was expected.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spurctl.errors import DocumentError
from spurctl.holdings import HOLDING_TRACES, AgentProcess, Holding, Inventory
from spurctl.model import MAX_JOB_ID
from spurctl.sources.documents import INVENTORY_SCHEMA, dump_json
from spurctl.sources.inventory_document import (
    inventory_from_dict,
    inventory_to_dict,
    parse_inventory_records,
    parse_inventory_text,
)

# -- round trip ------------------------------------------------------------------------

times = st.none() | st.datetimes(
    min_value=datetime(1971, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone.max]),
)
counts = st.integers(0, 2**64 - 1)
names = st.text(min_size=1, max_size=12)
holdings = st.builds(
    Holding,
    job_id=st.integers(0, MAX_JOB_ID),
    cpus=st.none() | counts,
    memory_mb=st.none() | counts,
    gpus=st.lists(st.integers(0, 64), max_size=4).map(tuple),
    pids=st.lists(st.integers(0, 2**22), max_size=4).map(tuple),
    started_at=times,
    attempt=st.none() | counts,
    traces=st.lists(st.sampled_from(HOLDING_TRACES) | names, max_size=3).map(tuple),
)


@st.composite
def inventories(draw: st.DrawFn) -> Inventory:
    # `agent` is written only when the scan looked for spurd: a model holding an
    # agent it did not look for is not a state node-inventory produces.
    agent_checked = draw(st.booleans())
    agent = draw(st.none() | st.builds(AgentProcess, pid=counts, started_at=times))
    return Inventory(
        node=draw(names),
        collected_at=draw(times),
        source=draw(st.text(max_size=12)),
        error=draw(st.none() | st.text(max_size=20)),
        held=tuple(draw(st.lists(holdings, max_size=4))),
        agent=agent if agent_checked else None,
        hostname=draw(st.none() | names),
        target_node=draw(st.none() | names),
        target_nodes=tuple(draw(st.lists(names, max_size=3))),
        agent_checked=agent_checked,
        # The node's own word (node-inventory's `agent_config`), either part alone too.
        agent_controller=draw(st.none() | names),
        agent_cluster=draw(st.none() | names),
    )


ROUND = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@ROUND
@given(st.lists(inventories(), min_size=1, max_size=3))
def test_any_inventory_the_model_holds_reads_back_unchanged(invs: list[Inventory]) -> None:
    docs = [inventory_to_dict(inv) for inv in invs]
    # JSON Lines as `spurctl collect` writes them (non-ASCII kept), one document, an array.
    lines = "".join(dump_json(d, indent=None) + "\n" for d in docs)
    assert list(parse_inventory_text(lines, name="inv.jsonl")) == invs
    assert list(parse_inventory_text(dump_json(docs[0]), name="inv.json")) == invs[:1]
    assert list(parse_inventory_text(json.dumps(docs), name="inv.json")) == invs
    # The dict reader (scenarios) is the same declaration.
    assert [inventory_from_dict(json.loads(json.dumps(d)), where="w") for d in docs] == invs
    for inv in parse_inventory_text(lines, name="inv.jsonl"):
        for t in [inv.collected_at, *(h.started_at for h in inv.held)]:
            assert t is None or t.tzinfo is UTC


# A holding as a document may write it: nulls, times in any offset or none, sessions, values
# out of bounds. JSON Lines decode a line's holdings straight into Holding when they read so.
_raw_times = st.sampled_from(
    [None, "2026-12-01T22:14:05Z", "2026-12-01T22:14:05.123456+00:00", "2026-12-01T22:14:05",
     "2026-12-01T23:14:05+01:00", "2026-12-01T17:14:05-05:00", "not a time", 7]
)  # fmt: skip
_raw_counts = st.sampled_from([None, 0, 3, -1, 2**32, "3", True])
_raw_lists = st.sampled_from([None, [], [0, 1], [-1], ["x"], [2**40]])
_raw_sessions = st.sampled_from(
    [None, [], [{"attempt": 1, "step": 0, "supervisor": 10, "binding": "live"}],
     [{"attempt": -1, "step": 0, "supervisor": 10, "binding": "live"}],
     [{"attempt": 1, "step": 0, "supervisor": 10, "binding": "gone"}]]
)  # fmt: skip
raw_holdings = st.fixed_dictionaries(
    {"job_id": st.sampled_from([0, 4711, MAX_JOB_ID, MAX_JOB_ID + 1, -1, None, "1"])},
    optional={
        "cpus": _raw_counts,
        "memory_mb": _raw_counts,
        "gpus": _raw_lists,
        "pids": _raw_lists,
        "started_at": _raw_times,
        "attempt": _raw_counts,
        "traces": st.sampled_from([None, [], ["cgroup"], [""], ["newer"], [1]]),
        "tracked_pids": _raw_lists,
        "supervisors": _raw_lists,
        "sessions": _raw_sessions,
    },
)


def _read(text: str, name: str) -> list[Inventory] | str:
    try:
        return list(parse_inventory_text(text, name=name))
    except DocumentError as exc:
        return str(exc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(raw_holdings, max_size=4))
def test_json_lines_read_holdings_as_one_document_does(held: list[dict[str, Any]]) -> None:
    line = json.dumps({"schema": INVENTORY_SCHEMA, "node": "gpu017", "held": held})
    # Two lines are JSON Lines (each line decoded straight into Holding when it can be);
    # one line alone is one document, read through _HoldingDoc.
    one = _read(line, "f")
    lines = _read(f"{line}\n{line}\n", "f")
    if isinstance(one, str):
        assert lines == one.replace("f:", "f: line 1:", 1)
    else:
        assert lines == one + one
        # Equal times in other offsets compare equal: the model's are UTC's own.
        assert all(h.started_at is None or h.started_at.tzinfo is UTC for h in lines[0].held)


def test_a_line_holding_a_unicode_line_separator_is_still_one_line() -> None:
    # Written with ensure_ascii=False, U+2028 stays raw; JSON Lines end only at "\n".
    inv = Inventory("gpu\u2028x", None, "src\x1c", hostname="h\u2029")
    text = dump_json(inventory_to_dict(inv), indent=None) + "\n" + _line(node="gpu002")
    records = list(parse_inventory_records(text, name="inv.jsonl"))
    assert [(w, i.node) for w, i in records] == [
        ("inv.jsonl: line 1", "gpu\u2028x"),
        ("inv.jsonl: line 2", "gpu002"),
    ]


def test_unknown_fields_are_ignored_as_before() -> None:
    doc = {**json.loads(_line()), "future": {"x": [1]}}
    doc["held"][0]["future"] = "y"
    (inv,) = parse_inventory_text(json.dumps(doc), name="f")
    assert inv.held[0].job_id == 4711


def test_absent_and_null_read_alike_except_agent() -> None:
    base = {"schema": INVENTORY_SCHEMA, "node": "n"}
    nulls = {k: None for k in ("collected_at", "source", "error", "held", "hostname")}
    nulls |= {"target_node": None, "target_nodes": None}
    assert inventory_from_dict(base, where="w") == inventory_from_dict({**base, **nulls}, where="w")
    assert inventory_from_dict({**base, "agent": None}, where="w").agent_checked
    assert not inventory_from_dict(base, where="w").agent_checked


# -- refusals: file, line, field path, what was expected -------------------------------


def _holding(**fields: Any) -> dict[str, Any]:
    return {
        "job_id": 4711,
        "cpus": 16,
        "memory_mb": 65536,
        "gpus": [0, 1],
        "pids": [81234],
        "started_at": "2026-12-01T22:14:05Z",
        **fields,
    }


def _line(held: list[Any] | None = None, **fields: Any) -> str:
    doc = {
        "schema": INVENTORY_SCHEMA,
        "node": "gpu017",
        "collected_at": "2026-12-02T10:00:00Z",
        "held": [_holding()] if held is None else held,
        **fields,
    }
    return json.dumps(doc) + "\n"


def _refusal(bad_line: str) -> str:
    """The message for a JSON Lines file whose third line is `bad_line`."""
    text = _line(node="gpu001") + "\n" + _line(node="gpu002") + bad_line + _line(node="gpu004")
    with pytest.raises(DocumentError) as err:
        list(parse_inventory_records(text, name="inv.jsonl"))
    message = str(err.value)
    assert "\n" not in message
    # Line 2 is blank: the count is of the file's lines, as an editor shows them.
    assert message.startswith("inv.jsonl: line 4: "), message
    return message


HELD_1 = [_holding(job_id=1)]


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        # wrong type
        (
            _line(held=[*HELD_1, _holding(cpus="16")]),
            "held[1]: field 'cpus' must be a non-negative",
        ),
        (_line(held=[*HELD_1, _holding(job_id=True)]), "held[1]: field 'job_id' must be"),
        (_line(held=[*HELD_1, _holding(gpus=[0, 1.5])]), "held[1]: field 'gpus' must be a list"),
        (_line(held={"job_id": 1}), "field 'held' must be a list"),
        (_line(held=[*HELD_1, [4712]]), "held[1]: expected a JSON object, got list"),
        (_line(node=7), "field 'node' must be a string, got 7"),
        (_line(error=3), "field 'error' must be a string or null"),
        (_line(agent=2201), "field 'agent' must be an object with 'pid' or null"),
        (_line(agent={"pid": "2201"}), "agent: field 'pid' must be a non-negative integer"),
        # missing required field
        (_line(held=[*HELD_1, {"cpus": 4}]), "held[1]: missing integer field 'job_id'"),
        (_line(held=[*HELD_1, _holding(job_id=None)]), "held[1]: missing integer field 'job_id'"),
        (_line(agent={"started_at": None}), "agent: missing integer field 'pid'"),
        (_line(node=""), "inventory without a node name"),
        (_line(node=None), "inventory without a node name"),
        # bad id or count range
        (_line(held=[*HELD_1, _holding(job_id=2**32)]), "held[1]: job_id 4294967296 is out of"),
        (_line(held=[*HELD_1, _holding(job_id=-1)]), "held[1]: field 'job_id' must be a non-neg"),
        (_line(held=[*HELD_1, _holding(pids=[5, -1])]), "held[1]: field 'pids' must be a list"),
        (_line(held=[*HELD_1, _holding(attempt=-2)]), "held[1]: field 'attempt' must be"),
        # bad time
        (_line(held=[*HELD_1, _holding(started_at="yesterday")]), "held[1]: field 'started_at'"),
        (_line(held=[*HELD_1, _holding(started_at=1764000000)]), "not an RFC 3339 time"),
        (_line(collected_at="2026-13-01T00:00:00Z"), "field 'collected_at' is not an RFC 3339"),
        (_line(agent={"pid": 1, "started_at": "soon"}), "agent: field 'started_at' is not"),
        # unknown schema
        (_line(schema="spurctl.audit/v1"), "schema is 'spurctl.audit/v1', expected"),
        (_line(schema=None), "schema is None, expected 'spurctl.inventory/v1'"),
        (json.dumps({"node": "gpu003", "held": 5}) + "\n", "schema is absent, expected"),
        # bad trace
        (_line(held=[*HELD_1, _holding(traces="cgroup")]), "held[1]: field 'traces' must be"),
        (_line(held=[*HELD_1, _holding(traces=["cgroup", ""])]), "held[1]: field 'traces'"),
        (_line(held=[*HELD_1, _holding(traces=[3])]), "list of names (e.g. 'cgroup'"),
        # names
        (_line(hostname=""), "field 'hostname' must be a non-empty string or null"),
        (_line(target_nodes=["a", ""]), "field 'target_nodes' must be a list of node names"),
    ],
)
def test_each_kind_of_bad_record_names_file_line_field_and_what_was_expected(
    bad: str, said: str
) -> None:
    assert said in _refusal(bad)


def test_a_bad_list_item_is_named_with_its_index() -> None:
    message = _refusal(_line(held=[*HELD_1, _holding(gpus=[0, -1])]))
    assert "held[1]: field 'gpus' must be a list of non-negative integers (gpus[1] is -1)" in (
        message
    )


def test_a_document_that_is_not_an_object_says_what_it_is() -> None:
    assert "expected a JSON object, got list" in _refusal("[1, 2]\n")


def test_a_wrong_schema_is_said_before_any_other_field() -> None:
    # A snapshot fed as an inventory: its other fields are wrong too, the schema says why.
    message = _refusal(json.dumps({"held": "x", "schema": "spurctl.snapshot/v1"}) + "\n")
    assert "schema is 'spurctl.snapshot/v1', expected 'spurctl.inventory/v1'" in message


def test_one_document_and_an_array_name_the_file_and_the_item() -> None:
    bad = json.loads(_line(held=[_holding(job_id=-5)]))
    with pytest.raises(DocumentError, match=r"^inv\.json: held\[0\]: field 'job_id'"):
        list(parse_inventory_text(json.dumps(bad, indent=2), name="inv.json"))
    good = json.loads(_line())
    with pytest.raises(DocumentError, match=r"^inv\.json: item 3: held\[0\]: field 'job_id'"):
        list(parse_inventory_text(json.dumps([good, good, bad]), name="inv.json"))
    with pytest.raises(DocumentError, match=r"^inv\.json: item 2: expected a JSON object"):
        list(parse_inventory_text(json.dumps([good, 5]), name="inv.json"))


def test_text_that_is_not_json_names_its_line() -> None:
    text = _line() + '{"schema": "spurctl.inv\n'
    with pytest.raises(DocumentError, match=r"^inv\.jsonl: line 2: not valid JSON \("):
        list(parse_inventory_text(text, name="inv.jsonl"))
    with pytest.raises(DocumentError, match=r"^inv\.json: line 3: not valid JSON \("):
        list(parse_inventory_text("[\n" + _line() + ",,\n]", name="inv.json"))
    with pytest.raises(DocumentError, match=r"^inv\.json: line 5: not valid JSON \("):
        list(parse_inventory_text("\n\n[\n" + _line() + ",,\n]", name="inv.json"))
    # The first line bad and more lines after it: still JSON Lines, still line 1.
    with pytest.raises(DocumentError, match=r"^inv\.jsonl: line 1: held\[0\]: field 'cpus'"):
        list(parse_inventory_text(_line(held=[_holding(cpus=-1)]) + _line(), name="inv.jsonl"))


def test_a_time_with_an_offset_or_none_reads_as_utc() -> None:
    held = [
        _holding(started_at="2026-12-01T23:14:05+01:00"),
        _holding(job_id=2, started_at="2026-12-01T22:14:05"),
    ]
    (inv,) = parse_inventory_text(_line(held=held), name="f")
    want = datetime(2026, 12, 1, 22, 14, 5, tzinfo=UTC)
    assert [h.started_at for h in inv.held] == [want, want]
    assert all(h.started_at is not None and h.started_at.tzinfo is UTC for h in inv.held)


def test_a_huge_or_deep_bad_value_is_shown_briefly() -> None:
    message = _refusal(_line(held=[_holding(job_id=10**400)]))
    assert "is out of range (Spur job ids are 32-bit)" in message and len(message) < 200
    deep: Any = 1
    for _ in range(500):
        deep = [deep]
    message = _refusal(_line(node=deep))
    assert "field 'node' must be a string, got [[" in message and len(message) < 200
