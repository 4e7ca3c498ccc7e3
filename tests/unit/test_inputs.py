"""Whatever an operator feeds spurctl, a reader answers with data or one SpurctlError.

Random text and random JSON shaped like the real documents go through every reader
of operator input: inventories, snapshots, agent maps, spur.conf and hostlists.
Anything but a SpurctlError would reach the operator as an "internal error".
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spurctl.errors import SpurctlError
from spurctl.hostlist import MAX_NODES, parse_scope
from spurctl.sources.documents import INVENTORY_SCHEMA, SNAPSHOT_SCHEMA
from spurctl.sources.inventory_document import parse_inventory_text
from spurctl.sources.settings import load_agent_map, load_conf
from spurctl.sources.snapshot_document import snapshot_from_dict

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)


def some_of(*keys: str) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with some of the real document's keys, each holding any JSON value."""
    return st.fixed_dictionaries({}, optional=dict.fromkeys(keys, json_values))


holdings = some_of("job_id", "cpus", "memory_mb", "gpus", "pids", "started_at")
inventories = st.builds(
    lambda node, held, rest: {"schema": INVENTORY_SCHEMA, "node": node, "held": held, **rest},
    st.text(max_size=6) | json_values,
    st.lists(holdings | json_values, max_size=3),
    some_of("collected_at", "source", "error"),
)
snapshots = st.builds(
    lambda jobs, nodes, rest: {"schema": SNAPSHOT_SCHEMA, "jobs": jobs, "nodes": nodes, **rest},
    st.lists(
        some_of("job_id", "state", "nodelist", "user", "submit_time", "resources"), max_size=2
    ),
    st.lists(
        some_of("name", "state", "partitions", "total_resources", "alloc_resources"), max_size=2
    ),
    some_of("controller", "taken_at", "watermark", "view"),
)


def only_spurctl_errors(read: Callable[[], object]) -> None:
    try:
        read()
    except SpurctlError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(st.text() | inventories.map(json.dumps) | st.lists(inventories, max_size=3).map(json.dumps))
def test_any_inventory_text_parses_or_raises_one_document_error(text: str) -> None:
    only_spurctl_errors(lambda: list(parse_inventory_text(text, name="inventory.jsonl")))


@FUZZ
@given(snapshots | json_values)
def test_any_snapshot_document_reads_or_raises_one_document_error(doc: Any) -> None:
    only_spurctl_errors(lambda: snapshot_from_dict(json.loads(json.dumps(doc)), where="snap.json"))


@FUZZ
@given(st.text() | json_values.map(json.dumps))
def test_any_agent_map_or_spur_conf_reads_or_raises_one_error(text: str) -> None:
    fd, name = tempfile.mkstemp()
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        only_spurctl_errors(lambda: load_agent_map(Path(name)))
        only_spurctl_errors(lambda: load_conf(Path(name)))
    finally:
        os.unlink(name)


@FUZZ
@given(st.text(alphabet="gpu0123456789[]-,./ !@", max_size=24) | st.text(max_size=12))
def test_any_hostlist_expands_or_raises_one_error(text: str) -> None:
    only_spurctl_errors(lambda: parse_scope(text))


@pytest.mark.parametrize("hostlist", ["gpu[0-999999999]", "n[1-100000000]", "r[1-2000]n[1-1000]"])
def test_a_hostlist_naming_millions_of_nodes_is_refused_before_it_is_expanded(
    hostlist: str,
) -> None:
    started = time.monotonic()
    with pytest.raises(SpurctlError, match=f"more than {MAX_NODES:,}"):
        parse_scope(hostlist)
    assert time.monotonic() - started < 0.5


# -- a snapshot's completeness is read, never inferred ---------------------------------


def _snapshot(**view: Any) -> dict[str, Any]:
    jobs = [{"job_id": i, "state": "RUNNING", "nodelist": "gpu001"} for i in (7, 8)]
    return {
        "schema": SNAPSHOT_SCHEMA,
        "taken_at": "2026-12-02T10:00:00Z",
        "controller": {"address": "http://ctl:6817", "version": "0.8.0"},
        "watermark": {"value": 9, "source": "estimated"},
        "view": view,
        "jobs": jobs,
        "nodes": [{"name": "gpu001", "state": "IDLE"}],
    }


