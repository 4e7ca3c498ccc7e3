"""`spurctl autopilot`'s output: one JSON line per round (stdout), a short human line
(stderr, on a terminal), and the metrics for node_exporter's textfile collector."""

from __future__ import annotations

import json
from typing import Any

from spurctl.errors import redact, visible
from spurctl.model import format_time
from spurctl.render.node_admin_metrics import _family, _label
from spurctl.usecases.autopilot import RoundReport

SCHEMA = "spurctl.autopilot/v1"
ACTIONS = ("reclaim", "drain", "resume", "repair")
RESULTS = ("sent", "failed", "skipped", "would-send", "owed", "interrupted")
BUDGETS = ("max-actions", "max-unavailable")


def document(r: RoundReport) -> dict[str, Any]:
    by_action: dict[str, dict[str, int]] = {}
    for d in r.actions:
        results = by_action.setdefault(d.act, {})
        results[d.result] = results.get(d.result, 0) + 1
    calls = [
        {"action": d.act, "node": d.node, "job_id": d.job_id or None, "kind": d.kind,
         "result": d.result, "detail": d.detail}
        for d in r.actions
    ]  # fmt: skip
    return {
        "schema": SCHEMA,
        "round": r.round,
        "started_at": format_time(r.started_at.replace(microsecond=0)),
        "took_s": round(r.took_s, 3),
        "state": r.state.value,
        "why": r.why,
        "findings": r.findings,
        "nodes": {"audited": r.nodes_audited, "needing_action": r.nodes_needing_action},
        "actions": by_action,
        # The calls themselves; in a dry run, what it would send.
        ("would_send" if r.state.value == "dry-run" else "calls"): calls,
        "waiting": r.waiting,
        # Nodes needing a person, and why (a phantom charge without --repair, a refusal).
        "left_to_person": [{"node": n, "why": w} for n, w in sorted(r.to_person.items())],
        "budgets_left": r.budgets,
        "breaker": {"open": r.breaker.open, "calm_rounds": r.breaker.calm},
        "settled": r.settled,
    }


def json_line(r: RoundReport) -> str:
    # json.dumps escapes every control character a cluster name may carry.
    return redact(json.dumps(document(r), sort_keys=False)) + "\n"


def human_line(r: RoundReport) -> str:
    sent = sum(1 for d in r.actions if d.result == "sent")
    failed = sum(1 for d in r.actions if d.result == "failed")
    would = sum(1 for d in r.actions if d.result == "would-send")
    waiting = sum(r.waiting.values())
    findings = sum(r.findings.values())
    parts = [f"round {r.round} {r.state.value}", f"{findings} findings"]
    if would:
        parts.append(f"{would} would be sent")
    else:
        parts.append(f"{sent} sent" + (f", {failed} failed" if failed else ""))
    if waiting:
        parts.append(f"{waiting} waiting")
    line = "spurctl autopilot: " + ", ".join(parts)
    if r.why:
        line += f" ({r.why[0]})"
    return visible(redact(line)) + "\n"


def metrics(r: RoundReport) -> str:
    """The textfile collector's file: every action and result a series (0 when none)."""
    actions = [
        (f'{{action="{a}",result="{res}"}}', float(r.actions_total.get((a, res), 0)))
        for a in ACTIONS
        for res in RESULTS
    ]
    findings = [(f'{{kind="{_label(k)}"}}', float(n)) for k, n in sorted(r.findings.items())]
    # A budget the round could not count (no view) is left out, never said to be spent.
    budgets = [(f'{{budget="{b}"}}', float(r.budgets[b])) for b in BUDGETS if b in r.budgets]
    lines = [
        *_family("autopilot_rounds_total", "counter", "Rounds since the autopilot started.",
                 [("", float(r.rounds_total))]),
        *_family("autopilot_actions_total", "counter",
                 "Calls the autopilot made since it started, by action and result.", actions),
        *_family("autopilot_findings", "gauge", "The last round's findings by kind.", findings),
        *_family("autopilot_breaker_open", "gauge",
                 "1 while the breaker is open: the autopilot acts on nothing.",
                 [("", 1.0 if r.breaker.open else 0.0)]),
        *_family("autopilot_paused", "gauge", "1 while the pause file exists.",
                 [("", 1.0 if r.paused else 0.0)]),
        *_family("autopilot_nodes_drain_reason_lost", "gauge",
                 "Nodes in scope that spurctl drained and Spur v0.8.0 then marked DOWN 'Not "
                 "responding', locked: left to a person (spurctl resume --lost-reason).",
                 [("", float(r.reason_lost))]),
        *_family("autopilot_budget_remaining", "gauge",
                 "What is left of each budget after the last round.", budgets),
        *_family("autopilot_last_round_timestamp_seconds", "gauge",
                 "When the last round started (Unix time).",
                 [("", float(int(r.started_at.timestamp())))]),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"
