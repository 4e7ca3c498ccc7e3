"""`reclaim --plan FILE`: whether a saved plan may be applied now, and which of its
entries the fresh audit still plans.

A saved plan says what may be sent, never that it still should be: the nodes
are audited afresh and only a saved entry the fresh audit plans again can go.
Pure: the caller brings the saved document, the fresh plan and the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from spurctl.decide.freshness import CLOCK_AHEAD_S
from spurctl.decide.plan import Entry, duration
from spurctl.errors import SpurctlError
from spurctl.hostlist import loose_key
from spurctl.model import Finding, Job, NextStep, PlanDocument, format_time

# A fresh plan, for a caller that cannot say of which nodes.
FRESH_PLAN = NextStep.spurctl("reclaim", "--help", why="how to save a fresh plan")

Key = tuple[str, int]


class Sent(Protocol):
    """The journal's record of the last cancel sent for one (node, job)."""

    @property
    def at(self) -> str: ...

    @property
    def run(self) -> str | None: ...


def check_saved(
    saved: PlanDocument, here: str, max_age_s: float, now: datetime, fresh: NextStep | None = None
) -> None:
    """Refuse (SpurctlError, nothing sent) a saved reclaim plan check_view refuses. Each
    refusal ends with `fresh`, the dry run that saves a new plan of the same nodes and
    jobs."""
    check_view(saved.taken_at, saved.controller.address, here, max_age_s, now, fresh or FRESH_PLAN)


def check_view(
    taken_at: datetime, made_on: str, here: str, max_age_s: float, now: datetime, remake: NextStep
) -> None:
    """Refuse (SpurctlError, nothing sent) a saved plan (reclaim's or repair's) whose view
    was taken on another controller than `here`, the one answering now (`made_on`),
    longer ago than `max_age_s`, or ahead of this host's clock by more than a node's
    clock may be: its age then proves nothing, and any --max-inventory-age would pass
    it. Each refusal ends with `remake`, the dry run that saves a new plan."""
    age = (now - taken_at).total_seconds()
    if age < -CLOCK_AHEAD_S:
        raise SpurctlError(
            f"refusing the saved plan, nothing sent: its view is dated "
            f"{format_time(taken_at)}, {duration(-age)} ahead of this host's clock "
            f"(more than the {duration(CLOCK_AHEAD_S)} allowed), so how old it is cannot be "
            "told; make a fresh one with",
            step=remake,
        )
    if age > max_age_s:
        raise SpurctlError(
            f"refusing the saved plan, nothing sent: its view was taken {duration(age)} ago, "
            f"longer than --max-inventory-age {duration(max_age_s)}; make a fresh one with",
            step=remake,
        )
    if here != made_on:
        raise SpurctlError(
            f"refusing the saved plan, nothing sent: it was made from controller "
            f"{made_on}, this is {here}; make a fresh one against this "
            "controller with",
            step=remake,
        )


def narrow_to_saved(
    saved: PlanDocument,
    fresh: Sequence[Entry],
    findings: Sequence[Finding],
    job_of: Callable[[int], Job | None],
    excluded: Collection[str] = (),
    went_out: Mapping[Key, Sent] | None = None,
) -> tuple[list[Entry], dict[Key, str]]:
    """The saved entries in the plan's order: the fresh entry where the fresh audit plans
    it again, else the saved one, spared (the second value: why each is not sent).

    `findings` are the fresh audit's, `job_of` the fresh view's jobs, `excluded` the
    nodes -x leaves out of this run (matched by name, case and domain aside),
    `went_out` the journal's cancels already sent (a plan applied before).
    """
    planned: Mapping[Key, Entry] = {(e.node, e.job_id): e for e in fresh}
    reads = {(f.node, f.job_id): f for f in findings if f.job_id is not None}
    left_out = {loose_key(n) for n in excluded}
    entries: list[Entry] = []
    spared: dict[Key, str] = {}
    for p in saved.entries:
        saved_entry = Entry(p.finding, p.address, p.collected_at)
        key = (saved_entry.node, saved_entry.job_id)
        if key in planned:
            entries.append(planned[key])
            continue
        entries.append(saved_entry)
        if loose_key(key[0]) in left_out:
            spared[key] = f"not sent: -x leaves {key[0]} out of this run, so it was not audited"
        else:
            sent = (went_out or {}).get(key)
            spared[key] = _why_spared(key, reads.get(key), job_of(key[1]), sent)
    return entries, spared


def _why_spared(key: Key, now: Finding | None, job: Job | None, sent: Sent | None) -> str:
    """Why a saved entry the fresh audit no longer plans is not sent. A holding gone since
    a cancel the journal records (`sent`: a plan applied already) says so."""
    node, job_id = key
    if now is not None:
        return (
            "not sent: no longer reclaimable, the fresh audit reads it as "
            f"{now.kind.value}: {now.reason}"
        )
    if sent is not None:
        by = f"the run of {sent.at}, journal run {sent.run}" if sent.run else f"{sent.at}, journal"
        return f"not sent: no longer held (cancelled by {by}): {node} no longer holds job {job_id}"
    if job is not None:
        where = f"on {job.nodelist}" if job.nodelist else "with no nodelist yet"
        return (
            f"not sent: no longer reclaimable, job {job_id} is now {job.state.name} {where}, "
            f"and {node}'s holding of it is not a finding any more"
        )
    return (
        "not sent: no longer reclaimable, the fresh audit finds no holding of job "
        f"{job_id} on {node}"
    )
