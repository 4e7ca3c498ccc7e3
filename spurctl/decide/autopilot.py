"""What `spurctl autopilot` does in one round, and why: pure.

A round brings its candidates (the reclaims, drains and resumes the manual commands'
own planners would make of a fresh audit), when the autopilot first saw what each one
acts on, what the journal says the autopilot did in the last hour and day, and how
many more nodes spurctl may take out of service. `choose` says, for each candidate,
whether it is sent now or waits, in one sentence: a finding younger than `--grace`
(a 0.9+ controller's own reclaim has two heartbeats to free it), a drain spurctl set
on a node not clean for `--resume-after`, a budget spent (`--max-actions` in a
sliding hour, `--max-unavailable`), or a node acted on `--flap-limit` times in a day,
which is drained once with a "flapping" reason and left to a person. The breaker
(`breaker_step`) stops a whole round when its view cannot be trusted or too many
nodes need action at once (a wipe, a controller restart), and closes only after
three calm rounds.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from spurctl.model import parse_time

# Every journal record the autopilot writes carries this `origin` (and its `round`).
ORIGIN = "autopilot"
# The mark of a drain the autopilot sets on a flapping node: never lifted by it.
FLAPPING = "flapping"
DEFAULT_GRACE_S = 60.0  # two agent heartbeats
DEFAULT_RESUME_AFTER_S = 300.0
DEFAULT_MAX_ACTIONS = 60  # per sliding hour
DEFAULT_FLAP_LIMIT = 3  # actions on one node in 24 h
# --repair: the longest a round waits for a removed node to register again (--wait). A
# node not back by then is left owed in the journal; a later round (or `spurctl repair`)
# puts back what it is owed once it is back.
DEFAULT_REPAIR_WAIT_S = 10.0
CALM_ROUNDS = 3  # rounds below half the breaker's threshold before it closes
# A repair's mutating calls: spurctl's drain, DeregisterNode, and a put-back (the labels
# or the hold the fresh record dropped). One already removed owes its put-back only.
REPAIR_CALLS = 3
# Its journaled notes (GetNode reads: the node back, its charge judged) are no calls.
REPAIR_NOTES = frozenset({"return", "verify", "done", "recheck"})
HOUR = timedelta(hours=1)
DAY = timedelta(hours=24)


class Act(enum.StrEnum):
    RECLAIM = "reclaim"
    DRAIN = "drain"
    RESUME = "resume"
    REPAIR = "repair"


class State(enum.StrEnum):
    ACTING = "acting"
    PAUSED = "paused"
    BREAKER_OPEN = "breaker-open"
    DRY_RUN = "dry-run"
    # The journal's lock held by a manual run: nothing sent this round.
    JOURNAL_BUSY = "journal-busy"


@dataclass(frozen=True, slots=True)
class Threshold:
    """`--breaker N|P%`: a number of nodes, or a percentage of the audited nodes (at least
    10); 0 opens the breaker at the first node needing action."""

    count: int | None = None
    percent: float | None = None

    def of(self, audited: int) -> int:
        if self.count is not None:
            return self.count
        assert self.percent is not None
        return max(10, math.floor(audited * self.percent / 100 + 1e-9))

    def __str__(self) -> str:
        if self.count is not None:
            return str(self.count)
        p = self.percent or 0.0
        return f"{int(p) if float(p).is_integer() else p}%"


DEFAULT_BREAKER = Threshold(percent=5.0)


@dataclass(frozen=True, slots=True)
class Breaker:
    """Open or closed; `calm`: rounds in a row below half the threshold since it opened."""

    open: bool = False
    calm: int = 0
    why: str = ""


def breaker_step(previous: Breaker, needing: int, threshold: int, blind: str | None) -> Breaker:
    """The breaker after a round in which `needing` nodes need action; `blind`: why this
    round's view cannot be trusted (incomplete, no controller, old inventories), or None."""
    if blind is not None:
        return Breaker(True, 0, blind)
    if needing > threshold:
        return Breaker(
            True,
            0,
            f"{needing} nodes need action, more than --breaker allows ({threshold}): a wipe? "
            "a controller restart? run `spurctl checklist post-wipe`",
        )
    if not previous.open:
        return Breaker()
    calm = previous.calm + 1 if (needing == 0 or needing < threshold / 2) else 0
    if calm >= CALM_ROUNDS:
        return Breaker()
    return Breaker(
        True,
        calm,
        f"{needing} nodes need action; the breaker closes after {CALM_ROUNDS} rounds in a row "
        f"below half its threshold ({calm} so far; it opened: {previous.why.split(' (')[0]})",
    )


