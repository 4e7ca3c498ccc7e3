"""The gateway relay of `collect --topology --ship-scanner`: standard library only.

spurctl sends this file's source to a gateway's `python3 -I -S -` over ssh, with
a plan (the nodes it reaches itself, and the sub-gateways with theirs) and the
node scanner. The relay runs `ssh NODE python3 -` for each of its nodes, at most
`fanout` at once, writing the scanner to each one's standard input and killing
one that outlives `timeout`; it sends itself to each sub-gateway the same way.
It prints one JSON line per node of its plan, and nothing else but a first
`hello` line, so that the side above can tell a gateway that never started.
A node is only ever reported by the relay its plan sends it to.
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
    try:
        stdout, stderr = child.communicate(data["scanner"].encode(), timeout=data["timeout"])
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill(child)
        stdout, stderr = child.communicate()
        timed_out = True
    finally:
        _done(child)
    out.line(
        {
            "node": node,
            "rc": child.returncode,
            "stdout": stdout.decode("utf-8", errors="replace"),
            "stderr": _tail(stderr),
            "timed_out": timed_out,
            "via": data["name"],
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
        stderr_box.append(child.stderr.read())

    threads = [threading.Thread(target=t, daemon=True) for t in (watch, read_stderr)]
    for thread in threads:
        thread.start()
    try:
        child.stdin.write(program({**data, "name": gateway, "plan": sub}))
        child.stdin.close()
    except OSError:
        pass  # it died at once: its stderr says why
    for raw in child.stdout:
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if doc.get("hello") == gateway:
            hello.set()
        elif doc.get("node") in mine:  # a gateway speaks only for its own nodes
            out.line(doc)
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
