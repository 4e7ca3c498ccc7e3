"""Reading the small files a node scan looks at: cgroup limits, /proc entries, descriptors.

The node is live while it is read: a file that vanishes, cannot be read, is not
ASCII or is larger than any such file ever is, is skipped (told to the scan's
skip hook), never fatal.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

SkipHook = Callable[[Path, Exception], None]
"""Told about every entry skipped mid-scan (vanished, unreadable, garbage)."""

# cgroup control files and /proc/<pid>/{stat,comm,cgroup} are a few hundred bytes; a
# spurstepd descriptor a few KiB. Anything larger is not one of them.
MAX_SMALL_FILE = 64 * 1024


def ignore(path: Path, exc: Exception) -> None:
    return None


def read_bytes(path: Path, skip: SkipHook, limit: int = MAX_SMALL_FILE) -> bytes | None:
    """At most `limit` bytes of `path`; None (and `skip` told) when it cannot be read or is
    larger. A missing file is not told: absence is an answer, not a fault."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            skip(path, exc)
        return None
    if len(data) > limit:
        skip(path, ValueError(f"larger than {limit} bytes"))
        return None
    return data


def read_text(path: Path, skip: SkipHook, limit: int = MAX_SMALL_FILE) -> str | None:
    """`read_bytes` as ASCII text (what cgroup and /proc files are)."""
    data = read_bytes(path, skip, limit)
    if data is None:
        return None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as exc:
        skip(path, exc)
        return None


_MIB = 1024 * 1024
MAX_FILE = 64 * _MIB  # a /proc or cgroup file: an environment is a few MiB at most


def read_whole(path: Path) -> bytes:
    """The whole file, refused (EFBIG) past MAX_FILE: --proc-root may name any tree,
    /dev/zero too. Raises OSError as open() and read() do."""
    import errno

    data = bytearray()
    with open(path, "rb", buffering=0) as fh:
        while len(data) <= MAX_FILE and (piece := fh.read(1 << 16)):
            data += piece
    if len(data) > MAX_FILE:
        raise OSError(errno.EFBIG, f"larger than {MAX_FILE // _MIB} MiB", str(path))
    return bytes(data)
