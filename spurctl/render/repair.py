"""`spurctl repair` as text and JSON: the plan, the prompt, each node's result.

Every line is one fact about one node, whole (never wrapped), so `grep gpu009`
finds it; text from the cluster (names, reasons) has its control characters
written out. The commands it prints are argv lists from the use case, quoted here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from spurctl.decide.reasons import duration, plural
from spurctl.decide.repair import Target, charge_text
from spurctl.errors import visible
from spurctl.model import NextStep, format_time
from spurctl.render.common import ReclaimFormat, command_line, dump_json, text_time, write_output
from spurctl.usecases.repair import Repaired, RepairPlan, Stage, Status

SCHEMA = "spurctl.repair/v1"
NOTHING_SENT = "nothing sent"


def _out(lines: Sequence[str], file: TextIO | None) -> None:
    stream = file or sys.stdout
    stream.write("".join(visible(line) + "\n" for line in lines))
    stream.flush()


def _steps(t: Target, plan: RepairPlan) -> str:
    if t.removed:
        return (
            f"its record was removed by repair run {t.resumes}: wait up to {duration(plan.wait_s)} "
            "for its spurd to register it again"
        )
    return (
        f"drain ({t.reason!r}), re-read after {duration(plan.tick_s)}, "
        f"DeregisterNode(force=false), wait up to {duration(plan.wait_s)} for its spurd to "
        "register it again"
    )


def _put_back(t: Target) -> str:
    """What goes back the moment the node is back (the hold first), then the judgement."""
    parts = []
    if t.hold is not None:
        parts.append(f"put back the {t.hold.state} {t.hold.reason!r}")
    if t.labels:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(t.labels.items()))
        parts.append(f"put back whichever of its labels {labels} the fresh record lacks")
    back = "; as soon as it is back " + " and ".join(parts) if parts else ""
    return f"{back}; then judge its charge"


def plan_lines(plan: RepairPlan) -> list[str]:
    n = len(plan.targets)
    lines = [
        f"Repair plan: {plural(n, 'node')} of {plan.nodes} (controller {plan.controller}, "
        f"view {text_time(plan.taken_at)})",
        f"Rejoin: {plan.rejoin}",
    ]
    for t in plan.targets:
        resumed = f" [takes up run {t.resumes}]" if t.resumes and not t.removed else ""
        charge = "" if t.removed else f"phantom allocation {charge_text(t.charge)}: "
        lines.append(f"  {t.node}  {charge}{_steps(t, plan)}{_put_back(t)}{resumed}")
    for r in plan.refusals:
        lines.append(f"  {r.node}  REFUSED: {r.why}")
    if plan.uncharged:
        lines.append(f"  no phantom charge, nothing to repair: {', '.join(plan.uncharged)}")
    return lines


def show_plan(plan: RepairPlan, fmt: str, file: TextIO | None = None) -> None:
    """The plan on stdout before anything is sent (the table; JSON prints it with the result)."""
    if fmt == ReclaimFormat.TABLE:
        _out(plan_lines(plan), file)


def question(plan: RepairPlan) -> str:
    names = ", ".join(t.node for t in plan.targets)
    return f"Drain, remove and wait for {plural(len(plan.targets), 'node')} ({names})?"


def step_text(step: NextStep) -> str:
    """The step as a line to paste (render.common.command_line), and why after it."""
    return f"{command_line(step)}   # {step.why}" if step.why else command_line(step)


def waiting(what: str) -> None:
    """What a repair waits for, said before the wait: one stderr line (on a terminal and
    in a log alike), so a minute's wait is never silent."""
    from spurctl.errors import note

    note(what)


def result_lines(done: Repaired) -> list[str]:
    if done.stage is Stage.PLANNED:
        lines = ["DRY RUN: nothing sent"]
        if done.apply is not None:
            lines += [f"{done.apply.why}:", f"  {command_line(done.apply)}"]
        return lines
    if done.stage is Stage.NOTHING:
        return ["Nothing to repair: nothing sent"]
    if done.stage is Stage.DECLINED:
        return [f"Declined: {NOTHING_SENT}"]
    counts = {s: sum(1 for r in done.results if r.status is s) for s in Status}
    lines = [
        f"Repair result: {counts[Status.REPAIRED] + counts[Status.LANDED]} repaired"
        + (f" ({counts[Status.LANDED]} with a job landed)" if counts[Status.LANDED] else "")
        + f", {counts[Status.REFUSED]} refused after the re-read, {counts[Status.FAILED]} failed, "
        f"{counts[Status.NOT_BACK]} not back"
        + (f", {counts[Status.INTERRUPTED]} interrupted" if counts[Status.INTERRUPTED] else "")
        + "."
    ]
    for r in done.results:
        lines.append(f"  {r.node}  {r.status.value}: {r.detail}")
        lines.extend(f"    {step_text(s)}" for s in r.next_steps)
    return lines


def document(done: Repaired) -> dict[str, Any]:
    plan = done.plan
    return {
        "schema": SCHEMA,
        "controller": {"address": plan.controller, "version": plan.controller_version},
        "taken_at": format_time(plan.taken_at),
        "nodes": plan.nodes,
        "rejoin": plan.rejoin,
        "dry_run": done.stage is Stage.PLANNED,
        "stage": done.stage.value,
        "plan": [
            {"node": t.node, "removed_already": t.removed, "resumes": t.resumes, **t.restore()}
            for t in plan.targets
        ],
        "refused": [{"node": r.node, "reason": r.why} for r in plan.refusals],
        "uncharged": plan.uncharged,
        "results": [
            {
                "node": r.node,
                "status": r.status.value,
                "detail": r.detail,
                "next": [
                    {"argv": list(s.argv), "where": s.where, "why": s.why} for s in r.next_steps
                ],
            }
            for r in done.results
        ],
        "exit_status": int(done.exit_status),
        "error": done.error,
        "settle": list(done.settle.argv) if done.settle is not None else None,
    }


def show(done: Repaired, fmt: str, output: Path | None, file: TextIO | None = None) -> None:
    """The result (and with `output`, the saved plan of a dry run: spurctl.repair-plan/v1)."""
    if output is not None:
        write_output(dump_json(done.plan.document()) + "\n", output)
    if fmt == ReclaimFormat.JSON:
        (file or sys.stdout).write(dump_json(document(done)) + "\n")
        return
    _out(result_lines(done), file)
    if done.error is not None:
        settle = f" `{command_line(done.settle)}`" if done.settle is not None else ""
        print(f"spurctl: {visible(done.error)}{settle}", file=sys.stderr)
