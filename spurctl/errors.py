"""Errors an operator can act on.

A SpurctlError ends the command with its message as one line on stderr and
exit status 2. The message says what is wrong and how to fix it, and never
carries a secret.
"""

from __future__ import annotations

import enum
import json
from typing import NoReturn


class ExitStatus(enum.IntEnum):
    """What every command exits with (docs/contract.md, "Exit status")."""

    OK = 0  # nothing needs action; a reclaim sent and confirmed everything planned
    ACTION_NEEDED = 1  # findings need action; a reclaim skipped, failed or was refused
    ERROR = 2  # bad usage or input, an unreachable controller: one line on stderr
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class SpurctlError(Exception):
    """Bad usage, bad input, an unreachable controller: exit 2 with one line."""

    exit_code = ExitStatus.ERROR


def fail(message: str) -> NoReturn:
    """End the command: `message` says what is wrong and how to fix it."""
    raise SpurctlError(message)


class DocumentError(SpurctlError):
    """A JSON document (inventory, snapshot, agent map) is malformed."""


_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret so that no message spurctl prints can carry it."""
    if value and len(value) >= 4:
        _secrets.add(value)
        # The same secret as repr() or JSON prints it: escapes would slip past a plain match.
        for form in (repr(value)[1:-1], json.dumps(value)[1:-1]):
            _secrets.add(form)


def redact(text: str) -> str:
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, "<redacted>")
    return text
