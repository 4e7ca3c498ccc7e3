r"""A command to paste, drawn on a terminal narrower than it: never cut.

On one line wherever it fits. Where it does not, a live view cannot leave it to the
terminal to fold (the view is redrawn in place by counting its lines), so it is broken
where a shell joins it back: between two words, the line ending in ` \\` (a line
continuation); inside a word longer than a line, the word is quoted piece by piece,
each line ending in `\\` right after its piece, and the next piece starts its line
(no indent: the shell drops the backslash and the line break and reads the pieces as
one word). Pasted into sh, bash or zsh, the lines are the one command.
"""

from __future__ import annotations

import shlex

from spurctl.errors import visible
from spurctl.next_step import NextStep
from spurctl.render.common import command_line
from spurctl.render.table import cell_len

# A continuation line's indent, under the command's first word.
_INDENT = "  "
# The narrowest line a command is broken for: a piece of a word, quoted, and its `\`.
_NARROWEST = 12


def command_lines(step: NextStep, width: int | None) -> list[str]:
    """`step` as render.common.command_line writes it, on as many lines of at most
    `width` columns as it needs (None: one line, however long), every word whole or
    split where the shell joins it again; nothing is ever left out."""
    whole = command_line(step)
    if width is None or not step.argv or cell_len(whole) <= width:
        return [whole]
    words = step.argv if step.where is None else ("ssh", step.where, shlex.join(step.argv))
    width = max(width, _NARROWEST)
    lines: list[str] = []
    line = ""
    for word in words:
        quoted = visible(shlex.quote(word))
        spaced = f"{line} {quoted}" if line.strip() else line + quoted
        if cell_len(spaced) + 2 <= width:  # room for its ` \` too
            line = spaced
            continue
        if line.strip():
            lines.append(f"{line} \\")
            line = _INDENT
        if cell_len(line + quoted) + 2 <= width:
            line += quoted
            continue
        # Longer than a line: quoted in pieces, each joined to the next by `\`.
        pieces = _pieces(word, width - cell_len(line) - 2, width - 2)
        lines.append(line + pieces[0] + "\\")
        lines += [piece + "\\" for piece in pieces[1:-1]]
        line = pieces[-1]
    lines.append(line)
    return lines


def _pieces(word: str, first: int, rest: int) -> list[str]:
    r"""`word` cut into pieces, each quoted for the shell on its own (in at most `first`
    columns for the first piece, `rest` for the others, at least one character each:
    each leaves its line room for a ` \`); read one after the other with nothing
    between them, they are the word."""
    out: list[str] = []
    room = first
    start = 0
    while start < len(word):
        end = start + 1
        while end < len(word) and cell_len(visible(shlex.quote(word[start : end + 1]))) <= room:
            end += 1
        out.append(visible(shlex.quote(word[start:end])))
        start, room = end, rest
    return out
