"""Issue 43 item 9, read off the source: one warning printer, one label per severity,
one table style, one screen time format.

spurctl: warning: was formatted in seven files (sources, act and usecases printing their
own); each screen labelled a note its own way (NOTE:, Note:, **Warning:**); three table
styles (rich's heavy boxes, SIMPLE_HEAD, plain columns). Each is one now, and a new
module that starts its own is caught here.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from spurctl import errors

ROOT = Path(__file__).resolve().parents[2] / "spurctl"
SOURCES = sorted(p for p in ROOT.rglob("*.py") if "proto" not in p.parts)


def _offenders(pattern: str, allowed: set[str], under: Path = ROOT) -> list[str]:
    found = []
    for path in SOURCES:
        if not path.is_relative_to(under):
            continue
        name = str(path.relative_to(ROOT.parent))
        if name not in allowed and re.search(pattern, path.read_text()):
            found.append(name)
    return found


def test_one_function_prints_a_warning_or_a_note_on_stderr() -> None:
    assert _offenders(r"spurctl: (warning|note):", {"spurctl/errors.py"}) == []


def test_the_printer_prints_one_prefixed_line(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    errors.warn("the key file is readable by group")
    errors.note("wrote the audit to a.txt")
    assert err.getvalue().splitlines() == [
        "spurctl: warning: the key file is readable by group",
        "spurctl: note: wrote the audit to a.txt",
    ]


def test_one_label_per_severity_on_a_screen_or_in_a_document() -> None:
    # NOTE: and WARNING: are spelled once, in render/common.py.
    allowed = {"spurctl/render/common.py"}
    labels = r"\bNote:|\*\*Warning:|\*\*Note:|[\"']NOTE:|[\"']WARNING:"
    assert _offenders(labels, allowed) == []


def test_one_table_style_every_table_drawn_by_render_table() -> None:
    assert _offenders(r"rich\.table|rich import box|\bbox\.", set(), ROOT / "render") == []


def test_one_time_format_on_screen() -> None:
    # Every screen's time is render.common.text_time; the watch's times (since, age)
    # are issue 43 item 7's.
    allowed = {"spurctl/render/common.py", "spurctl/render/watch.py", "spurctl/render/since.py"}
    assert _offenders(r"strftime", allowed, ROOT / "render") == []
