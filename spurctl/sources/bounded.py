"""Every file spurctl reads, read with a limit: past it, one line refusing it.

A wrong path (`/dev/zero`, a disk image, a log of gigabytes) given as a plan, a
key or an inventory would otherwise be read without end, or into all the
memory there is, before any parser could say it is not what it should be. So
each kind of document has a size that no real one comes near (`Limit`), and a
read stops one byte past it: a regular file is refused by its size before a
byte is read, anything else (a device, a pipe) when the byte past the limit
arrives. JSON Lines (inventories) also have a limit per line, so that an
endless line ends as soon as it is over, however large the whole may be.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from spurctl.errors import SpurctlError

KIB = 2**10
MIB = 2**20
GIB = 2**30
_CHUNK = MIB


@dataclass(frozen=True, slots=True)
class Limit:
    """How large one kind of document may be, and how to say so."""

    noun: str  # "a saved plan": what the file should have been
    size: int  # bytes
    fix: str  # what to give instead
    line: int | None = None  # JSON Lines: the longest line


# The limits, each far above the largest real document of its kind.
KEY = Limit("a key or token file", 64 * KIB, "give the file holding the key or token alone")
CONF = Limit("a spur.conf", 4 * MIB, "give the cluster's spur.conf (TOML)")
USER_CONFIG = Limit("spurctl's config.toml", 4 * MIB, "give spurctl's own config.toml")
# 200,000 nodes at ~60 bytes an entry is 12 MiB.
AGENT_MAP = Limit(
    "an agent map", 64 * MIB, 'give a JSON or TOML object like {"gpu017": "10.0.3.17:6818"}'
)
TLS_CA = Limit("a CA bundle", 16 * MIB, "give the PEM file of the controller's CA")
# An entry is one finding (~1 KiB with its pids and GPUs): 200,000 of them fit.
PLAN = Limit("a saved plan", 256 * MIB, "give the file `spurctl reclaim --dry-run -o FILE` wrote")
# 200,000 jobs are ~100 MB on the wire and ~300 MB as a snapshot's JSON.
SNAPSHOT = Limit("a snapshot", GIB, "give the file `spurctl snapshot -o FILE` wrote")
# One line per node: a node holding 1,000 jobs prints ~200 KB. A JSON (not JSON Lines)
# document of 20,000 nodes' inventories may be one line of ~60 MB.
INVENTORY = Limit(
    "inventories",
    2 * GIB,
    "give what `spurctl collect -o FILE` wrote (one line per node), or split it",
    line=64 * MIB,
)
# Records of ~300 bytes: millions of cancels before it is near.
JOURNAL = Limit(
    "a journal", GIB, "move it aside (spurctl starts a new one) and read it with --journal"
)
# ClusterShell's topology.conf: a route a line, a few KiB for 20,000 nodes as node sets.
TOPOLOGY = Limit("a topology file", 4 * MIB, "give ClusterShell's topology.conf ([routes] lines)")
SCENARIO = Limit("a simulated cluster's scenario", 256 * MIB, "give a scenario JSON file")
# A node's /proc and cgroup files: an environment is at most a few MiB.
NODE_FILE = Limit("a /proc or cgroup file", 64 * MIB, "check --proc-root and --cgroup-root")


class TooLarge(SpurctlError):
    """A file past its kind's limit: refused, not read further."""


def size_text(size: int) -> str:
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if size >= unit:
            return f"{size / unit:g} {name}"
    return f"{size} bytes"


def refusal(limit: Limit, name: str) -> TooLarge:
    return TooLarge(
        f"{name} is larger than {size_text(limit.size)}, more than {limit.noun} can be; {limit.fix}"
    )


def read_bytes(path: Path | str, limit: Limit, name: str | None = None) -> bytes:
    """The file's bytes, at most `limit.size` of them: TooLarge past that (named `name`,
    default the path). OSError as opening or reading raises it."""
    with open(path, "rb", buffering=0) as fh:
        return read_stream(fh, limit, name or str(path))


def read_text(path: Path | str, limit: Limit, name: str | None = None) -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bytes(path, limit, name).decode("utf-8")


def read_stream(stream: BinaryIO, limit: Limit, name: str) -> bytes:
    """What `stream` holds to its end, refused (TooLarge) one byte past `limit.size`."""
    _check_size(stream, limit, name)
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read(min(_CHUNK, limit.size + 1 - size))
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit.size:
            raise refusal(limit, name)
        chunks.append(chunk)


def read_lines(stream: BinaryIO, limit: Limit, name: str) -> bytes:
    """JSON Lines to their end: refused (TooLarge) at the first line longer than
    `limit.line`, as soon as it is (an endless line ends there), or past `limit.size`."""
    assert limit.line is not None
    size = _check_size(stream, limit, name)
    whole = min(limit.line, limit.size)
    if size is not None and size <= whole:
        # A regular file no longer than one line may be holds no line over the limit: read
        # in one call (a large cluster's 10,000 lines took ~10 ms more one by one, joined).
        # One that has grown past that since is read again, line by line.
        start = stream.tell()
        data = stream.read(whole + 1)
        if len(data) <= whole:
            return data
        stream.seek(start)
    chunks: list[bytes] = []
    size = lineno = 0
    while True:
        line = stream.readline(limit.line + 1)
        if not line:
            return b"".join(chunks)
        lineno += 1
        if len(line) > limit.line:
            raise TooLarge(
                f"{name}: line {lineno} is longer than {size_text(limit.line)}, more than one "
                f"line of {limit.noun} can be; {limit.fix}"
            )
        size += len(line)
        if size > limit.size:
            raise refusal(limit, name)
        chunks.append(line)


def _check_size(stream: BinaryIO, limit: Limit, name: str) -> int | None:
    """Refuse a regular file over the limit by its size, before reading a byte of it; the
    size of a regular file, None for any other stream."""
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's stream)
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > limit.size:
        raise refusal(limit, name)
    return st.st_size