@dataclass(frozen=True, slots=True)
class Candidate:
    """One call a manual command's planner would make this round. `since`: when the
    autopilot first saw what it acts on (the finding; for a resume, the node clean)."""

    act: Act
    node: str
    job_id: int
    kind: str
    since: datetime
    # The drain's reason (drain), or the drain it lifts (resume).
    reason: str = ""
    # A repair of a node an earlier run removed: it takes no node out, owes a put-back.
    removed: bool = False

    @property
    def calls(self) -> int:
        """The mutating calls it makes, counted against --max-actions."""
        if self.act is Act.REPAIR:
            return 1 if self.removed else REPAIR_CALLS
        return 1


@dataclass(frozen=True, slots=True)
class Choice:
    """A candidate sent now (`go`) or not (`wait`: which budget or rule, `why`)."""

    candidate: Candidate
    go: bool
    why: str
    # What holds it back: grace, resume-after, max-actions, max-unavailable, flapping, ...
    wait: str | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    grace_s: float = DEFAULT_GRACE_S
    resume_after_s: float = DEFAULT_RESUME_AFTER_S
    max_actions: int = DEFAULT_MAX_ACTIONS
    flap_limit: int = DEFAULT_FLAP_LIMIT


@dataclass(slots=True)
class Spent:
    """What the journal says the autopilot did: calls in the last hour, and per node the
    rounds in the last day that acted on it."""

    last_hour: int = 0
    rounds_on: dict[str, int] = field(default_factory=dict)


def spent(records: Iterable[Mapping[str, Any]], now: datetime) -> Spent:
    """The autopilot's calls in the journal (each outcome `sent` or `failed`: a mutating
    call that went out, or may have; one skipped at its re-check is none), counted for
    `--max-actions` (the last hour) and `--flap-limit` (distinct rounds per node in the
    last day). Read from the journal, so a restart does not reset them."""
    out = Spent()
    rounds: dict[str, set[tuple[str, Any]]] = {}
    for rec in records:
        # A call that went out (or may have: failed): a re-check that stopped it is none.
        if (
            rec.get("event") != "outcome"
            or rec.get("origin") != ORIGIN
            or rec.get("result") not in ("sent", "failed")
            or (rec.get("action") == "repair" and rec.get("step") in REPAIR_NOTES)
        ):
            continue
        try:
            at = parse_time(rec.get("at"))
        except ValueError:
            continue
        if at is None or at > now + timedelta(minutes=5):
            continue
        if now - at <= HOUR:
            out.last_hour += 1
        if now - at <= DAY:
            rounds.setdefault(str(rec.get("node")), set()).add(
                (str(rec.get("run")), rec.get("round"))
            )
    out.rounds_on = {node: len(seen) for node, seen in rounds.items()}
    return out


def flapping_reason(node: str, times: int) -> str:
    return (
        f"spurctl: {FLAPPING}: the autopilot acted on it {times} times in 24 h; left to a "
        f"person (spurctl journal; spurctl explain {node})"
    )


_ORDER = {Act.RECLAIM: 0, Act.DRAIN: 1, Act.RESUME: 2, Act.REPAIR: 3}


