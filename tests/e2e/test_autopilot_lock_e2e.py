"""Manual commands and a live autopilot on one journal: never two writers.

The autopilot holds its own lock from start to stop (one autopilot per journal) and the
journal's lock only while a round acts. A manual reclaim, drain, resume or repair waits
for the journal's lock (--lock-wait, one stderr line naming what it waits for) and goes
between two rounds; a round that finds a manual run holding it sends nothing and says
so (`journal-busy`); a round whose journal changed since its audit read it (a manual
run acted meanwhile) audits again under the lock before it sends.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spurctl.act.journal import journal_lock
from spurctl_sim.fleet_scenario import node_name, strand
from tests.cli import cli_process, lines_of, run_cli, wait_for
from tests.e2e.test_autopilot_e2e import Fleet, autopilot_records, rounds_of, running_fleet
from tests.reclaim import journal_records


def manual_reclaim(f: Fleet, node: str, *extra: str, inventory: Path | None = None) -> list[str]:
    return [
        "reclaim", "--controller", f.sim.controller_address, "--node", node, "--inventory",
        str(inventory or f.live), "--agent-map", str(f.agent_map), "--journal", str(f.journal),
        "--yes", "--settle", "5", *extra,
    ]  # fmt: skip


def cancels_of(journal: Path, node: str) -> list[dict[str, Any]]:
    found = journal_records(journal)
    return [r for r in found if r["node"] == node and r["event"] == "intent"]


def _round_lines(lines: Any, deadline_s: float = 60) -> Callable[[], dict[str, Any]]:
    def next_round() -> dict[str, Any]:
        line = lines.get(timeout=deadline_s)
        assert line, "the autopilot ended"
        return json.loads(line)

    return next_round


def test_a_manual_reclaim_started_during_a_round_waits_for_it_and_is_journaled_once(
    tmp_path: Path,
) -> None:
    agents = [node_name(3), node_name(5)]
    with running_fleet(tmp_path, 20, agents=agents, agent_latency=4.0) as f:
        strand(f.sim, 3)
        with cli_process(*f.args("--interval", "0.3", "--grace", "0"), home=f.home) as pilot:
            # The round holds the journal's lock: its cancel is at the agent (4 s).
            wait_for(lambda: any(r["event"] == "intent" for r in autopilot_records(f.journal)),
                     timeout=30)  # fmt: skip
            strand(f.sim, 5)  # both may go for it now: one cancel is sent, by one of them
            with cli_process(*manual_reclaim(f, "gpu0005", "--lock-wait", "60"),
                             home=f.home) as manual:  # fmt: skip
                assert manual.stderr is not None
                line = lines_of(manual.stderr).get(timeout=30)
                assert "waiting up to 60s" in line and f"the autopilot (pid {pilot.pid})" in line
                # It went once the round ended: not refused (2), nothing sent beside it.
                assert manual.wait(timeout=90) in (0, 1)
            wait_for(lambda: not f.sim.holdings(node_name(5)), timeout=30)
            pilot.send_signal(signal.SIGTERM)
            assert pilot.wait(timeout=30) == 0
        records = journal_records(f.journal)
        first_out = next(i for i, r in enumerate(records) if r["event"] == "outcome")
        assert records[first_out]["node"] == "gpu0003"  # the round's call ended first
        sent = cancels_of(f.journal, "gpu0005")
        assert len(sent) == 1  # the manual run's or the next round's: journaled once


def test_lock_wait_0_refuses_in_one_line_while_a_round_acts(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)], agent_latency=4.0) as f:
        strand(f.sim, 3)
        with cli_process(*f.args("--interval", "0.3", "--grace", "0"), home=f.home) as pilot:
            wait_for(lambda: any(r["event"] == "intent" for r in autopilot_records(f.journal)),
                     timeout=30)  # fmt: skip
            refused = run_cli(*manual_reclaim(f, "gpu0003", "--lock-wait", "0"), home=f.home,
                              process=True)  # fmt: skip
            assert refused.returncode == 2
            [line] = refused.stderr.splitlines()
            assert f"the autopilot (pid {pilot.pid})" in line and "--lock-wait" in line
            assert "nothing was sent" in line
            pilot.send_signal(signal.SIGTERM)
            assert pilot.wait(timeout=30) == 0
        assert len(cancels_of(f.journal, "gpu0003")) == 1  # the round's


def test_a_round_finding_a_manual_run_holding_the_journal_sends_nothing_and_says_so(
    tmp_path: Path,
) -> None:
    with (
        running_fleet(tmp_path, 20, agents=[node_name(3)]) as f,
        cli_process(*f.args("--interval", "0.2", "--grace", "0"), home=f.home) as pilot,
    ):
        assert pilot.stdout is not None
        next_round = _round_lines(lines_of(pilot.stdout))
        next_round()
        # Between rounds the journal's lock is free: a manual run goes at once.
        free = run_cli(*manual_reclaim(f, "gpu0004", "--lock-wait", "0"), home=f.home,
                       process=True)  # fmt: skip
        assert free.returncode == 0, free.stderr
        with journal_lock(f.journal):  # a manual run (this test) holds it
            strand(f.sim, 3)
            r = next_round()
            while r["state"] != "journal-busy":
                assert r["state"] == "acting" and not r["calls"], r
                r = next_round()
            assert r["calls"] == [] and r["waiting"] == {"journal-busy": 1}
            assert f"journal in use by another spurctl run (pid {os.getpid()})" in r["why"][0]
            assert autopilot_records(f.journal) == []
        r = next_round()
        while not r["calls"]:
            r = next_round()
        assert r["state"] == "acting"
        assert [(c["node"], c["result"]) for c in r["calls"]] == [("gpu0003", "sent")]
        pilot.send_signal(signal.SIGTERM)
        assert pilot.wait(timeout=30) == 0


@contextmanager
def fed_fifo(fifo: Path, feeds: list[Callable[[], bytes]]) -> Iterator[threading.Thread]:
    """A FIFO given as the autopilot's --inventory: each time its audit opens it, the
    next feed runs (while the autopilot waits on the read) and its bytes are written.

    A fresh FIFO replaces the one fed before its writer closes: the next feed's open then
    waits for the autopilot's next open. Reopening the same FIFO would succeed while the
    autopilot still read the last feed, and both feeds' bytes would reach one read (no
    end of file between them), the next audit then waiting for a writer forever."""
    os.mkfifo(fifo)
    failed: list[BaseException] = []

    def feed() -> None:
        try:
            for make in feeds:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                        break
                    except OSError as exc:
                        if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                            raise
                        time.sleep(0.02)
                try:
                    os.set_blocking(fd, True)
                    data = memoryview(make())
                    while data:
                        data = data[os.write(fd, data) :]
                    os.unlink(fifo)
                    os.mkfifo(fifo)
                finally:
                    os.close(fd)
        except BaseException as exc:
            failed.append(exc)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    yield feeder
    feeder.join(timeout=60)
    assert not feeder.is_alive(), "the autopilot did not read every feed"
    assert not failed, failed


def test_a_round_audits_again_when_a_manual_run_acted_since_its_audit(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(5)]) as f:
        strand(f.sim, 5)
        before = f.live.read_bytes()  # gpu0005 holds its finished job
        assert b'"gpu0005"' in before
        manual: list[Any] = []

        def manual_run_meanwhile() -> bytes:
            # The round's audit is under way (it reads this FIFO): a manual run goes now.
            manual.append(run_cli(*manual_reclaim(f, "gpu0005", "--lock-wait", "0"),
                                  home=f.home, process=True))  # fmt: skip
            return before  # and the audit sees the holding as it was before the cancel

        def now() -> bytes:
            return f.live.read_bytes()

        fifo = tmp_path / "inventory.fifo"
        args = f.args("--grace", "0", "--rounds", "1")
        args[args.index(str(f.live))] = str(fifo)
        with fed_fifo(fifo, [manual_run_meanwhile, now]):
            pilot = run_cli(*args, home=f.home, process=True, timeout=120)
        # Sent (unconfirmed: its --settle re-read no inventory showing it freed in time).
        assert manual and manual[0].returncode in (0, 1), manual[0].stderr
        assert pilot.returncode == 0, pilot.stderr
        [r] = rounds_of(pilot.stdout)
        assert r["state"] == "acting" and r["calls"] == []
        assert any("audited again under its lock" in w for w in r["why"])
        # One cancel of gpu0005: the manual run's; the autopilot did not send it again.
        assert len(cancels_of(f.journal, "gpu0005")) == 1
        assert autopilot_records(f.journal) == []


def test_a_waiting_manual_run_says_what_it_waits_for_and_refuses_at_its_deadline(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.jsonl"
    with journal_lock(journal):  # another spurctl run (this test) holds it
        t0 = time.monotonic()
        done = run_cli("drain", "--controller", "http://127.0.0.1:9", "-w", "gpu0001",
                       "--inventory", str(tmp_path / "none.jsonl"), "--journal", str(journal),
                       "--yes", "--lock-wait", "1", home=tmp_path / "home",
                       process=True)  # fmt: skip
        took = time.monotonic() - t0
    assert done.returncode == 2 and took >= 1.0
    waited, refused = done.stderr.splitlines()
    assert "waiting up to 1s" in waited and f"another spurctl run (pid {os.getpid()})" in waited
    assert "still in use" in refused and "after 1s (--lock-wait)" in refused
    assert not journal.exists() or journal.read_text() == ""


def test_sigterm_while_waiting_for_the_lock_exits_with_nothing_sent(tmp_path: Path) -> None:
    with running_fleet(tmp_path, 20, agents=[node_name(3)]) as f:
        strand(f.sim, 3)
        with (
            journal_lock(f.journal),
            cli_process(*manual_reclaim(f, "gpu0003", "--lock-wait", "60"), home=f.home) as proc,
        ):
            assert proc.stderr is not None
            err = lines_of(proc.stderr)
            line = err.get(timeout=30)
            assert "waiting up to 60s" in line
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 130
        assert not f.journal.exists() or cancels_of(f.journal, "gpu0003") == []
        assert f.sim.holdings(node_name(3))  # nothing was cancelled
