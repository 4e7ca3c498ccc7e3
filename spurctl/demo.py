"""`spurctl demo`: the whole audit-and-reclaim loop on a simulated Spur cluster, on loopback.

The cluster is spurctl_sim (spurctld plus one spurd per node, real gRPC on
127.0.0.1) loaded with the production incident of Spur PR #623. Every step calls
the library functions the real commands call, on files the real commands would
read, so what the demo prints is what `spurctl audit` and `spurctl reclaim`
print against that cluster.

Auth: the agents run with `[auth] mode = required`, so a reclaim only goes
through because spurctl mints the `spurctld` credential from the cluster key
file. The controller runs `permissive`: Spur scopes GetJobs to whichever
credential is presented (admins too), so an audit that presents one sees only
its own user's jobs; anonymous reads keep the demo's controller view complete.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from spurctl import hostlist
from spurctl.decide.reasons import plural
from spurctl.errors import SpurctlError
from spurctl.model import Action, AuditReport, Finding, Kind, NodeState
from spurctl.render.common import write_key_file
from spurctl.sources.bounded import JOURNAL, read_text

if TYPE_CHECKING:
    from spurctl.audit_view import AuditInputs
    from spurctl.sources.settings import Connection
    from spurctl.usecases.reclaim import Prepared, ReclaimRun
    from spurctl_sim import SimCluster
    from spurctl_sim.identity import AuthMode

# Wide enough for the audit table's reason column when the output is not a
# terminal (a pipe, a file, a test); a terminal's own width wins.
_CONTROLLER_AUTH: AuthMode = "permissive"
_AGENT_AUTH: AuthMode = "required"

HEADINGS = (
    "1. Audit: the controller's view against what the agents hold",
    "2. Reclaim, dry run: the plan, nothing sent",
    "3. Reclaim: re-check, journal, cancel on that node only",
    "4. Audit again: what is left, and why",
)
REPAIR_HEADING = "5. Repair: the phantom node rebuilt through Spur's one path"
# The walkthrough's agents heartbeat this often, so the repaired node is back in a blink;
# a real spurd heartbeats every 30 s.
DEMO_HEARTBEAT_S = 0.2
_REPAIRABLE_SPURD_START = datetime(2026, 11, 18, 7, 31, 10, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class DemoCluster:
    """A running simulated cluster and the files the real commands would be pointed at."""

    sim: SimCluster
    directory: Path
    inventory: Path
    agent_map: Path
    key_file: Path
    conf: Path
    journal: Path
    # A `--command` template that "collects" a simulated node (%h: its name).
    node_command: str = ""
    # A config.toml (SPURCTL_CONFIG) with that command and the agent map, so every
    # command of the tour, and every command they print, collects and sends as the demo's.
    config: Path | None = None

    def refresh_inventory(self) -> None:
        """Rewrite the inventories from what the agents hold now (what `collect` would gather)."""
        self.sim.write_inventories(self.inventory)

    def connection(self) -> Connection:
        """Resolved as `spurctl reclaim --controller ... --conf ... --jwt-key-file ...
        --agent-map ...` would, but blind to the operator's own token and spur.conf:
        a demo never sends a real cluster's credential anywhere."""
        from spurctl.sources.settings import connect_settings

        return connect_settings(
            controller=self.sim.controller_address,
            conf_path=self.conf,
            token=None,
            jwt_key_file=self.key_file,
            agent_map=self.agent_map,
            home=self.directory,
        )


def _spur_conf(sim: SimCluster) -> str:
    port = sim.controller_address.rpartition(":")[2]
    return (
        "# spur.conf of the simulated cluster of `spurctl demo`; removed when it stops.\n"
        "[controller]\n"
        'hosts = ["127.0.0.1"]\n'
        f'listen_addr = "127.0.0.1:{port}"\n'
        "\n"
        "[auth]\n"
        "# The agents (spurd) demand the cluster credential; the simulated controller\n"
        "# also answers anonymous reads, so an audit sees every user's jobs.\n"
        f'mode = "{_AGENT_AUTH}"\n'
    )


