"""FindingFilter (audit --kind/--action) and reclaim's one hostlist, without a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.model import Action, Kind
from spurctl.render.audit import (
    NO_FILTER,
    FindingFilter,
    audit_document,
    filter_notice,
    render_audit,
)
from spurctl.render.common import summary_line, write_output
from tests.unit.test_render import _report


def test_no_filter_keeps_everything_and_says_nothing() -> None:
    report = _report()
    assert not NO_FILTER.active
    assert NO_FILTER.shown(report.findings) == report.findings
    assert "filter" not in audit_document(report)
    assert "Filter" not in render_audit(report, "table", console_width=200)
    assert filter_notice(report, "csv", NO_FILTER) is None


def test_kinds_or_together_and_actions_and_with_them() -> None:
    report = _report()
    only = FindingFilter(kinds=(Kind.TERMINAL_HELD, Kind.PHANTOM_ALLOC), actions=(Action.RECLAIM,))
    kept = only.shown(report.findings)
    assert {(f.node, f.job_id) for f in kept} == {("gpu2", 4000), ('rack"7\\gpu\n1', 77)}
    assert only.flags() == "--kind terminal-held --kind phantom-alloc --action reclaim"
    assert FindingFilter(actions=(Action.INVESTIGATE,)).shown(report.findings) == [
        f for f in report.findings if f.action is Action.INVESTIGATE
    ]


def test_the_document_keeps_its_summary_and_says_what_was_hidden() -> None:
    report = _report()
    only = FindingFilter(actions=(Action.RECLAIM,))
    doc = json.loads(render_audit(report, "json", only=only))
    whole = audit_document(report)
    assert doc["summary"] == whole["summary"]
    assert [f["action"] for f in doc["findings"]] == ["reclaim"] * 4
    assert doc["filter"] == {"kinds": [], "actions": ["reclaim"], "shown": 4, "hidden": 5}
    assert list(doc).index("filter") == list(doc).index("findings") - 1


@pytest.mark.parametrize("fmt", ["table", "markdown", "prometheus"])
def test_every_format_that_has_room_says_the_filter_and_keeps_the_summary(fmt: str) -> None:
    report = _report()
    only = FindingFilter(kinds=(Kind.HEALTHY,))
    text = " ".join(render_audit(report, fmt, console_width=200, only=only).split())
    assert "Filter --kind healthy: showing 1 of 9 findings, 8 hidden" in text
    if fmt != "prometheus":
        assert summary_line(report) in text  # whole, as without the filter
    assert filter_notice(report, fmt, only) is None  # the document says it itself


def test_csv_says_the_filter_on_stderr_instead() -> None:
    report = _report()
    only = FindingFilter(kinds=(Kind.HEALTHY,))
    assert render_audit(report, "csv", only=only).count("\n") == 2  # header and one row
    assert filter_notice(report, "csv", only) == (
        "spurctl: note: Filter --kind healthy: showing 1 of 9 findings, 8 hidden; "
        "the summary and the exit status count all 9."
    )


def test_a_failed_write_leaves_neither_a_changed_file_nor_a_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "spurctl.prom"
    target.mkdir()  # the rename over a directory fails after the temp file is written
    (target / "kept").write_text("old")
    with pytest.raises(SpurctlError, match=r"^cannot write .*spurctl\.prom: "):
        write_output("# new report\n", target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spurctl.prom"]
    assert (target / "kept").read_text() == "old"
