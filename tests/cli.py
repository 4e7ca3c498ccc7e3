"""Running spurctl for real in tests: the CLI as a subprocess in a clean environment, dead ports.

Every run gets its own HOME, XDG_STATE_HOME and XDG_CONFIG_HOME (so ~/.spur/token,
the default journal and spurctl's config.toml are the test's own) and no SPUR_* or
SPURCTL_* variable from the developer's shell.

Every wait here has a deadline, and a child still running when its test ends is
killed with its whole process group: a regression fails in seconds, it never
hangs the suite.
"""

from __future__ import annotations

import io
import os
import queue
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO, Any

WORKTREE = Path(__file__).resolve().parents[1]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPUR_", "SPURCTL_")) and k != "GRPC_ENABLE_FORK_SUPPORT"
    }
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / "state"),
        # The run's own config.toml (none unless the test writes one), never the developer's.
        XDG_CONFIG_HOME=str(home / ".config"),
        # This checkout's spurctl and simulator (sim/, a distribution of its own).
        PYTHONPATH=os.pathsep.join([str(WORKTREE), str(WORKTREE / "sim")]),
        # Wide enough that rich never folds a table cell the test reads.
        COLUMNS="240",
    )
    env.update(extra)
    return env


def spurctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "spurctl", *args]


def home_for(home: Path | None = None) -> Path:
    """HOME for a run: the one given, made if missing, or else a fresh one."""
    if home is None:
        return Path(tempfile.mkdtemp(prefix="spurctl-home-"))
    home.mkdir(parents=True, exist_ok=True)
    return home


