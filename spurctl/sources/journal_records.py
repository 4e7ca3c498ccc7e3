"""The reclaim journal read back: its records, what earlier runs left open, and what
they sent (act/journal.py writes it). Reading never takes the journal's lock: a dry
run or an audit must not wait for a running reclaim; a run that must not see the
journal change under it takes the lock first (act.journal.journal_lock).

A journal is one admin host's, and may hold several clusters' runs: two clusters with
the same node names and job ids (`[contexts.prod]`, `[contexts.lab]`) share the default
journal. Every record says the cluster it was written for (`controller`, `cluster`:
cluster_of), and a run reads only its own cluster's (`records(..., cluster=)`, the one
place the records of a run are read): another cluster's cancels must not turn this
cluster's reclaimable holdings into leftovers, nor its drains count as spurctl's here
(issue 53.1). A record naming no cluster (written before records said one) counts for
every cluster, as it always did: of what it can do, counting an old cancel spares a
holding (a leftover, never a wrong send); counting an old drain as spurctl's lifts
only a node whose reason is exactly one spurctl journaled setting, and only once a
fresh audit of it is clean; ignoring them would instead resend futile cancels and
leave spurctl's own drains and unfinished repairs behind.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.errors import SpurctlError
from spurctl.errors import warn as _warn
from spurctl.model import MAX_JOB_ID, parse_time
from spurctl.sources.cluster_binding import Binding

if TYPE_CHECKING:
    from spurctl.sources.settings import Connection

SCHEMA = "spurctl.journal/v1"

# How much of a journal's start is read to find its first record.
FIRST_LINE_LIMIT = 1 << 20
# How every record spurctl writes begins: a first record cut short by a crash still does.
_RECORD_START = b'{"schema": "' + SCHEMA.encode() + b'"'


def cluster_of(conn: Connection | None) -> Binding | None:
    """The cluster a run against `conn` journals and reads as its own: the controller
    URLs it reads (normalised as --controller's; none for the built-in localhost
    default, which names no cluster) and the cluster's name (spur.conf's cluster_name,
    else the config file's). None without a connection (a snapshot audit): every record
    counts."""
    if conn is None:
        return None
    from spurctl.sources.settings import DEFAULT_CONTROLLER

    controllers = () if conn.controllers == (DEFAULT_CONTROLLER,) else tuple(conn.controllers)
    return Binding(controllers, conn.cluster)


def run_records(
    path: Path, conn: Connection | None, warn: Callable[[str], None] = _warn
) -> list[dict[str, Any]]:
    """The records a run against `conn` reads as its own (cluster_of), in the order
    written; none when there is no journal. Never takes the lock."""
    return _readable(path, warn, cluster_of(conn))


def stamp(binding: Binding | None) -> dict[str, str]:
    """The fields saying which cluster a record was written for (none when unknown)."""
    if binding is None:
        return {}
    out = {}
    if binding.cluster is not None:
        out["cluster"] = binding.cluster
    if binding.controllers:
        out["controller"] = ",".join(binding.controllers)
    return out


def recorded_cluster(rec: dict[str, Any]) -> Binding:
    """The cluster a record says it was written for (empty: a record that says none)."""
    controller, cluster = rec.get("controller"), rec.get("cluster")
    urls = tuple(u for u in controller.split(",") if u) if isinstance(controller, str) else ()
    return Binding(urls, cluster if isinstance(cluster, str) and cluster else None)


def belongs(rec: dict[str, Any], cluster: Binding | None) -> bool:
    """Whether `rec` is a record of `cluster`'s runs: everything both name agrees (the
    cluster's name, and at least one controller URL, compared as written: a controller
    reached under another name reads as another cluster, which only forgets). A record
    naming no cluster, or a reader that knows none, counts."""
    if cluster is None:
        return True
    theirs = recorded_cluster(rec)
    names = theirs.cluster is None or cluster.cluster is None or theirs.cluster == cluster.cluster
    urls = not theirs.controllers or not cluster.controllers
    return names and (urls or bool(set(theirs.controllers) & set(cluster.controllers)))


def check_start(data: bytes, path: Path) -> None:
    """Refuse (SpurctlError) a file whose first line is not a journal record: spurctl
    appends only to its own journals (an empty file is one not yet written)."""
    first = next((line for line in data.split(b"\n") if line.strip()), b"")
    if not first or first.startswith(_RECORD_START):
        return  # not written yet; a record, or the first one cut short by a crash
    try:
        rec: dict[str, Any] | None = record_of(first)  # a record from before the schema
    except Exception:
        rec = None
    if rec is None or rec.get("event") not in ("intent", "outcome", "interrupted"):
        raise SpurctlError(
            f"journal {path} is not a spurctl journal (its first line is not a journal "
            "record), and spurctl appends only to its own: pass --journal PATH"
        )


# As the kernel (Linux's MAXSYMLINKS): more links than this on one path is a loop.
_MAX_LINKS = 40


def check_path(path: Path) -> None:
    """Refuse (SpurctlError), before anything is read or created, a journal path that
    names no file (`/`, a directory) or reaches its file through a link spurctl cannot
    trust: a link to nothing (the journal and its directories would be created where it
    points), a link owned by someone other than root or the user running spurctl, or a
    link to a directory such a someone owns (either could point it anywhere). The path
    is followed as the kernel follows it, one component and one link at a time; the
    first component that does not exist ends the walk (spurctl creates the rest)."""
    if path.name in ("", ".", "..") or path.is_dir():
        raise SpurctlError(
            f"journal {path} is a directory, not a regular file; pass --journal FILE "
            "(e.g. /var/lib/spurctl/journal.jsonl)"
        )
    trusted = {0, os.geteuid()}
    here = Path(path.anchor) if path.is_absolute() else Path.cwd()
    todo = list(path.parts[1:] if path.is_absolute() else path.parts)
    links = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            here = here.parent
            continue
        step = here / part
        try:
            st = step.lstat()
        except OSError:
            return  # missing: spurctl creates the rest; unreadable: opening it says why
        if not stat.S_ISLNK(st.st_mode):
            here = step
            continue
        links += 1
        target = os.readlink(step)
        if links > _MAX_LINKS:
            raise SpurctlError(f"journal {path}: too many links on the way; pass --journal PATH")
        if st.st_uid not in trusted:
            raise _untrusted(path, f"{step} is a link owned by uid {st.st_uid}")
        if not step.exists():
            raise SpurctlError(
                f"journal {path}: {step} is a link to {target}, which does not exist; spurctl "
                "does not create files where a link points: pass --journal PATH"
            )
        owner = step.stat().st_uid
        if todo and owner not in trusted:
            raise _untrusted(path, f"{step} is a link to {target}, a directory of uid {owner}")
        led = Path(target)
        if led.is_absolute():
            here, todo = Path(led.anchor), [*led.parts[1:], *todo]
        else:
            todo = [*led.parts, *todo]


def _untrusted(path: Path, why: str) -> SpurctlError:
    return SpurctlError(
        f"journal {path}: {why}, not root's or this user's, so where the journal lands is "
        "not this user's to say; pass --journal PATH"
    )


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An intent the journal never closed: the cancel may or may not have gone out."""

    at: str
    node: str
    job_id: int
    kind: str
    # The run that wrote the intent; None for a record from before run ids.
    run: str | None = None


