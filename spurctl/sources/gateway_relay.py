"""The gateway relay of `collect --topology --ship-scanner`: standard library only.

spurctl sends this file's source to a gateway's `python3 -I -S -` over ssh, with
a plan (the nodes it reaches itself, and the sub-gateways with theirs) and the
node scanner. The relay runs `ssh NODE python3 -` for each of its nodes, at most
`fanout` at once, writing the scanner to each one's standard input and killing
one that outlives `timeout`; it sends itself to each sub-gateway the same way.
It prints one JSON line per node of its plan, and nothing else but a first
`hello` line, so that the side above can tell a gateway that never started.
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
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# How the relay is started on a gateway: a clean interpreter, only the standard library.
GATEWAY_PYTHON = "python3 -I -S -"
_STDERR_TAIL = 2000
_CHUNK = 1 << 16
# How long the readers of a finished command may take to see their pipes close.
_DRAIN_S = 5.0


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


def _head(stream: Any, cap: int) -> tuple[bytes, int]:
    """The first `cap` bytes of `stream`, and how many it gave in all (read to its end)."""
    kept = bytearray()
    total = 0
    while chunk := stream.read1(_CHUNK):
        total += len(chunk)
        if len(kept) < cap:
            kept += chunk[: cap - len(kept)]
    return bytes(kept), total


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

    def line(self, doc: dict[str, Any]) -> None:
        with self.lock:
            node = doc.get("node")
            if node is not None:
                if node in self.sent:
                    return
                self.sent.add(node)
            try:
                sys.stdout.write(json.dumps(doc) + "\n")
                sys.stdout.flush()
            except (BrokenPipeError, OSError):  # the side above is gone: stop
                _kill_children()
                os._exit(1)


_CHILDREN: set[subprocess.Popen[bytes]] = set()
_CHILDREN_LOCK = threading.Lock()


def _kill_children() -> None:
    with _CHILDREN_LOCK:
        for child in _CHILDREN:
            _kill(child)


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.returncode is not None:  # reaped: its pid may be another process's now
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # the timeout kills ssh and whatever it started
    )
    with _CHILDREN_LOCK:
        _CHILDREN.add(child)
    return child


def _done(child: subprocess.Popen[bytes]) -> None:
    with _CHILDREN_LOCK:
        _CHILDREN.discard(child)


def _tail(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")[-_STDERR_TAIL:]


def _last_line(raw: bytes) -> str:
    lines = [line.strip() for line in _tail(raw).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _scan(node: str, data: dict[str, Any], out: _Out) -> None:
    argv = [*shlex.split(data["ssh"]), "-o", "BatchMode=yes", node, data["remote"]]
    try:
        child = _start(argv)
    except OSError as exc:
        out.line({"node": node, "rc": 127, "stdout": "", "stderr": str(exc), "timed_out": False})
        return
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    stdin, stdout, stderr = child.stdin, child.stdout, child.stderr
    got: dict[str, Any] = {}

    def feed() -> None:
        # The scanner with --ship-scanner; otherwise the node's stdin is empty.
        with contextlib.suppress(OSError):
            stdin.write(data["scanner"].encode())
        with contextlib.suppress(OSError):
            stdin.close()

    jobs = {
        "feed": feed,
        "out": lambda: got.__setitem__("out", _head(stdout, data["cap"])),
        "err": lambda: got.__setitem__("err", tail_of(stderr)),
    }
    threads = [threading.Thread(target=job, daemon=True) for job in jobs.values()]
    for thread in threads:
        thread.start()
    try:
        child.wait(timeout=data["timeout"])
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill(child)
        child.wait()
        timed_out = True
    finally:
        _done(child)
    for thread in threads:
        thread.join(timeout=_DRAIN_S)  # a pipe a leftover process holds open is let go
    kept, printed = got.get("out", (b"", 0))
    cut = max(0, printed - data["cap"])
    out.line(
        {
            "node": node,
            "rc": child.returncode,
            # Cut output is no inventory: none of it is sent, only how much there was.
            "stdout": "" if cut else kept.decode("utf-8", errors="replace"),
            "stderr": _tail(got.get("err", b"")),
            "timed_out": timed_out,
            "via": data["name"],
            "printed": printed,
            "cut": cut,
        }
    )


def _gateway(gateway: str, sub: dict[str, Any], data: dict[str, Any], out: _Out) -> None:
    """Run the relay on `gateway` for `sub`; each of its nodes it does not report fails
    naming it (never an empty answer)."""
    mine = set(plan_nodes(sub))
    limit = budget(sub, data["fanout"], data["timeout"])
    argv = [*shlex.split(data["ssh"]), "-o", "BatchMode=yes", gateway, GATEWAY_PYTHON]
    why = "failed"
    stderr_box: list[bytes] = []
    try:
        child = _start(argv)
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
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if doc.get("hello") == gateway:
            hello.set()
        elif isinstance(doc.get("node"), str) and doc["node"] in mine:
            out.line(doc)  # a gateway speaks only for its own nodes
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
    out = _Out()
    out.line({"hello": data["name"]})
    plan = data["plan"]
    threads = [
        threading.Thread(target=_gateway, args=(gateway, sub, data, out), daemon=True)
        for gateway, sub in plan["gateways"].items()
    ]
    for thread in threads:
        thread.start()
    with ThreadPoolExecutor(max_workers=max(1, data["fanout"])) as pool:
        for node in plan["nodes"]:
            pool.submit(_scan, node, data, out)
    for thread in threads:
        thread.join()
