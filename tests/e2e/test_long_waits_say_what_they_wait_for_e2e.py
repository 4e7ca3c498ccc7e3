"""Issue 53.10: a repair's waits say what they wait for before they begin (about a minute
on a real cluster: --tick, then spurd's next heartbeat), one stderr line each, terminal
or log alike."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_repair_e2e import phantom, repair


def test_a_repair_says_what_each_long_wait_waits_for(tmp_path: Path) -> None:
    with phantom(tmp_path) as p:
        run = repair(p, "--yes", "--tick", "1.2")
        assert run.returncode == 0, run.stdout + run.stderr
        said = run.stderr.splitlines()
        assert (
            "spurctl: note: waiting 1.2 s (--tick) before re-reading gpu009: a dispatch "
            "already under way lands or fails meanwhile"
        ) in said
        assert (
            "spurctl: note: waiting up to 5 s (--wait) for gpu009 to register again (its "
            "spurd's next heartbeat)"
        ) in said
        # A wait under a second passes unsaid.
        quick = repair(p, "--yes", "--tick", "0")
        assert "(--tick)" not in quick.stderr