def _config_toml(command: str, agent_map: Path, journal: Path) -> str:
    # A JSON string is a TOML basic string: the same quotes and escapes. The journal is
    # the demo's own, removed with it: a command run without --journal must not leave
    # the simulated cluster's runs in the operator's default journal (issue 53.2).
    return (
        "# spurctl's defaults for the simulated cluster of `spurctl demo` (SPURCTL_CONFIG).\n"
        f"collect_command = {json.dumps(command)}\n"
        f"agent_map = {json.dumps(str(agent_map))}\n"
        f"journal = {json.dumps(str(journal))}\n"
    )


@contextmanager
def demo_cluster(
    jwt_key: str | None = None, scenario: str = "incident", heartbeat_s: float = 30.0
) -> Iterator[DemoCluster]:
    """A simulated cluster on loopback (the incident, or `post-wipe`), its files in a
    private temp dir removed on exit; its agents heartbeat every `heartbeat_s` (a node a
    repair removed registers again at its next one).

    The key is random unless given; it is written only to a mode-0600 file.
    """
    from spurctl_sim import SimCluster, incident, node_line, post_wipe

    key = jwt_key or secrets.token_urlsafe(32)
    # The directory outlives the servers: they stop (closing their ports) before it goes.
    with tempfile.TemporaryDirectory(prefix="spurctl-demo-") as tmp:
        directory = Path(tmp)
        chosen = post_wipe() if scenario == "post-wipe" else incident()
        if scenario != "post-wipe":  # gpu009's inventory shows its spurd: it can be repaired
            chosen.agent_started_at.setdefault("gpu009", _REPAIRABLE_SPURD_START)
        with SimCluster(
            chosen, auth=_CONTROLLER_AUTH, agent_auth=_AGENT_AUTH, jwt_key=key,
            heartbeat_interval=heartbeat_s,
        ) as sim:  # fmt: skip
            key_file = directory / "jwt.key"
            write_key_file(key + "\n", key_file)
            agent_map = directory / "agents.json"
            agent_map.write_text(json.dumps(sim.agent_map(), indent=1) + "\n")
            conf = directory / "spur.conf"
            conf.write_text(_spur_conf(sim))
            inventory = directory / "inventories.jsonl"
            command = node_line.command(inventory)
            config = directory / "config.toml"
            journal = directory / "journal.jsonl"
            config.write_text(_config_toml(command, agent_map, journal))
            cluster = DemoCluster(
                sim=sim,
                directory=directory,
                inventory=inventory,
                agent_map=agent_map,
                key_file=key_file,
                conf=conf,
                journal=journal,
                # `ssh NODE spurctl node-inventory` without an sshd: the node's line of
                # the served inventory file.
                node_command=command,
                config=config,
            )
            cluster.refresh_inventory()
            yield cluster


# -- the walkthrough ------------------------------------------------------------


@dataclass(slots=True)
class DemoResult:
    """What the walkthrough saw; `ok` when the loop closed the way it should."""

    before: AuditReport
    after: AuditReport
    reclaimed_nodes: str
    run: ReclaimRun
    agent_subjects: list[str | None] = field(default_factory=list)
    refusals: int = 0
    # Step 5: the phantom nodes before the repair, and those the repair left charged.
    phantom_before: list[str] = field(default_factory=list)
    phantom_after: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.run.ok
            and bool(_rows(self.before, Action.RECLAIM))
            and not _rows(self.after, Action.RECLAIM)
            and bool(self.phantom_before)
            and not self.phantom_after
        )


def _rows(report: AuditReport, action: Action) -> list[Finding]:
    return [f for f in report.findings if f.action is action]


def _by_kind(findings: Sequence[Finding]) -> str:
    """'active-elsewhere on gpu[003-008]; terminal-held on gpu012', in contract order."""
    parts = []
    for kind in Kind:
        nodes = {f.node for f in findings if f.kind is kind}
        if nodes:
            parts.append(f"{kind.value} on {hostlist.fold(sorted(nodes))}")
    return "; ".join(parts) or "none"


