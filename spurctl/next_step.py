"""A next step: a command for the operator to run, as data (docs/layout.md).

It imports nothing from spurctl: errors.py (a SpurctlError may carry one) and
model.py (which offers it beside the findings, where most of spurctl takes it
from) both stand on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NextStep:
    """A command for the operator to run next, as data: its argv and why to run it.

    decide/ and the use cases return these; only render/ makes text of them
    (render.common.command_line: shell-quoted, on a line of its own, never
    wrapped), so a printed command pastes into a shell as it was meant.
    `where`: the host it must run on when that is not the admin host (a node, for
    node-release), said beside it rather than folded into the command.
    """

    argv: tuple[str, ...]
    why: str = ""
    where: str | None = None

    @classmethod
    def spurctl(cls, *words: str, why: str = "", where: str | None = None) -> NextStep:
        return cls(("spurctl", *words), why, where)
