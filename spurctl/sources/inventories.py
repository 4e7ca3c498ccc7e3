"""What the agents hold, from wherever the operator said: files, standard input, or a live collect.

An audit's two halves are the controller's view and these inventories; `Sources`
records how the operator chose them, and `gather_holdings` turns that choice
into inventories (exactly one of files or a collect).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from spurctl.errors import SpurctlError
from spurctl.errors import warn as _warn
from spurctl.heap import gc_paused
from spurctl.holdings import Inventory, held_ids
from spurctl.model import ControllerView, format_time
from spurctl.scope import Scope
from spurctl.sources import bounded
from spurctl.sources.inventory_document import parse_inventory_records

if TYPE_CHECKING:
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.tree import Tree

INVENTORY_SUFFIXES = (".json", ".jsonl", ".ndjson")

_MIB = 2**20


@dataclass
class Sources:
    """Where an audit's two halves come from, as the operator chose them."""

    # The nodes in scope (-w, less -x), parsed once by the command.
    scope: Scope
    inventory: list[str] | None
    collect: bool
    command: str
    fanout: int
    snapshot: Path | None = None
    # None: a progress bar when stderr is a terminal; a live watch view turns it off.
    progress: bool | None = None
    # With --topology: collect through ClusterShell's gateways (command is then unused).
    tree: Tree | None = None
    # --ship-scanner: send the node scanner on each command's stdin (shipped_scan.py).
    ship_scanner: bool = False
    # --node-timeout: how long a node's collect command may run.
    node_timeout: float = 60.0
    # Neither --inventory nor --collect is an answer of its own (`nodes`, as sinfo: the
    # controller's columns, every agent not-inventoried), not an error.
    holdings_optional: bool = False


def gather_holdings(src: Sources, view_nodes: Iterable[str]) -> list[Inventory]:
    """Inventories from files or a live collect (of the scope's nodes, else of every
    node in `view_nodes`; never -x's); exactly one of the two."""
    if src.collect and src.inventory:
        raise SpurctlError("use --inventory or --collect, not both")
    if src.inventory:
        return load_inventories(src.inventory)
    if src.collect:
        from spurctl.sources.collect import collect

        targets = src.scope.targets(list(view_nodes))
        return collect(
            targets,
            command=src.command,
            fanout=src.fanout,
            timeout=src.node_timeout,
            progress=src.progress,
            tree=src.tree,
            ship_scanner=src.ship_scanner,
        )
    if src.holdings_optional:
        return []
    raise SpurctlError(
        "no inventories: pass --inventory FILE|DIR|- or --collect "
        "(no Spur RPC lists what an agent holds)"
    )


def load_inventories(
    sources: Sequence[str], warn: Callable[[str], None] = _warn
) -> list[Inventory]:
    """Inventories from files, directories of files, or '-' (stdin); JSON or JSON Lines.

    In a directory only regular files are read (a FIFO or socket named *.json would
    block forever); what was skipped is said through `warn`. Two different records
    of one node collected at the same moment are an error naming both.
    """
    with gc_paused():
        return _load_inventories(sources, warn)


def _load_inventories(sources: Sequence[str], warn: Callable[[str], None]) -> list[Inventory]:
    out: list[Inventory] = []
    seen: dict[str, tuple[Inventory, str]] = {}

    def add(records: Iterable[tuple[str, Inventory]]) -> None:
        # The latest record of a node wins (model.inventories_by_node); two that
        # tie on collected_at and differ leave no way to choose: an error.
        for where, inv in records:
            prev = seen.get(inv.node)
            if prev is not None and prev[0].collected_at == inv.collected_at:
                if prev[0] != inv:
                    when = format_time(inv.collected_at) or "no collected_at"
                    raise SpurctlError(
                        f"two different inventories of {inv.node} collected at the same time "
                        f"({when}): {prev[1]} and {where}; keep one of them"
                    )
            elif prev is None or _at(inv) > _at(prev[0]):
                seen[inv.node] = (inv, where)
            out.append(inv)

    for source in sources:
        if source == "-":
            # A test harness may swap in text: read as much as the limit, then as bytes.
            limit = bounded.INVENTORY.size + 1
            stdin = getattr(sys.stdin, "buffer", None) or io.BytesIO(sys.stdin.read(limit).encode())
            text = _read(stdin, "<stdin>")
            add(parse_inventory_records(text, name="<stdin>"))
            continue
        files = _files(Path(source), warn)
        from_dir = files != [Path(source)]
        for f in files:
            try:
                # A large buffer: each refill releases the GIL, which the controller
                # read on another thread then holds for a switch interval.
                with open(f, "rb", buffering=_MIB) as fh:
                    text = _read(fh, str(f))
            except OSError as exc:
                raise SpurctlError(f"cannot read inventory {f}: {exc.strerror}") from None
            other = _other_document(text) if from_dir else None
            if other is not None:
                # Found in a directory, not named: someone else's file. Skipping it
                # loses nothing: the node it would have covered is not-inventoried.
                warn(f"--inventory {source}: skipped {f.name}: {other}, not a spurctl inventory")
                continue
            add(parse_inventory_records(text, name=str(f)))
    return out


