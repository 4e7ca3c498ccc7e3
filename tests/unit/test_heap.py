"""spurctl.heap.in_child: work in a forked copy, its outcome back, Ctrl-C and death handled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spurctl import heap
from spurctl.errors import DocumentError, SpurctlError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="in_child forks: needs POSIX")

_touched: list[str] = []


def test_the_work_runs_in_another_process_and_only_its_result_comes_back() -> None:
    _touched.clear()
    _touched.append("set here, before the call")

    def work() -> tuple[int, list[str], int]:
        seen = list(_touched)  # the copy starts as this process is
        _touched.append("set in the copy")
        big = bytearray(64 << 20)  # allocated and dropped there, never here
        return os.getpid(), seen, len(big)

    pid, seen, size = heap.in_child(work)

    assert pid != os.getpid()
    assert seen == ["set here, before the call"]
    assert size == 64 << 20
    assert _touched == ["set here, before the call"]  # the copy's change stayed there


def test_an_error_comes_back_as_itself_with_the_childs_traceback_as_a_note() -> None:
    def work() -> None:
        raise DocumentError("inv.jsonl line 3: not JSON")

    with pytest.raises(DocumentError, match=r"inv\.jsonl line 3: not JSON") as caught:
        heap.in_child(work)

    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1
    assert notes[0].startswith("raised in a child process:")
    assert "in work" in notes[0]


def test_a_copy_that_dies_before_answering_is_one_error_naming_how() -> None:
    def work() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(SpurctlError, match=r"was killed by signal 9 \(Killed\) before it answered"):
        heap.in_child(work)


def test_an_outcome_pickle_cannot_carry_is_an_error_not_a_hang() -> None:
    def work() -> object:
        return threading.Lock()  # no pickle for a lock

    with pytest.raises(RuntimeError, match="could not be passed back"):
        heap.in_child(work)


def _interrupt_once_started(started: Path) -> threading.Thread:
    """SIGINT to this process (as `kill -INT` would send), once the copy has written
    `started` and this process's main thread waits in heap's read of the answer (a
    SIGINT before that, on a loaded machine, would be a Ctrl-C the test did not mean);
    waits 10 s at most."""
    main = threading.main_thread().ident

    def reading() -> bool:
        frame = sys._current_frames().get(main or 0)
        while frame is not None:
            if frame.f_code is heap._read_all.__code__:
                return True
            frame = frame.f_back
        return False

    def fire() -> None:
        deadline = time.monotonic() + 10
        while not (started.exists() and reading()) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


class Stopped(KeyboardInterrupt):
    pass


def test_ctrl_c_here_reaches_the_copy_and_what_it_stopped_is_raised_here(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"

    def work() -> None:
        started.write_text(str(os.getpid()))
        try:
            time.sleep(30)
        except KeyboardInterrupt:
            raise Stopped("sleeping") from None

    thread = _interrupt_once_started(started)
    begun = time.monotonic()
    with pytest.raises(Stopped, match="sleeping"):
        heap.in_child(work)
    thread.join(timeout=5)

    assert time.monotonic() - begun < 10
    with pytest.raises(ProcessLookupError):  # reaped, not left running
        os.kill(int(started.read_text()), 0)


def test_a_copy_that_will_not_stop_is_killed_after_its_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heap, "CHILD_UNWIND_S", 0.5)
    started = tmp_path / "started"

    def work() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        started.write_text(str(os.getpid()))
        time.sleep(30)

    thread = _interrupt_once_started(started)
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as caught:
        heap.in_child(work)
    thread.join(timeout=5)

    assert type(caught.value) is KeyboardInterrupt
    assert time.monotonic() - begun < 5
    with pytest.raises(ProcessLookupError):
        os.kill(int(started.read_text()), 0)


def test_without_fork_the_work_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(heap.os, "fork")
    assert heap.in_child(os.getpid) == os.getpid()


def test_the_copy_drops_this_processs_signal_handlers_but_for_its_own_ctrl_c() -> None:
    heard: list[int] = []
    previous = signal.signal(signal.SIGWINCH, lambda n, _f: heard.append(n))
    try:

        def work() -> tuple[object, bool]:
            return signal.getsignal(signal.SIGWINCH), callable(signal.getsignal(signal.SIGINT))

        winch, own_interrupt = heap.in_child(work)
    finally:
        signal.signal(signal.SIGWINCH, previous)

    assert winch == signal.SIG_DFL  # a resize during a round redraws nothing from the copy
    assert own_interrupt


ORPHANED = """
import os, sys, time
from spurctl import heap

def work():
    with open(sys.argv[1], "w") as out:
        out.write(str(os.getpid()))
    time.sleep(60)

heap.Child(work)
time.sleep(60)
"""


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (gone, or a zombie nobody reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG): Linux")
def test_a_copy_ends_when_the_process_that_forked_it_is_killed(tmp_path: Path) -> None:
    started = tmp_path / "child"
    proc = subprocess.Popen([sys.executable, "-c", ORPHANED, str(started)])
    try:
        deadline = time.monotonic() + 10
        while not started.exists() or not started.read_text():
            assert time.monotonic() < deadline, "the copy never started"
            time.sleep(0.01)
        child = int(started.read_text())
        proc.kill()  # SIGKILL: the parent cleans nothing up
        proc.wait(timeout=5)
        deadline = time.monotonic() + 5
        while not _gone(child):
            assert time.monotonic() < deadline, f"the copy {child} outlived its parent"
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
