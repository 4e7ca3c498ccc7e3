"""Where spurctl spends less on memory management, the one place this is explained.

A 20,000-node audit builds millions of small objects that never form cycles.
- `gc_paused`: while bulk data is built, the cyclic collector would rescan the
  growing heap at every allocation burst (json parsing alone ran 3x slower);
  reference counting still frees everything. Ending a pause moves the new objects
  straight to the oldest generation (freeze then unfreeze: no scan).
- `few_malloc_arenas`: glibc gives threads their own malloc arenas, and memory
  freed in one is not reused by another; a watch's rounds read on fresh threads
  (gRPC's, the inventory reader's), so its peak crept up round after round
  (431 -> 525 MiB over 100 rounds at 20,000 nodes; bench/watch_rounds.py).
- `trim_heap`: even in two arenas, a round's freed objects leave holes that the
  next round's differently sized ones do not fill, and glibc keeps them; handing
  the free pages back before each round slowed the peak's creep (391 -> 440 MiB
  over 100 rounds without; 370 -> 402-408 with, growth 1.09-1.10 where the target
  is 1.10; bench/watch_rounds.py and bench/README.md).
- `keep_until_exit` and `exit_now`: freeing an audit's objects one by one costs
  ~50 ms when the command's frame unwinds and ~0.1 s in the interpreter's
  teardown; the OS frees the whole heap at once on `os._exit`.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

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


# glibc's mallopt parameter (malloc.h); two arenas: the main thread's and one for the rest.
_M_ARENA_MAX = -8
_WATCH_ARENAS = 2


def few_malloc_arenas() -> bool:
    """Cap glibc's malloc arenas for a long-running process; False where this is not
    glibc (musl, macOS), which leaves memory as it was."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        return bool(libc.mallopt(_M_ARENA_MAX, _WATCH_ARENAS))
    except AttributeError:  # a libc without mallopt
        return False


def _glibc() -> Any:
    """The C library on Linux, or None (another platform, or none to be found)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None or not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def trim_heap() -> bool:
    """Give the pages malloc holds free back to the OS (glibc's malloc_trim);
    False where this is not glibc, which leaves memory as it was."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        return bool(libc.malloc_trim(0))
    except AttributeError:  # a libc without malloc_trim
        return False


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
