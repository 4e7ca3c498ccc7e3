"""What the terminal is, found once at the edge and handed to every renderer.

Renderers never probe the terminal themselves and never read standard input: the
command layer builds one `Environment` (spurctl/commands/environment.py) and
passes it down, so a renderer's output depends only on what it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Environment:
    # Standard output is a terminal: tables for eyes, colour, live views.
    tty: bool = False
    # Its width in columns; None when stdout is no terminal (a pipe or a file gets
    # whole lines, one record each, for grep).
    width: int | None = None
    # Its height in lines (None: no terminal): a view redrawn in place fits in it.
    height: int | None = None
    # Standard error is a terminal: a progress bar may be drawn there.
    stderr_tty: bool = False
    # Colour may be used (a terminal, or FORCE_COLOR set; and NO_COLOR unset).
    colour: bool = False
    # The [y/N] prompt on the operator's terminal, or None when stdin is no terminal
    # (then nothing may be asked, and an action needs --yes).
    ask: Callable[[str], bool] | None = None