def unresolved(
    path: Path, warn: Callable[[str], None] = _warn, cluster: Binding | None = None
) -> list[Unresolved]:
    """Intents with no outcome after them (an interrupted or crashed reclaim).

    Never takes the lock (a dry run must not wait for a running reclaim). A line
    that is not a whole, readable record (a crash mid-write: cut UTF-8, a number
    no job id can be, not JSON) is reported through `warn` with its line number
    and skipped.
    """
    return open_intents(_readable(path, warn, cluster))


def _readable(
    path: Path, warn: Callable[[str], None], cluster: Binding | None = None
) -> list[dict[str, Any]]:
    """The journal's records of `cluster`, or none when there is no journal. Never takes
    the lock."""
    # A journal that is not a regular file (a device, a pipe) holds no earlier run,
    # and reading one may never end (/dev/full reads zeros forever).
    if not path.is_file():
        return []
    try:
        return records(path, warn, cluster=cluster)
    except FileNotFoundError:
        return []


def open_intents(found: Iterable[dict[str, Any]]) -> list[Unresolved]:
    """Of these records, the intents with no outcome after them."""
    still: dict[tuple[str, int], Unresolved] = {}
    for rec in found:
        key = (rec["node"], rec["job_id"])
        if rec.get("event") == "intent":
            run = rec.get("run")
            still[key] = Unresolved(
                str(rec.get("at")),
                key[0],
                key[1],
                str(rec.get("kind")),
                run if isinstance(run, str) and run else None,
            )
        elif rec.get("event") == "outcome":
            still.pop(key, None)
    return sorted(still.values(), key=lambda u: (u.at, u.node, u.job_id))


@dataclass(frozen=True, slots=True)
class WentOut:
    """The last agent cancel the journal records as sent for one (node, job)."""

    at: str  # its outcome's time, RFC 3339 UTC
    run: str | None  # the run that sent it (None: a record from before run ids)


@dataclass(frozen=True, slots=True)
class History:
    """What a journal says of the runs before this one, from one read of it."""

    # Intents no outcome closed (unresolved).
    unresolved: list[Unresolved] = field(default_factory=list)
    # When an agent cancel was last sent, or may have been, per (node, job) (cancels_sent).
    cancelled: dict[tuple[str, int], datetime] = field(default_factory=dict)
    # The last cancel recorded as sent (confirmed or not) per (node, job), and by which run.
    went_out: dict[tuple[str, int], WentOut] = field(default_factory=dict)


