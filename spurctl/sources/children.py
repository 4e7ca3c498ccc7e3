"""The commands spurctl starts end with it, however it ends.

A collect runs one local command per node (`ssh NODE spurctl node-inventory` by
default). Left to themselves, they outlive a spurctl that is killed (kill -9, a
systemd stop, a hangup, SIGTERM): orphaned ssh sessions with no deadline, still
reading the nodes. Two guards, since each covers what the other cannot:

- Every command asks Linux, before it execs, to be sent SIGTERM when spurctl
  dies (PR_SET_PDEATHSIG), and never starts if spurctl is already gone. That
  reaches the command itself, however spurctl died.
- Every command joins one process group, led by a keeper: a `/bin/sh` that waits
  on a pipe whose writing end only spurctl holds. However spurctl ends, the pipe
  reads end-of-file and the keeper signals the whole group, SIGTERM and then,
  after KEEPER_GRACE_S, SIGKILL. That also reaches what a command started itself
  (a template with `;` or `|` runs a shell whose children PDEATHSIG does not cover),
  and a command ClusterShell killed at its timeout but whose children lived on.

One keeper per process: a watch's rounds run in forked copies (heap.Child), and
each copy starts its own. The keeper is a shell, not a fork of spurctl, so it
holds none of spurctl's memory and runs no Python after the fork.

PR_SET_PDEATHSIG fires when the *thread* that started the command ends: a
collect runs its commands from the thread that waits for them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

# How long the commands get to end on SIGTERM, once spurctl is gone, before SIGKILL.
KEEPER_GRACE_S = 2
_PR_SET_PDEATHSIG = 1  # linux/prctl.h

# Waits for end-of-file on its standard input (the pipe), then ends its process group.
# It ignores the signals it sends, and those a terminal or a stop would.
_KEEPER = f"""trap '' HUP INT QUIT TERM
while read -r _; do :; done
kill -TERM 0
sleep {KEEPER_GRACE_S}
kill -KILL 0
"""


class _Keeper:
    def __init__(self) -> None:
        self.owner = os.getpid()
        read_end, self._write_end = os.pipe()  # both close on exec: no command holds them
        try:
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", _KEEPER],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                process_group=0,
            )
        finally:
            os.close(read_end)
        self.group = self.process.pid


_keeper: _Keeper | None = None
_lock = threading.Lock()


def keeper_group() -> int | None:
    """The process group the commands join, its keeper started on first use in this
    process; None where there is none (no /bin/sh, not POSIX)."""
    global _keeper
    with _lock:
        if _keeper is None or _keeper.owner != os.getpid():
            try:
                _keeper = _Keeper()
            except OSError:
                return None
        return _keeper.group


def _prctl() -> Callable[..., int] | None:
    from spurctl.heap import _prctl as prctl  # looked up once, in the parent

    return prctl()


def ends_with_spurctl(join_group: bool = True) -> Callable[[], None]:
    """A preexec function for a command spurctl starts: in the child, before it execs,
    join the keeper's group and ask for SIGTERM when spurctl dies; if spurctl died
    already, never run the command. `join_group=False` for a command that leads a
    group of its own (the gateway relay: it ends what it started on SIGTERM)."""
    parent, prctl = os.getpid(), _prctl()
    group = keeper_group() if join_group else None

    def in_child() -> None:
        if group is not None:
            with suppress(OSError):  # the keeper is gone: PDEATHSIG still guards
                os.setpgid(0, group)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # spurctl died before the request was made
            os._exit(1)

    return in_child


def exec_worker() -> type[Any]:
    """ClusterShell's ExecWorker whose commands end with spurctl (ends_with_spurctl)."""
    from ClusterShell.Engine.Engine import E_READ, E_WRITE
    from ClusterShell.Worker.Exec import ExecClient, ExecWorker
    from ClusterShell.Worker.fastsubprocess import PIPE, STDOUT, Popen

    class Client(ExecClient):
        # ExecClient starts its command here; the same start, with the preexec function.
        def _exec_nonblock(
            self, commandlist: Any, shell: bool = False, env: dict[str, str] | None = None
        ) -> Any:
            proc = Popen(
                commandlist,
                bufsize=0,
                stdin=PIPE,
                stdout=PIPE,
                stderr=PIPE if self._stderr else STDOUT,
                shell=shell,
                env={**os.environ, **env} if env else None,
                preexec_fn=self.worker.preexec,
            )
            if self._stderr:
                self.streams.set_stream(self.worker.SNAME_STDERR, proc.stderr, E_READ)
            self.streams.set_stream(self.worker.SNAME_STDOUT, proc.stdout, E_READ)
            self.streams.set_stream(self.worker.SNAME_STDIN, proc.stdin, E_WRITE, retain=False)
            return proc

    class Worker(ExecWorker):
        SHELL_CLASS = Client

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.preexec = ends_with_spurctl()
            super().__init__(*args, **kwargs)

    return Worker
