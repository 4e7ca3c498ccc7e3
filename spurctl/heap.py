"""Where spurctl spends less on memory management, the one place this is explained.

A 20,000-node audit builds millions of small objects that never form cycles.
- `gc_paused`: while bulk data is built, the cyclic collector would rescan the
  growing heap at every allocation burst (json parsing alone ran 3x slower);
  reference counting still frees everything. Ending a pause moves the new objects
  straight to the oldest generation (freeze then unfreeze: no scan).
- `in_child` and `Child`: a watch's rounds each build and drop an audit's worth of objects;
  in one long-lived heap their freed blocks leave holes that the next round's,
  sized differently, do not fill, and the peak crept up round after round
  (517 -> 651 MiB over 100 rounds at 20,000 nodes; capping glibc's arenas and
  malloc_trim before each round only slowed it to 370 -> 402-408, growth
  1.09-1.10 against a 1.10 target; bench/watch_rounds.py and bench/README.md).
  Each round now runs in a forked copy of the process that hands back only its
  findings and exits: its heap goes with it, whole (the largest process of a
  100-round watch peaked at 360 MiB after round 5 and 364 after round 100).
- `keep_until_exit` and `exit_now`: freeing an audit's objects one by one costs
  ~50 ms when the command's frame unwinds and ~0.1 s in the interpreter's
  teardown; the OS frees the whole heap at once on `os._exit`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, NoReturn, TypeVar, cast

import msgspec

from spurctl.errors import SpurctlError

T = TypeVar("T")

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block.

    Blocks may nest and overlap across threads (an audit reads the controller
    and the inventories at once): the collector comes back, if it was on, when
    the last of them ends.
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                # Only when nothing else froze objects: unfreeze would release theirs too.
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                if _was_enabled:
                    gc.enable()


# After Ctrl-C, how long the child may take to unwind and say what it stopped.
CHILD_UNWIND_S = 10.0


def in_child(work: Callable[[], T], *, result_type: Any = None) -> T:
    """`work()` in a forked copy of this process: its result, or the exception it raised.

    Everything `work` allocates lives and dies in the copy; this process gets back
    only the result through a pipe, so what it keeps for longer is all its heap
    ever holds. The result is pickled, or with `result_type` encoded as msgpack
    and decoded as that type (msgspec: a watch round's 11,000 findings in 8 ms
    where pickle takes 35). Exceptions are pickled, with the copy's traceback as
    a note. The copy inherits the process as it is (options, the secrets to
    redact, a test's patches), so `work` runs as it would here. Where there is
    no fork (Windows), `work()` runs in this process.

    Ctrl-C: from a terminal it reaches both processes; from `kill -INT` only this
    one, which passes it on. Either way the copy raises KeyboardInterrupt once
    (a second SIGINT is ignored there), unwinds and answers with it, and that is
    raised here: it says what was interrupted (audit's FirstRoundInterrupted). A
    copy that has not answered within CHILD_UNWIND_S, or a second Ctrl-C here,
    is killed and the KeyboardInterrupt raised as is. A copy that dies without
    answering (the OOM killer, a crash) is a SpurctlError naming how it ended.
    """
    return Child(work, result_type=result_type).result()


class Child(Generic[T]):
    """`in_child` in two steps: the copy starts working when this is made, and
    `result()` waits for its answer; meanwhile this process may do other work.
    `cancel()` stops a copy whose answer is no longer wanted (as Ctrl-C would,
    then by force) and waits for it to end; `result()` or `cancel()`, once."""

    def __init__(self, work: Callable[[], T], *, result_type: Any = None) -> None:
        self._result_type = result_type
        self._pid: int | None = None
        self._here: Callable[[], T] | None = None
        if not hasattr(os, "fork"):
            self._here = work
            return
        # What this process has buffered must not be written twice, by it and by the copy.
        sys.stdout.flush()
        sys.stderr.flush()
        read_end, write_end = os.pipe()
        parent, prctl = os.getpid(), _prctl()
        pid = os.fork()
        if pid == 0:  # the copy: never returns
            os.close(read_end)
            _die_with(parent, prctl)
            _answer(work, write_end, typed=result_type is not None)
        os.close(write_end)
        self._pid, self._fd = pid, read_end

    def result(self) -> T:
        if self._here is not None:
            return self._here()
        pid, fd = self._take()
        chunks: list[bytes] = []
        try:
            try:
                _read_all(fd, chunks)
            except KeyboardInterrupt as interrupt:
                raise (_interrupted(pid, fd) or interrupt) from None
        except BaseException:
            _end(pid, fd)
            raise
        os.close(fd)
        if not chunks:
            raise SpurctlError(
                f"the child process (pid {pid}) {_reap(pid)} before it answered; if the "
                "kernel killed it (dmesg names the OOM killer), give this process more memory"
            )
        try:
            return cast(T, _outcome(b"".join(chunks), self._result_type))
        finally:
            _reap(pid)  # after decoding: the copy's exit, its whole heap unmapped, ran meanwhile

    def cancel(self) -> None:
        if self._pid is None:
            self._here = None
            return
        pid, fd = self._take()
        _interrupted(pid, fd)  # a copy that stops within CHILD_UNWIND_S ends its own way
        _end(pid, fd)

    def _take(self) -> tuple[int, int]:
        if self._pid is None:
            raise RuntimeError("a child's answer is taken once")
        pid, self._pid = self._pid, None
        return pid, self._fd


def _end(pid: int, fd: int) -> None:
    """Kill the copy (answered or not, nothing more is read from it) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.close(fd)
    _reap(pid)


_RESULT, _PICKLED = b"m", b"p"  # an answer's first byte: msgpack of the result, or a pickle


def _outcome(answer: bytes, result_type: Any) -> object:
    """The result an answer carries, or the exception it carries raised."""
    body = memoryview(answer)[1:]
    if answer[:1] == _RESULT:
        return msgspec.msgpack.decode(body, type=result_type)
    ok, value = pickle.loads(body)
    if ok:
        return value
    raise value


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """Linux's prctl(2), looked up once in the parent (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return cast(Callable[..., int], ctypes.CDLL(None, use_errno=True).prctl)
    except (OSError, AttributeError):
        return None


def _die_with(parent: int, prctl: Callable[..., int] | None) -> None:
    """In the copy: SIGTERM it when `parent` dies (kill -9, a systemd stop), so that
    a round nobody waits for does not go on reading the cluster. Where there is
    no prctl the copy ends at its answer, when it finds nobody reading it."""
    if prctl is None:
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the request was made
        os._exit(1)


def _answer(work: Callable[[], object], fd: int, *, typed: bool) -> NoReturn:
    """The copy's side of `in_child`: run `work`, write its outcome to `fd`, exit."""
    code = 0
    try:
        # Short-lived, and an audit's objects form no cycles (gc_paused): the collector
        # would only scan, and so copy, the parent's pages.
        gc.disable()
        _default_handlers()
        signal.signal(signal.SIGINT, _interrupt_once)
        try:
            outcome: tuple[bool, object] = (True, work())
        except BaseException as exc:  # the parent raises it
            if not isinstance(exc, KeyboardInterrupt):
                exc.add_note("raised in a child process:\n" + traceback.format_exc().rstrip())
            outcome = (False, exc)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # answered: nothing left to interrupt
        try:
            if typed and outcome[0]:
                data = _RESULT + msgspec.msgpack.encode(outcome[1])
            else:
                data = _PICKLED + pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an outcome neither can carry
            failure = RuntimeError(f"the child's outcome could not be passed back: {exc!r}")
            data = _PICKLED + pickle.dumps((False, failure))
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # whatever it was, the parent sees no answer
        code = 1
    os._exit(code)


def _default_handlers() -> None:
    """Undo the parent's Python signal handlers in the copy: a terminal's resize
    reaches both, and only the parent may redraw its view."""
    for number in signal.valid_signals():
        try:
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and the like: never had a handler
            continue


def _interrupt_once(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _read_all(fd: int, chunks: list[bytes], deadline: float | None = None) -> bool:
    """Read `fd` to its end into `chunks`; False if `deadline` (monotonic) came first."""
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return True
        chunks.append(chunk)


def _interrupted(pid: int, fd: int) -> BaseException | None:
    """After Ctrl-C here: the KeyboardInterrupt the copy answered with, or None
    (it answered otherwise, too late, or a second Ctrl-C came: it is killed)."""
    chunks: list[bytes] = []  # what was read before is no answer; the copy's interrupt is
    try:
        os.kill(pid, signal.SIGINT)  # ignored there if the terminal sent it one already
        answered = _read_all(fd, chunks, time.monotonic() + CHILD_UNWIND_S)
    except KeyboardInterrupt:
        answered = False
    answer = b"".join(chunks)
    if not answered or answer[:1] != _PICKLED:  # none in time, or a result after all
        return None
    try:
        ok, value = pickle.loads(memoryview(answer)[1:])
    except Exception:  # part of an answer: the interrupt here stands
        return None
    return value if not ok and isinstance(value, KeyboardInterrupt) else None


def _reap(pid: int) -> str:
    """Wait for the copy to end; how it ended, as "exited N" or "was killed by ..."."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"was killed by signal {number} ({signal.strsignal(number) or 'unknown'})"
    return f"exited {os.waitstatus_to_exitcode(status)}"


# What the last command produced, held until the process exits.
_kept: list[object] = []


def keep_until_exit(*results: object) -> None:
    """Hold a command's results until `exit_now`; in a test that runs commands
    in-process, each call replaces the last one's."""
    _kept[:] = results


def exit_now(code: int) -> NoReturn:
    """Exit without freeing the heap object by object.

    Every file a command writes is closed before it returns; only the standard
    streams are left to flush. If they cannot be flushed (a closed pipe), the
    interpreter's own exit reports it as it always has.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        sys.exit(code)
    os._exit(code)
