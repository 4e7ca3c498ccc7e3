"""The one way text leaves spurctl: every registered secret redacted on the way out.

`install()` puts a `Redacting` stream in front of stdout and stderr at start-up, so
every print, rich console, Typer/Click usage line and --debug traceback passes it;
`-o` files (render/common.write_output) and the journal (act/journal) redact the
text they write with the same `errors.redact`. Text the cluster sent is also
redacted where it is read (sources/scrub.py, sources/documents.py), before a
table can fold a secret across two lines.

Control characters (errors.visible): stderr carries plain lines only, so its sink
writes every control character but the newline out visibly. A rich console that
styles stderr writes to `styled`, which only redacts, and escapes its own data
(render/common.escaped), as every renderer on stdout does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, TextIO

from spurctl.errors import redact, visible


class Redacting:
    """A text stream that writes whole lines, each redacted, to the stream it wraps.

    A line is held until its newline (or a flush) so that a secret written in two
    pieces is still seen whole; everything else is the wrapped stream's. With
    `escape`, every control character of a line but its newline is written out.
    """

    def __init__(self, stream: TextIO, *, escape: bool = False) -> None:
        self._stream = stream
        self._pending = ""
        self._escape = escape
        self._styled: Redacting | None = None

    @property
    def styled(self) -> Redacting:
        """This stream, redacted but not escaped: for a console that styles its text."""
        if not self._escape:
            return self
        if self._styled is None:
            self._styled = Redacting(self._stream)
        return self._styled

    def _out(self, text: str) -> None:
        text = redact(text)
        self._stream.write(visible(text, keep_newlines=True) if self._escape else text)

    @property
    def wrapped(self) -> TextIO:
        return self._stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # as a text stream does: Click probes with b""
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        data = self._pending + text
        cut = data.rfind("\n") + 1
        self._pending = data[cut:]
        if cut:
            self._out(data[:cut])
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            self._out(self._pending)
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def installed() -> Iterator[None]:
    """stdout and stderr redacted (and stderr escaped) for the duration; the streams
    found on entry are put back, flushed, on the way out."""
    before = sys.stdout, sys.stderr
    install()
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):  # a closed pipe: the interpreter's exit reports it
                stream.flush()
        sys.stdout, sys.stderr = before


def install() -> None:
    """Redact stdout and stderr, and escape stderr, from now on (idempotent)."""
    if not isinstance(sys.stdout, Redacting):
        sys.stdout = Redacting(sys.stdout)
    if not isinstance(sys.stderr, Redacting):
        sys.stderr = Redacting(sys.stderr, escape=True)


def styled(stream: TextIO) -> TextIO:
    """Where a rich console styling `stream` writes: past the escaping, never past
    the redaction."""
    return stream.styled if isinstance(stream, Redacting) else stream  # type: ignore[return-value]
