"""What `spurctl nodes` prints: one line per node (as `sinfo -N`), or JSON, or CSV.

The table is plain columns, one node per line, so that it greps and sorts; the
nodes of each agent status follow it as folded hostlists. Names and errors come
from the cluster: every control character in them is written out.
"""

from __future__ import annotations

import csv
import io
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from spurctl.decide.reasons import duration
from spurctl.errors import visible
from spurctl.hostlist import fold, is_node_name, ranges
from spurctl.model import format_time
from spurctl.render.common import (
    NOTE_LABEL,
    WARNING_LABEL,
    NodesFormat,
    choose,
    csv_safe,
    dump_json,
    same_version,
    text_time,
)
from spurctl.render.environment import Environment

if TYPE_CHECKING:
    from spurctl.usecases.nodes import NodeListing, NodeRow

SCHEMA = "spurctl.nodes/v1"
HEADERS = ("node", "state", "jobs", "held", "agent", "inv-age", "findings")
CSV_FIELDS = (
    "node", "state", "jobs", "held", "agent", "inventory_node", "inventory_age_s", "error",
    "findings", "reason", "reason_uid", "reason_since",
)  # fmt: skip
REASON_HEADERS = ("who", "when", "nodes")


def render(
    listing: NodeListing,
    fmt: NodesFormat | str,
    *,
    header: bool = True,
    ack: str | None = None,
    width: int | None = None,
) -> str:
    """The listing as `fmt`; `header` False (`--no-header`): the table's node lines alone.
    `ack`: the acknowledged controller version, whose note the table then leaves out;
    `width`: the terminal's, where the table is for eyes (None: every line whole)."""
    chosen = choose(NodesFormat, str(fmt), "nodes")
    if chosen is NodesFormat.JSON:
        return dump_json(document(listing)) + "\n"
    if chosen is NodesFormat.CSV:
        return _csv(listing)
    return _table(listing, header=header, ack=ack, width=width)


def show(
    listing: NodeListing,
    fmt: NodesFormat | str,
    env: Environment,
    *,
    header: bool = True,
    ack: str | None = None,
) -> None:
    """The listing on stdout as `fmt` (the table laid out for `env`); with `header` False
    its warnings go to stderr (as audit's: the version note is explain's and the JSON's)."""
    if not header:
        from spurctl.render.terminal import warn_lines

        warn_lines(n for n in listing.notes if n != listing.version_note)
    width = env.width if env.tty else None
    sys.stdout.write(render(listing, fmt, header=header, ack=ack, width=width))


def screen_notes(listing: NodeListing, ack: str | None = None) -> list[str]:
    """The notes as a screen shows them, each with its label: each warning in full, then
    the controller-version note in one line (its whole text is in `explain` and the JSON
    `notes`), none once that version is acknowledged (--ack-version, as audit's)."""
    out = [f"{WARNING_LABEL} {n}" for n in listing.notes if n != listing.version_note]
    if listing.version_line and not same_version(ack, listing.controller_version):
        out.append(f"{NOTE_LABEL} {listing.version_line}")
    return out


def hostlist_of(names: list[str]) -> str:
    """Names as one folded hostlist; a name no hostlist can hold is listed as it is."""
    foldable = [n for n in names if is_node_name(n)]
    odd = [n for n in names if not is_node_name(n)]
    return ",".join(([fold(foldable)] if foldable else []) + odd)


def _row_document(r: NodeRow) -> dict[str, Any]:
    return {
        "node": r.node,
        "state": r.state,
        "jobs": list(r.jobs),
        "held": None if r.held is None else list(r.held),
        "agent": r.agent.value,
        "inventory_node": r.inventory_node,
        "inventory_age_s": r.inventory_age_s,
        "error": r.error,
        "findings": {kind.value: n for kind, n in r.findings},
        "reason": r.reason,
        "reason_uid": r.reason_uid,
        "reason_since": None if r.reason_since is None else format_time(r.reason_since),
    }


def _filter(listing: NodeListing) -> dict[str, Any]:
    """The `filter` key when --state chose the rows (none otherwise)."""
    if not listing.states:
        return {}
    shown = len(listing.rows)
    hidden = (listing.total or shown) - shown
    states = [s.name.lower() for s in listing.states]
    return {"filter": {"states": states, "shown": shown, "hidden": hidden}}


def filter_line(listing: NodeListing) -> str | None:
    """The table's line saying --state chose the rows, or None."""
    if not listing.states:
        return None
    shown, total = len(listing.rows), listing.total or len(listing.rows)
    states = ",".join(s.name.lower() for s in listing.states)
    return f"Filter --state {states}: showing {shown} of {total} nodes."


def findings_cell(r: NodeRow) -> str:
    """The node's findings as one word: each kind, with its count when more than one."""
    return ",".join(k.value + (f"({n})" if n > 1 else "") for k, n in r.findings) or "-"


