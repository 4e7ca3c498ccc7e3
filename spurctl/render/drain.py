"""`spurctl drain` and `spurctl resume` as text and JSON: the plan, the prompt, the result.

One line per node, whole; text from the cluster has its control characters written out.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from spurctl.decide.lost_reason import LOST_KIND
from spurctl.decide.reasons import plural
from spurctl.errors import visible
from spurctl.model import NodeState
from spurctl.render.common import ReclaimFormat, command_line, dump_json
from spurctl.usecases.drain import Changed, DrainPlan, Verb

SCHEMA = "spurctl.node-changes/v1"
NOTHING_SENT = "nothing sent"


def _out(lines: list[str], file: TextIO | None) -> None:
    stream = file or sys.stdout
    stream.write("".join(visible(line) + "\n" for line in lines))
    stream.flush()


def plan_lines(plan: DrainPlan) -> list[str]:
    verb = "Drain" if plan.verb is Verb.DRAIN else "Resume"
    lines = [
        f"{verb} plan: {plural(len(plan.changes), 'node')} of {plan.nodes} "
        f"(controller {plan.controller})"
    ]
    for c in plan.changes:
        if plan.verb is Verb.DRAIN:
            lines.append(f"  {c.node}  UpdateNode(state=DRAIN, reason={c.reason!r})")
        elif c.kind == LOST_KIND:
            lines.append(
                f"  {c.node}  UpdateNode(state=IDLE): lifts the DOWN 'Not responding' that "
                f"replaced spurctl's {c.reason!r}, its audit is clean and its spurd runs"
            )
        else:
            down = c.seen is not None and NodeState.DOWN in c.seen.states
            also = " and its spurd runs (DOWN since its heartbeat was lost)" if down else ""
            lines.append(
                f"  {c.node}  UpdateNode(state=IDLE): lifts {c.reason!r}, its audit is clean{also}"
            )
    lines.extend(f"  {left.node}  {left.why}" for left in plan.left)
    return lines


def show_plan(plan: DrainPlan, fmt: str, file: TextIO | None = None) -> None:
    if fmt == ReclaimFormat.TABLE:
        _out(plan_lines(plan), file)


def question(plan: DrainPlan) -> str:
    names = ", ".join(c.node for c in plan.changes)
    return f"{plan.verb.value.title()} {plural(len(plan.changes), 'node')} ({names})?"


def result_lines(done: Changed) -> list[str]:
    if done.dry_run:
        lines = ["DRY RUN: nothing sent"]
        if done.apply is not None:
            lines += [f"{done.apply.why}:", f"  {command_line(done.apply)}"]
        return lines
    if done.declined:
        return [f"Declined: {NOTHING_SENT}"]
    if not done.plan.changes:
        return [f"Nothing to {done.plan.verb.value}: nothing sent"]
    ok = sum(1 for sent, _ in done.done.values() if sent)
    past = "drained" if done.plan.verb is Verb.DRAIN else "resumed"
    rest = [c.node for c in done.plan.changes if c.node not in done.done]
    stopped = f", {len(rest)} not attempted (interrupted)" if done.interrupted else ""
    lines = [f"Result: {ok} {past}, {len(done.done) - ok} failed{stopped}."]
    lines.extend(
        f"  {node}  {'sent' if sent else 'failed'}: {detail}"
        for node, (sent, detail) in done.done.items()
    )
    if done.interrupted:
        lines.extend(f"  {node}  not attempted: interrupted before it" for node in rest)
    return lines


def document(done: Changed) -> dict[str, Any]:
    plan = done.plan
    return {
        "schema": SCHEMA,
        "command": plan.verb.value,
        "controller": plan.controller,
        "nodes": plan.nodes,
        "dry_run": done.dry_run,
        "plan": [{"node": c.node, "reason": c.reason, "kind": c.kind} for c in plan.changes],
        "left": [{"node": left.node, "why": left.why, "kept": left.kept} for left in plan.left],
        "results": [
            {"node": node, "result": "sent" if sent else "failed", "detail": detail}
            for node, (sent, detail) in done.done.items()
        ],
        "interrupted": done.interrupted,
        "not_attempted": [c.node for c in plan.changes if c.node not in done.done]
        if done.interrupted
        else [],
        "exit_status": int(done.exit_status),
        "error": done.error,
    }


def show(done: Changed, fmt: str, file: TextIO | None = None) -> None:
    if fmt == ReclaimFormat.JSON:
        (file or sys.stdout).write(dump_json(document(done)) + "\n")
        return
    _out(result_lines(done), file)
    if done.error is not None:
        print(f"spurctl: {visible(done.error)}", file=sys.stderr)
