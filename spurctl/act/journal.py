"""The reclaim journal: JSON Lines, appended, never rewritten.

Every cancel gets an `intent` record before it is sent and an `outcome` after;
each record is flushed and fsynced before the next cancel goes out, so after a
crash or Ctrl-C an intent without an outcome says exactly which node to check.

One writer at a time per journal: an open Journal holds an exclusive lock
(flock on the sibling `<journal>.lock`, which records the holder's pid) for as
long as it is open, and a second run refuses naming that pid, at once or after
waiting for it (`journal_lock(path, wait_s)`: a manual command's --lock-wait, for an
autopilot's round to end). An autopilot holds its own lock, `<journal>.autopilot.lock`,
from start to stop (one autopilot per journal) and the journal's only while a round
acts (`journal_lock_if_free`: a round that finds it taken sends nothing). The lock
is the journal's real file's (a link given as the journal is followed once, in
real_path), so runs reaching one journal by different names exclude each other.
Neither file is ever opened through a link (O_NOFOLLOW), the lock is truncated
only when it holds a pid or nothing, and a file whose first line is not a journal
record is never appended to (issue 39.2). Within one
process the lock is re-entrant, so `journal_lock(path)` can hold it across a
whole run that opens the Journal more than once. Reading (`unresolved`, dry
runs) never takes the lock. The journal is created 0600 in a 0700 directory; a
torn or unreadable line is reported and skipped, never fatal.

Every record carries `"schema": "spurctl.journal/v1"` and `run`: one id per hold
of the lock, so the records of one reclaim (its sends, and the failures its
re-collect journals later through another Journal) share it, and a node-release
gets its own. An outcome that closes an intent an earlier, interrupted run left
open keeps that run's id (so the earlier run reads as interrupted, and the new
run is not charged with it) and names the closing run in `recorded_by`. A run
a signal stopped says so in `interrupted` records of its own (Journal.interrupted):
they name a node and a job, as every record does, and pair with no intent.
"""

from __future__ import annotations

import errno
import fcntl
import getpass
import json
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spurctl.errors import SpurctlError, redact
from spurctl.model import format_time, utcnow
from spurctl.sources.journal_records import (
    FIRST_LINE_LIMIT,
    SCHEMA,
    Unresolved,
    check_path,
    check_start,
    cluster_of,
    stamp,
    unresolved,
)

if TYPE_CHECKING:
    from spurctl.sources.settings import Connection


def default_path() -> Path:
    """The journal when no --journal names one (sources/user_config.default_journal)."""
    from spurctl.sources.user_config import default_journal

    return default_journal()


def operator_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in a container: still record something
        return str(os.getuid())


def real_path(path: Path) -> Path:
    """The journal's real file: a link given as --journal is followed here, once, and the
    lock and every write use what it leads to (two runs reaching one journal through
    different links share one lock). A link to nothing is refused: spurctl does not
    create a file wherever a link points, nor follows a link someone else controls
    (journal_records.check_path)."""
    check_path(path)
    return Path(os.path.realpath(path))


def lock_path(path: Path) -> Path:
    """The file beside the journal's real file whose flock says a reclaim is using it (and
    holds its pid)."""
    real = real_path(path)
    return real.with_name(real.name + ".lock")


def _make_parent(path: Path) -> None:
    # A directory spurctl creates for the journal is its owner's alone.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)


class _Held:
    __slots__ = ("count", "fd", "run")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.count = 1
        # One run id per hold: a reclaim holds the lock from its first intent to its
        # last verified outcome, whichever Journal objects write them.
        self.run = new_run_id()


def new_run_id() -> str:
    """A run id: the UTC time it began (sorts, reads, and a prefix selects), then 6 random hex."""
    return f"{utcnow().strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"


_held: dict[str, _Held] = {}
_held_lock = threading.Lock()


def _key(path: Path) -> str:
    return str(real_path(path))


# What a lock file spurctl wrote holds: its holder's pid and a newline, or nothing yet.
_LOCK_TEXT = re.compile(rb"[0-9]{0,20}\n?")


