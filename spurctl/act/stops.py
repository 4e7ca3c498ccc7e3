"""Stops (Ctrl-C, SIGTERM, SIGHUP): all three one interrupt, and deferred across a step
that must not be cut apart.

`stops_as_ctrl_c` makes SIGTERM and SIGHUP raise KeyboardInterrupt as Ctrl-C does: a
command that changes nodes (cli.py installs it for each) then says what it sent
whichever of them stopped it (a systemd stop, a closed ssh session), where their
default action would end the process without a word and leave a drain or a removed
node's hold unsaid. A node call and the run's record of it, or handing a node to the cancel pool and
noting that it was handed: a stop that lands in between would leave a call made but
not known to the run. Blocking the signals in the main thread's mask does not hold
them: the kernel gives a process-wide signal to any thread that does not block it
(gRPC's among them), and Python then runs the handler in the main thread all the
same. So the handlers are swapped for the block, and a stop caught meanwhile is
handed to the handler it would have met, once the block ends.

`daemon_signals` is the autopilot's (a daemon between rounds): SIGTERM and SIGINT stop
it, SIGHUP asks it to re-read its configuration before its next round.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_AS_CTRL_C = (signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stops_as_ctrl_c(box: dict[str, str] | None = None) -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does; the
    name of the first that lands goes into `box["signal"]`. Outside the main thread
    (signals cannot be caught there) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: object) -> None:
        if box is not None:
            box.setdefault("signal", signal.Signals(signum).name)
        raise KeyboardInterrupt

    try:
        for number in _AS_CTRL_C:
            previous[number] = signal.signal(number, handler)
        yield
    finally:
        for caught, old in previous.items():
            signal.signal(caught, old)


@contextmanager
def stops_deferred() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block ends, then act as they would have:
    a node call, its journal outcome and the caller's record of it are never cut apart
    (a drain sent but not known to the run would be left in place). Python runs signal
    handlers in the main thread whichever thread the signal reached, so the handlers are
    swapped, not the signal mask. Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {number: signal.signal(number, lambda n, _f: caught.append(n)) for number in _STOPS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if caught:
            first = signal.Signals(caught[0])
            handler = previous[first]
            if callable(handler):  # Ctrl-C's KeyboardInterrupt, or the command's own
                handler(first, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(first)


@contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP are dropped for the block: a run already stopping puts
    back what it owes and says what it did, and a second Ctrl-C must not turn that into
    a bare `interrupted` with a call gone out unsaid (each call has its own deadline, so
    the block ends). Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, lambda _n, _f: None) for number in _STOPS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@dataclass(slots=True)
class DaemonFlags:
    """What a daemon's signals asked of it: to stop, or to re-read its configuration."""

    stopping: bool = False
    reload: bool = False


@contextmanager
def daemon_signals(flags: DaemonFlags) -> Iterator[None]:
    """SIGTERM/SIGINT: stop (a KeyboardInterrupt where it lands; the send paths defer it
    past the call in flight); SIGHUP: re-read the configuration before the next round."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_n: int, _f: object) -> None:
        flags.stopping = True
        raise KeyboardInterrupt

    def reload(_n: int, _f: object) -> None:
        flags.reload = True

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, stop),
        signal.SIGINT: signal.signal(signal.SIGINT, stop),
        signal.SIGHUP: signal.signal(signal.SIGHUP, reload),
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
