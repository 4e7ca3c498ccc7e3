"""`spurctl audit` as a library call: sources in, an AuditReport out (watch rounds too).

The steps, each explainable: read the controller (or a snapshot), read what the
agents hold, ask the controller about every held id its bulk answer left out
(only when that answer was incomplete), fix the watermark, classify. `run_audit`
is the whole of it; the CLI, the demo, the tests and the benchmarks call it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.errors import SpurctlError, redact
from spurctl.heap import Child, gc_paused, keep_until_exit
from spurctl.model import (
    AuditReport,
    ControllerView,
    Finding,
    Inventory,
    Job,
    Kind,
    Watermark,
    WatermarkSource,
    held_ids,
    inventories_by_node,
    utcnow,
    watermark_for,
)
from spurctl.releases import spur_version_line, spur_version_note
from spurctl.sources.inventories import (
    Sources,
    gather_holdings,
    read_view_and_inventories,
)

if TYPE_CHECKING:
    from spurctl.decide.tracker import WatchRound
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.settings import Connection

# A live collect's per-node deadline: an ssh and a scan, far longer than one RPC.
COLLECT_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class AuditInputs:
    """Everything a decision was made from; saving these reproduces the audit."""

    view: ControllerView
    inventories: dict[str, Inventory]
    watermark: Watermark
    confirmed: dict[int, Job | None]
    scope: frozenset[str] | None
    offline: bool
    not_found_doubt: str | None = None
    # Whether the controller was read with a credential (Spur then scopes GetJobs to its
    # user); None when unknown (a saved snapshot does not record it).
    credential: bool | None = None
    # The inventories come from this audit's own --collect (after the view was read).
    collected: bool = False
    # When the inventories were in hand (collection ended, or the files were read), on
    # this host's clock: an inventory dated well after it is clock-ahead. None: the view's.
    now: datetime | None = None
    # Agent cancels reclaim's journal records, by (node, job id): see classify's `cancelled`.
    cancelled: Mapping[tuple[str, int], datetime] = field(default_factory=dict)
    # The nodes in scope that -x left out (usecases/scope.py): not audited, noted.
    excluded: tuple[str, ...] = ()


def confirm_missing(
    view: ControllerView,
    held: Iterable[int],
    confirm: Callable[[Iterable[int]], Mapping[int, Job | None]],
    *,
    not_found_doubt: str | None,
) -> dict[int, Job | None]:
    """Ask GetJob about every held id the view lacks and cannot prove untracked.

    A complete full view, or an unscoped ask by id, needs no asking. A NOT_FOUND
    answer (None) is kept only when it proves the id untracked: with
    `not_found_doubt` set, it may hide another user's job, and the id is left
    unconfirmed.
    """
    lacking = view.lacking(held)
    missing = {i for i in lacking if not view.proves_untracked(i)}
    if not missing:
        return {}
    confirmed = dict(confirm(missing))
    if not_found_doubt is not None:
        return {i: j for i, j in confirmed.items() if j is not None}
    return confirmed


def gather(
    view: ControllerView,
    inventories: Iterable[Inventory],
    *,
    client: ControllerClient | None,
    watermark_flag: int | None = None,
    snapshot_watermark: Watermark | None = None,
    scope: frozenset[str] | None = None,
    not_found_doubt: str | None = None,
    collected: bool = False,
) -> AuditInputs:
    """Confirm what the bulk view could not, then fix the watermark.

    A complete view proves absence by itself. An incomplete one (a scoped
    credential) proves nothing: every held id it lacks is asked about with GetJob,
    and only NOT_FOUND counts as untracked. Offline (a snapshot) nothing can be
    asked, so those ids stay unverifiable.
    """
    now = utcnow()  # the inventories are in hand: nothing honest is dated after this
    by_node = inventories_by_node(inventories)
    confirmed: dict[int, Job | None] = {}
    if client is not None:
        held = held_ids(by_node.values())
        if view.bounded:
            view = client.look_up(view, held)
        confirmed = confirm_missing(view, held, client.confirm, not_found_doubt=not_found_doubt)
    if watermark_flag is None and snapshot_watermark is not None:
        watermark = snapshot_watermark
    else:
        watermark = watermark_for(view, confirmed, flag=watermark_flag)
    return AuditInputs(
        view=view,
        inventories=by_node,
        watermark=watermark,
        confirmed=confirmed,
        scope=scope,
        offline=client is None,
        not_found_doubt=(
            not_found_doubt if client is not None and (view.bounded or not view.complete) else None
        ),
        now=now,
        credential=None if client is None else client.scoped,
        collected=collected,
    )


def audit(inputs: AuditInputs, *, include_healthy: bool = False) -> AuditReport:
    from spurctl.decide.classify import classify
    from spurctl.decide.onset import dated

    view = inputs.view
    # Classifying converts the jobs the holdings name and the active ones.
    with gc_paused():
        result = classify(
            view,
            inputs.inventories,
            watermark=inputs.watermark.value,
            confirmed=inputs.confirmed,
            scope=inputs.scope,
            include_healthy=include_healthy,
            now=inputs.now,
            collected=inputs.collected,
            cancelled=inputs.cancelled,
        )
    notes: list[str] = []
    if not view.complete:
        how = (
            "held ids it lacks were checked one by one with GetJob; only NOT_FOUND counts "
            "as untracked"
            if not inputs.offline
            else "this is a saved snapshot, so GetJob cannot confirm anything: held ids "
            "it lacks are unverifiable and spared"
        )
        notes.append(
            f"controller view is INCOMPLETE: GetJobs returned {view.coverage()} "
            f"({_short(inputs)}); {how}."
        )
    notes.extend(view.read_notes)
    if inputs.excluded:
        from spurctl.usecases.scope import excluded_note

        notes.append(excluded_note(inputs.excluded))
    notes.extend(_coverage_notes(result.findings, view, collected=inputs.collected))
    if inputs.not_found_doubt:
        notes.append(f"NOT_FOUND is not proof here: {inputs.not_found_doubt}.")
    notes.extend(result.notes)
    old_spur = spur_version_note(view.version)
    if old_spur is not None:
        notes.append(old_spur)
    return AuditReport(
        controller_address=view.address,
        controller_version=view.version,
        taken_at=view.taken_at,
        watermark=inputs.watermark,
        view_complete=view.complete,
        jobs_seen=len(view.jobs),
        jobs_total=view.jobs_total,
        findings=dated(result.findings, view, inputs.inventories, inputs.confirmed),
        nodes_in_scope=result.nodes_in_scope,
        nodes_inventoried=result.nodes_inventoried,
        notes=notes,
        version_note=old_spur,
        version_line=spur_version_line(view.version),
    )


def _short(inputs: AuditInputs) -> str:
    """Why a view came back short, as far as the way it was read tells."""
    if inputs.credential is None:
        return (
            "a saved snapshot does not say whether it was read with a credential; with one, "
            "Spur scopes GetJobs to the credential's user, admins too"
        )
    if inputs.credential:
        return "Spur scopes GetJobs to the credential's user, admins too"
    # Without a credential GetJobs is unscoped: what remains is the read itself.
    return (
        "no credential was presented, so GetJobs was not scoped to a user: jobs that changed "
        "state while it was read, or answers too large to read (see the notes), left it short"
    )


def _have(items: Sequence[object]) -> str:
    return "has" if len(items) == 1 else "have"


def _were(items: Sequence[object]) -> str:
    return "was" if len(items) == 1 else "were"


def _are(items: Sequence[object]) -> str:
    return "is" if len(items) == 1 else "are"


def _coverage_notes(
    findings: Iterable[Finding], view: ControllerView, *, collected: bool = False
) -> list[str]:
    """What the not-inventoried findings add up to, said before the findings themselves."""
    from spurctl.decide.reasons import plural
    from spurctl.hostlist import fold

    missing = [f.node for f in findings if f.kind is Kind.NOT_INVENTORIED]
    known = [n for n in missing if n in view.nodes]
    unknown = [n for n in missing if n not in view.nodes]
    notes = []
    if known:
        notes.append(
            f"{plural(len(known), 'node')} in scope {_have(known)} no inventory and "
            f"{_were(known)} not audited: "
            f"{fold(known)} "
            + (
                "(this audit's --collect brought no inventory naming them)."
                if collected
                else f"(collect {'it' if len(known) == 1 else 'them'}, or use --collect)."
            )
        )
    if unknown:
        notes.append(
            f"{plural(len(unknown), 'node')} in scope {_are(unknown)} unknown to the controller "
            f"and {_have(unknown)} no "
            f"inventory: {fold(unknown)} (check the --nodes hostlist)."
        )
    return notes


def run_audit(
    src: Sources,
    conn: Connection | None,
    *,
    watermark: int | None = None,
    include_healthy: bool = False,
    journal: Path | None = None,
) -> tuple[AuditReport, AuditInputs]:
    """`spurctl audit` once: the view (live, or `src.snapshot`), the inventories, the findings.

    `conn` may be None only for a snapshot audit, which talks to no controller.
    `journal`: reclaim's journal, read for the agent cancels already sent (a holding
    with no process gets one at most); None reads none.
    """
    scope = src.scope.named
    left_out: tuple[str, ...] = ()

    def leave_out(view: ControllerView, holdings: list[Inventory]) -> list[Inventory]:
        # -x: its nodes' inventories go before anything is asked about what they hold.
        nonlocal scope, left_out
        if not src.scope.excluded:
            return holdings
        from spurctl.usecases.scope import excluding

        kept = excluding(src.scope.excluded, view.nodes, holdings, scope)
        scope, left_out = kept.scope, kept.left_out
        return kept.inventories

    if src.snapshot is not None:
        from spurctl.sources.documents import read_snapshot

        view, saved_watermark = read_snapshot(src.snapshot)
        holdings = leave_out(view, gather_holdings(src, view.nodes))
        inputs = gather(
            view,
            holdings,
            client=None,
            watermark_flag=watermark,
            snapshot_watermark=saved_watermark,
            scope=scope,
            collected=src.collect,
        )
    else:
        from spurctl.sources.controller import ControllerClient

        if conn is None:
            raise SpurctlError("a live audit needs a controller connection")
        with ControllerClient(conn) as client:
            if src.inventory and not src.collect:
                view, holdings = read_view_and_inventories(client, src.inventory)
            else:
                view = client.view()
                holdings = gather_holdings(src, view.nodes)
            holdings = leave_out(view, holdings)
            inputs = gather(
                view,
                holdings,
                client=client,
                watermark_flag=watermark,
                scope=scope,
                not_found_doubt=conn.not_found_doubt(),
                collected=src.collect,
            )
    if left_out:
        from dataclasses import replace

        inputs = replace(inputs, excluded=left_out)
    if journal is not None:
        from dataclasses import replace

        from spurctl.act.journal import cancels_sent

        inputs = replace(inputs, cancelled=cancels_sent(journal))
    report = audit(inputs, include_healthy=include_healthy)
    report.cluster = None if conn is None else conn.cluster
    return report, inputs


def take_snapshot(conn: Connection) -> tuple[ControllerView, Watermark]:
    """`spurctl snapshot`: the controller's view and its estimated watermark, for later audits."""
    from spurctl.sources.controller import ControllerClient

    with ControllerClient(conn) as client:
        view = client.view(everything=True)  # an offline audit cannot ask for held ids
    return view, Watermark(view.estimated_watermark(), WatermarkSource.ESTIMATED)


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


# What a watch round's child hands back: the report, when each node was collected.
_RoundResult = tuple[AuditReport, dict[str, datetime | None]]


def _watch_round(
    src: Sources,
    conn: Connection | None,
    *,
    first: bool,
    watermark: int | None,
    include_healthy: bool,
    journal: Path | None,
) -> _RoundResult:
    """One round's audit: its report, and when each inventoried node was collected.

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
    return report, {node: inv.collected_at for node, inv in inputs.inventories.items()}


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
        round_imports(src)
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
                report, evidence = found
                tracked = tracker.update(report.findings, at, evidence_at=evidence)
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
    `interval` after the previous one's."""
    number = 0
    started = 0.0
    while rounds is None or number < rounds:
        if number:
            sleep(max(0.0, started + interval - clock()))
            # A sleep may end a hair early on some clocks; a round is never early.
            started = max(clock(), started + interval)
        else:
            started = clock()
        number += 1
        yield number, started
