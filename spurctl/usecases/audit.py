"""`spurctl audit`: one audit is run_audit (spurctl/audit_view.py, below the use cases);
`--watch` is rounds of it, each in a child process, scheduled and tracked here."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.audit_view import run_audit
from spurctl.errors import SpurctlError, redact
from spurctl.heap import Child, keep_until_exit
from spurctl.model import (
    AuditReport,
    utcnow,
)
from spurctl.sources.inventories import (
    Sources,
)

if TYPE_CHECKING:
    from spurctl.decide.tracker import WatchRound
    from spurctl.sources.settings import Connection

# -- audit --watch -----------------------------------------------------------------

WATCH_INTERVAL = 30.0  # one agent heartbeat: a round sooner rarely shows anything new


class FirstRoundInterrupted(KeyboardInterrupt):
    """Ctrl-C before the first round could be shown; `doing` says what it stopped."""

    def __init__(self, doing: str) -> None:
        super().__init__(doing)
        self.doing = doing


def _interrupted_doing(exc: BaseException, src: Sources, conn: Connection | None) -> str:
    """What the first round was doing when Ctrl-C came, from where it was stopped.

    The innermost step of the audit that the interrupt unwound names it; when
    none does (Ctrl-C between two steps), what the round as a whole does.
    """
    from spurctl.decide.reasons import plural

    controller = "the controller"
    if conn is not None and conn.controllers:
        controller += f" at {', '.join(conn.controllers)}"
    collecting = "collecting inventories from the nodes"
    tb, doing = exc.__traceback__, None
    while tb is not None:
        name = tb.tb_frame.f_code.co_name
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == "spurctl.sources.inventories" and name == "gather_holdings":
            targets = tb.tb_frame.f_locals.get("targets")
            if isinstance(targets, list) and targets:
                collecting = f"collecting inventories from {plural(len(targets), 'node')}"
        if module == "spurctl.sources.collect":
            doing = collecting
        elif module == "spurctl.sources.controller":
            asking = name in ("confirm", "look_up")
            doing = f"asking {controller} about held ids one by one" if asking else None
            doing = doing or f"reading {controller}"
        elif module == "spurctl.sources.inventories" and name == "view":
            doing = f"reading {controller}"  # the inventory files are read: waiting on it
        elif module == "spurctl.sources.inventories" and name == "load_inventories":
            doing = "reading the inventory files"
        tb = tb.tb_next
    if doing is not None:
        return doing
    if src.collect:
        return f"reading {controller} and {collecting}"
    return f"reading {controller} and the inventory files"


def round_imports(src: Sources) -> None:
    """Import here, once, what an audit imports on first use: gRPC and protobuf with
    the controller client, the classifier, ClusterShell, and the collect fan-out
    with --collect. Each watch round's child then starts with them; else every
    child imports them anew (some 120 modules, ~0.1 s a round at any size)."""
    import ClusterShell.NodeSet
    import ClusterShell.RangeSet
    import grpc._channel  # noqa: F401 - grpc imports it with the first channel

    import spurctl.decide.classify
    import spurctl.decide.onset
    import spurctl.sources.controller

    if src.collect:
        import ClusterShell.Task  # noqa: F401

        import spurctl.sources.collect  # noqa: F401


# What a watch round's child hands back: the report, when each node was collected, and
# the controller's clock at its view (Ping's server_time; None when it gave none).
_RoundResult = tuple[AuditReport, dict[str, datetime | None], datetime | None]


def _watch_round(
    src: Sources,
    conn: Connection | None,
    *,
    first: bool,
    watermark: int | None,
    include_healthy: bool,
    journal: Path | None,
) -> _RoundResult:
    """One round's audit: its report, when each inventoried node was collected, and the
    controller's clock at its view.

    Ctrl-C during the first round is FirstRoundInterrupted, saying what it stopped:
    only here, where the interrupt unwinds the audit, can that be read.
    """
    try:
        report, inputs = run_audit(
            src, conn, watermark=watermark, include_healthy=include_healthy, journal=journal
        )
    except KeyboardInterrupt as exc:
        if first:
            raise FirstRoundInterrupted(_interrupted_doing(exc, src, conn)) from None
        raise
    # In a round's child, which exits next: freeing the view and the inventories
    # object by object would cost ~40 ms at 20,000 nodes (heap.keep_until_exit).
    keep_until_exit(inputs)
    collected = {node: inv.collected_at for node, inv in inputs.inventories.items()}
    return report, collected, inputs.view.clock


def watch_rounds(
    src: Sources,
    conn: Connection | None,
    *,
    watermark: int | None = None,
    include_healthy: bool = False,
    journal: Path | None = None,
    interval: float = WATCH_INTERVAL,
    rounds: int | None = None,
    before_round: Callable[[WatchRound], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    isolate: bool = True,
    view_flags: tuple[str, ...] = (),
) -> Generator[WatchRound, None, None]:
    """Audit every `interval` seconds until `rounds` (None: forever); yield each round.

    A failing first round raises (exit 2); a later one is yielded with `error`
    set and the last good report, and the watch goes on: a controller failover
    or a half re-collected file is exactly what a watch should ride out.
    Ctrl-C during the first round raises FirstRoundInterrupted, saying what it stopped.
    `before_round` is told the previous round just before the next one starts
    (a live view shows "running" meanwhile). `clock` and `sleep` pace the rounds.
    `isolate`: each round's audit runs in a child process (heap.Child); False
    runs it here (a test whose stand-in audit moves the test's own clock). A
    round that ends after the next one is due starts that one's child at once,
    before it is itself tracked and yielded: a watch that cannot keep up pays
    for its audits, not for its audits and its drawing. Close the iterator when
    done with it: a round started ahead is then stopped (heap.Child.cancel).

    A round's time is when it was due to start, on the monotonic clock the rounds
    are scheduled by: the rounds of a 30 s watch are 30 s apart however long each
    one's controller read took, so a finding seen in rounds 1 to 3 is 60 s old in
    round 3, not 59.6 s because round 1 also opened the connection.
    """
    from dataclasses import replace
    from datetime import timedelta
    from functools import partial

    from spurctl.decide.tracker import Tracker, WatchRound

    def audit_of(first: bool) -> Callable[[], _RoundResult]:
        return partial(
            _watch_round, src, conn, first=first,
            watermark=watermark, include_healthy=include_healthy, journal=journal,
        )  # fmt: skip

    if isolate:
        try:
            round_imports(src)
        except KeyboardInterrupt as exc:  # the first round's start: said as any of it is
            raise FirstRoundInterrupted(_interrupted_doing(exc, src, conn)) from None
    tracker = Tracker()
    state: WatchRound | None = None
    origin: tuple[float, datetime] | None = None
    # The next round, started (at that clock reading) while this one is tracked and drawn.
    ahead: tuple[float, Child[_RoundResult]] | None = None
    try:
        for number, due in scheduled(interval, rounds, clock=clock, sleep=sleep):
            child: Child[_RoundResult] | None = None
            started = due
            if ahead is not None:
                (started, child), ahead = ahead, None
            if origin is None:
                origin = (started, utcnow())
            at = origin[1] + timedelta(seconds=started - origin[0])
            if state is not None and before_round is not None:
                before_round(state)
            found: _RoundResult | None = None
            try:
                if isolate:
                    # In a child process, the round's view and inventories never share
                    # this long-lived heap: its peak stays that of one audit (heap.py).
                    child = child or Child(audit_of(state is None), result_type=_RoundResult)
                    found = child.result()
                else:
                    found = audit_of(state is None)()
            except SpurctlError as exc:
                if state is None:
                    raise
                state = replace(state, number=number, at=at, error=redact(str(exc)))
            except KeyboardInterrupt as exc:
                if state is None and not isinstance(exc, FirstRoundInterrupted):
                    raise FirstRoundInterrupted(_interrupted_doing(exc, src, conn)) from None
                raise
            if isolate and (rounds is None or number < rounds) and clock() >= started + interval:
                # Behind its schedule, the watch starts the next round's audit now and
                # tracks and draws this one meanwhile, rather than after.
                ahead = (clock(), Child(audit_of(False), result_type=_RoundResult))
            if found is not None:
                report, evidence, controller_clock = found
                tracked = tracker.update(
                    report.findings,
                    at,
                    evidence_at=evidence,
                    collected=src.collect,
                    controller_clock=controller_clock,
                )
                state = WatchRound(
                    number, at, interval, report, tracked, number, view_flags=view_flags
                )
            assert state is not None
            yield state
    finally:
        if ahead is not None:  # the watch stopped: that round's answer is not wanted
            ahead[1].cancel()


def every(
    interval: float,
    rounds: int | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[int]:
    """Round numbers 1, 2, ..., each yielded when due; stops after `rounds` (None: never).

    A round is due `interval` seconds after the previous one started, not after
    it ended; one that overran is followed at once, never by a burst of rounds
    making up for lost time.
    """
    for number, _ in scheduled(interval, rounds, clock=clock, sleep=sleep):
        yield number


def scheduled(
    interval: float,
    rounds: int | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[int, float]]:
    """`every`'s rounds with the `clock` reading each started at: never less than
    `interval` after the previous one's. A round on time is dated when it was due,
    exactly: how late the sleep before it woke (a loaded machine) is not the round's
    age (the error is then a smaller age: a later verdict, never an early one); one
    after a round that overran is dated when it starts."""
    number = 0
    started = 0.0
    while rounds is None or number < rounds:
        if number:
            due = started + interval
            wait = due - clock()
            if wait > 0:
                sleep(wait)  # it may end a hair early or late: the round is dated `due`
                started = due
            else:
                sleep(0.0)
                started = clock()
        else:
            started = clock()
        number += 1
        yield number, started
