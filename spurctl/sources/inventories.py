"""What the agents hold, from wherever the operator said: files, standard input, or a live collect.

An audit's two halves are the controller's view and these inventories; `Sources`
records how the operator chose them, and `gather_holdings` turns that choice
into inventories (exactly one of files or a collect).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spurctl.errors import SpurctlError
from spurctl.gcpause import gc_paused
from spurctl.model import ControllerView, Inventory
from spurctl.sources.documents import parse_inventory_text

if TYPE_CHECKING:
    from spurctl.sources.controller import ControllerClient

INVENTORY_SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass
class Sources:
    """Where an audit's two halves come from, as the operator chose them."""

    nodes: str | None
    inventory: list[str] | None
    collect: bool
    command: str
    fanout: int
    snapshot: Path | None = None
    # None: a progress bar when stderr is a terminal; a live watch view turns it off.
    progress: bool | None = None


def gather_holdings(src: Sources, view_nodes: Iterable[str], timeout: float) -> list[Inventory]:
    """Inventories from files or a live collect; exactly one of the two."""
    if src.collect and src.inventory:
        raise SpurctlError("use --inventory or --collect, not both")
    if src.inventory:
        return load_inventories(src.inventory)
    if src.collect:
        from spurctl.hostlist import parse_scope
        from spurctl.sources.collect import collect

        targets = sorted(parse_scope(src.nodes)) if src.nodes else sorted(view_nodes)
        return collect(
            targets,
            command=src.command,
            fanout=src.fanout,
            timeout=timeout,
            progress=src.progress,
        )
    raise SpurctlError(
        "no inventories: pass --inventory FILE|DIR|- or --collect "
        "(no Spur RPC lists what an agent holds)"
    )


def load_inventories(sources: Sequence[str]) -> list[Inventory]:
    """Inventories from files, directories of files, or '-' (stdin); JSON or JSON Lines."""
    with gc_paused():
        return _load_inventories(sources)


def _load_inventories(sources: Sequence[str]) -> list[Inventory]:
    out: list[Inventory] = []
    for source in sources:
        if source == "-":
            out.extend(parse_inventory_text(sys.stdin.read(), name="<stdin>"))
            continue
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in INVENTORY_SUFFIXES)
            if not files:
                raise SpurctlError(
                    f"--inventory {path} holds no .json or .jsonl files; "
                    "write them with `spurctl collect -o FILE`"
                )
        elif path.exists():
            files = [path]
        else:
            raise SpurctlError(f"--inventory {path}: no such file or directory")
        for f in files:
            try:
                text = f.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise SpurctlError(f"cannot read inventory {f}: {exc}") from None
            out.extend(parse_inventory_text(text, name=str(f)))
    return out


def read_view_and_inventories(
    client: ControllerClient, sources: Sequence[str]
) -> tuple[ControllerView, list[Inventory]]:
    """The controller's view and the inventory files, read at the same time.

    Neither depends on the other, and while the controller builds and sends a
    large answer this process would otherwise sit idle: parsing the inventories
    meanwhile takes most of their cost off the audit's wall time. A controller
    failure is reported first, as if the view had been read first. The view is
    read on a daemon thread, so Ctrl-C returns at once instead of waiting for a
    slow controller (closing the client then cancels the call).
    """
    outcome: list[ControllerView | BaseException] = []
    done = threading.Event()

    def read_view() -> None:
        try:
            outcome.append(client.view())
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
        inventories = load_inventories(sources)
    except Exception:
        view()
        raise
    return view(), inventories
