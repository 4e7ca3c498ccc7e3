"""The one table style every command draws (audit, nodes, reclaim, journal, the watch).

Lowercase headings in bold, no box, no rule and no blank line between rows (as
sinfo, squeue and kubectl print theirs); columns two spaces apart; a row's colour
is its outcome's. Every cell but the last column's is unbreakable: a node name, a
kind, a job id or an address is never cut or folded. The last column may be text
(a reason, a detail) that wraps at spaces only, never inside a word that fits a line:

- beside the row, in a column of its own, where the screen leaves it room;
- or, when that would take more lines (a narrow reason column at 120 columns makes a
  four-line row of a two-line reason), begun beside the row and carried on under it,
  indented HANG columns, the whole width;
- or, when the cells leave it no room at all, wholly under the row.

Down a pipe or into a file (`whole_lines`) every row is one line, its text whole, for
grep. A table whose unbreakable cells do not fit the screen at all is for its caller
to lay out otherwise (`fits`): audit and reclaim stack each row's cells. A table drawn
`one_line` (a live view short of lines: the watch) keeps every row to one line of the
screen: its text cut with `…` to the room its cells leave, and a row whose cells alone
are wider than the screen cut at its edge.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.style import Style

GAP = 2  # columns between two cells
HANG = 2  # the indent of a row's text carried on under it
MIN_BESIDE = 30  # the fewest columns the text may start in beside a row's cells
_LEAST_CUT = 4  # the fewest columns a one_line row's cut text is shown in (else left out)
_HEADING_STYLE = "bold"


@dataclass(frozen=True, slots=True)
class Row:
    """One row: its unbreakable cells, the wrapped text after them ("" when the table
    has none), the row's style (a rich style, as text) and any cell's own on top."""

    cells: Sequence[str]
    text: str = ""
    style: str | None = None
    cell_styles: Sequence[str | None] = field(default_factory=tuple)


Piece = tuple[str, "Style | None"]


def cell_len(text: str) -> int:
    """The columns `text` takes on a terminal (a CJK character takes two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


class Table:
    """Rows under `headings`; `text_heading` names the last, wrapped column (None: the
    table has none). A rich renderable, drawn at the console's width."""

    def __init__(
        self,
        headings: Sequence[str],
        rows: Sequence[Row],
        text_heading: str | None = None,
        *,
        short_text: bool = False,
        one_line: bool = False,
    ) -> None:
        # `short_text`: the text is a word or two (nodes' findings), kept beside its row
        # wherever it fits whole, however narrow the room left, and carried on under the
        # row only where it does not.
        self.short_text = short_text
        self.one_line = one_line
        self.headings = list(headings)
        self.rows = list(rows)
        self.text_heading = text_heading
        widths = [cell_len(h) for h in self.headings]
        for row in self.rows:
            for k, cell in enumerate(row.cells):
                n = cell_len(cell)
                if n > widths[k]:
                    widths[k] = n
        self.widths = widths

    @property
    def cells_width(self) -> int:
        """The columns the unbreakable cells take, with the gaps after them (before the
        text) when there is text."""
        gaps = len(self.widths) if self.text_heading is not None else len(self.widths) - 1
        return sum(self.widths) + GAP * gaps

    def fits(self, width: int) -> bool:
        """Whether every row's unbreakable cells fit on one line of `width`."""
        return self.cells_width <= width

    def _padded(self, cells: Sequence[str]) -> list[str]:
        return [c + " " * (w - cell_len(c)) for c, w in zip(cells, self.widths, strict=True)]

    def _heading_line(self, width: int | None = None) -> str:
        """The headings over their cells, and the text's where the text starts beside
        them (the text under the rows needs none)."""
        line = (" " * GAP).join(self._padded(self.headings))
        least = cell_len(self.text_heading or "") if self.short_text else MIN_BESIDE
        beside = width is None or width - self.cells_width >= least
        if self.text_heading is not None and beside:
            line += " " * GAP + self.text_heading
        return line.rstrip()

    def whole_lines(self, heading: bool = True) -> list[str]:
        """Every row on one line, its text whole, however wide: for a pipe or a file."""
        gap = " " * GAP
        out = [self._heading_line()] if heading else []
        for row in self.rows:
            line = gap.join(self._padded(row.cells))
            if self.text_heading is not None:
                line += gap + row.text
            out.append(line.rstrip())
        return out

    def _text_lines(self, text: str, width: int) -> tuple[list[str], bool]:
        """The row's text laid out at `width`: its lines, and whether they hang (the first
        beside the cells, the rest under the row at HANG) rather than stay in a column."""
        beside = width - self.cells_width
        if self.short_text and cell_len(text) <= beside:
            return [text], False
        column = wrapped(text, beside) if beside >= MIN_BESIDE else None
        first = first_words(text, beside) if beside >= MIN_BESIDE else ""
        rest = text[len(first) :].lstrip(" ")
        hanging = [first.rstrip(" "), *(wrapped(rest, width - HANG) if rest else [])]
        if column is not None and len(column) <= len(hanging):
            return column, False
        return hanging, True

    def lines(self, width: int, console: Console | None = None) -> Iterator[list[Piece]]:
        """Each line as its pieces of text and their styles (none without a console)."""

        def style(name: str | None) -> Style | None:
            return None if console is None or not name else console.get_style(name)

        if self.one_line:
            yield from self._one_line(width, style)
            return
        if not self.fits(width):
            yield from self._stacked(width, style)
            return
        gap = " " * GAP
        yield [(self._heading_line(width), style(_HEADING_STYLE))]
        indent = " " * self.cells_width
        for row in self.rows:
            row_style = style(row.style)
            cells = self._padded(row.cells)
            line: list[Piece] = []
            for k, cell in enumerate(cells):
                own = style(row.cell_styles[k]) if k < len(row.cell_styles) else None
                piece_style = row_style + own if row_style and own else own or row_style
                line.append(((gap if k else "") + cell, piece_style))
            if self.text_heading is None:
                yield line
                continue
            texts, hanging = self._text_lines(row.text, width)
            if texts[0]:
                line.append((gap + texts[0], row_style))
            yield line
            lead = " " * HANG if hanging else indent
            for rest in texts[1:]:
                yield [(lead + rest, row_style)]

    def _stacked(
        self, width: int, style: Callable[[str | None], Style | None]
    ) -> Iterator[list[Piece]]:
        """Where the cells alone are wider than the screen: each row's first cell on a line
        of its own, its other cells (each whole) on the next, its text under them, as
        audit's findings stack."""
        for row in self.rows:
            row_style = style(row.style)
            own = [style(row.cell_styles[k]) if k < len(row.cell_styles) else None
                   for k in range(len(row.cells))]  # fmt: skip
            head = own[0] or row_style
            yield [(row.cells[0], row_style + head if row_style and head else head)]
            line: list[Piece] = [(" " * HANG, None)]
            for k, cell in enumerate(row.cells[1:], start=1):
                if not cell:
                    continue
                piece = own[k] or row_style
                line.append((("  " if len(line) > 1 else "") + cell, piece))
            if len(line) > 1:
                yield line
            if self.text_heading is not None and row.text:
                for text in wrapped(row.text, width - 2 * HANG):
                    yield [(" " * 2 * HANG + text, row_style)]

    def _one_line(
        self, width: int, style: Callable[[str | None], Style | None]
    ) -> Iterator[list[Piece]]:
        """Each row on one line of `width`: its cells, then its text cut to the room left
        (none: the text is left out); a line wider than `width` cut at its edge."""
        gap = " " * GAP
        room = width - self.cells_width
        heading = gap.join(self._padded(self.headings))
        if self.text_heading is not None and room >= cell_len(self.text_heading):
            heading += gap + self.text_heading
        yield [(cut(heading.rstrip(), width), style(_HEADING_STYLE))]
        for row in self.rows:
            row_style = style(row.style)
            line: list[Piece] = []
            used = 0
            for k, cell in enumerate(self._padded(row.cells)):
                own = style(row.cell_styles[k]) if k < len(row.cell_styles) else None
                piece = cut((gap if k else "") + cell, width - used)
                used += cell_len(piece)
                line.append((piece, row_style + own if row_style and own else own or row_style))
            if self.text_heading is not None and row.text and room >= _LEAST_CUT:
                line.append((gap + cut(row.text, room), row_style))
            yield line

    def plain_lines(self, width: int) -> list[str]:
        return ["".join(text for text, _ in line).rstrip() for line in self.lines(width)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        newline = Segment.line()
        for pieces in self.lines(options.max_width, console):
            for text, piece_style in pieces:
                yield Segment(text, piece_style)
            yield newline


class OneLine:
    """A line drawn whole at any width, never wrapped (the terminal may fold it for the
    eye; copied, it is still one line): a command to paste."""

    def __init__(self, text: str, style: str | None = None) -> None:
        self.text = text
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        yield Segment(self.text, console.get_style(self.style) if self.style else None)
        yield Segment.line()


# -- words ---------------------------------------------------------------------


def cut(text: str, width: int) -> str:
    """`text` in at most `width` columns: whole where it fits, else cut with `…`."""
    if cell_len(text) <= width:
        return text
    if width <= 0:
        return ""
    if text.isascii():
        return text[: width - 1] + "…"
    from rich.text import Text

    shown = Text(text)
    shown.truncate(width, overflow="ellipsis")
    return shown.plain


def first_words(text: str, width: int) -> str:
    """What of `text` starts a line of `width` without cutting a word: its first wrapped
    line (trailing space included), or "" when its first word alone is wider."""
    head = text.split(" ", 1)[0]
    if cell_len(head) > width:
        return ""
    first = wrapped(text, width)[0]
    # A wrapped line ends where its space was: give back the space with it.
    return text[: len(first) + 1] if text[len(first) : len(first) + 1] == " " else first


def wrapped(text: str, width: int) -> list[str]:
    """The text's lines at `width`, as rich folds a Text: at spaces, and a word wider
    than the whole line cut into pieces (nothing else could show it)."""
    width = max(width, 1)
    if cell_len(text) <= width:
        return [text]
    simple = text.isascii() and text.isprintable() and "  " not in text
    if simple and text.strip(" ") == text:
        return _folded_words(text, width)
    from rich.text import Text

    return [line.plain for line in Text(text).wrap(_measuring(), width, overflow="fold")]


def _folded_words(text: str, width: int) -> list[str]:
    """Rich's Text.wrap(overflow="fold") for one-cell-per-character text with single
    spaces (rich takes 0.6 ms a line; a reason naming 10,000 scattered nodes has 500).
    As rich: a word carries its trailing space, fits if the line's length (spaces
    included) plus the word without its space is at most `width`, and a word longer
    than `width` starts a line and is cut into `width` pieces, its space included."""
    words = [f"{w} " for w in text.split(" ")]
    words[-1] = words[-1][:-1]
    lines: list[str] = []
    line = ""
    for word in words:
        size = len(word.rstrip(" "))
        if width - len(line) >= size:
            line += word
        elif size > width:
            if line:
                lines.append(line)
            pieces = [word[i : i + width] for i in range(0, len(word), width)]
            lines += pieces[:-1]
            line = pieces[-1]
        else:
            lines.append(line)
            line = word
    lines.append(line)
    return [ln[:width] if len(ln) > width and not ln[width:].strip(" ") else ln for ln in lines]


@functools.cache
def _measuring() -> Console:
    from rich.console import Console

    return Console(file=io.StringIO(), color_system=None, width=10_000)
