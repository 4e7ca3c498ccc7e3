"""Run one command on many nodes through ClusterShell's gateway tree.

A topology file in ClusterShell's topology.conf format routes nodes through
gateways (`admin1: gw[1-8]`, `gw[1-8]: gpu[0001-8000]`). ClusterShell's
TreeWorker is the engine: it starts `python -m ClusterShell.Gateway` on each
gateway over ssh, and each gateway runs the remote command on its share of the
nodes over ssh, `fanout` at a time, killing one that outlives `timeout`. Nodes
the topology does not list are reached straight from this host.

What spurctl adds is only the accounting, so that every node ends with exactly
one outcome and a gateway's trouble is never mistaken for a node's empty answer:

- a gateway that could not be started or died hands each of its nodes a
  failure naming it (ClusterShell reroutes to a sibling gateway of the same
  group when there is one; with none left it would abort the whole run);
- a gateway that never answers is given up after `timeout` seconds, and a
  tree that has not finished long after every node's own timeout is stopped,
  each unfinished node naming its gateway;
- a node the gateway killed at its timeout says which gateway did.

This module reads no topology unless it is named: /etc/clustershell/topology.conf
is not used by default.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spurctl.errors import SpurctlError

DEFAULT_REMOTE_COMMAND = "spurctl node-inventory"

# How often the gateways' start-up and the whole tree's deadline are checked.
_TICK = 0.25


@dataclass(frozen=True, slots=True)
class Tree:
    """How to collect through gateways: the topology file, the command each node
    runs, and the ssh program ClusterShell uses (None: `ssh` from PATH)."""

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
    from ClusterShell.Topology import TopologyError, TopologyParser

    where = f"--topology {path}"
    try:
        with open(path, encoding="utf-8") as fh:
            fh.read(1)
    except FileNotFoundError:
        raise SpurctlError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise SpurctlError(f"{where}: a directory; name the topology.conf file") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SpurctlError(f"{where}: cannot read it ({why})") from None
    root = root_name()
    try:
        return TopologyParser(str(path)).tree(root)
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


def run_tree(
    nodes: Sequence[str],
    tree: Tree,
    fanout: int,
    timeout: float,
    on_done: Callable[[], None],
) -> dict[str, Relayed]:
    """Run `tree.remote_command` on every node through the gateways; one Relayed per node.

    `on_done` is called once per node as it finishes (a progress bar's tick).
    """
    import logging

    from ClusterShell.Event import EventHandler
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Task import task_self

    topology = _load_topology(tree.topology)
    # ClusterShell logs what spurctl reports per node anyway (a gateway that failed,
    # a channel closed early); without a handler Python would print it on stderr.
    log = logging.getLogger("ClusterShell")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):  # once: watch re-runs
        log.addHandler(logging.NullHandler())

    out = {node: Relayed() for node in nodes}
    finished: set[str] = set()
    gateway_stderr: dict[str, list[bytes]] = {}

    def done(node: str) -> None:
        if node in out and node not in finished:
            finished.add(node)
            on_done()

    class Gather(EventHandler):
        def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
            relayed = out.get(node)
            if relayed is None:  # a gateway's own stderr (its ssh failing, say)
                gateway_stderr.setdefault(node, []).append(msg)
            else:
                (relayed.stderr if sname == "stderr" else relayed.stdout).append(msg)

        def ev_hup(self, worker: Any, node: str, rc: int) -> None:
            relayed = out.get(node)
            if relayed is not None and relayed.rc is None:
                relayed.rc = rc
            done(node)

    task = task_self()
    task.set_info("fanout", fanout)
    task.set_info("ssh_path", tree.ssh or "ssh")
    task.set_default("stdout_msgtree", False)
    task.set_default("stderr_msgtree", False)
    task.topology = topology
    task.router = None  # a fresh router: no gateway marked unreachable by an earlier run

    worker = _tree_worker_class()(
        NodeSet.fromlist(nodes),
        handler=Gather(),
        timeout=timeout,
        command=tree.remote_command,
        stderr=True,
        remote=True,
        failures={},
        on_timeout=done,
    )
    watch = _Watch(worker, timeout, fanout, len(nodes))

    class Tick(EventHandler):
        def ev_timer(self, timer: Any) -> None:
            watch.tick()

    task.schedule(worker)
    task.timer(_TICK, handler=Tick(), interval=_TICK, autoclose=True)
    try:
        task.run()
    except Exception as exc:  # the tree broke mid-run: every unfinished node says so
        why = str(exc).splitlines()[0] if str(exc) else ""
        for node in nodes:
            if node not in finished:
                out[node].gateway_error = f"the gateway tree stopped ({type(exc).__name__}: {why})"
        task.gateways.clear()  # channels a broken run left behind must not serve the next
    finally:
        task.topology = None
        task.router = None
        task.set_info("ssh_path", None)

    timed_out = set(worker.iter_keys_timeout())
    for node, relayed in out.items():
        relayed.via = worker.via.get(node)
        relayed.timed_out = node in timed_out
        failure = worker.failures.get(node)
        if failure is not None and relayed.gateway_error is None:
            gateway, why = failure
            detail = _last_line(gateway_stderr.get(gateway, []))
            relayed.gateway_error = f"gateway {gateway} {why}" + (f": {detail}" if detail else "")
    return out


class _Watch:
    """Timer handler: gives up on gateways that never start, and on a tree that
    has not finished long after every node's own timeout could have passed."""

    def __init__(self, worker: Any, timeout: float, fanout: int, total: int) -> None:
        self.worker = worker
        self.total = total
        self.timeout = timeout
        self.fanout = fanout
        self.started = time.monotonic()
        self.deadline: float | None = None
        self.aborted = False

    def tick(self) -> None:
        worker = self.worker
        now = time.monotonic()
        if self.deadline is None and worker.gwtargets:
            # Each gateway runs its nodes `fanout` at a time, each for at most
            # `timeout`, and so does this host for the nodes it reaches itself;
            # two more timeouts for starting gateways and reroutes.
            routed = [len(t) for t in worker.gwtargets.values()]
            most = max([*routed, self.total - sum(routed)])
            self.deadline = self.started + self.timeout * (math.ceil(most / self.fanout) + 2)
        for gateway, since in list(worker.contacted.items()):
            if gateway in worker.gwtargets and now - since > self.timeout:
                worker.give_up(gateway, f"did not answer within {self.timeout:g} s", setup=False)
        if self.deadline is not None and now > self.deadline:
            limit = self.deadline - self.started
            for gateway in list(worker.gwtargets):
                worker.give_up(gateway, f"did not finish within {limit:g} s", setup=True)
            if now > self.deadline + self.timeout and worker.gwtargets and not self.aborted:
                # A gateway without a channel to close: stop the whole worker, so
                # that the run ends; each node still waiting fails naming its gateway.
                self.aborted = True
                for gateway in list(worker.gwtargets):
                    worker.reasons.setdefault(gateway, f"did not finish within {limit:g} s")
                worker.abort()


_CLASS: list[type] = []


def _tree_worker_class() -> type:
    """ClusterShell's TreeWorker, plus the accounting of which gateway failed which node."""
    if _CLASS:
        return _CLASS[0]
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Worker.Tree import TreeWorker

    class AccountedTreeWorker(TreeWorker):
        def __init__(
            self,
            nodes: Any,
            handler: Any,
            timeout: float,
            *,
            failures: dict[str, tuple[str, str]],
            on_timeout: Callable[[str], None],
            **kwargs: Any,
        ) -> None:
            super().__init__(nodes, handler, timeout, **kwargs)
            self.failures = failures  # node -> (gateway, what happened to it)
            self.via: dict[str, str] = {}
            self.contacted: dict[str, float] = {}  # gateway -> when first asked
            self.reasons: dict[str, str] = {}  # gateway -> why it was given up
            self.on_timeout = on_timeout

        def _execute_remote(self, cmd: str, targets: Any, gateway: Any, timeout: float) -> None:
            name = str(gateway)
            self.contacted.setdefault(name, time.monotonic())
            for node in NodeSet(targets):
                self.via[node] = name
            super()._execute_remote(cmd, targets, gateway, timeout)

        def _relaunch(self, previous_gateway: Any) -> None:
            # The gateway failed before it was set up. ClusterShell sends its nodes
            # through another gateway of the same group; a node with none left ends
            # here as this gateway's failure instead of aborting the whole run.
            name = str(previous_gateway)
            for node in list(self.gwtargets.get(name, ())):
                if not self._reroutable(node):
                    self._fail(node, name, "failed")
            if self.gwtargets.get(name):
                super()._relaunch(previous_gateway)

        def _reroutable(self, node: str) -> bool:
            router = self.router
            for network, nexthops in router.table:
                if node in network:
                    return router._best_next_hop(nexthops) is not None
            return True  # not behind a gateway: reached from this host

        def _fail(self, node: str, gateway: str, why: str) -> None:
            self.failures.setdefault(node, (gateway, self.reasons.get(gateway, why)))
            self._on_remote_node_close(node, os.EX_UNAVAILABLE, gateway)

        def _gateway_abort(self, gateway: Any) -> None:
            # The gateway's channel closed with nodes still waiting: it died, or
            # was given up. ClusterShell closes each with EX_PROTOCOL; the reason
            # is kept here so that the node's record names the gateway.
            name = str(gateway)
            for node in list(self.gwtargets.get(name, ())):
                self.failures.setdefault(node, (name, self.reasons.get(name, "failed")))
            super()._gateway_abort(gateway)

        def _on_remote_node_timeout(self, node: str, gateway: Any) -> None:
            super()._on_remote_node_timeout(node, gateway)
            self.on_timeout(node)

        def _on_node_timeout(self, node: str) -> None:
            super()._on_node_timeout(node)
            self.on_timeout(node)

        def give_up(self, gateway: str, why: str, *, setup: bool) -> None:
            """Stop waiting for `gateway`: its channel is closed and each of its
            nodes fails with `why`. `setup=False` only if it never got set up."""
            entry = self.task.gateways.get(gateway)
            if entry is None:
                return
            chanworker = entry[0]
            if not setup and chanworker.eh.setup:
                return
            self.reasons.setdefault(gateway, why)
            for node in list(self.gwtargets.get(gateway, ())):
                self.failures.setdefault(node, (gateway, self.reasons[gateway]))
            chanworker.abort()

    _CLASS.append(AccountedTreeWorker)
    return AccountedTreeWorker


def _last_line(lines: list[bytes]) -> str:
    for raw in reversed(lines):
        line = raw.decode("utf-8", errors="replace").strip()
        if line:
            return line if len(line) <= 200 else line[:199] + "…"
    return ""


def shipped_plan(nodes: Sequence[str], topology: Any, root: str) -> dict[str, Any]:
    """Which nodes each relay reaches itself and which sub-gateways it sends on, from
    `root` down, as ClusterShell's router spreads them over a route's gateways."""
    from ClusterShell.NodeSet import NodeSet
    from ClusterShell.Propagation import PropagationTreeRouter

    router = PropagationTreeRouter(root, topology)
    direct: list[str] = []
    behind: dict[str, list[str]] = {}
    for hop, targets in router.dispatch(NodeSet.fromlist(nodes)):
        if str(hop) == str(targets):
            direct += list(NodeSet(targets))
        else:
            behind.setdefault(str(hop), []).extend(NodeSet(targets))
    return {
        "nodes": sorted(direct),
        "gateways": {gw: shipped_plan(sub, topology, gw) for gw, sub in sorted(behind.items())},
    }


def run_shipped_tree(
    nodes: Sequence[str],
    tree: Tree,
    fanout: int,
    timeout: float,
    on_done: Callable[[], None],
) -> dict[str, Relayed]:
    """The tree with the node scanner shipped: spurctl's standard-library relay
    (sources/gateway_relay.py) runs on each gateway, sent over ssh like the scanner,
    so a gateway needs only python3. One Relayed per node, as run_tree's."""
    import subprocess
    import sys

    from spurctl.sources import gateway_relay
    from spurctl.sources.shipped_scan import scanner_program

    plan = shipped_plan(nodes, _load_topology(tree.topology), root_name())
    data = {
        "relay": Path(gateway_relay.__file__).read_text(encoding="utf-8"),
        "scanner": scanner_program().decode(),
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
        start_new_session=True,
    )
    assert relay.stdin is not None and relay.stdout is not None and relay.stderr is not None
    err_box: list[bytes] = []
    stderr = relay.stderr
    reader = threading.Thread(target=lambda: err_box.append(stderr.read()), daemon=True)
    reader.start()
    # Joined before the relay is reaped, so the kill never hits a reused pid.
    killer = threading.Timer(limit, _kill_group, (relay.pid,))
    killer.start()
    try:
        with contextlib.suppress(BrokenPipeError):
            relay.stdin.write(gateway_relay.program(data))
            relay.stdin.close()
        for raw in relay.stdout:  # node by node, as each relay reports it
            _take(raw, out, on_done)
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


def _take(raw: bytes, out: dict[str, Relayed], on_done: Callable[[], None]) -> None:
    """One node's line from the relay, if it is one of ours and the first for it."""
    import json

    try:
        doc = json.loads(raw)
    except ValueError:
        return
    got = out.get(str(doc.get("node"))) if isinstance(doc, dict) else None
    if got is None or got.rc is not None or got.gateway_error is not None:
        return
    if doc.get("gateway_error") is not None:
        got.gateway_error = str(doc["gateway_error"])
    elif isinstance(doc.get("rc"), int):  # anything else a gateway sent is not an answer
        got.rc = doc["rc"]
        got.stdout = [str(doc.get("stdout", "")).encode()]
        got.stderr = [line.encode() for line in str(doc.get("stderr", "")).splitlines()]
        got.timed_out = doc.get("timed_out") is True
        got.via = str(doc["via"]) if doc.get("via") is not None else None
    else:
        return
    on_done()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
