"""Errors an operator can act on.

A SpurctlError ends the command with its message as one line on stderr and
exit status 2. The message says what is wrong and how to fix it, and never
carries a secret.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import threading
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from spurctl.next_step import NextStep


class ExitStatus(enum.IntEnum):
    """What every command exits with (docs/contract.md, "Exit status")."""

    OK = 0  # nothing needs action; a reclaim sent and confirmed everything planned
    ACTION_NEEDED = 1  # findings need action; a reclaim skipped, failed or was refused
    ERROR = 2  # bad usage or input, an unreachable controller: one line on stderr
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class SpurctlError(Exception):
    """Bad usage, bad input, an unreachable controller: exit 2 with one line.

    `step`: the command that fixes it, when there is one to paste. The message leads
    into it ("...; check the names with"), and the line ends with the command, quoted
    as render/ quotes every command (render.terminal.report).
    """

    exit_code = ExitStatus.ERROR

    def __init__(self, message: str = "", *, step: NextStep | None = None) -> None:
        super().__init__(message)
        self.step = step


class Aborted(SpurctlError):
    """Ctrl-C at a prompt: the command ends saying what was (not) done, exit 1."""

    exit_code = ExitStatus.ACTION_NEEDED


class Interrupted(Exception):
    """Ctrl-C in a command, carried past Typer, which would turn it into exit 130 with
    nothing said; `main` says it in one line (commands/help.HelpGroup)."""


def fail(message: str) -> NoReturn:
    """End the command: `message` says what is wrong and how to fix it."""
    raise SpurctlError(message)


# What starts each stderr line by its severity: `spurctl: error:` (render/terminal.report,
# for what ends the command), and these two for what it says on the way.
WARNING_PREFIX = "spurctl: warning: "
NOTE_PREFIX = "spurctl: note: "


def warn(message: str) -> None:
    """One stderr line an operator should act on, the command going on: the one warning
    printer, for every layer (a layer that must stay quiet takes a `warn` callback).
    A line break or control character it quotes is written out: it stays one line."""
    print(f"{WARNING_PREFIX}{visible(message)}", file=sys.stderr)


def note(message: str) -> None:
    """One stderr line that informs and asks nothing (a filter's count, a file written)."""
    print(f"{NOTE_PREFIX}{visible(message)}", file=sys.stderr)


class DocumentError(SpurctlError):
    """A JSON document (inventory, snapshot, agent map) is malformed."""


_secrets: set[str] = set()
# Each secret as it would appear in a protobuf answer or a JSON document's text.
_raw: tuple[bytes, ...] = ()
_raw_text: tuple[str, ...] = ()
_pattern: re.Pattern[str] | None = None
_secrets_lock = threading.Lock()

# A secret shorter than this is redacted only where it stands alone (not inside a
# longer run of token characters): a two-character key must not blank every
# occurrence of those two letters in a message, yet never print on its own.
_SHORT = 4
_TOKEN_CHARS = r"A-Za-z0-9_.~+/=-"


def register_secret(value: str | None) -> None:
    """Remember a secret so that no message spurctl prints can carry it.

    Every secret counts, however short; spurctl registers each credential it
    mints itself before sending it.
    """
    global _pattern, _raw, _raw_text
    if not value:
        return
    # The same secret as repr() or JSON prints it: escapes would slip past a plain match.
    forms = {value, repr(value)[1:-1], json.dumps(value)[1:-1]}
    with _secrets_lock:
        if forms <= _secrets:
            return
        _secrets.update(forms)
        _raw = (*_raw, value.encode())
        _raw_text = tuple(dict.fromkeys((*_raw_text, *sorted(forms))))
        _pattern = None


def secrets_state() -> tuple[frozenset[str], tuple[bytes, ...], tuple[str, ...]]:
    """The registered secrets, for a caller that runs commands in-process (tests) and
    puts them back with `restore_secrets` afterwards."""
    with _secrets_lock:
        return frozenset(_secrets), _raw, _raw_text


def restore_secrets(state: tuple[frozenset[str], tuple[bytes, ...], tuple[str, ...]]) -> None:
    global _pattern, _raw, _raw_text
    with _secrets_lock:
        _secrets.clear()
        _secrets.update(state[0])
        _raw, _raw_text = state[1], state[2]
        _pattern = None


def _compiled() -> re.Pattern[str] | None:
    global _pattern
    with _secrets_lock:
        if _pattern is None and _secrets:
            parts = []
            for secret in sorted(_secrets, key=len, reverse=True):
                escaped = re.escape(secret)
                if len(secret) < _SHORT:
                    escaped = rf"(?<![{_TOKEN_CHARS}]){escaped}(?![{_TOKEN_CHARS}])"
                parts.append(escaped)
            _pattern = re.compile("|".join(parts))
        return _pattern


def carries_secret(data: bytes | str) -> bool:
    """Whether an answer off the wire (bytes) or a document's text may hold a
    registered secret: a substring search per secret, so that the common answer is
    read as it came and only one that may carry a secret is redacted."""
    if isinstance(data, str):
        return any(secret in data for secret in _raw_text)
    return any(secret in data for secret in _raw)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `<redacted>`."""
    if not carries_secret(text):
        return text
    pattern = _compiled()
    if pattern is None:
        return text
    return pattern.sub("<redacted>", text)


# -- control characters ----------------------------------------------------------

# C0 and C1 controls, DEL, and the invisible characters that reorder or break a
# line (bidi embeddings, overrides and isolates; line and paragraph separators):
# from the cluster they could rewrite an operator's screen or title, or hide text.
_CONTROLS = (
    *range(0x00, 0x20),
    *range(0x7F, 0xA0),
    *range(0x200B, 0x2010),
    *range(0x2028, 0x202F),
    *range(0x2066, 0x206A),
    0xFEFF,
)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_VISIBLE = {c: _NAMED.get(c) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
_VISIBLE_LINES = {c: s for c, s in _VISIBLE.items() if c != 0x0A}


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control character written out (ESC as `\\x1b`, CR as `\\r`),
    so that a name from the cluster is shown as what it is instead of acting on the
    terminal. `keep_newlines` leaves line breaks alone (for whole lines of output)."""
    if text.isprintable():  # the fast path: no control character, nothing to copy
        return text
    return text.translate(_VISIBLE_LINES if keep_newlines else _VISIBLE)
