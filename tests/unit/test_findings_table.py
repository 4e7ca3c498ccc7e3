"""The findings table a person reads: rows that differ only in their node folded
into one hostlist row, and large tables drawn without rich exactly as rich draws them."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import spurctl.render.audit as audit_render
from spurctl.model import Action, AuditReport, Finding, Kind, Watermark, WatermarkSource
from spurctl.render.audit import FindingsTable, plain_text, render_audit
from spurctl.render.common import folded, job_text
from spurctl.render.table import wrapped


def _silent(i: int) -> Finding:
    return Finding(
        f"gpu{i:05d}", None, Kind.NOT_INVENTORIED, Action.INVESTIGATE,
        f"no inventory speaks for gpu{i:05d}",
    )  # fmt: skip


def _held(i: int, reason: str | None = None) -> Finding:
    return Finding(
        f"gpu{i:05d}", 1000 + i, Kind.TERMINAL_HELD, Action.RECLAIM,
        reason or f"job {1000 + i} ended COMPLETED; gpu{i:05d} still holds it with GPUs 0-3",
        live=False,
    )  # fmt: skip


def _report(findings: list[Finding]) -> AuditReport:
    return AuditReport(
        "http://ctl:6817", "0.8.0", datetime(2026, 12, 3, 12, tzinfo=UTC),
        Watermark(5000, WatermarkSource.FLAG), True, 10, 10, findings, 20000, 10000,
    )  # fmt: skip


def test_findings_that_differ_only_in_their_node_fold_into_one_hostlist_row() -> None:
    findings = [_held(1), _held(2), *(_silent(i) for i in range(10000, 20000))]
    rows = folded(findings)
    assert [shown.node for shown, _ in rows] == ["gpu00001", "gpu00002", "gpu[10000-19999]"]
    shown, first = rows[2]
    assert shown.reason == "no inventory speaks for gpu[10000-19999] (10,000 nodes)"
    assert first is findings[2]
    assert rows[0] == (findings[0], findings[0])  # a row naming a job is its own


def test_findings_with_another_reason_action_or_column_are_not_folded_together() -> None:
    other = Finding("gpu00003", None, Kind.NOT_INVENTORIED, Action.INVESTIGATE, "agent down")
    findings = [_silent(1), _silent(2), other, _silent(4)]
    rows = folded(findings)
    assert [s.node for s, _ in rows] == ["gpu[00001-00002,00004]", "gpu00003"]
    by_column = folded(findings[:2], lambda f: (f.node[-1],))  # e.g. the watch's ages
    assert [s.node for s, _ in by_column] == ["gpu00001", "gpu00002"]


def test_the_table_and_markdown_fold_and_per_node_unfolds_json_and_csv_never_fold() -> None:
    report = _report([_held(1), *(_silent(i) for i in range(10000, 10300))])
    table = render_audit(report, "table", console_width=140)
    assert "gpu[10000-10299]" in table and "(300 nodes)" in table
    assert "gpu10005" not in table
    unfolded = render_audit(report, "table", console_width=140, fold=False)
    assert "gpu10005" in unfolded and "(300 nodes)" not in unfolded
    markdown = render_audit(report, "markdown")
    assert "gpu[10000-10299]" in markdown and "gpu10005" not in markdown
    assert "gpu10005" in render_audit(report, "markdown", fold=False)
    assert render_audit(report, "json").count('"node": "gpu1') == 300
    assert render_audit(report, "csv").count("\ngpu1") == 300


def _mixed() -> list[Finding]:
    out = [
        _held(i, f"job {1000 + i} ended; gpu{i:05d} holds it. " * (i % 4 + 1)) for i in range(40)
    ]
    out += [_silent(i) for i in range(100, 180)]
    out.append(_held(50, "a " + "x" * 300 + " long word, folded as rich folds it"))
    out.append(_held(51, "日本語のテキスト " * 20))  # double-width cells
    out.append(Finding("gpu00051", 7, Kind.TERMINAL_HELD, Action.SPARE, "two  spaces  kept"))
    return out


@pytest.mark.parametrize("width", [80, 110, 120, 157, 240])
@pytest.mark.parametrize("fold", [True, False])
def test_the_table_breaks_no_cell_and_no_word_that_fits_a_line(width: int, fold: bool) -> None:
    findings = _mixed()
    table = FindingsTable(findings, fold=fold)
    lines = plain_text([table], width).splitlines()
    from rich.cells import cell_len

    assert all(cell_len(line) <= width for line in lines), width
    shown = {w for line in lines for w in line.split()}
    for drawn in [d for d, _ in folded(findings)] if fold else findings:
        for word in (drawn.kind.value, drawn.action.value, job_text(drawn.job_id)):
            assert word in shown, (word, width)
        for word in drawn.reason.split():
            if cell_len(word) <= width - 2:  # a word wider than a whole line alone is cut
                assert word in shown, (word, width)
    # Every row names its node at the start of its line, as sinfo -N does.
    rows = [line for line in lines if line and not line[0].isspace()]
    assert rows[0].split()[:2] == ["node", "job"]
    assert len(rows) - 1 == table.count


def test_on_a_terminal_the_large_table_shows_the_same_text_in_the_rows_colours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from rich.console import Console

    findings = _mixed()
    monkeypatch.setattr(audit_render, "FAST_ROWS", 0)
    buf = io.StringIO()
    console = Console(file=buf, width=140, force_terminal=True, color_system="standard")
    console.print(FindingsTable(findings))
    text = buf.getvalue()
    assert "\x1b[31m" in text or "\x1b[1;31m" in text  # reclaim rows in red
    monkeypatch.setattr(audit_render, "FAST_ROWS", 10**9)
    plain = plain_text([FindingsTable(findings)], 140)
    import re

    shown = "".join(
        line.rstrip() + "\n" for line in re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()
    )
    assert shown == plain


@given(
    st.lists(st.text(alphabet="ab,[]-0123", min_size=1, max_size=40), min_size=1, max_size=30),
    st.integers(min_value=10, max_value=60),
)
def test_the_fast_word_wrap_folds_exactly_as_rich_does(words: list[str], width: int) -> None:
    from rich.console import Console
    from rich.text import Text

    text = " ".join(words)
    console = Console(width=200, color_system=None)
    by_rich = [line.plain for line in Text(text).wrap(console, width, overflow="fold")]
    assert wrapped(text, width) == by_rich


def _watch_like_columns() -> list[audit_render.Column]:
    from rich.text import Text

    return [
        audit_render.Column("since", lambda f: Text("12:00:00"), lambda f: Text("since 12:00:00")),
        audit_render.Column(
            "status",
            lambda f: Text("STRANDED", style="bold red"),
            lambda f: Text("STRANDED", style="bold red"),
        ),
    ]


@pytest.mark.parametrize("width", [40, 80, 109, 120])
@pytest.mark.parametrize("fold", [True, False])
def test_the_large_stacked_layout_is_drawn_exactly_as_rich_draws_it(
    monkeypatch: pytest.MonkeyPatch, width: int, fold: bool
) -> None:
    # Below 110 columns, and wherever the columns leave the reasons no room (120 here,
    # with a folded hostlist beside two more columns), each reason goes under its row.
    findings = _mixed() + [_silent(i) for i in range(300, 1300, 2)]
    columns = _watch_like_columns()
    monkeypatch.setattr(audit_render, "FAST_ROWS", 10**9)
    by_rich = plain_text([FindingsTable(findings, columns, fold=fold)], width)
    monkeypatch.setattr(audit_render, "FAST_ROWS", 0)
    by_segments = plain_text([FindingsTable(findings, columns, fold=fold)], width)
    assert by_segments == by_rich
    # Stacked only where the cells alone are wider than the screen (the folded
    # hostlist's cell beside two more columns is 106 columns).
    if not FindingsTable(findings, columns, fold=fold).table().fits(width):
        assert width <= 80 or (fold and width < 106)
        assert "\n          job 1000 ended;" in by_segments
    else:
        assert by_segments.startswith("node ")
    # Nothing cut but a folded row's hostlist cell (render.common.node_cell: its reason
    # names every node).
    assert "STRANDED" in by_segments and "…" not in re.sub(r"…( |\n)", "", by_segments)


def test_columns_that_leave_the_reasons_no_room_stack_them_instead_of_cutting_cells() -> None:
    findings = [_held(1), *(_silent(i) for i in range(300, 1300, 2))]  # a long folded hostlist
    wide = plain_text([FindingsTable(findings, _watch_like_columns())], 120)
    (row,) = [line for line in wide.splitlines() if line.startswith("gpu00001 ")]
    assert row.split()[:7] == [
        "gpu00001", "1001", "terminal-held", "reclaim", "no", "12:00:00", "STRANDED",
    ]  # fmt: skip
    text = plain_text([FindingsTable(findings, _watch_like_columns())], 100)
    # Every cell whole: the kind, the action, the status, the job id, the reason.
    assert "    1001  terminal-held  reclaim  live: no  since 12:00:00  STRANDED" in text
    assert "          job 1001 ended COMPLETED; gpu00001 still holds it with GPUs 0-3" in text
    assert "investiga…" not in text and "STRAN…" not in text
