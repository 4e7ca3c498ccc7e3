"""The terminal side of `spurctl audit --watch`: the signals its screen needs, and the
loop that shows each round on it.

Signals are the command layer's (render/ only draws): Ctrl-C is held while a drawing
is being written, and a resized terminal (SIGWINCH) hands the screen its new size.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from types import TracebackType
from typing import Protocol

from spurctl.decide.tracker import WatchRound
from spurctl.errors import ExitStatus, SpurctlError


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C until the block is done, then raise it.

    A KeyboardInterrupt landing inside rich's write leaves the drawing in rich's
    buffer, and the next write repeats it without moving the cursor back: a stale
    copy of the round stays above the final view.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            if callable(previous):
                previous(signal.SIGINT, None)
            else:
                raise KeyboardInterrupt


@contextmanager
def resizes(resize: Callable[[int, int], None], fd: int) -> Iterator[None]:
    """While in the block, a resized terminal (SIGWINCH) calls `resize(columns, lines)`
    with the size of the terminal on `fd`, as the terminal says it (not $COLUMNS)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def resized(_signum: int, _frame: object) -> None:
        try:
            size = os.get_terminal_size(fd)
        except OSError:  # no longer a terminal: nothing to redraw for
            return
        resize(size.columns, size.lines)

    previous = signal.signal(signal.SIGWINCH, resized)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)


class Screen(Protocol):
    """Where the rounds go (render.watch.WatchScreen, render.watch_json.JsonLines)."""

    def __enter__(self) -> Screen: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...
    def follow(self, rounds: Iterator[WatchRound]) -> WatchRound: ...
    def running(self) -> None: ...


def follow(
    rounds: Callable[..., Generator[WatchRound, None, None]],
    screen: Screen,
    *,
    signals: AbstractContextManager[None] | None = None,
) -> int:
    """Show `rounds(before_round=hook)` (the hook each round calls as it starts) on
    `screen` until they end or Ctrl-C; the exit status the last round earns.
    `signals`: what the screen needs installed meanwhile (`resizes`)."""
    from contextlib import nullcontext

    from spurctl.render.watch import first_round_interrupted
    from spurctl.usecases.audit import FirstRoundInterrupted

    try:
        # The rounds are closed on the way out: a round started ahead stops with them.
        with (
            screen,
            signals or nullcontext(),
            closing(rounds(before_round=lambda _: screen.running())) as each,
        ):
            last = screen.follow(each)
    except FirstRoundInterrupted as stopped:
        first_round_interrupted(stopped.doing)
        return ExitStatus.INTERRUPTED
    if last.error is not None:
        raise SpurctlError(f"the last round failed: {last.error}")
    return last.exit_status
