"""Issue 53.6: what another tool's habits type (kubectl's -o, apt's -y, head's -n, sinfo's
-t, a node as an argument) gets one line saying how spurctl spells it, exit 2."""

from __future__ import annotations

import pytest

from tests.cli import one_line_error, run_cli


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["reclaim", "gpu003"], "`spurctl reclaim --node gpu003`"),
        (["drain", "gpu[001-003]"], "`spurctl drain --node 'gpu[001-003]'`"),
        (["nodes", "-o", "wide"], "the output format is --format here"),
        (["explain", "gpu003", "-o", "json"], "the output format is --format here"),
        (["reclaim", "-y", "-w", "gpu003"], "spurctl spells it --yes"),
        (["journal", "-n", "5"], "the newest runs are --last N here"),
        (["audit", "-t", "down"], "`spurctl nodes -t STATE`"),
        (["audit", "--state", "down"], "`spurctl nodes -t STATE`"),
    ],
)
def test_another_tools_habit_is_answered_with_spurctls_spelling(argv: list[str], said: str) -> None:
    one_line_error(run_cli(*argv), said)
