"""What `spurctl snapshot` writes: the document, and on stderr what was saved."""

from __future__ import annotations

import sys
from pathlib import Path

from spurctl.decide.reasons import plural
from spurctl.model import ControllerView
from spurctl.render.common import write_output


def saved_sentence(view: ControllerView, output: Path) -> str:
    """How much was saved, from where, and whether the view was whole."""
    state = "complete" if view.complete else f"INCOMPLETE ({len(view.jobs)} of {view.jobs_total})"
    return (
        f"saved {plural(len(view.jobs), 'job')} and {plural(len(view.nodes), 'node')} "
        f"from {view.address} "
        f"(view {state}) to {output}"
    )


def show_saved(taken: tuple[ControllerView, str], output: Path) -> None:
    """The snapshot document (`taken`: the view and its encoded document) written to
    `output` whole, then one stderr line saying what it holds."""
    view, document = taken
    write_output(document, output)
    print(saved_sentence(view, output), file=sys.stderr)
