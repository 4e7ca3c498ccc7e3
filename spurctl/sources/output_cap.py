"""How much of a node's output collect keeps: an inventory is a few KiB.

One node printing hundreds of megabytes (a scanner gone wrong, a node answering
with something else) must not drive the collector, or a gateway relaying it, to
gigabytes (issue 39.11). Its standard output is kept up to OUTPUT_CAP bytes and
counted past that; a node that printed more is an error record that says how
much was printed and how much was cut, and none of it is read as an inventory.
Its standard error is kept up to STDERR_CAP bytes (only its last line is used).

The direct fan-out caps through ClusterShell's exec worker (`capped_exec_worker`:
its line buffer is bounded too, so one endless line is never held whole); the
gateway relay caps on the gateway itself (gateway_relay.py, given OUTPUT_CAP).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

OUTPUT_CAP = 4 * 1024 * 1024
STDERR_CAP = 64 * 1024


def cut_error(printed: int, cut: int, cap: int = OUTPUT_CAP) -> str:
    """A node's error when its output went past the cap."""
    return (
        f"printed {printed:,} bytes, more than the {cap:,} an inventory may take: "
        f"{cut:,} bytes cut and nothing read"
    )


_CLASS: list[type] = []


def capped_exec_worker() -> type:
    """ClusterShell's ExecWorker whose commands end with spurctl (sources/children.py) and
    whose clients keep at most OUTPUT_CAP bytes of each node's stdout (STDERR_CAP of its
    stderr) and count the rest in `printed`."""
    if _CLASS:
        return _CLASS[0]
    from spurctl.sources.children import exec_worker

    # On top of the worker whose commands end with spurctl (sources/children.py).
    ExecWorker = exec_worker()

    class CappedClient(ExecWorker.SHELL_CLASS):  # type: ignore[name-defined]
        def _readlines(self, sname: str) -> Iterator[bytes]:
            # ClusterShell's own line splitting, over at most the cap: past it a chunk
            # is counted and let go, and a partial line never grows beyond it.
            chunk = self._read(sname)
            worker = self.worker
            key = (self.key, sname)
            before = worker.printed.get(key, 0)
            worker.printed[key] = before + len(chunk)
            room = (OUTPUT_CAP if sname == "stdout" else STDERR_CAP) - before
            if room <= 0:
                return
            stream = self.streams[sname]
            buf = stream.rbuf + chunk[:room]
            stream.rbuf = b""
            for line in buf.splitlines(True):
                if line.endswith(b"\n"):
                    yield line[:-2] if line.endswith(b"\r\n") else line[:-1]
                else:
                    stream.rbuf = line

    class CappedExecWorker(ExecWorker):  # type: ignore[valid-type,misc]
        SHELL_CLASS = CappedClient

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # (node, "stdout" | "stderr") -> bytes the node's command printed there
            self.printed: dict[tuple[str, str], int] = {}
            super().__init__(*args, **kwargs)

    _CLASS.append(CappedExecWorker)
    return CappedExecWorker
