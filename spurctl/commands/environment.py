"""The terminal, probed once per command: the Environment every renderer is handed,
and the one prompt spurctl asks on it."""

from __future__ import annotations

import os
import shutil
import sys

from spurctl.errors import Aborted
from spurctl.render.environment import Environment


def detect() -> Environment:
    """The standard streams as they are now (COLUMNS and LINES first for the size, as rich
    reads them)."""
    tty = sys.stdout.isatty()
    size = shutil.get_terminal_size() if tty else None
    return Environment(
        tty=tty,
        width=None if size is None else size.columns,
        height=None if size is None else size.lines,
        stderr_tty=sys.stderr.isatty(),
        # FORCE_COLOR colours what goes down a pipe (`| less -R`); NO_COLOR wins over it.
        colour=(tty or bool(os.environ.get("FORCE_COLOR"))) and not os.environ.get("NO_COLOR"),
        ask=confirm if sys.stdin.isatty() else None,
    )


def confirm(question: str) -> bool:
    """Ask on the terminal, default no; Ctrl-C at any moment aborts.

    Not input(): a Ctrl-C landing after the prompt is written but before
    input() blocks in read() is only acted on at the next signal, so the
    process would sit at the prompt. Waiting in short select() slices returns
    to Python often enough to act on it.
    """
    import select

    try:
        sys.stdout.write(f"{question} [y/N]: ")
        sys.stdout.flush()
        while not select.select([sys.stdin], [], [], 0.1)[0]:
            pass
        answer = sys.stdin.readline(4096)  # an answer is a word: no line without end
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        raise Aborted("nothing sent") from None
    if not answer:  # end of input: nobody said yes
        sys.stdout.write("\n")
        return False
    return answer.strip().lower() in ("y", "yes")
