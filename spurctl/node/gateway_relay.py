"""The gateway relay of `collect --topology --ship-scanner`: standard library only.

spurctl sends this file's source to a gateway's `python3 -I -S -` over ssh, with
a plan (the nodes it reaches itself, and the sub-gateways with theirs) and the
node scanner. The relay runs `ssh NODE python3 -` for each of its nodes, at most
`fanout` at once, writing the scanner to each one's standard input and killing
one that outlives `timeout`; it sends itself to each sub-gateway the same way.
It prints one JSON line per node of its plan, and nothing else but a first
`hello` line, so that the side above can tell a gateway that never started.
One thread runs all of its own nodes' commands (a selector over their pipes, so
a node costs its ssh process and no thread); each sub-gateway has a thread that
reads its lines and passes its nodes' on as they came.
A relay ends what it started, and then itself, when the side above is gone: its
standard output hangs up (the ssh connection dropped, the relay above ended), or
it is sent SIGTERM or SIGHUP (the relay spurctl runs here gets SIGTERM when
spurctl dies, however it dies).
A node is only ever reported by the relay its plan sends it to: a line a
gateway below sends for any other node is dropped here. Nothing read from a
gateway or a node is run or unpickled; lines are parsed with `json.loads` only.

Output is bounded wherever it is read: a node's standard output is kept up to
`data["cap"]` bytes, counted past it and reported cut (`printed`, `cut`, and no
text); its standard error and a gateway's keep only their last bytes; a line
from a gateway longer than `line_limit(cap)` is skipped whole. So one node or
gateway printing without end costs the relays above it no more than that.
docs/collecting.md has the design.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any, NoReturn

# How the relay is started on a gateway: a clean interpreter, only the standard library.
GATEWAY_PYTHON = "python3 -I -S -"
_STDERR_TAIL = 2000
_CHUNK = 1 << 16
# How long the readers of a finished command may take to see their pipes close.
_DRAIN_S = 5.0
# How long a gateway's relay gets to end its own commands on SIGTERM when this relay
# ends, before SIGKILL (a loaded gateway may take a moment to run its handler).
_TERM_GRACE_S = 2.0


def line_limit(cap: int) -> int:
    """The longest line a relay prints: a node's `cap` bytes of output as JSON (at most
    six bytes an input byte, "\\u00XX"), its stderr tail and the rest of the record."""
    return 6 * cap + 64 * 1024


def lines(stream: Any, limit: int) -> Any:
    """Each line of `stream` (bytes, newline kept), up to `limit` bytes; a longer line
    is read past and skipped whole, never held."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit:
            yield line
            continue
        while line and not line.endswith(b"\n"):  # the rest of the overlong line
            line = stream.readline(limit + 1)


def tail_of(stream: Any, keep: int = 4 * _STDERR_TAIL) -> bytes:
    """The last `keep` bytes of `stream`, read to its end."""
    kept = b""
    while chunk := stream.read1(_CHUNK):
        kept = (kept + chunk)[-keep:]
    return kept


def budget(plan: dict[str, Any], fanout: int, timeout: float) -> float:
    """Seconds a relay with `plan` needs at most: its own nodes `fanout` at a time and its
    sub-gateways at once, plus two timeouts for starting up (ssh, python)."""
    own = math.ceil(len(plan["nodes"]) / fanout) * timeout
    below = [budget(sub, fanout, timeout) for sub in plan["gateways"].values()]
    return 2 * timeout + max([own, *below])


def program(data: dict[str, Any]) -> bytes:
    """This relay's source with `data` to run: what a gateway's python3 reads."""
    return (data["relay"] + f"\nmain(json.loads({json.dumps(data)!r}))\n").encode()


def plan_nodes(plan: dict[str, Any]) -> list[str]:
    out = list(plan["nodes"])
    for sub in plan["gateways"].values():
        out += plan_nodes(sub)
    return out


