"""What `spurctl checklist post-wipe` shows: Markdown to paste into an incident
document, or the `spurctl.checklist/v1` JSON document for scripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from spurctl import hostlist
from spurctl.decide.post_wipe import Checklist, Hazard, HeldId, NodeAssessment, Step
from spurctl.decide.reasons import plural
from spurctl.model import WatermarkSource, format_time
from spurctl.render.common import (
    NOTE_LABEL,
    ChecklistFormat,
    choose,
    command_line,
    dump_json,
    escaped,
    markdown_table,
    md_cell,
    note_label,
    report_header,
    same_version,
    spur_version,
    text_time,
    write_told,
)
from spurctl.render.environment import Environment

CHECKLIST_SCHEMA = "spurctl.checklist/v1"


def check_format(fmt: str) -> None:
    choose(ChecklistFormat, fmt, "checklist")


def _shown_nodes(cl: Checklist) -> list[NodeAssessment]:
    """The checklist's nodes with all they hold, and any other node needing a look."""
    a = cl.assessment
    wanted = set(cl.nodes) | set(a.nodes_undetermined) | set(a.nodes_not_inventoried)
    return [a.nodes[n] for n in sorted(wanted) if n in a.nodes]


# -- json ------------------------------------------------------------------------------


def _held_to_dict(h: HeldId) -> dict[str, Any]:
    return {
        "job_id": h.job_id,
        "hazard": h.hazard.value,
        "reason": h.reason,
        "started_at": format_time(h.started_at),
        "live": h.live,
        "controller_state": h.controller_state,
        "new_run_nodes": h.new_run_nodes,
        "submissions_until": h.submissions_until,
        # Why spurd adopts the run across restarts (a live spurstepd session), or null.
        "adopted": h.adopted,
    }


def _node_to_dict(n: NodeAssessment) -> dict[str, Any]:
    ctl = n.controller_node
    return {
        "node": n.node,
        "recycle": bool(n.hazards),
        "inventoried": n.inventoried,
        "error": n.error,
        "state": ctl.state.name if ctl else None,
        # The node's own spurd start (its inventory's `agent`): what proves a restart.
        "agent_start_time": format_time(n.agent.started_at) if n.agent else None,
        "agent_pid": n.agent.pid if n.agent else None,
        # The controller's NodeInfo.slurmd_start_time: set when the node record is made (a
        # crash restart keeps it, a graceful one before Spur #784 renews it). Never proof.
        "slurmd_start_time": format_time(ctl.agent_start_time) if ctl else None,
        "partitions": list(n.partitions),
        "held": [_held_to_dict(h) for h in n.held],
    }


def _step_to_dict(s: Step) -> dict[str, Any]:
    return {
        "id": s.id.value,
        "title": s.title,
        "done": s.done,
        "checkable": s.checkable,
        "nodes": list(s.nodes),
        "hostlist": hostlist.fold(s.nodes),
        # One line a shell runs as is; the commands of a step run in order.
        "command": " && ".join(command_line(c) for c in s.commands if c.argv),
        "detail": s.detail,
    }


def checklist_document(cl: Checklist) -> dict[str, Any]:
    """The `spurctl.checklist/v1` document."""
    a = cl.assessment
    return {
        "schema": CHECKLIST_SCHEMA,
        "mode": "verify" if cl.verify else "plan",
        "ok": cl.ok,
        **report_header(a),
        "nodes_to_recycle": a.nodes_to_recycle,
        "nodes_not_inventoried": a.nodes_not_inventoried,
        "nodes_undetermined": a.nodes_undetermined,
        "steps": [_step_to_dict(s) for s in cl.steps],
        "nodes": [_node_to_dict(n) for n in _shown_nodes(cl)],
    }


# -- markdown --------------------------------------------------------------------------


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def _watermark_line(cl: Checklist) -> str:
    w = cl.assessment.watermark
    if w.source is WatermarkSource.FLAG:
        how = "given with --watermark"
    else:
        how = (
            "estimated: max tracked id + 1 and at least first_job_id, a lower bound of the "
            "controller's next id"
        )
    return f"watermark {w.value} ({how})"


def _summary(cl: Checklist) -> str:
    a = cl.assessment
    if cl.verify:
        checkable = [s for s in cl.steps if s.checkable]
        done = sum(1 for s in checkable if s.done)
        head = (
            f"**Verify pass over {hostlist.fold(cl.nodes)}: {done} of {len(checkable)} "
            "checkable steps done.**"
        )
        if cl.ok:
            return head + " Confirm the steps marked *by hand*, then submissions may resume."
        return head + " Do not resume submissions yet."
    recycle = a.nodes_to_recycle
    if not recycle:
        return "**No node in scope holds a pre-wipe id: nothing to recycle.**"
    return (
        f"**{len(recycle)} node{'s' if len(recycle) != 1 else ''} to recycle: "
        f"{hostlist.fold(recycle)}.** Do not resume submissions until every box is ticked."
    )


def _step_lines(s: Step) -> list[str]:
    box = "[x]" if s.done else "[ ]"
    by_hand = "" if s.checkable else " *(by hand)*"
    lines = [f"- {box} **{s.title}**{by_hand}: {s.detail}"]
    if s.commands:
        lines += ["", "  ```sh", *(f"  {command_line(c)}" for c in s.commands), "  ```", ""]
    return lines