def _open_lock(path: Path, lock: Path) -> int:
    """A lock file of the journal at `path` (its lock, or its autopilot's), opened without
    following a link, and only if it is a lock spurctl wrote: anything else (a link, a
    device, a file with other links or text) is refused, never truncated."""
    real = real_path(path)
    if real.exists() and not real.is_file():
        # A device or a pipe is no journal, and its lock would land beside it (in /dev).
        raise SpurctlError(f"journal {path} is not a regular file; pass --journal PATH")
    if real.is_file():
        # Nor is a file whose first line is no journal record: no lock lands beside it.
        with suppress(OSError):  # unreadable: opening the journal itself says why
            with open(real, "rb") as fh:
                start = fh.read(FIRST_LINE_LIMIT)
            check_start(start, path)
    try:
        _make_parent(lock)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SpurctlError(
                f"journal lock {lock} is a symbolic link, and spurctl never writes through "
                "one: remove the link (it is only a lock) or pass --journal PATH"
            ) from None
        raise SpurctlError(
            f"cannot open journal lock {lock}: {exc.strerror}; pass --journal PATH"
        ) from None
    try:
        st = os.fstat(fd)
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = "not a regular file"
        elif st.st_nlink != 1:
            why = f"a file with {st.st_nlink} names (hard links)"
        elif not _LOCK_TEXT.fullmatch(os.pread(fd, 64, 0)):
            why = "it holds something other than a pid"
        if why is not None:
            raise SpurctlError(
                f"journal lock {lock} is not a lock spurctl wrote ({why}), so spurctl leaves "
                "it as it is: remove it if it is yours, or pass --journal PATH"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


# How often a run waiting for the journal's lock (--lock-wait) tries it again.
LOCK_POLL_S = 0.1
# The lock an autopilot holds from its start to its stop: one autopilot per journal.
AUTOPILOT_LOCK_SUFFIX = ".autopilot.lock"


def autopilot_lock_path(path: Path) -> Path:
    """The file beside the journal's real file whose flock says an autopilot runs on it."""
    real = real_path(path)
    return real.with_name(real.name + AUTOPILOT_LOCK_SUFFIX)


def _pid_in(fd: int) -> str:
    return os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"


def _autopilot_pid(path: Path) -> str | None:
    """The pid the autopilot lock beside `path` records (its last holder's), or None."""
    try:
        fd = os.open(autopilot_lock_path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _pid_in(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)


def holder_words(path: Path, pid: str) -> str:
    """Who holds the journal's lock, as a line says it: the autopilot when its own lock
    records that pid (it holds the journal's only while a round acts), else another run."""
    if pid != "unknown" and _autopilot_pid(path) == pid:
        return f"the autopilot (pid {pid})"
    return f"another spurctl run (pid {pid})"


def _try_acquire(path: Path) -> str | None:
    """Take the journal's lock if it is free (or this process holds it): None; else who
    holds it (holder_words)."""
    key = _key(path)
    with _held_lock:
        held = _held.get(key)
        if held is not None:
            held.count += 1
            return None
        fd = _open_lock(path, lock_path(path))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                pid = _pid_in(fd)
            finally:
                os.close(fd)
            return holder_words(path, pid)
        _write_pid(fd)
        _held[key] = _Held(fd)
        return None


def _write_pid(fd: int) -> None:
    try:
        # Checked under the lock: what is truncated here is the pid another run wrote.
        if _LOCK_TEXT.fullmatch(os.pread(fd, 64, 0)):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the lock is what counts; the pid is only for the message


def _acquire(path: Path, wait_s: float = 0.0) -> None:
    """Take the journal's lock, waiting for it at most `wait_s` seconds (--lock-wait; one
    stderr line says what it waits for); SpurctlError naming the holder when it is still
    taken then. A Ctrl-C (or SIGTERM as one) while waiting ends the wait: nothing was
    sent yet."""
    holder = _try_acquire(path)
    if holder is None:
        return
    if wait_s > 0:
        from spurctl.errors import note

        note(
            f"journal {path} is in use by {holder}: waiting up to {wait_s:g}s for it (--lock-wait)"
        )
        deadline = time.monotonic() + wait_s
        while holder is not None and time.monotonic() < deadline:
            time.sleep(min(LOCK_POLL_S, max(0.0, deadline - time.monotonic())))
            holder = _try_acquire(path)
        if holder is None:
            return
        raise SpurctlError(
            f"journal {path} is still in use by {holder} after {wait_s:g}s (--lock-wait); "
            "nothing was sent: run again, with a longer --lock-wait, or pass --journal PATH"
        )
    raise SpurctlError(
        f"journal {path} is in use by {holder}; nothing was sent: wait for it with "
        "--lock-wait SECONDS (one writer at a time per journal) or pass --journal PATH"
    )


def _held_run(path: Path) -> str:
    with _held_lock:
        held = _held.get(_key(path))
        return held.run if held is not None else new_run_id()


def _release(path: Path) -> None:
    key = _key(path)
    with _held_lock:
        held = _held.get(key)
        if held is None:
            return
        held.count -= 1
        if held.count == 0:
            del _held[key]
            os.close(held.fd)  # closing the last descriptor releases the flock


@contextmanager
def journal_lock(path: Path, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the journal's exclusive lock for a whole run (re-entrant in one process).

    Raises SpurctlError naming the holder's pid when another process holds it after
    `wait_s` seconds (0: at once).
    """
    _acquire(path, wait_s)
    try:
        yield
    finally:
        _release(path)


@contextmanager
def journal_lock_if_free(path: Path) -> Iterator[str | None]:
    """The journal's lock, held for the block when it is free: yields None then, else who
    holds it (holder_words), without waiting and without it (the autopilot's round)."""
    holder = _try_acquire(path)
    try:
        yield holder
    finally:
        if holder is None:
            _release(path)


@contextmanager
def autopilot_lock(path: Path) -> Iterator[None]:
    """One autopilot per journal: its own lock beside the journal's, held from start to
    stop (the journal's lock it takes only while a round acts). SpurctlError naming the
    first's pid when another autopilot holds it."""
    lock = autopilot_lock_path(path)
    fd = _open_lock(path, lock)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SpurctlError(
                f"journal {path} already has an autopilot (pid {_pid_in(fd)}): one autopilot "
                "per journal; stop that one first, or pass --journal PATH"
            ) from None
        _write_pid(fd)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


class Journal:
    """Append-only, fsynced, thread-safe.

    A record is on disk when `intent`/`outcome` returns. Threads appending at
    the same time share one fsync (group commit): a reclaim of many nodes at
    once would otherwise queue every send behind every other record's fsync.
    """

    def __init__(self, path: Path, conn: Connection | None = None, run: str | None = None) -> None:
        self.path = path
        self.operator = operator_name()
        # The cluster every record is written for, that of the run's connection
        # (journal_records.cluster_of): a run reads back only its own cluster's records.
        self.cluster = stamp(cluster_of(conn))
        self._lock = threading.Lock()  # orders writes
        self._sync_lock = threading.Lock()  # one fsync at a time
        self._written = 0  # records written and flushed to the OS
        self._synced = 0  # records known to be on disk
        self._broken: OSError | None = None  # the write that failed: the rest fail too
        _acquire(path)  # held until close(): SpurctlError if another run holds it
        # `run`: one id across several holds of the lock (an autopilot's rounds).
        self.run = run or _held_run(path)
        # (node, job_id) -> the earlier run whose open intent an outcome here closes.
        self._closing: dict[tuple[str, int], str | None] = {}
        # Fields every record adds after the common ones (the autopilot's `origin`, `round`).
        self.tags: dict[str, Any] = {}
        try:
            fd = _open_journal(path)
        except BaseException:
            _release(path)
            raise
        try:
            self._fh = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self._end_torn_line(fd)
        except OSError as exc:
            _release(path)
            raise SpurctlError(
                f"cannot open journal {path}: {exc.strerror}; pass --journal PATH"
            ) from None

    def _end_torn_line(self, fd: int) -> None:
        # A crash mid-record leaves a line without its newline; the next record
        # must start on a line of its own, or it would be torn too.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            self._fh.write("\n")
            self._fh.flush()

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            # Only a record whose write already failed (and was raised) can fail here:
            # every other one was flushed and fsynced when written.
            if self._broken is None:
                raise
        finally:
            _release(self.path)

    def still_open(self, items: Iterable[Unresolved]) -> list[Unresolved]:
        """Those of `items` the journal, read now under the lock, still leaves open.

        A list read before the lock was taken may name intents another run has
        since closed; only the ones still open may be closed as interrupted.
        """
        now = set(unresolved(self.path, warn=lambda _: None))
        still = [u for u in items if u in now]
        for u in still:
            self._closing[(u.node, u.job_id)] = u.run
        return still

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _append(self, record: dict[str, Any]) -> None:
        line = redact(json.dumps(record, ensure_ascii=False))
        with self._lock:
            if self._broken is not None:
                # A failed write leaves its text in the file object's buffer: a later
                # record would carry it, torn, and fail the same way (a full disk).
                raise OSError(self._broken.errno, self._broken.strerror)
            try:
                self._fh.write(line + "\n")
                self._fh.flush()
            except OSError as exc:
                self._broken = exc
                raise
            self._written += 1
            mine = self._written
        with self._sync_lock:
            if self._synced < mine:
                # Every record counted in _written was flushed before it was counted,
                # so this fsync makes all of them durable, ours included.
                with self._lock:
                    covered = self._written
                os.fsync(self._fh.fileno())
                self._synced = covered

    def record_of(self, event: str, node: str, job_id: int, kind: str) -> dict[str, Any]:
        """What every record of one entry opens with: this run, the event, when, who, the
        cluster it was written for, and the entry (node, job, kind)."""
        return {
            "schema": SCHEMA,
            "run": self.run,
            "event": event,
            "at": format_time(utcnow().replace(microsecond=0)),
            "operator": self.operator,
            **self.cluster,
            "node": node,
            "job_id": job_id,
            "kind": kind,
            **self.tags,
        }

    def intent(
        self, node: str, job_id: int, kind: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        """An intent; `extra` adds fields of its own (a node administration's `action` and
        `step`, what it will put back), never one of the fields every record carries."""
        self._closing.pop((node, job_id), None)  # this run's own from here on
        self._append(_with(self.record_of("intent", node, job_id, kind), extra))

    def outcome(
        self,
        node: str,
        job_id: int,
        kind: str,
        result: str,
        detail: str,
        confirmed: bool | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """An outcome; `confirmed` (when given) says whether a re-collect (or, for a node
        administration, a read back) showed it done; `extra` as for `intent`."""
        record = _with(self.record_of("outcome", node, job_id, kind), extra)
        key = (node, job_id)
        if key in self._closing:
            # Closing an intent an earlier, interrupted run left open: it belongs to that run.
            earlier = self._closing.pop(key)
            record["run"] = earlier or self.run
            record["recorded_by"] = self.run
        record.update(result=result, detail=detail)
        if confirmed is not None:
            record["confirmed"] = confirmed
        self._append(record)

    def interrupted(
        self, node: str, job_id: int, kind: str, signal: str, detail: str, *, sent: bool
    ) -> None:
        """A signal stopped the run with this entry undone: never sent (`sent` False), or
        sent and left unconfirmed. Neither an intent nor an outcome: every reader that
        pairs those two passes it by."""
        self._append(
            {
                **self.record_of("interrupted", node, job_id, kind),
                "signal": signal,
                "sent": sent,
                "detail": detail,
            }
        )


def _open_journal(path: Path) -> int:
    """The journal's real file for appending (and reading its start), created 0600 if
    absent; never through a link, never a file other than a spurctl journal."""
    real = real_path(path)
    try:
        _make_parent(real)
        fd = os.open(
            real, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError as exc:
        raise SpurctlError(
            f"cannot open journal {path}: {exc.strerror}; pass --journal PATH"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpurctlError(f"journal {path} is not a regular file; pass --journal PATH")
        check_start(os.pread(fd, FIRST_LINE_LIMIT, 0), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _with(record: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """`record` and the fields of `extra` it does not have (never overriding one of them)."""
    return {**record, **{k: v for k, v in (extra or {}).items() if k not in record}}