class _Narrator:
    """Headings, one-paragraph explanations and the real renderers, on one stream."""

    def __init__(self, out: TextIO, ack: str | None = None) -> None:
        self.out = out
        self.tty = out.isatty()
        self.ack = ack  # --ack-version: the version note left out of the screens
        from spurctl.render.audit import pipe_width

        width = None if self.tty else pipe_width()
        self.console = Console(file=out, width=width, highlight=False, soft_wrap=False)
        from spurctl.render.environment import Environment

        # What the real renderers are told of the stream (the commands' Environment).
        colour = self.tty and not os.environ.get("NO_COLOR")
        self.env = Environment(tty=self.tty, width=self.console.width, colour=colour)

    def heading(self, title: str) -> None:
        self.console.print()
        self.console.rule(Text(title, style="bold"), align="left")

    def say(self, text: str) -> None:
        self.console.print(Text(text))

    def command(self, text: str) -> None:
        self.console.print(Text(f"$ {text}", style="bold cyan"))

    def panel(self, text: str, title: str) -> None:
        self.console.print(Panel(Text(text), title=title, title_align="left", expand=True))

    def audit_table(self, report: AuditReport) -> None:
        from spurctl.render.audit import print_audit, render_audit

        self.out.flush()
        if self.tty:
            print_audit(report, "table", self.env, file=self.out, ack=self.ack)
        else:  # as `spurctl audit` down a pipe: one finding per line, its reason whole
            width = self.console.width
            self.out.write(
                render_audit(report, "table", console_width=width, ack=self.ack, whole=True)
            )
        self.out.flush()


def _audit(
    cluster: DemoCluster, conn: Connection, nodes: str | None
) -> tuple[AuditReport, AuditInputs]:
    from spurctl.audit_view import run_audit
    from spurctl.scope import Scope
    from spurctl.sources.inventories import Sources

    return run_audit(Sources(Scope.parse(nodes), [str(cluster.inventory)], False, "", 1), conn)


def _prepare(cluster: DemoCluster, conn: Connection, nodes: str) -> Prepared:
    """`spurctl reclaim --node NODES --inventory ... --journal ...` up to its prompt."""
    from spurctl.scope import Scope
    from spurctl.sources.inventories import Sources
    from spurctl.usecases.reclaim import prepare

    src = Sources(Scope.parse(nodes), [str(cluster.inventory)], False, "", 1)
    return prepare(nodes, src, conn, journal_path=cluster.journal)