def run_cli(
    *args: str,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """The CLI in clean_env, HOME a fresh directory unless given: called in this process
    (spurctl.cli.main, as the console script calls it), or with `process` as a real
    subprocess where the process itself is the point (its exit, its signals, its fds)."""
    if process or "--watch" in args:  # the watch forks its rounds: a process of its own
        return subprocess.run(
            spurctl_argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(home_for(home), **(env or {})),
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    return run_in_process(
        list(args), clean_env(home_for(home), **(env or {})), timeout=timeout, cwd=cwd
    )


class _Captured(io.StringIO):
    """A standard stream as a pipe looks to spurctl: no terminal, text kept for the test."""

    def isatty(self) -> bool:
        return False


class InProcessTimeout(Exception):
    """A command called in-process ran past its test's deadline."""


def run_in_process(
    argv: list[str], environ: Mapping[str, str], *, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """spurctl.cli.main(argv) here, with `environ` as the whole environment, stdin empty,
    stdout and stderr captured; what a subprocess would have given. The deadline is a
    SIGALRM that raises in the command; everything is put back afterwards."""
    from spurctl import errors
    from spurctl.cli import main

    saved_env = dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_cwd = os.getcwd()
    saved_secrets = errors.secrets_state()
    out, err = _Captured(), _Captured()

    def too_long(_signum: int, _frame: object) -> None:
        raise InProcessTimeout(f"spurctl {shlex.join(argv)} ran past {timeout} s")

    previous_alarm = signal.signal(signal.SIGALRM, too_long)
    try:
        os.environ.clear()
        os.environ.update(environ)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = _Captured(), out, err
        signal.setitimer(signal.ITIMER_REAL, timeout)
        code = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_alarm)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        errors.restore_secrets(saved_secrets)
    return subprocess.CompletedProcess(
        spurctl_argv(*argv), code, _as_read(out.getvalue()), _as_read(err.getvalue())
    )


def _as_read(text: str) -> str:
    """What a text-mode pipe reader would see: universal newlines (CR and CRLF as LF)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def cli_process(
    *args: str,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    **popen: Any,
) -> AbstractContextManager[subprocess.Popen[str]]:
    """The CLI running in clean_env, in a session of its own; killed if still running at the end."""
    return running(spurctl_argv(*args), home=home, env=env, **popen)


def default_sigint() -> None:
    """In a child before it runs: SIGINT back to its default action. A shell starts a
    background job (and so nohup's) with SIGINT ignored, the child would inherit that,
    and Python installs no KeyboardInterrupt handler for an ignored SIGINT: every
    Ctrl-C test would then wait for an interrupt that never comes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _then_default_sigint(first: Callable[[], object] | None) -> Callable[[], None]:
    def preexec() -> None:
        default_sigint()
        if first is not None:
            first()

    return preexec


@contextmanager
def running(
    argv: list[str],
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    **popen: Any,
) -> Iterator[subprocess.Popen[str]]:
    """A process in clean_env and a session of its own; it and its group killed at the end."""
    options: dict[str, Any] = {
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "stdin": subprocess.DEVNULL,
        "text": True,
        **popen,
        "preexec_fn": _then_default_sigint(popen.get("preexec_fn")),
    }
    proc = subprocess.Popen(
        argv,
        env=clean_env(home_for(home), **(env or {})),
        start_new_session=True,
        **options,
    )
    try:
        yield proc
    finally:
        kill_group(proc.pid)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def kill_group(pid: int) -> None:
    """SIGKILL a child's process group (it leads one of its own); gone already is fine."""
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    """A pipe's lines, read on a daemon thread so a reader can give up at a deadline; '' at EOF."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def read_terminal(
    fd: int, until: Callable[[bytes], bool], timeout: float = 30.0, seen: bytes = b""
) -> bytes:
    """Read a pseudo-terminal onto `seen` until `until(seen)` holds or it closes, within timeout."""
    deadline = time.monotonic() + timeout
    while not until(seen):
        left = deadline - time.monotonic()
        assert left > 0, f"timed out; the terminal showed: {seen.decode(errors='replace')}"
        if not select.select([fd], [], [], min(left, 0.1))[0]:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer to the terminal has closed it
            break
        if not chunk:
            break
        seen += chunk
    return seen


def asleep_reading_terminal(pid: int) -> bool:
    """Whether the process's main thread sleeps in a terminal read (n_tty_read's wait_woken).

    Only a signal that lands there, or in another blocking call, is seen at once by
    Python's input(): one landing just before it blocks waits for the next signal.
    """
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("wait_woken", "n_tty_read")
    except OSError:  # gone already
        return False


def exit_status(pid: int, timeout: float = 20.0) -> int:
    """A forked child's exit code (as os.waitstatus_to_exitcode), waited for at most timeout."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        assert time.monotonic() < deadline, f"pid {pid} still running after {timeout} s"
        time.sleep(0.02)


def on_a_terminal(
    argv: list[str], env: dict[str, str], talk: Callable[[int], bytes]
) -> tuple[int, bytes]:
    """Run `argv` on a pseudo-terminal, with Ctrl-C reaching it; `talk(terminal)` reads
    (and types) to the child's exit and returns what it showed. The exit status and
    that; a child that outlives the deadlines is killed with its group."""
    import pty

    pid, terminal = pty.fork()
    if pid == 0:  # the child: spurctl on a terminal, as an operator runs it
        try:
            default_sigint()  # Ctrl-C on its terminal must reach it
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)  # never fall back into the test runner
    status: int | None = None
    try:
        seen = talk(terminal)
        status = exit_status(pid)
    finally:
        if status is None:
            kill_group(pid)
            os.waitpid(pid, 0)
        os.close(terminal)
    return status, seen


def answer_on_a_terminal(args: list[str], home: Path, keys: bytes) -> tuple[int, bytes]:
    """Run spurctl on a pseudo-terminal and type `keys` as soon as its [y/N] prompt shows
    (before the child may even be reading it); its exit status and everything it showed."""

    def answer(terminal: int) -> bytes:
        seen = read_terminal(terminal, lambda shown: b"[y/N]" in shown)
        assert b"[y/N]" in seen, seen
        os.write(terminal, keys)
        return read_terminal(terminal, lambda _: False, seen=seen)  # to the child's exit

    return on_a_terminal(spurctl_argv(*args), clean_env(home), answer)


def stderr_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Assert the contract for an operator error and return the line: exit 2, one line, no trace."""
    lines = stderr_lines(proc)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    line = lines[0]
    assert line.startswith("spurctl: error: "), line
    for word in words:
        assert word.lower() in line.lower(), (word, line)
    return line


def dead_url() -> str:
    """A loopback controller URL nothing listens on: connections are refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def run_process(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """run_cli as a real subprocess: for tests where the process is the point (sshd,
    ClusterShell's gateways, node_exporter reading what it wrote, systemd units)."""
    return run_cli(*args, process=True, **kwargs)


_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def on_screen(
    *args: str,
    home: Path,
    width: int = 80,
    height: int = 24,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, list[str]]:
    """spurctl with stdout on a `width`x`height` pseudo-terminal (stdin none): its exit
    status and the lines the terminal showed (colour codes dropped, trailing blanks
    stripped; a line longer than `width` is as written, which the terminal folds)."""
    import fcntl
    import pty
    import struct
    import termios

    controller_side, terminal_side = pty.openpty()
    fcntl.ioctl(terminal_side, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    size = {"COLUMNS": str(width), "LINES": str(height), "TERM": "xterm-256color", **(env or {})}
    with cli_process(*args, home=home, stdout=terminal_side, env=size, cwd=cwd) as proc:
        os.close(terminal_side)
        seen = read_terminal(controller_side, lambda _: False)  # to the end
        proc.communicate(timeout=30)
        os.close(controller_side)
    text = _ANSI.sub(b"", seen).decode()
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    assert proc.returncode is not None
    return proc.returncode, lines
