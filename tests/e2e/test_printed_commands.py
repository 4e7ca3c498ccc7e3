"""Every command spurctl prints for the operator to run next works when pasted (#28.3).

On the served demo cluster, as an operator would: the tour's commands, then each
command their output tells the operator to run (reclaim's confirm, the journal's,
the audit a --job that matched nothing points at, the names listing of
an unknown node, the checklist's collect and verify, a plain audit's reclaim, a saved
plan's apply, the alert rules' runbook commands), pasted into bash as printed (bash
parses the quoting) and run through the real CLI from PATH. "Works" is an answer, not an
error: exit 0, or 1 when what it reports needs action, and no `spurctl: error:` line.

The watch's `Reclaim with:` only appears once a holding outlived two heartbeats (60 s);
tests/unit/test_watch.py pastes it from a drawn round instead.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.cli import (
    clean_env,
    cli_process,
    home_for,
    on_a_terminal,
    read_terminal,
    spurctl_argv,
)
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
    """`command` (and `extra` words) pasted into bash as printed: bash parses it (its
    quoting, a hostlist's brackets it would glob) and runs `spurctl` from PATH. Every
    paste from one operator's shell: one HOME, one working directory."""
    assert shlex.split(command)[0] == "spurctl", command
    shim = tmp_path / "bin"
    if not shim.is_dir():  # `spurctl` on PATH runs this checkout, as the installed one would
        shim.mkdir()
        (shim / "spurctl").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m spurctl "$@"\n')
        (shim / "spurctl").chmod(0o755)
    env = clean_env(home_for(tmp_path / "operator"), **exports)
    env["PATH"] = f"{shim}:{env['PATH']}"
    line = command + "".join(" " + shlex.quote(word) for word in extra)
    return subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, env=env, cwd=tmp_path,
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip


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

        # A plain audit ends with the one command that acts on its reclaim hostlist.
        (audit,) = [c for c in tour if c.startswith("spurctl audit --inventory")]
        audited = _paste(audit, tmp_path, exports)
        reclaim_all = _quoted(audited.stdout, "spurctl reclaim --node")
        _works(_paste(reclaim_all, tmp_path, exports, "--dry-run"), reclaim_all)

        # The alert rules' runbook commands, for a node the incident strands (gpu003).
        for command in _runbook_commands("gpu003"):
            _works(_paste(command, tmp_path, exports), command)

        # Reclaim as terraform applies: a dry run saves the plan and prints the command
        # that applies exactly it; that send's confirm command collects the way this
        # shell does (the demo's collect command, from its SPURCTL_CONFIG).
        (send,) = [c for c in tour if c.startswith("spurctl reclaim") and "--dry-run" not in c]
        saved = _paste(send, tmp_path, exports, "--dry-run", "-o", "plan.json")
        _works(saved, send)
        apply = _quoted(saved.stderr, "spurctl reclaim --plan")
        sent = _paste(apply, tmp_path, exports, "--yes")
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


def _on_a_terminal(command: str, tmp_path: Path, exports: dict[str, str]) -> str:
    """What `command` shows on an 80x24 pseudo-terminal, control sequences taken out."""
    env = clean_env(home_for(tmp_path / "operator"), **exports, COLUMNS="80", LINES="24")
    argv = spurctl_argv(*shlex.split(command)[1:])
    status, seen = on_a_terminal(argv, env, lambda fd: read_terminal(fd, lambda _: False))
    assert status in (0, 1), seen
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace").replace("\r", ""))


def _runbook_commands(node: str) -> list[str]:
    """Every `spurctl ...` the shipped alert rules' annotations quote, for `node`."""
    rules = (
        Path(__file__).resolve().parents[2] / "contrib/prometheus/spurctl.rules.yml"
    ).read_text()
    annotations = [part.split("- alert:", 1)[0] for part in rules.split("annotations:")[1:]]
    folded = " ".join(" ".join(annotations).replace("{{ $labels.node }}", node).split())
    found = list(dict.fromkeys(QUOTED.findall(folded)))  # as YAML's >- folds the lines
    assert any(c.startswith("spurctl reclaim") for c in found), found
    return found


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

        # On an 80-column terminal the checklist is rendered text: its commands stay whole.
        screen = _on_a_terminal(checklist, tmp_path, exports)
        shown = [line.strip() for line in screen.splitlines() if line.startswith("    spurctl ")]
        expected = [["spurctl", "collect"], ["spurctl", "checklist"]]
        assert [shlex.split(c)[:2] for c in shown] == expected, screen
        for command in shown:
            _works(_paste(command, tmp_path, exports), command)
        assert "# Post-wipe agent recycle checklist" in verified.stdout
        assert "[x] **Verify" not in verified.stdout  # the pre-wipe runs are still there
