"""The one way text leaves spurctl: every registered secret redacted on the way out.

`install()` puts a `Redacting` stream in front of stdout and stderr at start-up, so
every print, rich console, Typer/Click usage line and --debug traceback passes it;
`-o` files (render/common.write_output) and the journal (act/journal) redact the
text they write with the same `errors.redact`. Text the cluster sent is also
redacted where it is read (sources/scrub.py, sources/documents.py), before a
table can fold a secret across two lines.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from spurctl.errors import redact


class Redacting:
    """A text stream that writes whole lines, each redacted, to the stream it wraps.

    A line is held until its newline (or a flush) so that a secret written in two
    pieces is still seen whole; everything else is the wrapped stream's.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = ""

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
            self._stream.write(redact(data[:cut]))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(redact(self._pending))
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    """Redact stdout and stderr from now on (idempotent)."""
    if not isinstance(sys.stdout, Redacting):
        sys.stdout = Redacting(sys.stdout)
    if not isinstance(sys.stderr, Redacting):
        sys.stderr = Redacting(sys.stderr)
