"""Run one command on many nodes through gateways, routed by ClusterShell's topology.

A topology file in ClusterShell's topology.conf format routes nodes through
gateways (`admin1: gw[1-8]`, `gw[1-8]: gpu[0001-8000]`). ClusterShell reads the
file and its router splits the nodes over the gateways, level by level
(`shipped_plan`); spurctl's own relay (node/gateway_relay.py, standard library
only) carries the work: sent over ssh to each gateway's `python3 -I -S -`, it runs
the remote command on its share of the nodes over ssh, `fanout` at a time,
killing one that outlives `timeout`, and ships itself to the gateways below.
Nodes the topology does not list are reached straight from this host, by the
same relay run here.

What comes back from a gateway is data, never code: one JSON line per node,
read with `json.loads` and nothing else (ClusterShell's own gateway protocol
carries pickles, which its root side unpickles: no gateway process of
ClusterShell's is ever started). A gateway speaks only for the nodes of its own
plan: a line for any other node is dropped at the relay above it, and this host
takes a node's first line only. Each node's output is capped on the gateway
(OUTPUT_CAP) and every line read from a gateway is bounded, so one node or one
gateway printing without end cannot exhaust this host's memory. docs/collecting.md
says exactly what a gateway is trusted with.

Every node ends with exactly one outcome, and a gateway's trouble is never
mistaken for a node's empty answer: a gateway that could not be started, never
answered, died or outlived the tree's deadline fails each of its nodes, naming it.

This module reads no topology unless it is named: /etc/clustershell/topology.conf
is not used by default.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spurctl.defaults import DEFAULT_REMOTE_COMMAND as DEFAULT_REMOTE_COMMAND
from spurctl.errors import SpurctlError


@dataclass(frozen=True, slots=True)
class Tree:
    """How to collect through gateways: the topology file, the command each node
    runs, and the ssh program the relays use (None: `ssh` from PATH)."""

    topology: Path
    remote_command: str = DEFAULT_REMOTE_COMMAND
    ssh: str | None = None


@dataclass(slots=True)
class Relayed:
    """What came back for one node through the tree."""

    stdout: list[bytes] = field(default_factory=list)
    stderr: list[bytes] = field(default_factory=list)
    rc: int | None = None
    timed_out: bool = False
    # The gateway the node was reached through (None: straight from this host).
    via: str | None = None
    # Set when the node's gateway failed it: the whole reason, naming the gateway.
    gateway_error: str | None = None
    # Bytes the node's command printed on stdout, and how many of them past the cap
    # were cut (then `stdout` is empty: cut output is no inventory).
    printed: int = 0
    cut: int = 0


def root_name() -> str:
    """This host as ClusterShell finds it in a topology: its short host name."""
    return socket.gethostname().split(".")[0]


def check_tree(tree: Tree) -> None:
    """Refuse a topology ClusterShell could not route from this host, or an empty
    remote command, before anything runs. Raises SpurctlError with the fix."""
    if not tree.remote_command.strip():
        raise SpurctlError("--remote-command is empty; give the command each node runs")
    if tree.ssh is not None and not tree.ssh.strip():
        raise SpurctlError("--ssh is empty; give the ssh program's path")
    _load_topology(tree.topology)


def _load_topology(path: Path) -> Any:
    """The propagation tree from this host, parsed from the file read once, bounded
    (bounded.TOPOLOGY); ClusterShell is given the text, never the path to read itself."""
    from ClusterShell.Topology import TopologyError, TopologyParser

    from spurctl.sources import bounded

    class _Parsed(TopologyParser):
        """ClusterShell's parser, its one read of the file answered from `text`."""

        def __init__(self, text: str, name: str) -> None:
            self._text, self._name = text, name
            super().__init__(name)

        def read(self, filenames: Any, encoding: str | None = None) -> list[str]:
            self.read_string(self._text, source=self._name)
            return [self._name]

    where = f"--topology {path}"
    try:
        text = bounded.read_text(path, bounded.TOPOLOGY, where)
    except FileNotFoundError:
        raise SpurctlError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise SpurctlError(f"{where}: a directory; name the topology.conf file") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SpurctlError(f"{where}: cannot read it ({why})") from None
    root = root_name()
    try:
        tree = _Parsed(text, str(path)).tree(root)
    except TopologyError as exc:
        if "not a valid root" in str(exc):
            raise SpurctlError(
                f"{where}: its routes do not start at this host ({root}); "
                f"the first [routes] line must be `{root}: GATEWAYS`"
            ) from None
        raise SpurctlError(f"{where}: not a usable topology ({exc})") from None
    except Exception as exc:  # configparser's errors, a malformed node set
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpurctlError(f"{where}: not a ClusterShell topology file ({first})") from None
    _check_gateways(tree, where)
    return tree


