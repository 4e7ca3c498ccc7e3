"""How deep a JSON document nests, told before it is parsed.

Python's json module (and msgspec, for an untyped value) parses nested arrays and
objects by recursion: a saved plan of 100,000 `[` is a RecursionError, not an answer,
and one nested a little less than the interpreter's limit parses and then breaks
whatever walks it next (a comparison, json.dumps, a repr in an error). No document
spurctl writes nests more than a handful of levels, so every saved document it loads
(reclaim and repair plans, snapshots, agent maps) is held to MAX_DEPTH here first:
its strings set aside, its brackets counted level by level, all in C (a few passes
over the brackets alone, one per level).
"""

from __future__ import annotations

import re

# Levels of arrays and objects a spurctl document may have; the deepest it writes is a
# snapshot's device list (document, jobs, job, resources, devices, gres, list, device).
MAX_DEPTH = 64

_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRING_BYTES = re.compile(_STRING.encode(), re.DOTALL)
_STRING_TEXT = re.compile(_STRING, re.DOTALL)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
# One level: every innermost pair, left to right (`{[]}` loses its `[]` only).
_PAIR = re.compile(rb"\[\]|\{\}")


def too_deep(raw: bytes | str, limit: int = MAX_DEPTH) -> str | None:
    """Why `raw` is refused when its arrays and objects may nest deeper than `limit`
    (so no parser need recurse past it); else None. Brackets that do not pair are
    left to the parser to describe, unless there are too many of them to parse."""
    if isinstance(raw, str):
        # Strings aside first: what is left is ASCII (brackets, numbers, words, spaces),
        # and anything past it is dropped with the rest of what is not a bracket.
        rest = _STRING_TEXT.sub("", raw).encode("ascii", "ignore")
    else:
        rest = _STRING_BYTES.sub(b"", raw)
    brackets = rest.translate(None, _NOT_BRACKETS)
    levels = 0
    while brackets:
        inner = _PAIR.sub(b"", brackets)
        if inner == brackets:  # none pair any more: at most this many levels more
            levels += len(brackets)
            break
        levels += 1
        brackets = inner
        if levels > limit:
            break
    if levels > limit:
        return f"nested more than {limit} levels deep, as no spurctl document is"
    return None
