"""The test helpers' own promise: a child the suite starts turns Ctrl-C into
KeyboardInterrupt even when the suite itself was started with SIGINT ignored
(in the background, or under nohup), so every Ctrl-C test means what it says."""

from __future__ import annotations

import signal
import sys

from tests.cli import running

SHOW = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


def test_a_child_started_while_sigint_is_ignored_gets_python_s_own_handler() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job starts
    try:
        with running([sys.executable, "-c", SHOW]) as proc:
            out, err = proc.communicate(timeout=30)
    finally:
        signal.signal(signal.SIGINT, before)
    assert (proc.returncode, out.strip()) == (0, "True"), err


def test_the_suite_itself_raises_keyboardinterrupt_on_sigint() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