def history(
    path: Path, warn: Callable[[str], None] = _warn, cluster: Binding | None = None
) -> History:
    """The journal at `path` read once for what a reclaim of `cluster` needs of its earlier
    runs; an empty History when there is none. Never takes the lock: a run that must not
    see the journal change under it takes the lock first (journal_lock)."""
    found = _readable(path, warn, cluster)
    return History(open_intents(found), sent_at(found), went_out(found))


def went_out(found: Iterable[dict[str, Any]]) -> dict[tuple[str, int], WentOut]:
    """Of these records, the last agent cancel each (node, job) was sent, as its outcome
    says (`sent`, or `unconfirmed`: sent, then no re-collect showed it freed)."""
    out: dict[tuple[str, int], WentOut] = {}
    for rec in found:
        if rec.get("event") != "outcome" or rec.get("kind") not in AGENT_CANCEL_KINDS:
            continue
        if rec.get("result") in ("sent", "unconfirmed"):
            run = rec.get("run")
            out[(rec["node"], rec["job_id"])] = WentOut(
                str(rec.get("at")), run if isinstance(run, str) and run else None
            )
    return out


# The kinds reclaim sends an agent cancel for (node-release journals `agent-orphan`).
AGENT_CANCEL_KINDS = frozenset({"terminal-held", "active-elsewhere", "below-watermark-unknown"})


def cancels_sent(
    path: Path, warn: Callable[[str], None] = _warn, cluster: Binding | None = None
) -> dict[tuple[str, int], datetime]:
    """When an agent cancel was last sent, or may have been, for each (node, job id).

    An outcome `sent` counts at its own time (the send came just before it); so does
    an intent no outcome of its run closed, or one closed as unknown (an interrupted
    send may have gone out). A skip, or a failure the send itself reported, does not.
    No journal: nothing was sent. Only `cluster`'s records count. Never takes the lock.
    """
    return sent_at(_readable(path, warn, cluster))


def sent_at(found: Iterable[dict[str, Any]]) -> dict[tuple[str, int], datetime]:
    """Of these records, when an agent cancel was last sent, or may have been, for each
    (node, job id) (cancels_sent)."""
    out: dict[tuple[str, int], datetime] = {}
    pending: dict[tuple[str, int], datetime] = {}

    def note(key: tuple[str, int], at: datetime) -> None:
        if key not in out or at > out[key]:
            out[key] = at

    for rec in found:
        if rec.get("kind") not in AGENT_CANCEL_KINDS:
            continue
        try:
            at = parse_time(rec.get("at"))
        except ValueError:
            continue
        if at is None:
            continue
        key = (rec["node"], rec["job_id"])
        if rec.get("event") == "intent":
            pending[key] = at
        elif rec.get("event") == "outcome":
            began = pending.pop(key, None)
            detail = str(rec.get("detail") or "")
            if rec.get("result") == "sent":
                note(key, at)
            elif detail.startswith("unknown:"):
                note(key, began or at)
    for key, at in pending.items():
        note(key, at)
    return out


def records(
    path: Path, warn: Callable[[str], None] = _warn, *, cluster: Binding | None = None
) -> list[dict[str, Any]]:
    """Every whole, readable record of the journal at `path`, in the order written; with
    `cluster`, only those of that cluster's runs (belongs).

    A line that is not one (a crash mid-write) is reported through `warn` with its
    line number and skipped. Records written before the schema and run ids are
    returned as they are. Raises FileNotFoundError when there is no journal, and
    SpurctlError when it cannot be read or is not a regular file.
    """
    if path.exists() and not path.is_file():
        # A device or a pipe holds no run, and reading one may never end (/dev/full).
        raise SpurctlError(f"journal {path} is not a regular file; pass --journal PATH")
    try:
        from spurctl.sources import bounded

        data = bounded.read_bytes(path, bounded.JOURNAL, f"journal {path}")
    except FileNotFoundError:
        raise
    except OSError as exc:  # a directory, no permission
        raise SpurctlError(f"cannot read journal {path}: {exc.strerror}") from None
    check_start(data[:FIRST_LINE_LIMIT], path)
    out: list[dict[str, Any]] = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            rec = record_of(raw)
        except Exception as exc:  # whatever a torn line does, it must not stop the reader
            why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            warn(f"journal {path} line {lineno}: unreadable record skipped ({why})")
            continue
        if belongs(rec, cluster):
            out.append(rec)
    return out


def record_of(raw: bytes) -> dict[str, Any]:
    """One journal line as a record with a str node and a job id in range; ValueError if not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8: cut mid-character") from None
    rec = json.loads(text)
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")
    node, job_id = rec.get("node"), rec.get("job_id")
    if not isinstance(node, str) or not node:
        raise ValueError("no node name")
    if type(job_id) is not int or not 0 <= job_id <= MAX_JOB_ID:
        raise ValueError(f"job_id is not a job id: {str(job_id)[:40]}")
    return rec