def document(listing: NodeListing) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "controller": {
            "cluster": listing.cluster,
            "address": listing.controller_address,
            "taken_at": format_time(listing.taken_at),
            "view_complete": listing.view_complete,
        },
        "notes": list(listing.notes),
        **_filter(listing),
        "nodes": [_row_document(r) for r in listing.rows],
        "summary": {
            "nodes": len(listing.rows),
            "by_agent": {s.value: hostlist_of(n) for s, n in listing.by_agent().items()},
        },
    }


def _text(r: NodeRow) -> str:
    """The row's last column, the one that may wrap: its findings, and the name its
    inventory reports when that is not the node's (a long name never widens the cells)."""
    named = f" (its inventory says {r.inventory_node})" if r.inventory_node else ""
    return visible(findings_cell(r) + named)


def _cells(r: NodeRow) -> tuple[str, ...]:
    agent = r.agent.value
    age = "-" if r.inventory_age_s is None else duration(max(r.inventory_age_s, 0.0))
    if r.inventory_age_s is not None and r.inventory_age_s < 0:
        age = f"{duration(-r.inventory_age_s)} ahead"
    return tuple(
        visible(c)
        for c in (
            r.node,
            "-" if r.state is None else r.state.lower(),
            ranges(r.jobs) or "-",
            "?" if r.held is None else ranges(r.held) or "-",
            agent,
            age,
        )
    )


def _table(
    listing: NodeListing, *, header: bool = True, ack: str | None = None, width: int | None = None
) -> str:
    """The one table style (render/table.py): a node per line, each cell whole; at a
    terminal's `width` too narrow for a row, each node's cells stacked under its name."""
    from spurctl.render.table import Row, Table

    # The findings are the text column: a long one (below-watermark-unknown, several kinds)
    # carries on under its row rather than stacking every row without headings.
    rows = [Row(_cells(r), _text(r)) for r in listing.rows]
    table = Table(HEADERS[:-1], rows, HEADERS[-1], short_text=True)
    if not header:
        return "".join(f"{line}\n" for line in table.whole_lines(heading=False))
    view = "complete" if listing.view_complete else "INCOMPLETE"
    cluster = f"Cluster {listing.cluster}: controller" if listing.cluster else "Controller"
    lines = [
        visible(
            f"{cluster} {listing.controller_address} at {text_time(listing.taken_at)} "
            f"({view} view): {len(listing.rows)} node{'s' if len(listing.rows) != 1 else ''}"
        )
    ]
    lines += [visible(n) for n in screen_notes(listing, ack)]
    chosen = filter_line(listing)
    if chosen is not None:
        lines.append(chosen)
    lines = _at_width(lines, width)
    if listing.rows:
        lines += table.whole_lines() if width is None else table.plain_lines(width)
    for status, names in listing.by_agent().items():
        lines.append(visible(f"{status.value} ({len(names):,}): {hostlist_of(names)}"))
    lines += _reasons(listing, width)
    return "\n".join(lines) + "\n"


def _reasons(listing: NodeListing, width: int | None) -> list[str]:
    """As sinfo -R: each reason a node is held out of service for, who set it and when,
    and its nodes; `-` where the controller or the journal does not say."""
    from spurctl.render.table import Row, Table

    grouped: dict[tuple[str, int | None, datetime | None], list[str]] = {}
    for r in listing.rows:
        if r.reason:
            grouped.setdefault((r.reason, r.reason_uid, r.reason_since), []).append(r.node)
    if not grouped:
        return []
    rows = [
        Row(
            (
                "-" if uid is None else f"uid {uid}",
                "-" if since is None else text_time(since),
                visible(hostlist_of(names)),
            ),
            visible(reason),
        )
        for (reason, uid, since), names in grouped.items()
    ]
    table = Table(REASON_HEADERS, rows, "reason")
    return ["", *(table.whole_lines() if width is None else table.plain_lines(width))]


def _at_width(lines: list[str], width: int | None) -> list[str]:
    """Sentences wrapped at a terminal's `width`, at spaces only (None: whole)."""
    if width is None:
        return lines
    import textwrap

    wrap = textwrap.TextWrapper(width, break_on_hyphens=False, break_long_words=False)
    return [part for line in lines for part in wrap.wrap(line) or [""]]


def _csv(listing: NodeListing) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in listing.rows:
        values = (
            r.node,
            r.state,
            " ".join(map(str, r.jobs)),
            None if r.held is None else " ".join(map(str, r.held)),
            r.agent.value,
            r.inventory_node,
            r.inventory_age_s,
            r.error,
            " ".join(f"{k.value}={n}" for k, n in r.findings),
            r.reason,
            r.reason_uid,
            None if r.reason_since is None else format_time(r.reason_since),
        )
        writer.writerow(["" if v is None else csv_safe(v) for v in values])
    return buf.getvalue()
