"""Every command spurctl prints for the operator to run next works when pasted (#28.3).

On the served demo cluster, as an operator would: the tour's commands, then each
command their output tells the operator to run (reclaim's confirm, the journal's,
the audit a --job that matched nothing points at, the names listing of
an unknown node, the checklist's collect and verify), pasted into the same shell
and run through the real CLI. "Works" is an answer, not an error: exit 0, or 1 when
what it reports needs action, and no `spurctl: error:` line.

The watch's `Reclaim with:` only appears once a holding outlived two heartbeats (60 s);
tests/unit/test_watch.py pastes it from a drawn round instead.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.cli import cli_process, run_cli
from tests.e2e.test_demo import _banner

# A command quoted in a sentence: "... with `spurctl audit --nodes gpu003 ...`".
QUOTED = re.compile(r"`(spurctl [^`]+)`")


@contextmanager
def _served(tmp_path: Path, *scenario: str) -> Iterator[tuple[dict[str, str], list[str]]]:
    """The demo cluster up: the shell's exports and the tour's commands (comments dropped)."""
    with cli_process("demo", "--serve", *scenario, home=tmp_path / "server") as proc:
        printed = _banner(proc)
        exports = dict(re.findall(r"^\s*export (\w+)=(\S+)$", "".join(printed), re.M))
        tour = [
            shlex.join(shlex.split(line, comments=True))
            for line in printed
            if line.strip().startswith("spurctl ")
        ]
        yield exports, tour
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


def _paste(
    command: str, tmp_path: Path, exports: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "spurctl", command
    # Every paste from one operator's shell: one HOME, one working directory.
    return run_cli(*words[1:], *extra, home=tmp_path / "operator", env=exports, cwd=tmp_path)


def _works(run: subprocess.CompletedProcess[str], command: str) -> None:
    assert run.returncode in (0, 1), (command, run.returncode, run.stderr)
    assert "spurctl: error" not in run.stderr, (command, run.stderr)


def _quoted(text: str, containing: str) -> str:
    """The one command in `text` that contains `containing`: quoted in a sentence (an
    error's one line), or on a line of its own (a next step)."""
    quoted = QUOTED.findall(text.replace("\n", " "))
    alone = [line.strip() for line in text.splitlines() if line.startswith("  spurctl ")]
    (command,) = [c for c in quoted + alone if containing in c]
    return command


def test_the_incident_tour_and_every_command_it_prints_work_pasted(tmp_path: Path) -> None:
    with _served(tmp_path) as (exports, tour):
        for command in tour:
            if "--watch" in command:
                run = _paste(command, tmp_path, exports, "--rounds", "1")
            elif command.startswith("spurctl reclaim") and "--dry-run" not in command:
                continue  # sent below, once every read-only command has seen the incident
            else:
                run = _paste(command, tmp_path, exports)
            _works(run, command)

        # Reclaim from the inventory file: the confirm command it prints collects the way
        # this shell does (the demo's collect command, from its SPURCTL_CONFIG).
        (send,) = [c for c in tour if c.startswith("spurctl reclaim") and "--dry-run" not in c]
        sent = _paste(send, tmp_path, exports, "--yes")
        assert sent.returncode == 1, sent.stderr  # sent, unconfirmed: nothing re-collected
        (confirm,) = [
            line.strip()
            for line in sent.stdout.splitlines()
            if line.strip().startswith("spurctl audit --nodes")
        ]
        # The agent frees the run after its grace: confirm until it shows, as an operator would.
        deadline = time.monotonic() + 30
        while True:
            confirmed = _paste(confirm, tmp_path, exports)
            _works(confirmed, confirm)
            if confirmed.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert confirmed.returncode == 0 and "No discrepancies: 1 node" in confirmed.stdout

        # The journal names the nodes of its unconfirmed cancels in its confirm command.
        (journal,) = [c for c in tour if c.startswith("spurctl journal")]
        listed = _paste(journal, tmp_path, exports)
        _works(listed, journal)
        (from_journal,) = [
            line.strip() for line in listed.stdout.splitlines() if line.startswith("  spurctl ")
        ]
        assert "--nodes gpu003" in from_journal
        _works(_paste(from_journal, tmp_path, exports), from_journal)

        # A --job that names nothing: the audit it points at reads these nodes.
        (dry_run,) = [c for c in tour if "--dry-run" in c]
        unmatched = _paste(dry_run, tmp_path, exports, "--job", "99999")
        assert unmatched.returncode == 1, unmatched.stderr
        see = _quoted(unmatched.stdout, "audit")
        assert "..." not in see and "--nodes gpu003" in see
        seen = _paste(see, tmp_path, exports)
        _works(seen, see)
        assert "1 node in scope" in seen.stdout  # gpu003 alone, freed by the reclaim above

        # An unknown node: the listing it points at answers, and lists the real names.
        for command, word in ((dry_run, "gpu003"), (_explain(tour), "gpu003")):
            typo = _paste(command.replace(word, "gpu099", 1), tmp_path, exports)
            assert typo.returncode == 2 and "unknown node gpu099" in typo.stderr
            names = _quoted(typo.stderr, "spurctl nodes")
            listing = _paste(names, tmp_path, exports)
            assert listing.returncode == 0, (names, listing.stderr)
            assert "gpu003" in listing.stdout and "gpu099" not in listing.stdout


def _explain(tour: list[str]) -> str:
    (command,) = [c for c in tour if c.startswith("spurctl explain")]
    return command


def test_the_post_wipe_checklist_prints_a_verify_for_the_nodes_it_plans(tmp_path: Path) -> None:
    with _served(tmp_path, "--scenario", "post-wipe") as (exports, tour):
        (checklist,) = [c for c in tour if c.startswith("spurctl checklist")]
        assert not any("--verify" in c for c in tour)  # the checklist's own says which nodes
        plan = _paste(checklist, tmp_path, exports)
        assert plan.returncode == 1, plan.stderr  # nodes to recycle
        step = plan.stdout.split("**Verify their inventories", 1)[1].split("- [", 1)[0]
        collect, verify = [line.strip() for line in step.splitlines() if "spurctl " in line]
        planned = shlex.split(collect)[shlex.split(collect).index("--nodes") + 1]
        assert planned in plan.stdout.split("**Drain the nodes", 1)[1]
        assert shlex.split(verify)[shlex.split(verify).index("--nodes") + 1] == planned

        collected = _paste(collect, tmp_path, exports)
        _works(collected, collect)
        assert collected.returncode == 0 and (tmp_path / "after.jsonl").is_file()
        verified = _paste(verify, tmp_path, exports)
        _works(verified, verify)
        assert "# Post-wipe agent recycle checklist" in verified.stdout
        assert "[x] **Verify" not in verified.stdout  # the pre-wipe runs are still there