class _Out:
    """One JSON line at a time on stdout; a node is printed once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: set[str] = set()

    def line(self, doc: dict[str, Any], raw: bytes | None = None) -> None:
        """Print `doc`; or, given `raw`, the line `doc` was read from (a gateway's line is
        passed on as it came: the side above parses the same bytes the same way)."""
        with self.lock:
            node = doc.get("node")
            if node is not None:
                if node in self.sent:
                    return
                self.sent.add(node)
            if raw is None:
                raw = json.dumps(doc).encode()
            try:
                sys.stdout.buffer.write(raw if raw.endswith(b"\n") else raw + b"\n")
                sys.stdout.flush()
            except (BrokenPipeError, OSError):  # the side above is gone: stop
                _end_all(1)


_CHILDREN: set[subprocess.Popen[bytes]] = set()
_GATEWAY_PIDS: set[int] = set()  # those of _CHILDREN that run a gateway's relay
_CHILDREN_LOCK = threading.Lock()


def _ended(signum: int, _frame: Any = None) -> None:
    """SIGTERM or SIGHUP (the handler), or the side above hung up: _end_all."""
    _end_all(128 + signum)


def _end_all(status: int) -> NoReturn:
    """The side above is gone, or ends this relay: end every command this relay
    started, then itself with `status`. A node's command is killed at once; a gateway's
    relay gets SIGTERM and _TERM_GRACE_S to end its own nodes' commands the same way
    before SIGKILL. Nothing is reaped here, so each command's group id stays its own
    until then. The lock is only waited on briefly: a signal's handler runs in the
    main thread, which may hold it."""
    locked = _CHILDREN_LOCK.acquire(timeout=1.0)
    try:
        started = [child for child in _CHILDREN if child.returncode is None]
        relays = [child for child in started if child.pid in _GATEWAY_PIDS]
    finally:
        if locked:
            _CHILDREN_LOCK.release()
    for child in started:
        how = signal.SIGTERM if child in relays else signal.SIGKILL
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, how)
    if relays:
        time.sleep(_TERM_GRACE_S)
        for child in relays:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
    os._exit(status)


def _watch_above() -> None:
    """End the relay once the side reading its lines is gone (its standard output hung
    up: the ssh connection above dropped, or the relay above ended), not at its next
    line, which may be a node's whole timeout away."""
    import select

    poller = select.poll()
    poller.register(sys.stdout.fileno(), 0)  # errors and hang-ups only
    while True:
        for _, event in poller.poll():
            if event & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                _ended(signal.SIGHUP)


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.returncode is not None:  # reaped: its pid may be another process's now
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)


def _start(argv: list[str], gateway: bool = False) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # the timeout kills ssh and whatever it started
    )
    with _CHILDREN_LOCK:
        _CHILDREN.add(child)
        if gateway:
            _GATEWAY_PIDS.add(child.pid)
    return child


def _done(child: subprocess.Popen[bytes]) -> None:
    with _CHILDREN_LOCK:
        _CHILDREN.discard(child)
        _GATEWAY_PIDS.discard(child.pid)


def _tail(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")[-_STDERR_TAIL:]


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in _tail(raw).splitlines() if line.strip()]
    return lines[-1] if lines else ""


class _Command:
    """One node's command as the loop runs it: what its pipes gave, and when it must end."""

    __slots__ = ("child", "closed_at", "deadline", "err", "exited_at", "fed", "kept", "node",
                 "open", "printed", "timed_out")  # fmt: skip

    def __init__(self, node: str, child: subprocess.Popen[bytes], deadline: float) -> None:
        self.node = node
        self.child = child
        self.deadline = deadline
        self.kept = bytearray()  # the first `cap` bytes of its stdout
        self.printed = 0  # all the bytes of its stdout
        self.err = b""  # the last bytes of its stderr
        self.fed = 0  # bytes of the scanner written to its stdin
        self.open = 2  # its stdout and stderr, until each is at its end
        self.timed_out = False
        self.exited_at: float | None = None  # seen exited while a pipe is still open
        self.closed_at = 0.0  # when both its pipes were at their end


