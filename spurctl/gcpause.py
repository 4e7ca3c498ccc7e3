"""Pause Python's cyclic garbage collector while building large, acyclic data.

Converting a 200,000-job answer or parsing 100,000 holdings allocates millions
of small objects that never form cycles; each allocation burst still triggers
collections that rescan everything built so far, which can cost more than the
work itself. Reference counting frees everything as usual; only the cycle
search waits until the last paused block ends.

Objects made during a pause all sit in the youngest generation, so the first
collection after it would scan every one of them. Ending a pause moves them
straight to the oldest generation instead (freeze then unfreeze: no scan),
where only a full collection looks at them, as it would have anyway.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

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