def run(
    out: TextIO | None = None, *, jwt_key: str | None = None, ack: str | None = None
) -> DemoResult:
    """Run the four steps against a fresh incident cluster and narrate them on `out`."""
    from spurctl.render.reclaim import print_plan, print_run
    from spurctl.usecases import reclaim

    say = _Narrator(out or sys.stdout, ack)
    with demo_cluster(jwt_key, heartbeat_s=DEMO_HEARTBEAT_S) as cluster:
        sim = cluster.sim
        conn = cluster.connection()
        with sim.state.lock:
            down = sorted(n.name for n in sim.state.nodes.values() if n.state is NodeState.DOWN)
        say.panel(
            f"A simulated Spur cluster runs on 127.0.0.1: spurctld and one spurd per node "
            f"({plural(len(sim.agent_map()), 'node')}), real gRPC. It holds the incident "
            "behind Spur "
            "PR #623: a controller restart marked healthy nodes DOWN on stale heartbeats "
            f"(still DOWN: {hostlist.fold(down)}; others were resumed), requeued their jobs "
            "onto other nodes, and the old nodes kept running them: they hold GPUs the "
            "scheduler thinks are free and reject every new GPU job. Around them: a phantom "
            "allocation, an agent holding an id a wiped controller issued, a node reporting "
            "its FQDN, and work in flight that must be spared. This controller predates #623, "
            "so nothing reclaims any of it by itself.\n\n"
            f"Agents run with auth {_AGENT_AUTH}: a cancel needs the cluster credential. "
            f"Files (inventories, agent map, key, journal) are in {cluster.directory}, "
            "removed on exit.",
            title="spurctl demo",
        )

        say.heading(HEADINGS[0])
        say.say(
            "spurctl reads every job and node from spurctld, reads what each agent really "
            "holds from the node inventories (on a real cluster `spurctl collect` gathers "
            "them over ssh), and judges each holding by the controller's own reclaim rules "
            "plus what the controller cannot see."
        )
        say.command("spurctl audit --inventory inventories.jsonl")
        before, _ = _audit(cluster, conn, None)
        say.audit_table(before)
        reclaim_rows = _rows(before, Action.RECLAIM)
        say.say(
            f"To reclaim ({len(reclaim_rows)}): {_by_kind(reclaim_rows)}. "
            f"To investigate, never reclaimed: {_by_kind(_rows(before, Action.INVESTIGATE))}."
        )

        nodes = hostlist.fold(sorted({f.node for f in reclaim_rows}))
        flags = f"--node '{nodes}' --inventory inventories.jsonl --agent-map agents.json"

        say.heading(HEADINGS[1])
        say.say(
            "The plan is the audit's reclaim rows on the named nodes, re-audited now. Each "
            "entry is one cancel to that node's agent only (CancelJob, signal 0), never the "
            "controller's CancelJob, which would also kill the job's legitimate new run."
        )
        say.command(f"spurctl reclaim {flags} --dry-run")
        planned = _prepare(cluster, conn, nodes)
        say.out.flush()
        print_plan(planned.entries, planned.report, file=say.out, env=say.env, ack=ack)

        say.heading(HEADINGS[2])
        say.say(
            "Each entry is re-checked with a fresh GetJob just before its cancel (a requeue "
            "may have landed since the audit); intent and outcome are fsynced to the journal "
            "around every send. The agents demand the cluster credential, so spurctl mints a "
            "short-lived one with subject `spurctld` from the key file for each cancel; the "
            "key itself is never printed."
        )
        say.command(f"spurctl reclaim {flags} --jwt-key-file jwt.key --journal journal.jsonl --yes")
        planned = _prepare(cluster, conn, nodes)
        cancels_before = len(sim.cancels)
        # AgentPool channels close inside the send, before the servers stop.
        reclaim_run = reclaim.carry_out(planned, conn)
        say.out.flush()
        print_run(
            reclaim_run, planned.entries, planned.report, fmt="table", file=say.out, env=say.env
        )
        accepted = sim.cancels[cancels_before:]
        subjects = [c.subject for c in accepted]
        refusals = [r for r in sim.refusals if r.endpoint != "controller"]
        journal = cluster.journal
        records = len(read_text(journal, JOURNAL).splitlines()) if journal.exists() else 0
        say.say(
            f"The agents accepted {plural(len(accepted), 'cancel')}, "
            f"{sum(1 for s in subjects if s == 'spurctld')} carrying a verified `spurctld` "
            f"credential, and refused {len(refusals)}. The journal holds {records} records "
            "(an intent before and an outcome after each cancel)."
        )

        say.heading(HEADINGS[3])
        cluster.refresh_inventory()
        say.say(
            "Fresh inventories, the same audit. The stranded allocations are gone. What is "
            "left is not spurctl's to cancel: investigate rows need a person (each reason "
            "says what to check), spare rows may be legitimate work in flight."
        )
        say.command("spurctl audit --inventory inventories.jsonl")
        after, _ = _audit(cluster, conn, None)
        say.audit_table(after)
        result = DemoResult(
            before=before,
            after=after,
            reclaimed_nodes=nodes,
            run=reclaim_run,
            agent_subjects=subjects,
            refusals=len(refusals),
        )
        say.say(
            f"Reclaim rows: {len(reclaim_rows)} before, {len(_rows(after, Action.RECLAIM))} "
            f"after. Still listed: investigate {len(_rows(after, Action.INVESTIGATE))} "
            f"({_by_kind(_rows(after, Action.INVESTIGATE))}), "
            f"spare {len(_rows(after, Action.SPARE))} ({_by_kind(_rows(after, Action.SPARE))})."
        )
        result.phantom_before, result.phantom_after = _repair_step(say, cluster, conn, after)
        say.say("Try it by hand on a fresh copy of this cluster: spurctl demo --serve")
        return result