def _check_gateways(tree: Any, where: str) -> None:
    """Refuse a gateway whose name could reach ssh as anything but a host: one starting
    with `-` would be read as an option (`-oProxyCommand=...` runs a command here), and
    one with characters a shell interprets is no host name. The relays also end ssh's
    options with `--`, so a name that got past this would still be a destination."""
    from spurctl.hostlist import is_node_name

    for group in tree:
        if not group.children_len() or group is tree.root:
            continue  # this host, or the nodes a route ends at (scope names, checked)
        for name in group.nodeset:
            if not is_node_name(name):
                what = (
                    "starts with '-', which ssh would read as an option"
                    if name.startswith("-")
                    else "is not a host name (only letters, digits, '.', '_' and '-')"
                )
                raise SpurctlError(
                    f"{where}: gateway {name!r} {what}; name each gateway by its host name"
                )


def _last_line(lines: list[bytes]) -> str:
    for raw in reversed(lines):
        line = raw.decode("utf-8", errors="replace").strip()
        if line:
            return line if len(line) <= 200 else line[:199] + "…"
    return ""


def shipped_plan(nodes: Sequence[str], topology: Any, root: str) -> dict[str, Any]:
    """Which nodes each relay reaches itself and which sub-gateways it sends on, from
    `root` down, as ClusterShell's router spreads them over a route's gateways."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet
    from ClusterShell.Propagation import PropagationTreeRouter

    from spurctl import hostlist

    router = PropagationTreeRouter(root, topology)
    # Folded first: NodeSet reads one hostlist far faster than 10,000 names one by one.
    targets = NodeSet(hostlist.fold(nodes), resolver=RESOLVER_NOGROUP)
    direct, behind = _spread(router.table, targets)
    return {
        "nodes": sorted(direct),
        "gateways": {gw: shipped_plan(sub, topology, gw) for gw, sub in sorted(behind.items())},
    }


def _spread(table: Any, targets: Any) -> tuple[list[str], dict[str, list[str]]]:
    """ClusterShell's `PropagationTreeRouter.dispatch` over its routing `table`, route by
    route rather than node by node (its `next_hop` searches the table for each node:
    1.4 s for 10,000 nodes). The same answer (tests/unit/test_collect_tree.py compares
    them): each route, in the table's order, takes the targets its network holds; of
    those, a node that is a gateway of an earlier route is reached directly, and each
    other goes to the route gateway that has been given the fewest nodes so far (the
    first such, in NodeSet order). Targets no route holds are reached directly.
    Returns (nodes reached directly, {gateway: its nodes, in order})."""
    from ClusterShell.NodeSet import NodeSet

    left = targets.copy()
    direct: list[str] = []
    behind: dict[str, list[str]] = {}
    given: dict[str, int] = {}
    earlier = NodeSet()  # the gateways of the routes before this one
    for network, gateways in table:
        mine = network & left
        left.difference_update(mine)
        reachable = set(mine & earlier)
        candidates = list(gateways)
        for node in mine:
            if node in reachable:
                direct.append(node)
                continue
            best = min(candidates, key=lambda gw: given.get(gw, 0))
            given[best] = given.get(best, 0) + 1
            behind.setdefault(best, []).append(node)
        earlier.update(gateways)
    direct += list(left)
    return direct, behind


def run_tree(
    nodes: Sequence[str],
    tree: Tree,
    fanout: int,
    timeout: float,
    on_done: Callable[[], None],
    *,
    ship_scanner: bool = False,
) -> dict[str, Relayed]:
    """Run `tree.remote_command` on every node through the gateways; one Relayed per node.

    spurctl's standard-library relay (node/gateway_relay.py) runs on each gateway,
    sent over ssh, so a gateway needs only python3. With `ship_scanner` each node's
    command gets the node scanner on its standard input; otherwise its stdin is empty.
    `on_done` is called once per node as its line arrives (a progress bar's tick).
    """
    import subprocess
    import sys

    from spurctl.node import gateway_relay
    from spurctl.sources import children
    from spurctl.sources.output_cap import OUTPUT_CAP

    plan = shipped_plan(nodes, _load_topology(tree.topology), root_name())
    scanner = ""
    if ship_scanner:
        from spurctl.node.shipped_scan import scanner_program

        scanner = scanner_program().decode()
    data = {
        "relay": Path(gateway_relay.__file__).read_text(encoding="utf-8"),
        "scanner": scanner,
        "cap": OUTPUT_CAP,
        "ssh": tree.ssh or "ssh",
        "remote": tree.remote_command,
        "fanout": fanout,
        "timeout": timeout,
        "name": None,
        "plan": plan,
    }
    out = {node: Relayed() for node in nodes}
    # This host runs the same relay for the nodes it reaches itself and for the top gateways.
    limit = gateway_relay.budget(plan, fanout, timeout) + timeout
    relay = subprocess.Popen(
        [sys.executable, "-I", "-S", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group: the kill at its limit reaches all it started
        preexec_fn=children.ends_with_spurctl(join_group=False),
    )
    assert relay.stdin is not None and relay.stdout is not None and relay.stderr is not None
    err_box: list[bytes] = []
    stderr = relay.stderr
    reader = threading.Thread(
        target=lambda: err_box.append(gateway_relay.tail_of(stderr)), daemon=True
    )
    reader.start()
    # Joined before the relay is reaped, so the kill never hits a reused pid.
    killer = threading.Timer(limit, _kill_group, (relay.pid,))
    killer.start()
    try:
        with contextlib.suppress(BrokenPipeError):
            relay.stdin.write(gateway_relay.program(data))
            relay.stdin.close()
        # Node by node, as each relay reports it; a line past the limit is skipped whole.
        for raw in gateway_relay.lines(relay.stdout, gateway_relay.line_limit(OUTPUT_CAP)):
            _take(raw, out, on_done, OUTPUT_CAP)
    finally:
        killer.cancel()
        killer.join()
        try:
            relay.wait(timeout=5)
        except subprocess.TimeoutExpired:  # its output ended (or this side broke): end it
            _kill_group(relay.pid)
            relay.wait()
        reader.join(timeout=5)
        relay.stdout.close()
        relay.stderr.close()
    err = err_box[0] if err_box else b""
    why = _last_line(err.splitlines()) or f"exited with status {relay.returncode}"
    for relayed in out.values():
        if relayed.rc is None and relayed.gateway_error is None:
            relayed.gateway_error = f"the gateway tree stopped ({why})"
    return out


def _take(raw: bytes, out: dict[str, Relayed], on_done: Callable[[], None], cap: int) -> None:
    """One node's line from the relay, if it is one of ours and the first for it. Read as
    JSON data only, and held to the cap whatever the gateway says it kept."""
    import json

    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return
    node = doc.get("node") if isinstance(doc, dict) else None
    got = out.get(node) if isinstance(node, str) else None
    if got is None or got.rc is not None or got.gateway_error is not None:
        return
    rc = doc.get("rc")
    if doc.get("gateway_error") is not None:
        got.gateway_error = str(doc["gateway_error"])[:_MAX_REASON]
    elif isinstance(rc, int) and not isinstance(rc, bool):  # anything else is not an answer
        got.rc = rc
        stdout = str(doc.get("stdout", "")).encode()
        printed, cut = doc.get("printed"), doc.get("cut")
        got.printed = printed if isinstance(printed, int) and printed >= 0 else len(stdout)
        got.cut = cut if isinstance(cut, int) and cut > 0 else max(0, len(stdout) - cap)
        got.printed = max(got.printed, len(stdout))
        got.stdout = [] if got.cut else [stdout]
        stderr = str(doc.get("stderr", ""))[-_MAX_REASON * 8 :]
        got.stderr = [line.encode() for line in stderr.splitlines()]
        got.timed_out = doc.get("timed_out") is True
        got.via = str(doc["via"])[:_MAX_REASON] if doc.get("via") is not None else None
    else:
        return
    on_done()


# The most of a gateway's reason (or via) kept; the node's record clips it further.
_MAX_REASON = 2000


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
