"""`spurctl explain` as text (kubectl describe style) or its spurctl.explain/v1 JSON."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from spurctl.decide.reasons import id_ranges
from spurctl.decide.supervision import step_name
from spurctl.model import parse_time
from spurctl.render.common import escaped, same_version, text_time
from spurctl.render.environment import Environment

_WATERMARK_FROM = {
    "flag": "given with --watermark",
    "estimated": "estimated: the highest job id the controller tracks, plus one",
    "snapshot": "saved with the snapshot",
}


def _kv(label: str, value: object, indent: int = 2) -> str:
    return f"{' ' * indent}{label + ':':<{17 - indent}} {value}"


def _or(value: object, default: str = "-") -> object:
    return default if value in (None, "", []) else value


def _t(value: str | None, default: str = "-") -> str:
    """An RFC 3339 time from the document as every screen says a time:
    `2026-12-02 14:47 UTC` (render.common.text_time; the JSON keeps the second)."""
    if value is None:
        return default
    parsed = parse_time(value)
    assert parsed is not None
    return text_time(parsed)


def _job(job: dict[str, Any]) -> list[str]:
    return [
        _kv(
            "State", job["state"] + (f" ({job['state_reason']})" if job["state_reason"] else ""), 4
        ),
        _kv("Nodelist", _or(job["nodelist"]), 4),
        _kv("Submitted", _t(job["submit_time"]), 4),
        _kv("Started", _t(job["start_time"]), 4),
        _kv("Ended", _t(job["end_time"]), 4),
    ]


def _controller_record(record: dict[str, Any]) -> list[str]:
    if record["job"] is not None:
        return [f"  Controller (from {record['source']}):", *_job(record["job"])]
    if record["tracked"] is False:
        return [f"  Controller:     does not track it ({record['proof']})"]
    why = record.get("unproven") or record.get("proof") or "unknown"
    return [f"  Controller:     unknown whether it tracks it: {why}"]


def _sessions(ev: dict[str, Any]) -> list[str]:
    """The holding's spurstepd sessions (Spur #754) and the refused ones, one line each."""
    lines = []
    for s in ev.get("sessions", []):
        step = step_name(s["step"])
        what = f"attempt {s['attempt']} step {step}: spurstepd pid {s['supervisor']} {s['binding']}"
        if s.get("workload") is not None:
            what += f", workload pid {s['workload']}"
        if s.get("why"):
            what += f" ({s['why']})"
        lines.append(_kv("Session", what, 4))
    refused = ev.get("session_refusals", [])
    lines += [_kv("Refused", f"{r['why']} ({r['path']})", 4) for r in refused]
    return lines


def render_text(doc: dict[str, Any]) -> str:
    lines = [f"Node:             {doc['node']}"]
    node = doc["controller_node"]
    if node is None:
        lines.append("Controller node:  none (the controller has no node by this name)")
    else:
        a = node["alloc"]
        state = node["state"] + (f" ({node['state_reason']})" if node["state_reason"] else "")
        lines += [
            f"Controller node:  {node['name']}",
            _kv("State", state),
            _kv("Allocated", f"{a['cpus']} CPUs, {a['memory_mb']} MB, {a['gpus']} GPUs"),
            _kv("Agent started", _t(node["agent_start_time"])),
        ]
        if node.get("cause"):
            lines.append(_kv("Cause", node["cause"]))
    c = doc["controller"]
    view = "complete" if c["view_complete"] else "INCOMPLETE"
    cluster = f"cluster {c['cluster']}, " if c.get("cluster") else ""
    lines.append(f"Controller view:  {cluster}{c['address']} at {_t(c['taken_at'])} ({view})")
    wm = doc["watermark"]
    lines.append(
        f"Watermark:        {wm['value']} ({_WATERMARK_FROM.get(wm['source'], wm['source'])})"
    )
    inv = doc["inventory"]
    if inv is None:
        lines.append("Inventory:        none speaks for this node (what it holds is unknown)")
    else:
        age_s = inv["age_s"]
        age = (
            ""
            if age_s is None
            else f", {age_s:.0f} s before the view"
            if age_s >= 0
            else f", {-age_s:.0f} s after the view"
        )
        stale = " STALE" if inv["stale"] else ""
        if inv.get("clock_ahead_s") is not None:
            stale += f" CLOCK AHEAD ({inv['clock_ahead_s']:.0f} s after this audit's clock)"
        agent = inv["agent"]
        hostname = str(_or(inv["hostname"]))
        if inv.get("hostname_given"):
            hostname += f" (the host's own name; node-inventory was given --hostname {inv['node']})"
        lines += [
            f"Inventory:        {inv['node']} ({inv['source']})",
            _kv("Hostname", hostname),
            _kv("Target node", _or(inv["target_node"])),
            _kv("Collected", f"{_t(inv['collected_at'])}{age}{stale}"),
            _kv(
                "Agent",
                "NOT RUNNING (the scan found no spurd)"
                if inv.get("agent_not_running")
                else "-"
                if agent is None
                else f"pid {agent['pid']}, started {_t(agent['started_at'])}",
            ),
            _kv("Holds", ", ".join(str(j) for j in inv["held"]) or "nothing"),
        ]
        if inv["error"]:
            lines.append(_kv("Error", inv["error"]))
    job = doc.get("job")
    if job is None:
        lines.append("Findings:" if doc["findings"] else "Findings:         none")
        for f in doc["findings"]:
            j = "-" if f["job_id"] is None else f["job_id"]
            lines.append(f"  {j:<7} {f['kind']:<24} {f['action']:<11} {f['reason']}")
    else:
        lines.append(f"Job:              {job['job_id']}")
        if not job["held"]:
            lines.append(f"  Held here:      no ({doc['node']}'s inventory does not hold it)")
        lines += _controller_record(job["controller"])
        if job["held"]:
            ev = job["evidence"]
            attempt = "" if ev["attempt"] is None else f", attempt {ev['attempt']}"
            lines += [
                "  Evidence:",
                _kv("Traces", (", ".join(ev["traces"]) or "-") + attempt, 4),
                _kv(
                    "Pids",
                    f"{len(ev['pids'])} live: {id_ranges(ev['pids'])}"
                    if ev["pids"]
                    else "none live",
                    4,
                ),
                _kv("GPUs", id_ranges(ev["gpus"]) or "-", 4),
                _kv("Started at", _t(ev["started_at"], "not recorded"), 4),
                *_sessions(ev),
            ]
            arm = job["arm"]
            judged = f" (judged as {arm['judged_as']})" if arm.get("judged_as") else ""
            lines.append(f"  Predicate:      Spur's {arm['text']}{judged}")
            if job["guards"]:
                lines.append("  Guards:")
                lines += [f"    {g['guard']}: {g['detail']}" for g in job["guards"]]
            else:
                lines.append("  Guards:         none")
            f = job["finding"]
            if f is not None:
                lines += [
                    f"  Finding:        {f['kind']} -> {f['action']}",
                    _kv("Reason", f["reason"]),
                ]
            r = job["reclaim"]
            if r["send"]:
                lines += [
                    f"  Reclaim sends:  {r['request']} to {r['endpoint']} ({r['endpoint_from']})",
                    _kv("Re-check", r["recheck"]),
                ]
            else:
                lines.append(f"  Reclaim sends:  nothing: {r['why']}")
    if doc.get("next_steps"):
        from spurctl.model import NextStep
        from spurctl.render.common import command_line

        lines.append("Next:")
        for step in doc["next_steps"]:
            command = command_line(NextStep(tuple(step["argv"])))
            lines += [f"  - {step['why']}:", f"{_COMMAND_INDENT}{command}"]
    if doc["notes"]:
        lines.append("Notes:")
        lines += [f"  - {n}" for n in doc["notes"]]
    if doc.get("cannot_see"):
        lines.append("What no inventory shows:")
        lines += [f"  - {n}" for n in doc["cannot_see"]]
    return "\n".join(lines) + "\n"


