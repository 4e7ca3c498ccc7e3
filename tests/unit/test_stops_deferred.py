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


def test_sigterm_and_sighup_are_ctrl_c_inside_stops_as_ctrl_c_and_named() -> None:
    from spurctl.act.stops import stops_as_ctrl_c

    before = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGHUP)}
    for stop in (signal.SIGTERM, signal.SIGHUP):
        box: dict[str, str] = {}
        with pytest.raises(KeyboardInterrupt), stops_as_ctrl_c(box):
            signal.raise_signal(stop)
        assert box == {"signal": stop.name}
    assert {n: signal.getsignal(n) for n in before} == before


def test_a_stop_deferred_inside_stops_as_ctrl_c_is_raised_after_the_block() -> None:
    from spurctl.act.stops import stops_as_ctrl_c

    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), stops_as_ctrl_c(), stops_deferred():
        steps.append("call")
        signal.raise_signal(signal.SIGTERM)
        steps.append("its record")
    assert steps == ["call", "its record"]


def test_stops_held_drops_every_stop_so_the_putting_back_is_said() -> None:
    from spurctl.act.stops import stops_as_ctrl_c, stops_held

    done: list[str] = []
    with stops_as_ctrl_c(), stops_held():
        for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.raise_signal(stop)
            done.append(stop.name)
    assert done == ["SIGINT", "SIGTERM", "SIGHUP"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