def _phantoms(report: AuditReport) -> list[str]:
    return sorted(f.node for f in report.findings if f.kind is Kind.PHANTOM_ALLOC)


def _repair_step(
    say: _Narrator, cluster: DemoCluster, conn: Connection, before: AuditReport
) -> tuple[list[str], list[str]]:
    """Step 5: `spurctl repair` rebuilds the phantom node; returns the phantom nodes before
    and after."""
    from spurctl.render.repair import plan_lines, result_lines
    from spurctl.scope import Scope
    from spurctl.sources.inventories import Sources
    from spurctl.usecases.repair import RepairRequest, repair

    phantoms = _phantoms(before)
    if not phantoms:
        return [], []
    nodes = hostlist.fold(phantoms)
    say.heading(REPAIR_HEADING)
    committed = _commit_placements(cluster)
    if committed:
        say.say(
            f"Meanwhile the controller recorded where {committed} runs: an active job with no "
            "nodelist may be on any node, and holds up every repair while it lasts."
        )
    say.say(
        f"{nodes} stays charged with no job behind it, and no cancel can clear that: Spur "
        "rebuilds a node's charge only when the node registers afresh. spurctl drains it, "
        "gives the scheduler a tick, re-reads it (no active job lists it, its spurd runs and "
        "holds nothing, the charge is unchanged), removes its record with "
        "DeregisterNode(force=false), waits for its spurd's next heartbeat to register it "
        "again, checks the charge is zero and puts back what the fresh record dropped. "
        f"The simulated agents heartbeat every {DEMO_HEARTBEAT_S:g} s; a real spurd every 30 s."
    )
    say.command(
        f"spurctl repair --node {nodes} --inventory inventories.jsonl --conf spur.conf "
        "--journal journal.jsonl --tick 1 --yes"
    )
    cluster.refresh_inventory()
    request = RepairRequest(
        scope=Scope.parse(nodes), journal_path=cluster.journal, yes=True, tick_s=1.0, wait_s=10.0
    )
    src = Sources(request.scope, [str(cluster.inventory)], False, "", 1)
    done = repair(
        request, src, conn, show_plan=lambda plan: _lines(say, plan_lines(plan)), ask=None
    )
    _lines(say, result_lines(done))
    cluster.refresh_inventory()
    again, _ = _audit(cluster, conn, nodes)
    left = _phantoms(again)
    say.say(
        f"Phantom allocations: {len(phantoms)} before ({nodes}), {len(left)} after"
        + (f" ({hostlist.fold(left)})." if left else ".")
    )
    return phantoms, left


def _commit_placements(cluster: DemoCluster) -> str:
    """Each active job without a nodelist gets the one node whose inventory holds it (the
    allocation's commit, which a real controller makes within moments); which ones."""
    import msgspec

    held_by: dict[int, list[str]] = {}
    for inv in cluster.sim.inventories():
        for h in inv.held:
            held_by.setdefault(h.job_id, []).append(inv.node)
    with cluster.sim.state.lock:
        jobs = list(cluster.sim.state.jobs.values())
    done = []
    for job in jobs:
        where = held_by.get(job.job_id, [])
        if job.state.active and not job.nodelist.strip() and len(where) == 1:
            cluster.sim.set_job(msgspec.structs.replace(job, nodelist=where[0]))
            done.append(f"job {job.job_id} ({where[0]})")
    return ", ".join(done)


def _lines(say: _Narrator, lines: Sequence[str]) -> None:
    from spurctl.errors import visible

    say.out.flush()
    say.out.write("".join(visible(line) + "\n" for line in lines))
    say.out.flush()


# -- serve ----------------------------------------------------------------------


# The served cluster's agents heartbeat this often: its inventory file is rewritten
# at least as often, so a watch never reads it as stale. SPURCTL_DEMO_HEARTBEAT_S
# shortens it (the tests do).
SERVE_HEARTBEAT_S = 30.0


