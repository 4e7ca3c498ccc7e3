"""drain's and resume's sends: each planned UpdateNode journaled and read back.

`send_changes` is a whole run of `spurctl drain`/`resume` (one call; its Journal holds
the journal's lock from the first record to the last, joining a caller's: re-entrant);
`change_node` is one node's call, shared with the autopilot, so both send through the
same guards (NodeAdmin: the node re-read right before the call, intent before, outcome
after). Whether a read-back shows the change is decide/drains.py's judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.decide.drains import NodeChange, shows_change
from spurctl.model import NodeState

if TYPE_CHECKING:
    from spurctl.act.node_admin import NodeAdmin
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.settings import Connection


@dataclass(slots=True)
class Sent:
    """What a run of drain's or resume's sends did."""

    # node -> (sent, detail); a node absent was not attempted.
    done: dict[str, tuple[bool, str]] = field(default_factory=dict)
    # The journal could not record a call: the run stopped there.
    error: str | None = None
    # Stopped by Ctrl-C (SIGTERM, SIGHUP) between two nodes: the rest not attempted.
    interrupted: bool = False


def send_changes(
    changes: Sequence[NodeChange], *, drain: bool, conn: Connection, journal_path: Path
) -> Sent:
    """Each change sent and journaled, in order, until the last, a stop or the journal's
    failure."""
    from spurctl.act.journal import Journal
    from spurctl.act.node_admin import ControllerWriter, JournalUnwritable, NodeAdmin
    from spurctl.act.stops import stops_deferred
    from spurctl.sources.controller import ControllerClient

    sent = Sent()
    try:
        # The Journal holds the journal's lock from its first record to its last.
        with (
            Journal(journal_path, conn) as journal,
            ControllerWriter(conn) as writer,
            ControllerClient(conn) as client,
        ):
            admin = NodeAdmin(writer, journal)
            try:
                for c in changes:
                    # A Ctrl-C lands between nodes: each call's outcome is journaled whole.
                    with stops_deferred():
                        try:
                            sent.done[c.node] = change_node(admin, client, drain, c)
                        except JournalUnwritable as exc:
                            if exc.sent:  # it went out: said, though its record is not
                                sent.done[c.node] = (True, "sent; the journal could not record it")
                            raise
            except KeyboardInterrupt:  # between two nodes (stops_deferred): say so
                sent.interrupted = True
    except JournalUnwritable as exc:
        sent.error = str(exc)
    return sent


def change_node(
    admin: NodeAdmin, client: ControllerClient, drain: bool, c: NodeChange
) -> tuple[bool, str]:
    """One node's UpdateNode (`drain`, else resume), journaled and read back: (sent, detail)."""
    from spurctl.act.node_admin import AdminCallFailed, ControllerWriter, NodeChanged, Step
    from spurctl.sources.node_records import read_node

    verb = "drain" if drain else "resume"

    def shows() -> bool:
        return shows_change(read_node(client, c.node), drain=drain, reason=c.reason)

    state = NodeState.DRAIN if drain else NodeState.IDLE
    words = f"state={state.name}" + (f", reason={c.reason!r}" if drain else "")
    step = Step(c.node, c.kind, verb, verb, f"UpdateNode({c.node}, {words})",
                {"reason": c.reason}, job_id=c.job_id)  # fmt: skip
    said = f"drained: {c.reason}" if drain else f"resumed: lifted {c.reason!r}"

    def send(w: ControllerWriter) -> None:
        w.update_node(c.node, state=state, reason=c.reason if drain else None)

    assert c.seen is not None  # drain_plan and resume_plan say what they saw
    try:
        # Sent only while the node is as the plan saw it: an admin may have drained it
        # (or lifted spurctl's) while the prompt was open.
        admin.send(step, send, said, confirm=shows, expect=c.seen)
    except NodeChanged as exc:
        return False, f"not sent: {exc.message}"
    except AdminCallFailed as exc:
        return False, exc.message
    return True, said
