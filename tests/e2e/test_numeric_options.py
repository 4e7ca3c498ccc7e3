"""nan, inf and out-of-range numbers are one usage line naming the option, exit 2, before
anything is asked or signalled."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import one_line_error, run_cli

CASES = {
    "watch --interval nan": (("audit", "--watch", "--interval", "nan"), "--interval"),
    "watch --interval inf": (("audit", "--watch", "--interval", "inf"), "--interval"),
    "collect --timeout inf": (("collect", "--nodes", "n1", "--timeout", "inf"), "--timeout"),
    "collect --node-timeout inf": (
        ("collect", "--nodes", "n1", "--node-timeout", "inf"),
        "--node-timeout",
    ),
    "audit --timeout nan": (("audit", "--timeout", "nan"), "--timeout"),
    "node-release --grace nan": (
        ("node-release", "--job", "5", "--started-at", "2026-12-01T00:00:00Z", "--grace", "nan"),
        "--grace",
    ),
    "reclaim --settle -1": (("reclaim", "--node", "n1", "--settle", "-1"), "--settle"),
    "reclaim --concurrency 0": (("reclaim", "--node", "n1", "--concurrency", "0"), "--concurrency"),
}


@pytest.mark.parametrize("args,option", CASES.values(), ids=list(CASES))
def test_a_bad_number_is_one_line_naming_the_option(
    args: tuple[str, ...], option: str, tmp_path: Path
) -> None:
    proc = run_cli(*args, home=tmp_path / "home", timeout=30)
    line = one_line_error(proc, option)
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr and line.count("\n") == 0