class _Nodes:
    """The relay's own nodes: each one's command, `fanout` at once, all in one thread.

    One selector watches every running command's pipes, so a node costs its ssh
    process and no thread. A command still running at `timeout` is killed with its
    process group. A command is reported once it has exited and both its pipes are
    at their end; one that exited while a process it left holds a pipe open is
    reported _DRAIN_S later with what it gave.
    """

    # How often every running command is asked whether it exited with a pipe still open
    # (rare, and then given _DRAIN_S anyway).
    _SWEEP_S = 0.5

    def __init__(self, data: dict[str, Any], out: _Out) -> None:
        self.data, self.out = data, out
        # `--` ends ssh's options: a node's name is its destination, whatever it starts with.
        self.argv = [*shlex.split(data["ssh"]), "-o", "BatchMode=yes", "--"]
        self.cap: int = data["cap"]
        self.scanner = memoryview(data["scanner"].encode())
        self.sel = selectors.DefaultSelector()
        # In start order, so in deadline order: each has the same timeout. (By command,
        # not pid: a reaped command's pid may be a new one's while it drains.)
        self.running: dict[_Command, None] = {}
        self.closed: list[_Command] = []  # both pipes at their end, not yet reaped

    def run(self, nodes: list[str]) -> None:
        todo = deque(nodes)
        fanout = max(1, self.data["fanout"])
        next_sweep = time.monotonic() + self._SWEEP_S
        while todo or self.running:
            while todo and len(self.running) < fanout:
                self._launch(todo.popleft())
            wait = self._SWEEP_S
            now = time.monotonic()
            for cmd in self.running:  # the oldest first: the next to time out
                if cmd.deadline > now:
                    wait = min(wait, cmd.deadline - now)
                    break
                if not cmd.timed_out:
                    cmd.timed_out = True
                    _kill(cmd.child)
            if self.closed:  # its exit status is due any moment, unless it closed them early
                recent = any(now - cmd.closed_at < 0.05 for cmd in self.closed)
                wait = min(wait, 0.002 if recent else 0.05)
            for key, _ in self.sel.select(max(0.0, wait)):
                cmd, stream = key.data
                if stream == "stdin":
                    self._feed(cmd, key.fileobj)
                else:
                    self._read(cmd, stream, key.fileobj)
            closed, self.closed = self.closed, []
            for cmd in closed:
                self._reap(cmd)
            now = time.monotonic()
            if now >= next_sweep:
                next_sweep = now + self._SWEEP_S
                self._sweep(now)

    def _launch(self, node: str) -> None:
        try:
            child = _start([*self.argv, node, self.data["remote"]])
        except OSError as exc:
            self.out.line(
                {"node": node, "rc": 127, "stdout": "", "stderr": str(exc), "timed_out": False}
            )
            return
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        cmd = _Command(node, child, time.monotonic() + self.data["timeout"])
        self.running[cmd] = None
        for stream, pipe in (("stdout", child.stdout), ("stderr", child.stderr)):
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe, selectors.EVENT_READ, (cmd, stream))
        if self.scanner:  # --ship-scanner; otherwise the node's stdin is empty
            os.set_blocking(child.stdin.fileno(), False)
            self.sel.register(child.stdin, selectors.EVENT_WRITE, (cmd, "stdin"))
        else:
            child.stdin.close()

    def _feed(self, cmd: _Command, pipe: Any) -> None:
        try:
            cmd.fed += os.write(pipe.fileno(), self.scanner[cmd.fed : cmd.fed + _CHUNK])
        except BlockingIOError:
            return
        except OSError:  # it stopped reading: what it does without the rest is its answer
            cmd.fed = len(self.scanner)
        if cmd.fed >= len(self.scanner):
            self.sel.unregister(pipe)
            with contextlib.suppress(OSError):
                pipe.close()

    def _read(self, cmd: _Command, stream: str, pipe: Any) -> None:
        try:
            chunk = os.read(pipe.fileno(), _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(cmd, pipe)
            if not cmd.open:
                cmd.closed_at = time.monotonic()
                self.closed.append(cmd)
        elif stream == "stdout":
            cmd.printed += len(chunk)
            if len(cmd.kept) < self.cap:
                cmd.kept += chunk[: self.cap - len(cmd.kept)]
        else:
            cmd.err = (cmd.err + chunk)[-4 * _STDERR_TAIL :]

    def _close(self, cmd: _Command, pipe: Any) -> None:
        self.sel.unregister(pipe)
        pipe.close()
        cmd.open -= 1

    def _reap(self, cmd: _Command) -> None:
        if cmd.child.poll() is None:
            self.closed.append(cmd)  # asked again in a moment
        else:
            self._report(cmd)

    def _sweep(self, now: float) -> None:
        """Commands that exited while a pipe is still open: given _DRAIN_S, then reported."""
        for cmd in list(self.running):
            if not cmd.open:
                continue
            if cmd.exited_at is None:
                if cmd.child.poll() is not None:
                    cmd.exited_at = now
            elif now - cmd.exited_at > _DRAIN_S:
                child = cmd.child
                for pipe in (child.stdin, child.stdout, child.stderr):
                    if pipe is not None and not pipe.closed:
                        with contextlib.suppress(KeyError):
                            self.sel.unregister(pipe)
                        pipe.close()
                cmd.open = 0
                self._report(cmd)

    def _report(self, cmd: _Command) -> None:
        child = cmd.child
        del self.running[cmd]
        _done(child)
        if child.stdin is not None and not child.stdin.closed:  # still being fed
            with contextlib.suppress(KeyError):
                self.sel.unregister(child.stdin)
            with contextlib.suppress(OSError):
                child.stdin.close()
        cut = max(0, cmd.printed - self.cap)
        self.out.line(
            {
                "node": cmd.node,
                "rc": child.returncode,
                # Cut output is no inventory: none of it is sent, only how much there was.
                "stdout": "" if cut else bytes(cmd.kept).decode("utf-8", errors="replace"),
                "stderr": _tail(cmd.err),
                "timed_out": cmd.timed_out,
                "via": self.data["name"],
                "printed": cmd.printed,
                "cut": cut,
            }
        )


def _gateway(gateway: str, sub: dict[str, Any], data: dict[str, Any], out: _Out) -> None:
    """Run the relay on `gateway` for `sub`; each of its nodes it does not report fails
    naming it (never an empty answer)."""
    mine = set(plan_nodes(sub))
    limit = budget(sub, data["fanout"], data["timeout"])
    argv = [*shlex.split(data["ssh"]), "-o", "BatchMode=yes", "--", gateway, GATEWAY_PYTHON]
    why = "failed"
    stderr_box: list[bytes] = []
    try:
        child = _start(argv, gateway=True)
    except OSError as exc:
        for node in sorted(mine):
            out.line({"node": node, "gateway_error": f"gateway {gateway} failed: {exc}"})
        return
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    started = time.monotonic()
    hello, eof = threading.Event(), threading.Event()
    given_up: list[str] = []

    def watch() -> None:
        # Kills only before the main thread reaps the child (it joins this first),
        # so the pid can never be another process's.
        while not eof.wait(0.1):
            elapsed = time.monotonic() - started
            if not hello.is_set() and elapsed > data["timeout"]:
                given_up.append(f"did not answer within {data['timeout']:g} s")
            elif elapsed > limit:
                given_up.append(f"did not finish within {limit:g} s")
            else:
                continue
            _kill(child)
            return

    def read_stderr() -> None:
        assert child.stderr is not None
        stderr_box.append(tail_of(child.stderr))

    threads = [threading.Thread(target=t, daemon=True) for t in (watch, read_stderr)]
    for thread in threads:
        thread.start()
    try:
        child.stdin.write(program({**data, "name": gateway, "plan": sub}))
        child.stdin.close()
    except OSError:
        pass  # it died at once: its stderr says why
    for raw in lines(child.stdout, line_limit(data["cap"])):
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            continue
        if not isinstance(doc, dict):
            continue
        if doc.get("hello") == gateway:
            hello.set()
        elif isinstance(doc.get("node"), str) and doc["node"] in mine:
            out.line(doc, raw)  # a gateway speaks only for its own nodes
    eof.set()
    threads[0].join()
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:  # its output ended but it lingers: end it
        _kill(child)
        child.wait()
    _done(child)
    threads[1].join(timeout=5)
    if given_up:
        why = given_up[0]
    else:
        detail = _last_line(stderr_box[0]) if stderr_box else ""
        if not detail and child.returncode:
            detail = f"exited with status {child.returncode}"
        why = "failed" + (f": {detail}" if detail else "")
    for node in sorted(mine):
        out.line({"node": node, "gateway_error": f"gateway {gateway} {why}"})


def main(data: dict[str, Any]) -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _ended)
    threading.Thread(target=_watch_above, daemon=True).start()
    out = _Out()
    out.line({"hello": data["name"]})
    plan = data["plan"]
    threads = [
        threading.Thread(target=_gateway, args=(gateway, sub, data, out), daemon=True)
        for gateway, sub in plan["gateways"].items()
    ]
    for thread in threads:
        thread.start()
    _Nodes(data, out).run(plan["nodes"])
    for thread in threads:
        thread.join()