def _started(h: HeldId) -> str:
    return text_time(h.started_at) if h.started_at is not None else "unknown"


def _held_items(shown: list[NodeAssessment]) -> list[str]:
    """The held ids as list items, for a screen: a table of six columns at 80 has no room
    for the reasons, and rich would cut the hazards short."""
    items = []
    for n in shown:
        for h in n.held:
            hazard = f"**{h.hazard.value}**" if h.hazard is not Hazard.HEALTHY else "healthy"
            items.append(
                f"- {_code(n.node)} job {h.job_id}: {hazard}, live {'yes' if h.live else 'no'}, "
                f"started {_started(h)}: {md_cell(h.reason)}"
            )
    return items


def render_markdown(cl: Checklist, *, screen: bool = False, ack: str | None = None) -> str:
    """The checklist as Markdown; `screen`: for print_on_terminal, the held ids as a list,
    not a table, and the controller-version note in one line, none when `ack` is that
    version (a document keeps the note whole, as the JSON does)."""
    a = cl.assessment
    version = f" ({spur_version(a.controller_version)})"
    taken = text_time(a.taken_at)
    lines = [
        "# Post-wipe agent recycle checklist",
        "",
        f"{f'Cluster {a.cluster}: controller' if a.cluster else 'Controller'} "
        f"{a.controller_address}{version}, read {taken}; {_watermark_line(cl)}.",
        "",
    ]
    for note in a.notes:
        if note == a.version_note and screen:  # one line on a screen, as every screen's
            if not same_version(ack, a.controller_version):
                lines += [f"> **{NOTE_LABEL}** {a.version_line or note}", ""]
        else:  # a document keeps it whole, as audit's Markdown and the JSON notes do
            lines += [f"> **{note_label(note, a.version_note)}** {note}", ""]
    lines += [_summary(cl), ""]
    if a.nodes_not_inventoried:
        assert cl.recollect is not None
        collect = command_line(cl.recollect)
        lines += [
            f"**Not inventoried ({len(a.nodes_not_inventoried)}):** what these hold is unknown; "
            f"inventory them ({_code(collect)}) and run the checklist again:",
            "",
        ]
        by_error: dict[str, list[str]] = {}
        for name in a.nodes_not_inventoried:
            by_error.setdefault(a.nodes[name].error or "", []).append(name)
        lines += [
            f"- {_code(hostlist.fold(names))}: {md_cell(error)}"
            for error, names in sorted(by_error.items())
        ]
        lines.append("")
    if cl.steps:
        lines += ["## Steps", ""]
        for s in cl.steps:
            lines += _step_lines(s)
        if lines[-1] != "":
            lines.append("")
    shown = [n for n in _shown_nodes(cl) if n.held]
    if shown and screen:
        lines += ["## Held ids", "", *_held_items(shown), ""]
    elif shown:
        rows = [
            [
                n.node,
                str(h.job_id),
                f"**{h.hazard.value}**" if h.hazard is not Hazard.HEALTHY else "healthy",
                "yes" if h.live else "no",
                _started(h),
                h.reason,
            ]
            for n in shown
            for h in n.held
        ]
        # Rows unpadded, as this table always printed them: `| gpu003 | 23 | ...`.
        table = markdown_table(
            ["node", "job", "hazard", "live", "started", "why"], rows, padded=False
        )
        lines += ["## Held ids", "", table, ""]
    return "\n".join(lines)


def render(cl: Checklist, fmt: ChecklistFormat | str) -> str:
    """The checklist as text in `fmt`, ending in a newline."""
    if choose(ChecklistFormat, fmt, "checklist") is ChecklistFormat.JSON:
        return dump_json(checklist_document(cl)) + "\n"
    return render_markdown(escaped(cl))


def print_on_terminal(
    cl: Checklist, env: Environment, file: TextIO | None = None, ack: str | None = None
) -> None:
    """The checklist's Markdown rendered for the terminal `env` describes, wrapped at its
    width (rich)."""
    from rich.markdown import Markdown
    from rich.text import Text

    from spurctl.render.audit import terminal_console

    console = terminal_console(file, env)
    text = render_markdown(escaped(cl), screen=True, ack=ack)
    # The prose wraps at the terminal's width; a step's commands never do (a command
    # broken over two lines does not paste): each is one line, soft-wrapped at most.
    prose: list[str] = []
    commands: list[str] | None = None
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if commands is None:  # a block opens: the prose so far goes first
                console.print(Markdown("\n".join(prose), hyperlinks=False))
                prose, commands = [], []
            else:
                for command in commands:
                    console.print(Text("    " + command), soft_wrap=True)
                commands = None
        elif commands is not None:
            commands.append(line.strip())
        else:
            prose.append(line)
    console.print(Markdown("\n".join(prose), hyperlinks=False))


def show(
    cl: Checklist,
    fmt: ChecklistFormat | str,
    output: Path | None,
    env: Environment,
    *,
    on_screen: bool,
    ack: str | None = None,
) -> None:
    """For eyes (`on_screen`), the rendered text; else the document as `fmt` to `output`
    (stdout when None)."""
    if on_screen:
        print_on_terminal(cl, env, ack=ack)
    else:
        chosen = choose(ChecklistFormat, fmt, "checklist")
        recycle = plural(len(cl.assessment.nodes_to_recycle), "node")
        what = f"the post-wipe checklist ({chosen}, {recycle} to recycle)"
        write_told(render(cl, fmt), output, what)