def serve(out: TextIO | None = None, *, scenario: str = "incident") -> None:
    """Keep a fresh simulated cluster up until SIGINT or SIGTERM; print how to reach it
    and a tour of every command.

    The inventory file is rewritten whenever what the agents hold changes and at
    every heartbeat, so an audit after a hand-made reclaim sees its effect and a
    watch sees fresh inventories.
    """
    import os

    say = _Narrator(out or sys.stdout)
    stopping = threading.Event()
    heartbeat = float(os.environ.get("SPURCTL_DEMO_HEARTBEAT_S") or SERVE_HEARTBEAT_S)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with demo_cluster(scenario=scenario, heartbeat_s=heartbeat) as cluster:
            for line in _banner(cluster, scenario, heartbeat):
                say.console.print(Text(line), overflow="ignore", crop=False)
            say.out.flush()
            seen = cluster.sim.state.generation
            written = time.monotonic()
            while not stopping.wait(0.25):
                changed = cluster.sim.state.generation != seen
                if changed or time.monotonic() - written >= heartbeat:
                    seen = cluster.sim.state.generation
                    cluster.refresh_inventory()
                    written = time.monotonic()
            directory = cluster.directory
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    say.say(f"Stopped; removed {directory}.")
    say.out.flush()


def _banner(cluster: DemoCluster, scenario: str, heartbeat: float) -> list[str]:
    d, inv, q = cluster.directory, cluster.inventory, shlex.quote
    nodes = hostlist.fold(sorted(cluster.sim.agent_map()))
    what = (
        "a controller wiped before its agents were recycled"
        if scenario == "post-wipe"
        else "the PR #623 incident"
    )
    lines = [
        f"Simulated Spur cluster ({what}, {plural(len(cluster.sim.agent_map()), 'node')}) "
        "on 127.0.0.1; "
        f"controller auth {_CONTROLLER_AUTH} (anonymous reads), agents auth {_AGENT_AUTH}.",
        f"Files in {d}, removed on exit:",
        f"  inventory: {inv} (rewritten as the agents change, and every {SERVE_HEARTBEAT_S:g} s)",
        f"  agent map: {cluster.agent_map}",
        f"  key file:  {cluster.key_file} (mode 0600)",
        f"  spur.conf: {cluster.conf}",
        f"  journal:   {cluster.journal}",
        f"  config:    {cluster.config} (the collect command, the agent map and the journal)",
        "",
        "In another shell:",
        f"  export SPUR_CONTROLLER_ADDR={cluster.sim.controller_address}",
        f"  export SPUR_JWT_KEY_FILE={cluster.key_file}",
        f"  export SPUR_CONF={cluster.conf}",
        f"  export SPURCTL_CONFIG={cluster.config}",
        "  unset SPUR_AUTH_TOKEN   # a real cluster's token is refused here",
        "",
        "Try, in order:",
        f"  spurctl audit --inventory {inv}",
        f"  spurctl audit --watch --inventory {inv}",
        f"  spurctl collect -w {q(nodes)} -o {d / 'fresh.jsonl'}",
        "  spurctl audit --collect",
    ]
    if scenario == "post-wipe":
        lines += [
            f"  spurctl checklist post-wipe --inventory {inv}",
            "    # its step 5 prints the collect and --verify commands for the nodes it names",
        ]
    else:
        lines += [
            f"  spurctl explain gpu003 4711 --inventory {inv}",
            f"  spurctl reclaim --node gpu003 --inventory {inv} --dry-run",
            f"  spurctl reclaim --node gpu003 --inventory {inv}   # asks before it sends",
            "  spurctl journal",
            f"  spurctl snapshot -o {d / 'snapshot.json'}",
        ]
    lines += [
        "  spurctl node-inventory   # on a real node: what its agent holds",
        "",
        "Serving; Ctrl-C to stop.",
    ]
    return lines


def command(*, keep_up: bool, scenario: str, ack: str | None = None) -> None:
    """`spurctl demo`: the walkthrough, or (--serve) the cluster of `scenario` kept up."""
    if keep_up:
        serve(scenario=scenario)
        return
    if scenario != "incident":
        raise SpurctlError("--scenario is for --serve: the walkthrough tells the incident")
    if not run(ack=ack).ok:
        raise SpurctlError(
            "the demo did not close the loop (see above); rerun with --debug and report it"
        )