def test_a_whole_snapshot_reads_complete_and_a_scoped_one_incomplete() -> None:
    view, wm = snapshot_from_dict(
        _snapshot(complete=True, jobs_seen=2, jobs_total=2), where="snap.json"
    )
    assert view.complete and wm.value == 9
    view, _ = snapshot_from_dict(
        _snapshot(complete=False, jobs_seen=2, jobs_total=5), where="snap.json"
    )
    assert not view.complete
    view, _ = snapshot_from_dict(_snapshot(jobs_total=5), where="snap.json")
    assert not view.complete


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (_snapshot(complete=True, jobs_seen=2), "view.jobs_total"),
        ({k: v for k, v in _snapshot().items() if k != "view"}, "view.jobs_total"),
        (_snapshot(complete=True, jobs_seen=5, jobs_total=5), "view.jobs_seen"),
        (_snapshot(complete=True, jobs_total=5), "view.complete"),
        (_snapshot(complete=False, jobs_total=2), "view.complete"),
        (_snapshot(complete="yes", jobs_total=2), "view.complete"),
        (_snapshot(jobs_total=2**32), "jobs_total"),
        ({**_snapshot(jobs_total=2), "watermark": {"value": 2**32}}, "watermark"),
        ({**_snapshot(jobs_total=2), "watermark": {}}, "watermark.value"),
        (
            {**_snapshot(jobs_total=2), "jobs": [{"job_id": 7, "state": "RUNNING"}] * 2},
            "appears twice",
        ),
        (
            {
                **_snapshot(jobs_total=1),
                "jobs": [{"job_id": 7, "state": "RUNNING", "array_job_id": 2**33}],
            },
            "array_job_id",
        ),
    ],
)
def test_a_forged_or_truncated_snapshot_is_one_error_naming_the_field(
    doc: dict[str, Any], field: str
) -> None:
    with pytest.raises(SpurctlError) as err:
        snapshot_from_dict(doc, where="snap.json")
    message = str(err.value)
    assert "\n" not in message and message.startswith("snap.json") and field in message


# -- one node's output, and inputs that used to slip ----------------------------------


def _inv(node: str, at: str | None = "2026-12-02T10:00:00Z", **extra: Any) -> str:
    doc = {"schema": INVENTORY_SCHEMA, "node": node, "collected_at": at, "held": [], **extra}
    return json.dumps(doc)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"held": ' + "[" * 100_000 + "]" * 100_000 + "}",
        _inv("gpu001") + "\n" + '{"held": ' + "[" * 100_000 + "\n",
    ],
    ids=["deep-array", "deep-held", "deep-line"],
)
def test_an_inventory_nested_100000_deep_is_one_document_error(text: str) -> None:
    with pytest.raises(SpurctlError, match="nested too deeply") as err:
        list(parse_inventory_text(text, name="inv.jsonl"))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "raised",
    [
        RecursionError("maximum recursion depth exceeded"),
        MemoryError(),
        ValueError("odd"),
        KeyError(),
    ],
)
def test_anything_raised_reading_one_nodes_output_is_that_nodes_error(
    monkeypatch: pytest.MonkeyPatch, raised: Exception
) -> None:
    from spurctl.sources import collect as collect_module

    def parse(text: str, *, name: str) -> Any:
        if "bad" in text:
            raise raised
        return parse_inventory_text(text, name=name)

    monkeypatch.setattr(collect_module, "parse_inventory_text", parse)
    good = collect_module._Outcome(stdout=[_inv("gpu001").encode()], rc=0)
    bad = collect_module._Outcome(stdout=[b'{"bad": 1}'], rc=0)
    ok = collect_module._guarded("gpu001", good, False, 5.0)
    failed = collect_module._guarded("gpu002", bad, False, 5.0)
    assert ok.error is None and ok.node == "gpu001"
    assert failed.node == "gpu002" and failed.error is not None and failed.held == ()
    assert type(raised).__name__ in failed.error

    def broken(*_: Any) -> Any:  # past the parser too: still this node's error alone
        raise RecursionError("deep")

    monkeypatch.setattr(collect_module, "_inventory", broken)
    assert "RecursionError" in (collect_module._guarded("gpu003", good, False, 5.0).error or "")


