"""act/stops.stops_deferred: a Ctrl-C (or SIGTERM, SIGHUP) that lands inside the block
acts once the block ends, never in the middle of it."""

from __future__ import annotations

import signal
import threading

import pytest

from spurctl.act.stops import stops_deferred


def test_a_ctrl_c_inside_the_block_is_raised_after_it_whole() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), stops_deferred():
        steps.append("call")
        signal.raise_signal(signal.SIGINT)
        steps.append("its record")  # not cut apart from the call
    assert steps == ["call", "its record"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_block_without_a_signal_changes_nothing() -> None:
    before = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with stops_deferred():
        pass
    assert {n: signal.getsignal(n) for n in before} == before


def test_sigterm_goes_to_the_handler_the_command_had() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda n, _f: seen.append(n))
    try:
        with stops_deferred():
            signal.raise_signal(signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outside_the_main_thread_it_is_a_plain_block() -> None:
    done: list[bool] = []

    def body() -> None:
        with stops_deferred():
            done.append(True)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout=10)
    assert done == [True]