def _other_document(text: str) -> str | None:
    """What a JSON document that is plainly not an inventory is ("schema 'x'", "no
    schema"); None for an inventory, or for text that does not read (the parser then
    says what is wrong with it, as for any broken inventory)."""
    import json

    from spurctl.sources.documents import INVENTORY_SCHEMA

    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        doc = json.loads(first)
    except (ValueError, RecursionError):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):  # nested past the parser's depth: not read
            return None
    if isinstance(doc, list):
        doc = doc[0] if doc else None
    if not isinstance(doc, dict):
        return "JSON without a schema" if doc is not None else None
    schema = doc.get("schema")
    if schema == INVENTORY_SCHEMA:
        return None
    if isinstance(schema, str) and schema.startswith("spurctl.inventory/"):
        return None  # a newer inventory version: the parser names the version
    return "no schema" if schema is None else f"schema {str(schema)[:60]!r}"


_NEVER = datetime.min.replace(tzinfo=UTC)


def _at(inv: Inventory) -> datetime:
    return inv.collected_at or _NEVER


def _stat(path: Path, what: str) -> os.stat_result:
    try:
        return path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SpurctlError(
                f"{what} {path}: a symlink loop (too many levels of symbolic links); "
                "point it at a real file"
            ) from None
        if exc.errno == errno.ENOENT:
            raise SpurctlError(f"{what} {path}: no such file or directory") from None
        raise SpurctlError(f"{what} {path}: {exc.strerror}") from None


def _files(path: Path, warn: Callable[[str], None]) -> list[Path]:
    """The files to read for one --inventory PATH."""
    st = _stat(path, "--inventory")
    if not stat.S_ISDIR(st.st_mode):
        return [path]  # named explicitly: read whatever it is (`<(clush ...)` is a pipe)
    files, skipped = [], []
    for p in sorted(path.iterdir()):
        if p.suffix not in INVENTORY_SUFFIXES:
            continue
        try:
            mode = p.stat().st_mode
        except OSError as exc:
            why = "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror
            skipped.append(f"{p.name} ({why})")
            continue
        if stat.S_ISREG(mode):
            files.append(p)
        else:
            skipped.append(f"{p.name} ({_kind(mode)}, not a regular file)")
    if skipped:
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        shown = ", ".join(skipped[:5]) + more
        warn(f"--inventory {path}: skipped {shown}")
    if not files:
        raise SpurctlError(
            f"--inventory {path} holds no .json or .jsonl files"
            + (" that are regular files" if skipped else "")
            + "; write them with `spurctl collect -o FILE`"
        )
    return files


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def _read(stream: BinaryIO, name: str) -> str:
    """The stream's text, UTF-8 strictly, within bounded.INVENTORY: a line over its limit
    is refused as soon as it is (an endless one too), never read into memory whole."""
    data = bounded.read_lines(stream, bounded.INVENTORY, name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = data.count(b"\n", 0, exc.start) + 1
        raise SpurctlError(
            f"{name}: line {at}: not UTF-8 (byte {exc.start}); inventories are UTF-8 JSON"
        ) from None


def read_view_and_inventories(
    client: ControllerClient, sources: Sequence[str]
) -> tuple[ControllerView, list[Inventory]]:
    """The controller's view and the inventory files, read at the same time
    (`read_view_and_holdings` without the held ids)."""
    view, inventories, _ = read_view_and_holdings(client, sources)
    return view, inventories


def read_view_and_holdings(
    client: ControllerClient, sources: Sequence[str]
) -> tuple[ControllerView, list[Inventory], frozenset[int]]:
    """The controller's view and the inventory files, read at the same time, and the
    ids the inventories hold (`held_ids`, which the view's read needs first).

    Neither depends on the other, and while the controller builds and sends a
    large answer this process would otherwise sit idle: parsing the inventories
    meanwhile takes most of their cost off the audit's wall time. A controller
    failure is reported first, as if the view had been read first. The view is
    read on a daemon thread, so Ctrl-C returns at once instead of waiting for a
    slow controller (closing the client then cancels the call).
    """
    outcome: list[ControllerView | BaseException] = []
    done = threading.Event()
    # The held ids, for the view to convert whole as its answers arrive (None: every
    # job); set on every path out of here before the view is waited for.
    held: list[frozenset[int] | None] = []
    held_known = threading.Event()

    def wanted() -> frozenset[int] | None:
        held_known.wait()
        return held[0]

    def read_view() -> None:
        try:
            outcome.append(client.view(wanted=wanted))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=read_view, name="controller-view", daemon=True).start()

    def view() -> ControllerView:
        done.wait()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    try:
        try:
            inventories = load_inventories(sources)
            held.append(held_ids(inventories))
        finally:
            if not held:
                held.append(None)
            held_known.set()
    except Exception:
        view()
        raise
    ids = held[0]
    assert ids is not None  # set above when the inventories were read
    return view(), inventories, ids
