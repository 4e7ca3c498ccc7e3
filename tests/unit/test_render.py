"""Every format shows the same audit: the json document is the contract, csv and
markdown survive their parsers, prometheus parses as exposition text, and the
table puts warnings and the most urgent rows where an operator looks first."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from msgspec.structs import replace

from spurctl.errors import SpurctlError
from spurctl.model import (
    Action,
    AuditReport,
    Finding,
    Kind,
    SinceEvidence,
    Watermark,
    WatermarkSource,
)
from spurctl.render.audit import (
    CSV_FIELDS,
    FINDING_FIELDS,
    audit_document,
    print_audit,
    render_audit,
)
from spurctl.render.environment import Environment

TAKEN_AT = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
INCOMPLETE_NOTE = (
    "controller view is incomplete (700 of 812 jobs seen): ids it did not return "
    "are spared unless GetJob answered NOT_FOUND."
)
WEIRD_NODE = 'rack"7\\gpu\n1'  # quote, backslash and newline: every escape at once


def _findings() -> list[Finding]:
    # Deliberately out of display order: the renderers must do the grouping.
    return [
        Finding(
            "gpu10",
            12,
            Kind.NOT_STARTED,
            Action.SPARE,
            "job 12 is PENDING and may be mid-dispatch to gpu10; spared.",
            live=False,
            controller_state="PENDING",
        ),
        Finding(
            "gpu2",
            None,
            Kind.PHANTOM_ALLOC,
            Action.INVESTIGATE,
            "gpu2 has 4 GPUs allocated and no active job lists it.",
        ),
        Finding(
            "gpu10",
            4711,
            Kind.ACTIVE_ELSEWHERE,
            Action.RECLAIM,
            "job 4711 runs on gpu[020-021] now | gpu10 still holds a stale run, pid 81234.",
            live=True,
            controller_state="RUNNING",
            allocated_nodes="gpu[020-021]",
            gpus=(0, 1),
            pids=(81234,),
            inventory_age_s=42.5,
        ),
        Finding(
            "gpu2",
            4000,
            Kind.TERMINAL_HELD,
            Action.RECLAIM,
            'job 4000 is COMPLETED, yet gpu2 holds it ("[bold]stale[/bold]").',
            live=False,
            controller_state="COMPLETED",
            allocated_nodes="gpu2",
        ),
        Finding(
            "gpu2",
            3999,
            Kind.BELOW_WATERMARK_UNKNOWN,
            Action.RECLAIM,
            "job 3999 is below the watermark 5121 and the controller no longer tracks it.",
            live=False,
        ),
        Finding(
            "gpu1",
            5200,
            Kind.ABOVE_WATERMARK_UNKNOWN,
            Action.INVESTIGATE,
            "job 5200 is at or above the watermark 5121: an agent from a reset controller?",
            live=True,
            pids=(7, 8),
        ),
        Finding(
            "gpu1",
            5001,
            Kind.HEALTHY,
            Action.NONE,
            "job 5001 is RUNNING here, as the controller says.",
            live=True,
            controller_state="RUNNING",
            allocated_nodes="gpu1",
        ),
        Finding(
            WEIRD_NODE,
            77,
            Kind.TERMINAL_HELD,
            Action.RECLAIM,
            "job 77 is CANCELLED,\nstill held.",
            live=False,
            controller_state="CANCELLED",
            allocated_nodes="",
        ),
        Finding(
            "gpu30",
            None,
            Kind.AGENT_UNREACHABLE,
            Action.INVESTIGATE,
            "gpu30 could not be inventoried: ssh timed out after 30 s.",
        ),
    ]


def _report(findings: list[Finding] | None = None, *, notes: bool = True) -> AuditReport:
    return AuditReport(
        controller_address="http://ctl:6817",
        controller_version="0.3.1",
        taken_at=TAKEN_AT,
        watermark=Watermark(5121, WatermarkSource.ESTIMATED),
        view_complete=False,
        jobs_seen=700,
        jobs_total=812,
        findings=_findings() if findings is None else findings,
        nodes_in_scope=128,
        nodes_inventoried=127,
        notes=[INCOMPLETE_NOTE, "2 findings withheld: | see --all"] if notes else [],
    )


def _empty_report() -> AuditReport:
    """An audit without findings: every node in scope was inventoried (one that
    was not would be a not-inventoried finding)."""
    r = _report([], notes=False)
    r.view_complete, r.jobs_seen, r.jobs_total = True, 812, 812
    r.nodes_inventoried = 128
    return r


# -- json --------------------------------------------------------------------


def test_json_document_has_exactly_the_contract_keys_and_values() -> None:
    report = _report()
    doc = json.loads(render_audit(report, "json"))
    assert doc == audit_document(report)
    # The contract's keys plus the documented addition "notes"; nothing renamed.
    assert list(doc) == [
        "schema",
        "controller",
        "watermark",
        "view",
        "notes",
        "findings",
        "summary",
    ]
    assert doc["schema"] == "spurctl.audit/v1"
    assert doc["controller"] == {
        "cluster": None,  # neither spur.conf nor the config file names it
        "address": "http://ctl:6817",
        "version": "0.3.1",
        "taken_at": "2026-12-02T10:00:00Z",
    }
    assert doc["watermark"] == {"value": 5121, "source": "estimated"}
    assert doc["view"] == {"complete": False, "jobs_seen": 700, "jobs_total": 812}
    assert doc["notes"] == report.notes
    assert doc["summary"] == {
        "nodes": 128,
        "nodes_inventoried": 127,
        "by_kind": {
            "not-started": 1,
            "phantom-alloc": 1,
            "active-elsewhere": 1,
            "terminal-held": 2,
            "below-watermark-unknown": 1,
            "above-watermark-unknown": 1,
            "healthy": 1,
            "agent-unreachable": 1,
        },
        "needs_action": 7,
    }
    for f in doc["findings"]:
        assert list(f) == [*FINDING_FIELDS, "gpus", "pids", "since", "since_evidence"]
    # Report order is kept: scripts may rely on the classifier's order.
    assert [(f["node"], f["job_id"]) for f in doc["findings"]] == [
        (f.node, f.job_id) for f in report.findings
    ]
    assert doc["findings"][2] == {
        "node": "gpu10",
        "job_id": 4711,
        "kind": "active-elsewhere",
        "action": "reclaim",
        "live": True,
        "reason": "job 4711 runs on gpu[020-021] now | gpu10 still holds a stale run, pid 81234.",
        "controller_state": "RUNNING",
        "allocated_nodes": "gpu[020-021]",
        "inventory_age_s": 42.5,
        "gpus": [0, 1],
        "pids": [81234],
        "since": None,
        "since_evidence": None,
    }
    unreachable = doc["findings"][-1]
    assert unreachable["job_id"] is None and unreachable["live"] is None
    assert unreachable["inventory_age_s"] is None
    assert unreachable["controller_state"] is None and unreachable["allocated_nodes"] is None


def test_json_times_are_utc_with_z_whatever_zone_the_report_carries() -> None:
    report = _report()
    report.taken_at = datetime(2026, 12, 2, 11, 30, 0, 250000, tzinfo=timezone(timedelta(hours=1)))
    doc = json.loads(render_audit(report, "json"))
    assert doc["controller"]["taken_at"] == "2026-12-02T10:30:00Z"  # no microseconds


def test_json_of_an_empty_audit_is_complete_and_counts_nothing() -> None:
    doc = json.loads(render_audit(_empty_report(), "json"))
    assert doc["findings"] == [] and doc["notes"] == []
    assert doc["view"] == {"complete": True, "jobs_seen": 812, "jobs_total": 812}
    assert doc["summary"] == {
        "nodes": 128,
        "nodes_inventoried": 128,
        "by_kind": {},
        "needs_action": 0,
    }


# -- csv ---------------------------------------------------------------------


def test_csv_round_trips_through_dictreader_one_row_per_finding() -> None:
    report = _report()
    text = render_audit(report, "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(report.findings)
    for row, f in zip(rows, report.findings, strict=True):
        assert list(row) == list(CSV_FIELDS)
        assert row["node"] == f.node  # survives the embedded quote, backslash and newline
        assert row["job_id"] == ("" if f.job_id is None else str(f.job_id))
        assert row["kind"] == f.kind.value and row["action"] == f.action.value
        assert row["live"] == {None: "", True: "true", False: "false"}[f.live]
        assert row["reason"] == f.reason  # commas, pipes, quotes and a newline intact
        assert row["controller_state"] == (f.controller_state or "")
        assert row["allocated_nodes"] == (f.allocated_nodes or "")
        age = f.inventory_age_s
        assert row["inventory_age_s"] == ("" if age is None else str(age))
    assert rows[2]["inventory_age_s"] == "42.5"


def test_csv_of_an_empty_audit_is_just_the_header() -> None:
    assert render_audit(_empty_report(), "csv") == ",".join(CSV_FIELDS) + "\n"


# -- markdown ----------------------------------------------------------------


def _md_cells(line: str) -> list[str]:
    # Split a GitHub table row on pipes not escaped by a backslash.
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def test_markdown_has_one_table_row_per_finding_and_escapes_pipes() -> None:
    report = _report()
    text = render_audit(report, "markdown")
    table = [line for line in text.splitlines() if line.startswith("|")]
    header, separator, *rows = table
    assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", separator)
    width = len(_md_cells(header))
    assert len(rows) == len(report.findings)
    assert all(len(_md_cells(r)) == width for r in rows)
    reasons = [_md_cells(r)[-1] for r in rows]
    assert "job 4711 runs on gpu[020-021] now \\| gpu10 still holds a stale run, pid 81234." in (
        reasons
    )
    # The newline in a reason and in a node name must not break the row: it is shown
    # written out (\\n, its backslash escaped for Markdown), as every control character.
    assert "job 77 is CANCELLED,\\\\nstill held." in reasons
    assert any(_md_cells(r)[0] == 'rack"7\\\\gpu\\\\n1' for r in rows)


def test_markdown_puts_heading_notes_and_summary_before_the_table() -> None:
    text = render_audit(_report(), "markdown")
    lines = text.splitlines()
    assert lines[0].startswith("# ")
    note_line = lines.index(f"> **WARNING:** {INCOMPLETE_NOTE}")
    summary_line = next(i for i, line in enumerate(lines) if line.startswith("**Summary:**"))
    first_row = next(i for i, line in enumerate(lines) if line.startswith("|"))
    assert note_line < summary_line < first_row
    assert "7 need action" in lines[summary_line]
    # The table follows the one order every format uses: nodes in natural order.
    first_data = _md_cells(lines[first_row + 2])
    assert first_data[0] == "gpu1"


def test_markdown_of_an_empty_audit_says_no_discrepancies_and_has_no_table() -> None:
    text = render_audit(_empty_report(), "markdown")
    assert "No discrepancies: 128 nodes, 128 inventoried." in text
    assert not any(line.startswith("|") for line in text.splitlines())


def test_an_audit_without_findings_that_left_a_node_unaudited_says_so() -> None:
    # "No discrepancies" only when every node in scope was audited, even if
    # the findings that say so were filtered out of the report.
    report = _empty_report()
    report.nodes_inventoried = 127
    for fmt in ("table", "markdown"):
        text = render_audit(report, fmt)
        assert "No discrepancies" not in text
        assert "1 of 128 nodes in scope were not audited" in text


# -- prometheus --------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
_LABEL = rf"[a-zA-Z_][a-zA-Z0-9_]*={_LABEL_VALUE}"
_HELP = re.compile(rf"# HELP ({_NAME}) (.*)")
_TYPE = re.compile(rf"# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)")
_SAMPLE = re.compile(
    rf"({_NAME})(\{{{_LABEL}(?:,{_LABEL})*\}})? "
    r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|NaN|[+-]Inf)(?: -?\d+)?"
)
_LABEL_PAIR = re.compile(rf"([a-zA-Z_][a-zA-Z0-9_]*)=({_LABEL_VALUE})")


def _unescape(quoted: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], quoted[1:-1])


def parse_exposition(text: str) -> dict[str, dict[str, Any]]:
    """A strict reader of the text exposition format, enough to catch what
    node_exporter's textfile collector would reject: malformed lines, bad
    escapes, a family declared twice or split up, samples before their TYPE,
    duplicate series."""
    assert text.endswith("\n"), "exposition text must end with a newline"
    families: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        if m := _HELP.fullmatch(line):
            name = m[1]
            assert name not in families or families[name]["help"] is None, f"line {n}: 2nd HELP"
            families.setdefault(name, {"help": None, "type": None, "samples": {}})
            families[name]["help"] = m[2]
        elif m := _TYPE.fullmatch(line):
            name = m[1]
            fam = families.setdefault(name, {"help": None, "type": None, "samples": {}})
            assert fam["type"] is None and not fam["samples"], f"line {n}: TYPE too late"
            fam["type"] = m[2]
        elif m := _SAMPLE.fullmatch(line):
            name = m[1]
            assert name in families and families[name]["type"], f"line {n}: sample before TYPE"
            assert current in (None, name) or not families[name]["samples"], (
                f"line {n}: family {name} split up"
            )
            labels = tuple((k, _unescape(v)) for k, v in _LABEL_PAIR.findall(m[2] or ""))
            samples = families[name]["samples"]
            assert labels not in samples, f"line {n}: duplicate series"
            samples[labels] = float(m[3])
        else:
            raise AssertionError(f"line {n} is not exposition format: {line!r}")
        current = name
    return families


def test_the_exposition_checker_rejects_what_the_collector_would() -> None:
    bad = [
        "spurctl_x 1\n",  # no TYPE
        '# TYPE spurctl_x gauge\nspurctl_x{node="a"b"} 1\n',  # unescaped quote
        '# TYPE spurctl_x gauge\nspurctl_x{node="a\\tb"} 1\n',  # bad escape
        "# TYPE spurctl_x gauge\nspurctl_x 1\nspurctl_x 2\n",  # duplicate series
        "# TYPE spurctl_x gauge\nspurctl_x 1",  # no final newline
        "# TYPE spurctl-x gauge\n",  # bad name
    ]
    for text in bad:
        with pytest.raises(AssertionError):
            parse_exposition(text)


EXPECTED_METRICS = {
    "spurctl_findings",
    "spurctl_node_reclaimable_holdings",
    "spurctl_finding",
    "spurctl_finding_since_seconds",
    "spurctl_findings_needing_action",
    "spurctl_nodes_in_scope",
    "spurctl_nodes_inventoried",
    "spurctl_controller_view_complete",
    "spurctl_watermark",
    "spurctl_audit_timestamp_seconds",
}


def test_prometheus_parses_with_help_and_type_for_every_metric() -> None:
    families = parse_exposition(render_audit(_report(), "prometheus"))
    assert set(families) == EXPECTED_METRICS
    for name, fam in families.items():
        assert fam["help"], name
        assert fam["type"] == "gauge", name
    assert families["spurctl_findings_needing_action"]["samples"] == {(): 7.0}
    assert families["spurctl_nodes_in_scope"]["samples"] == {(): 128.0}
    assert families["spurctl_nodes_inventoried"]["samples"] == {(): 127.0}
    assert families["spurctl_controller_view_complete"]["samples"] == {(): 0.0}
    assert families["spurctl_watermark"]["samples"] == {(): 5121.0}
    assert families["spurctl_audit_timestamp_seconds"]["samples"] == {(): TAKEN_AT.timestamp()}


def test_prometheus_has_a_series_for_every_kind_zero_when_absent() -> None:
    report = _report()
    findings = parse_exposition(render_audit(report, "prometheus"))["spurctl_findings"]["samples"]
    assert findings == {(("kind", k.value),): float(report.by_kind.get(k.value, 0)) for k in Kind}
    assert findings[(("kind", "terminal-held"),)] == 2.0
    assert findings[(("kind", "mid-commit"),)] == 0.0
    empty = parse_exposition(render_audit(_empty_report(), "prometheus"))
    assert set(empty["spurctl_findings"]["samples"].values()) == {0.0}
    assert len(empty["spurctl_findings"]["samples"]) == len(Kind)
    assert empty["spurctl_node_reclaimable_holdings"]["samples"] == {}
    assert empty["spurctl_controller_view_complete"]["samples"] == {(): 1.0}


def test_prometheus_counts_reclaimable_holdings_per_node_with_escaped_labels() -> None:
    families = parse_exposition(render_audit(_report(), "prometheus"))
    per_node = families["spurctl_node_reclaimable_holdings"]["samples"]
    # gpu1 (investigate + none only) and gpu30 (unreachable) have nothing to reclaim.
    assert per_node == {
        (("node", "gpu2"),): 2.0,
        (("node", "gpu10"),): 1.0,
        (("node", WEIRD_NODE),): 1.0,
    }


def test_csv_says_since_when_each_finding_has_lasted_and_what_dates_it() -> None:
    ended = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    findings = _findings()
    findings[3] = replace(findings[3], since=ended, since_evidence=SinceEvidence.JOB_END)
    rows = list(csv.DictReader(io.StringIO(render_audit(_report(findings), "csv"))))
    assert (rows[3]["since"], rows[3]["since_evidence"]) == ("2026-11-30T08:00:00Z", "job-end")
    assert (rows[0]["since"], rows[0]["since_evidence"]) == ("", "")


def test_prometheus_names_each_node_with_each_kind_of_finding_and_when_evidence_dates_it() -> None:
    ended = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    findings = _findings()
    # gpu2's two reclaim findings of different kinds; 4000's job ended on Nov 30.
    findings[3] = replace(findings[3], since=ended, since_evidence=SinceEvidence.JOB_END)
    # A second terminal holding on gpu2, dated later: the series says the earliest.
    later = replace(findings[3], job_id=4001, since=ended + timedelta(hours=5))
    families = parse_exposition(render_audit(_report([*findings, later]), "prometheus"))

    per_node = families["spurctl_finding"]["samples"]
    key = lambda node, kind, action: (("node", node), ("kind", kind), ("action", action))  # noqa: E731
    assert per_node == {
        key("gpu1", "above-watermark-unknown", "investigate"): 1.0,
        key("gpu2", "below-watermark-unknown", "reclaim"): 1.0,
        key("gpu2", "phantom-alloc", "investigate"): 1.0,
        key("gpu2", "terminal-held", "reclaim"): 2.0,
        key("gpu10", "not-started", "spare"): 1.0,
        key("gpu10", "active-elsewhere", "reclaim"): 1.0,
        key("gpu30", "agent-unreachable", "investigate"): 1.0,
        key(WEIRD_NODE, "terminal-held", "reclaim"): 1.0,
    }  # only nodes with findings; gpu1's healthy row (--all) is none
    since = families["spurctl_finding_since_seconds"]["samples"]
    assert since == {key("gpu2", "terminal-held", "reclaim"): ended.timestamp()}


def test_prometheus_per_node_series_follow_the_filter() -> None:
    from spurctl.render.audit import FindingFilter

    only = FindingFilter(kinds=(Kind.PHANTOM_ALLOC,))
    text = render_audit(_report(), "prometheus", only=only)
    assert text.startswith("# spurctl: Filter --kind phantom-alloc: showing 1 of 9 findings")
    families = parse_exposition(text.split("\n", 1)[1])  # the filter's comment line aside
    assert set(families["spurctl_finding"]["samples"]) == {
        (("node", "gpu2"), ("kind", "phantom-alloc"), ("action", "investigate"))
    }
    assert families["spurctl_findings"]["samples"][(("kind", "terminal-held"),)] == 2.0


# -- table -------------------------------------------------------------------


def _table(report: AuditReport, width: int = 120) -> list[str]:
    text = render_audit(report, "table", console_width=width)
    assert "\x1b[" not in text, "the string rendering must carry no colour codes"
    assert all(len(line) <= width for line in text.splitlines())
    return text.splitlines()


def _rows(lines: list[str]) -> list[tuple[str, str, str, str]]:
    """(node, job, kind, action) of each table row: a line whose third
    column holds a Kind (wrapped reason lines have no such column)."""
    kinds = {k.value for k in Kind}
    header = next(i for i, line in enumerate(lines) if re.match(r"node\s+job\s+kind", line))
    out = []
    for line in lines[header + 1 :]:
        # A row without a node starts with spaces, so split leaves "" for it.
        cells = re.split(r"\s{2,}", line)
        if len(cells) > 3 and cells[2] in kinds:
            out.append((cells[0], cells[1], cells[2], cells[3]))
    return out


def test_table_groups_by_node_in_natural_order_with_reclaim_rows_first() -> None:
    report = _report()
    report.findings = [f for f in report.findings if f.node != WEIRD_NODE]
    rows = _rows(_table(report))
    assert len(rows) == len(report.findings)
    nodes = [r[0] for r in rows]
    # Every row names its node (as sinfo -N), groups in natural name order (gpu2
    # before gpu10), as the JSON, CSV and summary order them (urgency no longer
    # reorders the groups).
    assert list(dict.fromkeys(nodes)) == ["gpu1", "gpu2", "gpu10", "gpu30"]
    assert nodes == ["gpu1", "gpu1", "gpu2", "gpu2", "gpu2", "gpu10", "gpu10", "gpu30"]
    actions = [r[3] for r in rows]
    assert actions == [
        "investigate",
        "none",
        "reclaim",
        "reclaim",
        "investigate",
        "reclaim",
        "spare",
        "investigate",
    ]
    # Within gpu2, the reclaim rows are in job order and the job-less row follows.
    assert [r[1] for r in rows[2:5]] == ["3999", "4000", "-"]


def test_table_shows_notes_before_the_rows_and_the_summary_after() -> None:
    lines = _table(_report())
    text = "\n".join(lines)
    assert lines[0].startswith("WARNING: controller view is incomplete")
    assert "WARNING: 2 findings withheld: | see --all" in text
    header = next(i for i, line in enumerate(lines) if re.match(r"node\s+job\s+kind", line))
    assert text.index("WARNING: 2 findings withheld") < text.index(lines[header])
    summary = next(i for i, line in enumerate(lines) if "nodes in scope" in line)
    assert summary > header
    summary_text = " ".join(lines[summary:])
    assert summary_text.startswith("128 nodes in scope, 127 inventoried;")
    assert "terminal-held 2" in summary_text and "7 need action." in summary_text
    assert "INCOMPLETE (700 of 812 jobs seen)" in summary_text
    assert "watermark 5121 (estimated)" in summary_text


def test_table_prints_report_text_literally_not_as_rich_markup() -> None:
    text = " ".join(" ".join(_table(_report(), width=200)).split())
    assert '("[bold]stale[/bold]")' in text
    assert "gpu[020-021]" in text


def test_table_wraps_long_reasons_within_the_width() -> None:
    lines = _table(_report(), width=80)
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith(" ") and "81234." in line for line in lines)


def test_a_narrow_table_puts_each_reason_on_its_own_lines_in_full() -> None:
    # At 80 columns a reason column would be a sliver: each reason goes under its row.
    lines = _table(_report(), width=80)
    text = " ".join(" ".join(lines).split())
    assert "gpu10 still holds a stale run, pid 81234." in text
    row = next(i for i, line in enumerate(lines) if " 4711 " in line)
    assert lines[row].split() == ["gpu10", "4711", "active-elsewhere", "reclaim", "yes"]
    assert lines[row + 1].startswith("  ") and not lines[row + 1][2].isspace()


def test_table_of_an_empty_audit_says_no_discrepancies_then_the_summary() -> None:
    lines = _table(_empty_report())
    assert lines[0] == "No discrepancies: 128 nodes, 128 inventoried."
    assert lines[1].startswith(
        "128 nodes in scope, 128 inventoried; findings: none; 0 need action."
    )
    assert not any(re.match(r"node\s+job\s+kind", line) for line in lines)


def test_table_of_an_empty_incomplete_audit_still_warns_first() -> None:
    report = _report([])
    report.nodes_inventoried = report.nodes_in_scope
    lines = _table(report)
    assert lines[0].startswith("WARNING: controller view is incomplete")
    assert any(line.startswith("No discrepancies:") for line in lines)


# -- print_audit -------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


SCREEN = Environment(tty=True, width=120, colour=True)
PIPE = Environment()


@pytest.fixture
def colour_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "120")


@pytest.mark.usefixtures("colour_env")
def test_print_audit_colours_a_terminal_by_action() -> None:
    out = _Terminal()
    print_audit(_report(), "table", SCREEN, file=out)
    text = out.getvalue()
    red = next(line for line in text.splitlines() if "3999" in line)
    assert "\x1b[" in red and "31" in red  # reclaim rows are red
    yellow = next(line for line in text.splitlines() if "5200" in line)
    assert "33" in yellow  # investigate rows are yellow
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert plain.index("WARNING: controller view is incomplete") < plain.index("3999")


@pytest.mark.usefixtures("colour_env")
def test_print_audit_is_plain_when_not_a_terminal() -> None:
    out = io.StringIO()
    print_audit(_report(), "table", PIPE, file=out)
    # Down a pipe, one finding per line, however long its reason.
    assert out.getvalue() == render_audit(_report(), "table", whole=True)
    assert "\x1b[" not in out.getvalue()


def test_print_audit_writes_other_formats_verbatim() -> None:
    out = _Terminal()
    print_audit(_report(), "csv", SCREEN, file=out)
    assert out.getvalue() == render_audit(_report(), "csv")


def test_print_audit_defaults_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    print_audit(_report(), "json", PIPE)
    assert json.loads(capsys.readouterr().out)["schema"] == "spurctl.audit/v1"


# -- errors ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["yaml", "", "JSON"])
def test_unknown_format_is_an_operator_error_naming_the_choices(fmt: str) -> None:
    expected = f"unknown format {fmt!r}; use table, json, csv, markdown or prometheus"
    with pytest.raises(SpurctlError) as exc:
        render_audit(_report(), fmt)
    assert str(exc.value) == expected
    with pytest.raises(SpurctlError):
        print_audit(_report(), fmt, PIPE, file=io.StringIO())


def test_node_inventory_never_tells_root_to_run_as_root() -> None:
    from spurctl.render.collect import unreadable_environments

    as_user = unreadable_environments(3, as_root=False)
    as_root = unreadable_environments(1, as_root=True)
    assert "3 processes could not be read" in as_user and as_user.endswith("run it as root.")
    assert "1 process could not be read" in as_root
    assert "run it as root" not in as_root and "hidepid" in as_root


def test_collect_folds_the_same_failure_on_many_nodes_into_one_line() -> None:
    from spurctl.model import Inventory
    from spurctl.render.collect import summarize

    def failed(node: str) -> Inventory:
        why = f"ssh: connect to host {node} port 22: Connection refused"
        return Inventory(node=node, collected_at=None, source="ssh", error=why)

    results = [failed(f"gpu{i:03d}") for i in range(1, 25)]
    results.append(Inventory(node="gpu099", collected_at=None, source="ssh", error="timed out"))
    text = summarize(results)
    assert "  gpu[001-024]: ssh: connect to host %h port 22: Connection refused" in text
    assert "  gpu099: timed out" in text
    assert "(%h: each node's own name)" in text
    assert len(text.splitlines()) == 5  # collected, failed, two reasons, the %h key


def test_text_reports_show_times_to_the_minute_in_utc() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from spurctl.render.common import text_time

    moment = datetime(2026, 12, 2, 14, 47, 31, 623309, tzinfo=UTC)
    assert text_time(moment) == "2026-12-02 14:47 UTC"
    assert text_time(moment.astimezone(timezone(timedelta(hours=2)))) == "2026-12-02 14:47 UTC"


def test_table_csv_and_json_list_findings_in_one_order() -> None:
    import csv as csv_module
    import io as io_module

    from spurctl.hostlist import natural_key

    report = _report()
    report.findings = sorted(
        (f for f in report.findings if f.node != WEIRD_NODE),
        key=lambda f: (natural_key(f.node), ["reclaim", "investigate", "spare", "none"].index(
            f.action.value), -1 if f.job_id is None else f.job_id),
    )  # fmt: skip
    table_nodes = list(dict.fromkeys(r[0] for r in _rows(_table(report))))
    doc = json.loads(render_audit(report, "json"))
    json_order = [(f["node"], f["job_id"]) for f in doc["findings"]]
    rows = list(csv_module.DictReader(io_module.StringIO(render_audit(report, "csv"))))
    csv_order = [(r["node"], int(r["job_id"]) if r["job_id"] else None) for r in rows]
    assert json_order == csv_order == [(f.node, f.job_id) for f in report.findings]
    assert table_nodes == list(dict.fromkeys(n for n, _ in json_order))
