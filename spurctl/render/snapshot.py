"""What `spurctl snapshot` says on stderr once the snapshot is saved."""

from __future__ import annotations

from pathlib import Path

from spurctl.decide.reasons import plural
from spurctl.model import ControllerView


def saved_sentence(view: ControllerView, output: Path) -> str:
    """How much was saved, from where, and whether the view was whole."""
    state = "complete" if view.complete else f"INCOMPLETE ({len(view.jobs)} of {view.jobs_total})"
    return (
        f"saved {plural(len(view.jobs), 'job')} and {plural(len(view.nodes), 'node')} "
        f"from {view.address} "
        f"(view {state}) to {output}"
    )