def test_a_line_over_the_limit_is_refused_by_its_size_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from spurctl.sources import bounded
    from spurctl.sources import inventories as inv_module

    monkeypatch.setattr(bounded, "INVENTORY", replace(bounded.INVENTORY, line=2**20))
    path = tmp_path / "big.jsonl"
    path.write_bytes(_inv("gpu001").encode() + b"\n" + b"x" * (3 * 2**20) + b"\n" + b"tail\n")
    with pytest.raises(SpurctlError, match=r"big.jsonl: line 2 is longer than 1 MiB, more than"):
        inv_module.load_inventories([str(path)])
    # A line right at the limit is still read.
    path.write_bytes(_inv("gpu001", source="y" * (2**20 - 200)).encode() + b"\n")
    assert [i.node for i in inv_module.load_inventories([str(path)])] == ["gpu001"]


def test_tied_records_of_one_node_must_agree_and_the_latest_wins(tmp_path: Path) -> None:
    from spurctl.sources.inventories import load_inventories

    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    a.write_text(_inv("gpu001") + "\n" + _inv("gpu002") + "\n")
    b.write_text(_inv("gpu001") + "\n")  # the same record again: fine
    c.write_text(_inv("gpu001", held=[{"job_id": 7}]) + "\n")
    assert len(load_inventories([str(a), str(b)])) == 3
    with pytest.raises(SpurctlError) as err:
        load_inventories([str(a), str(b), str(c)])
    assert "gpu001" in str(err.value) and f"{a}: line 1 and {c}" in str(err.value)
    # A later record differing from an older one is the normal case: no error.
    c.write_text(_inv("gpu001", at="2026-12-02T11:00:00Z", held=[{"job_id": 7}]) + "\n")
    d = tmp_path / "d.jsonl"
    d.write_text(_inv("gpu001", at="2026-12-02T10:00:00Z", held=[{"job_id": 9}]) + "\n")
    assert len(load_inventories([str(a), str(c), str(d)])) == 4  # d ties only an older record


def test_an_inventory_directory_reads_regular_files_only_and_says_what_it_skipped(
    tmp_path: Path,
) -> None:
    from spurctl.sources.inventories import load_inventories

    (tmp_path / "gpu001.json").write_text(_inv("gpu001"))
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "loop.jsonl").symlink_to(tmp_path / "loop.jsonl")
    (tmp_path / "sub.json").mkdir()
    (tmp_path / "notes.txt").write_text("not an inventory")
    warnings: list[str] = []
    invs = load_inventories([str(tmp_path)], warnings.append)
    assert [i.node for i in invs] == ["gpu001"]
    (warning,) = warnings
    assert "pipe.json (a FIFO, not a regular file)" in warning
    assert "loop.jsonl (a symlink loop)" in warning
    assert "sub.json (a directory, not a regular file)" in warning
    assert "notes.txt" not in warning
    with pytest.raises(SpurctlError, match="symlink loop"):
        load_inventories([str(tmp_path / "loop.jsonl")])


def test_an_unrelated_json_file_in_an_inventory_directory_is_named_and_skipped(
    tmp_path: Path,
) -> None:
    from spurctl.sources.inventories import load_inventories

    (tmp_path / "gpu001.json").write_text(_inv("gpu001"))
    (tmp_path / "package.json").write_text('{\n  "name": "dashboard"\n}\n')
    (tmp_path / "audit.json").write_text('{"schema": "spurctl.audit/v1", "findings": []}')
    (tmp_path / "list.json").write_text("[1, 2]")
    warnings: list[str] = []
    invs = load_inventories([str(tmp_path)], warnings.append)
    assert [i.node for i in invs] == ["gpu001"]
    assert sorted(warnings) == [
        f"--inventory {tmp_path}: skipped audit.json: schema 'spurctl.audit/v1', "
        "not a spurctl inventory",
        f"--inventory {tmp_path}: skipped list.json: JSON without a schema, not a spurctl "
        "inventory",
        f"--inventory {tmp_path}: skipped package.json: no schema, not a spurctl inventory",
    ]
    # Named explicitly, the same file is an error: the operator meant it.
    with pytest.raises(SpurctlError, match=r"package\.json"):
        load_inventories([str(tmp_path / "package.json")])
    # A broken inventory in the directory is still an error, never skipped.
    (tmp_path / "gpu002.json").write_text('{"schema": "spurctl.inventory/v1", "node": 7}')
    with pytest.raises(SpurctlError, match=r"gpu002\.json"):
        load_inventories([str(tmp_path)], warnings.append)


