"""An address that answered, but not as a Spur controller, named as such.

An operator who points `--controller` at the wrong port meets grpc's words for it:
an agent's port (spurd serves gRPC, but not SlurmController) answers
`UNIMPLEMENTED` ("Method not found!" from a grpc-core server, no words at all from
spurd's tonic); an HTTP/2 proxy or web server answers an HTTP status, which grpc
reports as `UNIMPLEMENTED: Received http2 header with status: 404`; an HTTP/1
server's reply is a frame grpc cannot parse (`UNAVAILABLE: Failed parsing HTTP/2`).
Each of these becomes one sentence that says the address answered, what it is
likely to be, and what it said. A controller is never taken for one of these: every
Spur release serves Ping, the first call each command makes.
"""

from __future__ import annotations

import re
import socket
import time
from urllib.parse import urlsplit

import grpc

NOT_A_CONTROLLER = "answered, but not as a Spur controller (an agent's port? an HTTP proxy?)"
# What to do about it, after the sentence (or after the failures of every endpoint).
CHECK_ADDRESS = (
    "check --controller / SPUR_CONTROLLER_ADDR (spurctld's port is 6817 unless its "
    "spur.conf says otherwise; spurd's is 6818)"
)

# grpc's connect failure when the peer's first bytes are not an HTTP/2 SETTINGS frame
# ("HTTP/1.1 404 ..." from a web server is one).
_NOT_HTTP2 = "Failed parsing HTTP/2"
# grpc's words for an HTTP/2 answer that carried an HTTP status but no grpc-status.
_HTTP2_STATUS = re.compile(r"Received http2 header with status: (\d{3})")


def not_a_controller(url: str, method: str, err: grpc.RpcError, timeout: float) -> str | None:
    """`URL answered, but not as a Spur controller (...): what it said`, or None when the
    failure says nothing about what answered (down, slow, a credential, a refusal)."""
    if not isinstance(err, grpc.Call):
        return None
    code, details = err.code(), err.details() or ""
    said: str | None = None
    if code == grpc.StatusCode.UNIMPLEMENTED:
        status = _HTTP2_STATUS.search(details)
        if status is not None:
            said = f"HTTP status {status[1]} over HTTP/2, not gRPC"
        elif method == "Ping":
            # Ping is in every Spur release: a gRPC server without it is no controller.
            said = f"it serves gRPC, but not Spur's SlurmController/{method}"
    elif code == grpc.StatusCode.UNAVAILABLE and _NOT_HTTP2 in details:
        status_code = http1_status(url, timeout)
        if status_code is not None:
            said = f"HTTP status {status_code} over HTTP/1, not gRPC"
    return None if said is None else f"{url} {NOT_A_CONTROLLER}: {said}"


def http1_status(url: str, timeout: float) -> int | None:
    """The status a plain http:// endpoint gives `GET /` over HTTP/1.1, or None when it
    gives none (not HTTP/1, closed, too slow, or an https:// URL: not probed)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None or parts.port is None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as conn:
            conn.sendall(request)
            head = _answer_head(conn, timeout)
    except OSError:
        return None
    m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    return int(m[1]) if m else None


_PROBE_READ = 4096


def _answer_head(conn: socket.socket, timeout: float) -> bytes:
    """The answer's first bytes, read on to its end (at most _PROBE_READ bytes, within
    `timeout` in all): a socket closed with the rest unread resets the connection under a
    server still writing it."""
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < _PROBE_READ:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            chunk = conn.recv(_PROBE_READ - len(data))
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data
