"""A --controller that answers, but is no Spur controller, is named as such in one line.

The tired mistakes: the agent's port (6818) for the controller's (6817), or the address
of an HTTP/2 proxy or web server. grpc's words for them ("UNIMPLEMENTED: Method not
found!", "Received http2 header with status: 404") never reach the operator; one line
says the address answered, what it may be, and which setting to check (exit 2). Beside
a real controller such an endpoint is skipped, as a down one is, and the note names it.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident
from tests.cli import one_line_error, run_cli

SENTENCE = "answered, but not as a Spur controller (an agent's port? an HTTP proxy?)"
# grpc's own words, which the operator should not have to decode.
GRPC_WORDS = ("UNIMPLEMENTED", "Method not found", "http2 header", "failed Ping")

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_HEADERS, _SETTINGS = 0x1, 0x4
_END_STREAM, _END_HEADERS, _ACK = 0x1, 0x4, 0x1
# HPACK's static table entry 13 is ":status: 404": one byte, 0x80 | 13.
_STATUS_404 = bytes([0x80 | 13])


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


def _answer_404(conn: socket.socket) -> None:
    """Speak just enough HTTP/2 (prior knowledge, as gRPC does): settings both ways, then
    ':status 404' and the end of the stream to every request, as a proxy with no route does."""
    with conn:
        conn.settimeout(10)
        try:
            if _read_exactly(conn, len(_PREFACE)) != _PREFACE:
                return
            conn.sendall(_frame(_SETTINGS, 0, 0))
            while True:
                head = _read_exactly(conn, 9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                _read_exactly(conn, length)
                if kind == _SETTINGS and not flags & _ACK:
                    conn.sendall(_frame(_SETTINGS, _ACK, 0))
                elif kind == _HEADERS:
                    conn.sendall(_frame(_HEADERS, _END_STREAM | _END_HEADERS, stream, _STATUS_404))
        except (OSError, ConnectionError):
            return


@pytest.fixture
def http2_404() -> Iterator[str]:
    """http://127.0.0.1:PORT of a real HTTP/2 (h2c) server answering 404 to everything."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=_answer_404, args=(conn,), daemon=True)
            worker.start()
            workers.append(worker)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        server.join(timeout=10)
        listener.close()
        for worker in workers:
            worker.join(timeout=15)


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """The incident with an agent on every node: a real gRPC server on a port that is not
    the controller's."""
    with SimCluster(incident()) as sim:
        yield sim


def _agent_url(cluster: SimCluster) -> str:
    return f"http://{cluster.agent_map()['gpu003']}"


def _assert_named(line: str, url: str) -> None:
    assert f"{url} {SENTENCE}" in line, line
    assert "--controller" in line and "6817" in line, line  # what to check, and the port
    for words in GRPC_WORDS:
        assert words not in line, (words, line)


@pytest.mark.parametrize(
    "argv",
    [["audit"], ["nodes"], ["explain", "gpu003"], ["checklist", "post-wipe", "-w", "gpu003"]],
    ids=lambda argv: argv[0],
)
def test_an_agents_port_given_as_the_controller_is_named_in_one_line(
    cluster: SimCluster, tmp_path: Path, argv: list[str]
) -> None:
    url = _agent_url(cluster)
    inventory = cluster.write_inventories(tmp_path / "inventory.jsonl")
    proc = run_cli(*argv, "--inventory", str(inventory), "--controller", url, home=tmp_path)
    line = one_line_error(proc)
    _assert_named(line, url)
    assert "serves gRPC, but not Spur's SlurmController" in line


def test_an_agents_port_in_the_environment_is_named_too(
    cluster: SimCluster, tmp_path: Path
) -> None:
    url = _agent_url(cluster)
    proc = run_cli("snapshot", "-o", str(tmp_path / "s.json"), env={"SPUR_CONTROLLER_ADDR": url})
    _assert_named(one_line_error(proc), url)
    assert not (tmp_path / "s.json").exists()


def test_an_http2_server_answering_404_is_named_in_one_line(http2_404: str, tmp_path: Path) -> None:
    proc = run_cli("snapshot", "-o", str(tmp_path / "s.json"), "--controller", http2_404)
    line = one_line_error(proc)
    _assert_named(line, http2_404)
    assert "HTTP status 404 over HTTP/2" in line
    assert not (tmp_path / "s.json").exists()


def test_beside_a_real_controller_a_wrong_endpoint_is_skipped_and_the_note_names_it(
    cluster: SimCluster, http2_404: str, tmp_path: Path
) -> None:
    agent = _agent_url(cluster)
    urls = f"{agent},{http2_404},{cluster.controller_address}"
    inventory = cluster.write_inventories(tmp_path / "inventory.jsonl")
    proc = run_cli("audit", "--json", "--inventory", str(inventory), "--controller", urls)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["controller"]["address"] == cluster.controller_address
    (note,) = [n for n in report["notes"] if "failover" in n]
    assert f"{agent} {SENTENCE}" in note and f"{http2_404} {SENTENCE}" in note
    assert f"{cluster.controller_address} answered" in note


def test_when_no_endpoint_is_a_controller_the_line_names_each(
    cluster: SimCluster, http2_404: str, tmp_path: Path
) -> None:
    agent = _agent_url(cluster)
    proc = run_cli("audit", "--controller", f"{agent},{http2_404}", home=tmp_path)
    line = one_line_error(proc, "no controller endpoint answered Ping", "--controller")
    assert f"{agent} {SENTENCE}" in line and f"{http2_404} {SENTENCE}" in line