def test_text_swapped_in_for_standard_input_is_read_with_the_same_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io
    from dataclasses import replace

    from spurctl.sources import bounded
    from spurctl.sources import inventories as inv_module

    monkeypatch.setattr("sys.stdin", io.StringIO(_inv("gpu001") + "\n"))
    assert [i.node for i in inv_module.load_inventories(["-"])] == ["gpu001"]
    monkeypatch.setattr(bounded, "INVENTORY", replace(bounded.INVENTORY, line=2**10))
    monkeypatch.setattr("sys.stdin", io.StringIO("x" * 2**20))
    with pytest.raises(SpurctlError, match=r"<stdin>: line 1 is longer than 1 KiB"):
        inv_module.load_inventories(["-"])


_LINES = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_LINES, end=st.booleans(), line=st.integers(1, 64), size=st.integers(0, 400))
def test_a_regular_file_reads_in_one_call_as_it_reads_line_by_line(
    tmp_path: Path, lines: list[bytes], end: bool, line: int, size: int
) -> None:
    # A regular file no longer than the line limit is read in one call (bounded.read_lines):
    # its bytes, or its refusal, are what reading it line by line gives.
    from spurctl.sources import bounded

    limit = bounded.Limit("inventories", size, "split it", line=line)
    path = tmp_path / "inv.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if end and lines else b""))
    checked = bounded._check_size

    def read(*, whole: bool) -> bytes | str:
        def check(*args: Any) -> int | None:
            size = checked(*args)  # refuses a file over the size limit either way
            return size if whole else None  # None: no size to go by, line by line

        bounded._check_size = check
        try:
            with path.open("rb") as fh:
                return bounded.read_lines(fh, limit, "inv.jsonl")
        except SpurctlError as exc:
            return str(exc)
        finally:
            bounded._check_size = checked

    assert read(whole=True) == read(whole=False)


def test_a_file_grown_past_the_line_limit_since_its_size_was_read_is_read_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spurctl.sources import bounded

    limit = bounded.Limit("inventories", 2**20, "split it", line=100)
    path = tmp_path / "inv.jsonl"
    path.write_bytes(b"a\n")
    # As if a collector appended a line over the limit between the size check and the read.
    monkeypatch.setattr(bounded, "_check_size", lambda *_: 2)
    with path.open("ab") as grow:
        grow.write(b"b" * 200 + b"\n")
    with path.open("rb") as fh, pytest.raises(SpurctlError, match="line 2 is longer than"):
        bounded.read_lines(fh, limit, "inv.jsonl")


_BLANKS = st.text(alphabet=" \t\n\r\xa0\u2028\x1c", max_size=4)


@given(lead=_BLANKS, trail=_BLANKS, held=st.booleans(), bad=st.booleans())
def test_blanks_around_one_document_never_change_how_it_reads(
    lead: str, trail: str, held: bool, bad: bool
) -> None:
    # parse_inventory_records strips only where it must (a file's last newline is left
    # on): JSON's blanks and the others strip() takes read alike, before and after it.
    holding = {"job_id": 7, "pids": [1], "started_at": "2026-12-02T09:00:00Z"}
    doc = _inv("gpu001", held=[holding] if held else [], error=3 if bad else None)

    def read(text: str) -> list[Any] | str:
        try:
            return [repr(i) for i in parse_inventory_text(text, name="inv")]
        except SpurctlError as exc:
            return str(exc)

    assert read(lead + doc + trail) == read(doc)