def choose(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    limits: Limits,
    spent_: Spent,
    room: int,
    left_to_person: frozenset[str] = frozenset(),
) -> list[Choice]:
    """Each candidate sent now or held back, and why (one sentence each). `room`: how many
    more nodes spurctl may take out of service (--max-unavailable, counted from the
    controller). A node the autopilot acted on in `flap_limit` rounds of the last day is
    drained with the flapping reason instead (once; its other candidates wait), and a
    flapping drain is never lifted. `left_to_person`: nodes out of service under the
    autopilot's flapping drain, on which nothing more is done. At most one repair goes
    out a round (each blocks the round for its tick and its wait): the others wait."""
    left = max(0, limits.max_actions - spent_.last_hour)
    out: list[Choice] = []
    flapped: set[str] = set()
    repairing = False
    for c in sorted(candidates, key=lambda c: (_ORDER[c.act], c.since, c.node, c.job_id)):
        age = (now - c.since).total_seconds()
        if c.node in left_to_person:
            out.append(Choice(c, False, f"{c.node} is drained as flapping: left to a person",
                              FLAPPING))  # fmt: skip
            continue
        if c.act is Act.RESUME:
            if FLAPPING in c.reason:
                out.append(
                    Choice(
                        c,
                        False,
                        f"{c.node} was drained as flapping: left to a "
                        "person, never resumed by the autopilot",
                        FLAPPING,
                    )
                )
                continue
            if age < limits.resume_after_s:
                out.append(
                    Choice(
                        c,
                        False,
                        f"{c.node} clean for {age:.0f}s, resumed after "
                        f"{limits.resume_after_s:.0f}s (--resume-after)",
                        "resume-after",
                    )
                )
                continue
        elif age < limits.grace_s and not c.removed:  # one owed its put-back: at once
            out.append(
                Choice(
                    c,
                    False,
                    f"{c.kind} on {c.node} seen for {age:.0f}s, acted on after "
                    f"{limits.grace_s:.0f}s (--grace)",
                    "grace",
                )
            )
            continue
        if c.node in flapped:
            out.append(Choice(c, False, f"{c.node} is drained as flapping this round", FLAPPING))
            continue
        times = spent_.rounds_on.get(c.node, 0)
        if c.act is not Act.RESUME and not c.removed and times >= limits.flap_limit:
            flapped.add(c.node)
            c = replace(c, act=Act.DRAIN, reason=flapping_reason(c.node, times))
            if room <= 0:
                out.append(
                    Choice(
                        c,
                        False,
                        f"{c.node} is flapping; draining it would pass --max-unavailable",
                        "max-unavailable",
                    )
                )
                continue
        if c.act is Act.REPAIR and repairing:
            out.append(Choice(c, False, f"one repair a round: {c.node}'s waits", "one-repair"))
            continue
        if left < c.calls:
            out.append(
                Choice(
                    c,
                    False,
                    f"--max-actions {limits.max_actions}/h spent: {c.act.value} of {c.node} waits"
                    + (f" (it makes {c.calls} calls, {left} left)" if c.calls > 1 else ""),
                    "max-actions",
                )
            )
            continue
        if c.act is Act.DRAIN or (c.act is Act.REPAIR and not c.removed):
            if room <= 0:
                out.append(
                    Choice(
                        c,
                        False,
                        f"{c.act.value}ing {c.node} would pass --max-unavailable",
                        "max-unavailable",
                    )
                )
                continue
            room -= 1
        repairing = repairing or c.act is Act.REPAIR
        left -= c.calls
        out.append(Choice(c, True, _go_why(c, age, times)))
    return out


def _go_why(c: Candidate, age: float, times: int) -> str:
    if FLAPPING in c.reason and c.act is Act.DRAIN:
        return f"{c.node} was acted on in {times} rounds in 24 h: drained as flapping"
    if c.act is Act.RESUME:
        return f"{c.node}'s audit clean for {age:.0f}s: lifts spurctl's drain"
    if c.removed:
        return f"{c.node} was removed by an earlier repair: waited for, what it is owed put back"
    what = f"job {c.job_id} " if c.job_id else ""
    return f"{c.kind} {what}on {c.node} has lasted {age:.0f}s: {c.act.value}"


@dataclass(slots=True)
class Sightings:
    """When the autopilot first saw each thing it may act on; what a round no longer shows
    is forgotten (if it comes back, its grace starts again)."""

    first: dict[tuple[str, str, int, str], datetime] = field(default_factory=dict)

    def seen(
        self, keys: Iterable[tuple[str, str, int, str]], now: datetime, family: str = "finding"
    ) -> None:
        """This round's keys of one `family` (a key's second part: "finding", "clean"); the
        family's others are forgotten, the other families' kept."""
        keep = set(keys)
        self.first = {k: v for k, v in self.first.items() if k[1] != family or k in keep} | {
            k: self.first.get(k, now) for k in keep
        }

    def since(self, key: tuple[str, str, int, str], now: datetime) -> datetime:
        return self.first.get(key, now)


def waits_by_budget(choices: Iterable[Choice]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in choices:
        if not c.go and c.wait is not None:
            out[c.wait] = out.get(c.wait, 0) + 1
    return out
