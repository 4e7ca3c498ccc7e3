"""Gather node inventories from many nodes at once, with ClusterShell as the engine.

`collect` runs one local command per node (by default `ssh` to the node running
`spurctl node-inventory`) through ClusterShell's ExecWorker, which substitutes
`%h` with the node name and keeps at most `fanout` commands running. Each node
ends as exactly one Inventory: the one it printed, or a record with `error` set
when its command failed, hung past the timeout or printed no valid inventory.
One node's trouble never stops the others.

Beyond one machine's fan-out, with a `Tree` (a ClusterShell topology.conf naming
the gateways), ClusterShell's router splits the nodes over the gateways and
spurctl's relay runs the remote command on every node through them
(sources/tree.py): gateway output is JSON data, never a pickle. Each node still
ends as exactly one Inventory; a node whose gateway failed is an error naming
that gateway, never an empty inventory.

Each node's output is capped (sources/output_cap.py): a node that prints more
than an inventory could ever be is an error record saying how much was cut.
docs/collecting.md has the exact commands.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from string import Template
from typing import Any

from spurctl import hostlist
from spurctl.defaults import DEFAULT_COMMAND
from spurctl.errors import DocumentError, SpurctlError
from spurctl.hostlist import is_node_name
from spurctl.model import Inventory, utcnow
from spurctl.sources.inventory_document import parse_inventory_text
from spurctl.sources.output_cap import cut_error
from spurctl.sources.tree import DEFAULT_REMOTE_COMMAND, Relayed, Tree, check_tree

# What a node runs through the tree with --ship-scanner: the scanner arrives on stdin.
SHIP_REMOTE_COMMAND = "python3 -"

_MAX_DETAIL = 300
# Characters that make a template more than one simple command (or that we do
# not try to reason about, even quoted).
_SHELL_SYNTAX = re.compile(r"[;&|()<>`\n]|\$\(")
_NOT_A_PROGRAM = {"if", "for", "while", "until", "case", "{", "!", "exec", "time", "["}


# cli's --nodes check still asks under this name.


class _Pattern(Template):
    # The same substitution ClusterShell's exec worker performs on its command.
    delimiter = "%"


def check_command(command: str) -> None:
    """Reject a command template that would not run once per node, named by %h.

    Raises SpurctlError with the fix.
    """
    if "%hosts" in command or "%{hosts}" in command:
        raise SpurctlError(
            "--command: %hosts runs one command for all nodes; use %h for one command per node"
        )
    try:
        one, two = (
            _Pattern(command).substitute(h=name, host=name, n=0, rank=0) for name in ("a", "b")
        )
    except (KeyError, ValueError) as exc:
        raise SpurctlError(
            f"--command: {command!r} is not a valid template ({exc}); "
            "use %h for the node name and %% for a literal %"
        ) from None
    if one == two:
        raise SpurctlError(
            f"--command: {command!r} does not name the node; put %h where the node name goes"
        )


def exec_form(command: str) -> str:
    """`exec COMMAND` when COMMAND is one simple command; otherwise COMMAND unchanged.

    ClusterShell runs the command through /bin/sh and kills that process at
    the timeout. dash forks for the command instead of replacing itself, so
    without `exec` the kill hits only the shell and a hung ssh lives on.
    """
    if _SHELL_SYNTAX.search(command):
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if not words or words[0] in _NOT_A_PROGRAM or "=" in words[0]:
        return command
    return "exec " + command


def failed(node: str, error: str) -> Inventory:
    """The record of a node that could not be inventoried."""
    return Inventory(node=node, collected_at=utcnow(), source="collect", error=error, held=())


def collect(
    nodes: Sequence[str],
    command: str = DEFAULT_COMMAND,
    fanout: int = 64,
    timeout: float = 60.0,
    progress: bool | None = None,
    tree: Tree | None = None,
    ship_scanner: bool = False,
) -> list[Inventory]:
    """Run `command` once per node in parallel and parse each node's inventory.

    With `tree`, `command` is not used: `tree.remote_command` runs on every node
    through the gateways of `tree.topology` (spurctl's relay, sources/tree.py).
    With `ship_scanner`, each command gets the node scanner on its standard
    input (node/shipped_scan.py) and prints what the scan found.

    Results follow the order of `nodes` (a repeated name is collected once).
    An inventory whose `node` differs from the target is kept as reported: the
    audit flags name mismatches. `progress=None` shows a progress bar on stderr
    when stderr is a terminal.
    """
    if tree is None:
        check_command(command)
    else:
        check_tree(tree)
        if ship_scanner and tree.remote_command == DEFAULT_REMOTE_COMMAND:
            tree = replace(tree, remote_command=SHIP_REMOTE_COMMAND)
    if fanout < 1:
        raise SpurctlError(f"--fanout must be at least 1, got {fanout}")
    if not timeout > 0:
        raise SpurctlError(f"--timeout must be positive, got {timeout:g}")
    order = list(dict.fromkeys(nodes))
    results: dict[str, Inventory] = {}
    runnable = []
    for node in order:
        if is_node_name(node):
            runnable.append(node)
        else:
            results[node] = failed(
                node, "node name has characters a shell would interpret; not run"
            )
    if runnable:
        show = sys.stderr.isatty() if progress is None else progress
        if tree is None:
            results.update(_run(runnable, command, fanout, timeout, show, ship_scanner))
        else:
            results.update(_run_tree(runnable, tree, fanout, timeout, show, ship_scanner))
    return [results[node] for node in order]


@dataclass(slots=True)
class _Outcome:
    stdout: list[bytes] = field(default_factory=list)
    stderr: list[bytes] = field(default_factory=list)
    rc: int | None = None


def _run(
    nodes: list[str],
    command: str,
    fanout: int,
    timeout: float,
    show_progress: bool,
    ship_scanner: bool = False,
) -> dict[str, Inventory]:
    from ClusterShell.Event import EventHandler
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Task import task_self

    from spurctl.sources.output_cap import OUTPUT_CAP, capped_exec_worker

    outcomes = {node: _Outcome() for node in nodes}

    class Gather(EventHandler):
        def __init__(self, on_done: Callable[[], None]) -> None:
            super().__init__()
            self.on_done = on_done

        def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
            outcome = outcomes.get(node)
            if outcome is not None:
                (outcome.stderr if sname == "stderr" else outcome.stdout).append(msg)

        def ev_hup(self, worker: Any, node: str, rc: int) -> None:
            outcome = outcomes.get(node)
            if outcome is not None:
                outcome.rc = rc
            self.on_done()

    task = task_self()
    task.set_info("fanout", fanout)
    # Output is gathered per node by the handler; the task's own copy would double it.
    task.set_default("stdout_msgtree", False)
    task.set_default("stderr_msgtree", False)

    with _Progress(len(nodes), show_progress) as bar:
        # ClusterShell's ExecWorker, its commands ending with spurctl (sources/children.py)
        # and each node's output capped (sources/output_cap.py).
        worker = capped_exec_worker()(
            NodeSet.fromlist(nodes),
            handler=Gather(bar.advance),
            timeout=timeout,
            command=exec_form(command),
            stderr=True,
        )
        if ship_scanner:
            from spurctl.node.shipped_scan import scanner_program

            worker.write(scanner_program())  # buffered per node until its command starts
            worker.set_write_eof()
        task.schedule(worker)
        task.run()
    timed_out = set(worker.iter_keys_timeout())
    read = _read_scan if ship_scanner else _read_document
    out = {}
    for node in nodes:
        printed = worker.printed.get((node, "stdout"), 0)
        if printed > OUTPUT_CAP:  # none of it is read: an inventory is a few KiB
            why = cut_error(printed, printed - OUTPUT_CAP)
            if node in timed_out:
                why += f"; then killed at its {timeout:g} s timeout"
            out[node] = failed(node, why)
        else:
            out[node] = _guarded(node, outcomes[node], node in timed_out, timeout, read)
    return out


def _run_tree(
    nodes: list[str],
    tree: Tree,
    fanout: int,
    timeout: float,
    show_progress: bool,
    ship_scanner: bool = False,
) -> dict[str, Inventory]:
    from spurctl.sources.tree import run_tree

    read = _read_scan if ship_scanner else _read_document
    with _Progress(len(nodes), show_progress) as bar:
        relayed = run_tree(nodes, tree, fanout, timeout, bar.advance, ship_scanner=ship_scanner)
    return {node: _relayed(node, relayed[node], timeout, read) for node in nodes}


def _relayed(
    node: str,
    got: Relayed,
    timeout: float,
    read: Callable[[str], list[Inventory]] | None = None,
) -> Inventory:
    """A node's record from what the tree relayed. A gateway's failure is this
    node's error whatever the node printed before it: never an inventory."""
    if got.gateway_error is not None:
        return failed(node, _clip(got.gateway_error))
    if got.cut:
        return failed(node, cut_error(got.printed, got.cut))
    if got.timed_out and got.via is not None:
        return failed(node, f"no answer within {timeout:g} s; killed by gateway {got.via}")
    outcome = _Outcome(got.stdout, got.stderr, got.rc)
    return _guarded(node, outcome, got.timed_out, timeout, read or _read_document)


def _read_document(text: str) -> list[Inventory]:
    return list(parse_inventory_text(text, name="output"))


def _read_scan(text: str) -> list[Inventory]:
    from spurctl.node.shipped_scan import read_scan

    return read_scan(text, name="output")


def _guarded(
    node: str,
    outcome: _Outcome,
    timed_out: bool,
    timeout: float,
    read: Callable[[str], list[Inventory]] = _read_document,
) -> Inventory:
    """This node's inventory; whatever reading its output raises is this node's error alone."""
    try:
        return _inventory(node, outcome, timed_out, timeout, read)
    except Exception as exc:  # RecursionError, MemoryError, anything: the others go on
        why = str(exc).splitlines()[0] if str(exc) else ""
        return failed(node, _clip(f"output could not be read ({type(exc).__name__}: {why})"))


def _inventory(
    node: str,
    outcome: _Outcome,
    timed_out: bool,
    timeout: float,
    read: Callable[[str], list[Inventory]],
) -> Inventory:
    if timed_out:
        return failed(node, f"no answer within {timeout:g} s; command killed")
    if outcome.rc is None:
        return failed(node, "command did not finish")
    if outcome.rc != 0:
        detail = _last_line(outcome.stderr)
        return failed(
            node, f"command exited with status {outcome.rc}" + (f": {detail}" if detail else "")
        )
    text = b"\n".join(outcome.stdout).decode("utf-8", errors="replace")
    try:
        found = read(text)
    except DocumentError as exc:
        return failed(node, _clip(f"printed no valid inventory ({exc})"))
    except Exception as exc:  # a parser that gives up some other way: still this node's error
        return failed(
            node, _clip(f"printed no valid inventory ({type(exc).__name__} while reading it)")
        )
    if len(found) != 1:
        what = "no inventory" if not found else f"{len(found)} inventories, expected one"
        return failed(node, f"printed {what}")
    inv = found[0]
    if not _speaks_for(inv, node):
        # Read as its own node's, it would replace that node's real record.
        return failed(node, f"{node}'s command printed an inventory of {inv.node}")
    return inv


def _speaks_for(inv: Inventory, node: str) -> bool:
    """Whether an inventory names the node its command ran on, equal up to case and
    domain (`gpu001.example` ~ `gpu001`): the audit files a record under its `node`,
    so any other name would stand in for another node (docs/collecting.md)."""
    return hostlist.loose_key(inv.node) == hostlist.loose_key(node)


def _last_line(lines: list[bytes]) -> str:
    for raw in reversed(lines):
        line = raw.decode("utf-8", errors="replace").strip()
        if line:
            return _clip(line)
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


class _Progress:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self._bar: Any = None
        self._task_id: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("collecting"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                # past stderr's escaping (render/sink.py): the bar shows no cluster text
                console=Console(file=getattr(sys.stderr, "styled", sys.stderr)),
                transient=True,
            )
            self._bar.start()
            self._task_id = self._bar.add_task("collect", total=self.total)
        return self

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task_id)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
