"""Text from data is never markup: reasons, details, notes and errors reach the
terminal as written, brackets and all, in every table spurctl draws; and what
the renderers share (format choices, the JSON header, writing a file) behaves
the same for each of them."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spurctl.decide.plan import Entry, Outcome, ReclaimRun, Result
from spurctl.decide.tracker import Tracker, WatchRound
from spurctl.errors import SpurctlError
from spurctl.model import Action, AuditReport, Finding, Inventory, Kind, Watermark, WatermarkSource
from spurctl.render import checklist as render_checklist
from spurctl.render.audit import audit_document, check_format, print_audit, render_audit
from spurctl.render.collect import summarize
from spurctl.render.common import (
    AuditFormat,
    ChecklistFormat,
    ReclaimFormat,
    report_header,
    write_output,
)
from spurctl.render.environment import Environment
from spurctl.render.reclaim import print_plan, print_run, print_unresolved, run_document
from spurctl.render.watch import WatchScreen, render_watch_round

TAKEN_AT = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
# Each is markup to rich: a tag it would swallow, a hostlist it could eat.
AUTH_ERROR = "[auth] jwt_key rejected by the agent"
HOSTLIST_REASON = "job 4711 runs on gpu[001-004] and gpu[a-b] now; [red]gpu10[/red] holds it."
NOTE = "2 findings withheld: [bold]see --all[/bold]"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    # One line per row at this width, so each piece of text can be found whole.
    monkeypatch.setenv("COLUMNS", "220")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)


def _finding() -> Finding:
    return Finding(
        "gpu10",
        4711,
        Kind.ACTIVE_ELSEWHERE,
        Action.RECLAIM,
        HOSTLIST_REASON,
        live=True,
        controller_state="RUNNING",
        allocated_nodes="gpu[001-004]",
        gpus=(0, 1),
        pids=(81234,),
    )


def _report(findings: list[Finding] | None = None) -> AuditReport:
    return AuditReport(
        controller_address="http://ctl:6817",
        controller_version="0.3.1",
        taken_at=TAKEN_AT,
        watermark=Watermark(5121, WatermarkSource.ESTIMATED),
        view_complete=True,
        jobs_seen=812,
        jobs_total=812,
        findings=[_finding()] if findings is None else findings,
        nodes_in_scope=128,
        nodes_inventoried=128,
        notes=[NOTE],
    )


def _plain(text: str) -> str:
    """The text as an operator reads it: no colour codes, runs of blanks as one."""
    return " ".join(ANSI.sub("", text).split())


def _assert_verbatim(text: str, *pieces: str) -> None:
    shown = _plain(text)
    for piece in pieces:
        assert " ".join(piece.split()) in shown, piece


@pytest.mark.parametrize("width", [200, 80])
def test_the_audit_table_prints_brackets_as_written(width: int) -> None:
    _assert_verbatim(render_audit(_report(), "table", console_width=width), HOSTLIST_REASON, NOTE)


def test_the_audit_table_on_a_terminal_prints_brackets_as_written() -> None:
    out = _Terminal()
    print_audit(_report(), "table", SCREEN, file=out)
    assert "\x1b[" in out.getvalue()  # coloured: the check sees a real terminal rendering
    _assert_verbatim(out.getvalue(), HOSTLIST_REASON, NOTE)


@pytest.mark.parametrize("width", [200, 80])
def test_the_watch_view_prints_brackets_as_written(width: int) -> None:
    tracked = Tracker().update([_finding()], TAKEN_AT)
    good = WatchRound(1, TAKEN_AT, 30.0, _report(), tracked, 1)
    failed = WatchRound(2, TAKEN_AT, 30.0, good.report, tracked, 1, error=AUTH_ERROR)
    text = render_watch_round(failed, console_width=width)
    _assert_verbatim(text, HOSTLIST_REASON, NOTE, f"Round 2 FAILED: {AUTH_ERROR}.")


SCREEN = Environment(tty=True, width=120, colour=True)


def _entry() -> Entry:
    return Entry(_finding(), "gpu10:6818")


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_the_reclaim_plan_prints_brackets_as_written(terminal: bool) -> None:
    out = _Terminal() if terminal else io.StringIO()
    print_plan([_entry()], _report(), file=out, env=SCREEN if terminal else Environment())
    _assert_verbatim(out.getvalue(), f"WARNING: {NOTE}", HOSTLIST_REASON)


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_the_reclaim_result_prints_brackets_as_written(terminal: bool) -> None:
    out = _Terminal() if terminal else io.StringIO()
    run = ReclaimRun(outcomes=[Outcome(_entry(), Result.FAILED, AUTH_ERROR)])
    env = SCREEN if terminal else Environment()
    print_run(run, [_entry()], _report(), fmt="table", file=out, env=env)
    _assert_verbatim(out.getvalue(), f"failed {AUTH_ERROR}", "1 planned: 0 sent, 0 skipped")


def test_unresolved_cancels_print_brackets_as_written() -> None:
    class Unresolved:
        at, node, job_id, kind = "2026-12-02T10:00:00Z", "gpu[a]", 7, "[x]"

    out = io.StringIO()
    print_unresolved([Unresolved()], file=out)
    _assert_verbatim(out.getvalue(), "WARNING: the journal has 1 cancel", "on gpu[a] ([x], ")


def test_the_reclaim_document_keeps_the_text_whole() -> None:
    run = ReclaimRun(outcomes=[Outcome(_entry(), Result.FAILED, AUTH_ERROR)])
    doc = run_document(run, [_entry()], _report(), dry_run=False)
    assert doc["plan"][0]["reason"] == HOSTLIST_REASON
    assert doc["outcomes"][0]["detail"] == AUTH_ERROR


# -- what the renderers share ------------------------------------------------


def test_the_format_choices_are_the_strings_the_commands_always_took() -> None:
    assert list(AuditFormat) == ["table", "json", "csv", "markdown", "prometheus"]
    assert list(ReclaimFormat) == ["table", "json"]
    assert list(ChecklistFormat) == ["markdown", "json"]
    # A choice and its string render the same: callers may pass either.
    for fmt in AuditFormat:
        assert render_audit(_report(), fmt) == render_audit(_report(), fmt.value)


def test_an_unknown_format_names_the_choices_of_its_command() -> None:
    with pytest.raises(
        SpurctlError, match=r"^unknown format 'md' for checklist; use markdown or json$"
    ):
        render_checklist.check_format("md")
    with pytest.raises(SpurctlError, match=r"^unknown format 'yaml'; use table, json, csv, "):
        check_format("yaml")
    with pytest.raises(
        SpurctlError, match=r"^unknown format 'csv' for reclaim; use table or json$"
    ):
        print_run(None, [], _report(), fmt="csv", file=io.StringIO())


def test_the_audit_document_opens_with_the_shared_header() -> None:
    doc = audit_document(_report())
    header = report_header(_report())
    assert list(doc)[1:5] == list(header) == ["controller", "watermark", "view", "notes"]
    assert {k: doc[k] for k in header} == header
    assert header["watermark"] == {"value": 5121, "source": "estimated"}
    assert header["controller"]["taken_at"] == "2026-12-02T10:00:00Z"


def test_write_output_replaces_the_file_whole_or_writes_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    write_output('{"new": true}\n', target)
    assert json.loads(target.read_text()) == {"new": True}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temp file left
    write_output("to stdout\n", Path("-"))
    write_output("and again\n", None)
    assert capsys.readouterr().out == "to stdout\nand again\n"


def test_write_output_into_a_missing_directory_is_an_operator_error(tmp_path: Path) -> None:
    with pytest.raises(SpurctlError, match=r"^cannot write .*missing/out\.md: "):
        write_output("x", tmp_path / "missing" / "out.md")


def test_the_collect_summary_lists_names_a_hostlist_would_misread_as_written() -> None:
    def ok(node: str) -> Inventory:
        return Inventory(node=node, collected_at=None, source="proc")

    results = [ok("gpu001"), ok("gpu002"), ok("gpu[003]"), ok("a,b")]
    assert summarize(results).splitlines()[1] == "ok (4): gpu[001-002],'gpu[003]','a,b'"


def _rounds() -> list[WatchRound]:
    tracked = Tracker().update([_finding()], TAKEN_AT)
    return [WatchRound(n, TAKEN_AT, 30.0, _report(), tracked, n) for n in (1, 2)]


def test_the_watch_screen_writes_one_plain_block_per_round_off_a_terminal() -> None:
    out = io.StringIO()
    first, second = _rounds()
    with WatchScreen(Environment(), out) as screen:
        screen.show(first)
        screen.running()  # nothing to redraw in a log
        screen.show(second)
    assert out.getvalue() == render_watch_round(first) + "\n" + render_watch_round(second)


def test_the_watch_screen_leaves_the_last_round_on_a_terminal_when_stopped() -> None:
    out = _Terminal()
    first, second = _rounds()
    terminal = Environment(tty=True, width=120, height=40, colour=True)
    with pytest.raises(KeyboardInterrupt), WatchScreen(terminal, out) as screen:
        screen.show(first)
        screen.running()
        assert "round 2 running" in _plain(out.getvalue())
        screen.show(second)
        raise KeyboardInterrupt
    last_frame = _plain(out.getvalue()).rsplit("spurctl audit --watch:", 1)[1]
    assert last_frame.startswith(" round 2,")
    assert "running" not in last_frame and "Ctrl-C" not in last_frame
    _assert_verbatim(last_frame, HOSTLIST_REASON)