# A next step's command, the only lines indented so: never wrapped (it must paste whole).
_COMMAND_INDENT = " " * 6
_VALUE_COLUMN = 18  # where `Label:` lines put their value (_kv)
_LABELLED = re.compile(r"^ *[A-Z][^:]*: +")
_BULLET = re.compile(r"^ *(?:- |\S+ {2,})")


def _hanging(line: str) -> int:
    """Where a wrapped line's continuation starts: under its value (`Reason:  ...`), its
    bullet's text (`  - ...`), or two past its own indent."""
    labelled = _LABELLED.match(line)
    if labelled and labelled.end() == _VALUE_COLUMN:
        return _VALUE_COLUMN
    bullet = _BULLET.match(line)
    if bullet and line.lstrip().startswith("- "):
        return bullet.end()
    return len(line) - len(line.lstrip(" ")) + 2


def wrapped(text: str, width: int) -> str:
    """Each line of `text` wrapped at `width` between words, never inside one (a hostlist,
    an address or a command word longer than the line stays whole), its continuation
    lines indented under where its value starts."""
    import textwrap

    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width or (
            line.startswith(_COMMAND_INDENT) and not line[len(_COMMAND_INDENT)].isspace()
        ):
            out.append(line)
            continue
        indent = _hanging(line)
        if indent >= width // 2:
            indent = 4
        out += textwrap.wrap(
            line,
            width,
            subsequent_indent=" " * indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
    return "\n".join(out) + "\n"


def render(doc: dict[str, Any], fmt: str, width: int | None = None, ack: str | None = None) -> str:
    """The document as `fmt`; the text wrapped at `width` (a terminal's), else one line
    per fact, as long as it is (for a pipe, grep and a file). `ack`: the acknowledged
    controller version, whose note the text then leaves out (JSON keeps every note)."""
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    text = render_text(escaped({**doc, "notes": _screen_notes(doc, ack)}))
    return text if width is None else wrapped(text, width)


def _screen_notes(doc: dict[str, Any], ack: str | None) -> list[str]:
    """The notes as the text shows them: the controller-version note in its short form, as
    every screen gives it (what it means, how to hide it: releases.spur_version_line; the
    JSON keeps it whole), or left out once the operator acknowledged that version."""
    from spurctl.releases import spur_version_line, spur_version_note

    version = doc["controller"].get("version") or ""
    note = spur_version_note(version)
    if note is None or note not in doc["notes"]:
        return list(doc["notes"])
    if same_version(ack, version):
        return [n for n in doc["notes"] if n != note]
    line = spur_version_line(version) or note
    return [line if n == note else n for n in doc["notes"]]


def show(doc: dict[str, Any], fmt: str, env: Environment, ack: str | None = None) -> None:
    """The document on stdout as `fmt`, wrapped at the terminal's width when there is one;
    `ack` as for render."""
    sys.stdout.write(render(doc, fmt, width=env.width, ack=ack))
