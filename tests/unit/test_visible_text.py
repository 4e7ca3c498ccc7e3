"""How text from the cluster is made safe to draw: errors.visible, render.common.escaped,
the CSV formula rule and the hostlist of names no NodeSet can parse."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from spurctl.errors import visible
from spurctl.hostlist import fold
from spurctl.model import Action, Finding, Kind
from spurctl.render.common import csv_safe, escaped


def _acts_on_a_terminal(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029\u202a\u202b\u202c\u202d\u202e"


@given(st.text())
def test_visible_leaves_no_control_character_and_escaped_agrees_with_it(text: str) -> None:
    shown = visible(text)
    assert not any(_acts_on_a_terminal(ch) for ch in shown)
    # The one-encode shortcut of `escaped` never misses what visible would change.
    assert escaped([text]) == [shown]
    assert escaped({"k": (text,)}) == {"k": (shown,)}


def test_visible_names_each_control_and_keep_newlines_keeps_only_the_newline() -> None:
    assert visible("a\x1b]0;t\x07\r\n\t\x9b\u202e") == "a\\x1b]0;t\\x07\\r\\n\\t\\x9b\\u202e"
    assert visible("one\ntwo\r", keep_newlines=True) == "one\ntwo\\r"


def _finding(node: str) -> Finding:
    return Finding(node, 7, Kind.TERMINAL_HELD, Action.RECLAIM, f"{node} holds job 7")


def test_escaped_copies_only_what_it_changes_and_keeps_shared_objects_shared() -> None:
    clean = [_finding("gpu001"), _finding("gpu002")]
    assert escaped(clean) is clean
    odd = _finding("gpu003\x1b[2J")
    shown = escaped({"report": [clean[0], odd], "tracked": (odd,)})
    assert shown["report"][0] is clean[0]
    assert shown["report"][1].node == "gpu003\\x1b[2J"
    assert shown["report"][1].reason == "gpu003\\x1b[2J holds job 7"
    assert shown["tracked"][0] is shown["report"][1]  # one finding, one copy: found by id()


def test_a_csv_cell_a_spreadsheet_would_run_gets_a_leading_quote() -> None:
    for formula in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_safe(formula) == "'" + formula
    assert csv_safe("gpu001") == "gpu001"
    assert csv_safe(-1) == -1  # a number is a number


def test_fold_lists_names_no_nodeset_can_parse_as_they_are() -> None:
    assert fold(["gpu001", "gpu002", "rack[7", "gpu\x1b[2J"]) == "gpu[001-002],gpu\x1b[2J,rack[7"
    assert fold(["rack[7", "rack]8"]) == "rack[7,rack]8"
