"""collect --topology: the gateway tree over real OpenSSH, on this one machine.

tests/sshd.py's sshd plays every host: spurctl ships its relay
(node/gateway_relay.py) to each gateway's `python3 -I -S -` through /usr/bin/ssh
and sshd, and each gateway reaches its nodes through ssh and sshd again; a node's
command prints its prepared inventory (node_line.py: the node's answer is not what
these tests are about, the transport is). The failing gateways are real too: a dead
one has no sshd on its address, a hung one is a session that never speaks, one that
dies has its session SIGKILLed after a second, and a frozen one has its session's
processes SIGSTOPped once it has started on its nodes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from spurctl.sources.collect import collect
from spurctl.sources.documents import dump_json
from spurctl.sources.inventory_document import inventory_to_dict
from spurctl.sources.tree import Tree, root_name, run_tree
from spurctl_sim import SimCluster, node_line
from spurctl_sim.incident_scenario import incident
from tests.cli import one_line_error, run_process
from tests.sshd import SshSite, ssh_site

# Long enough for a gateway to start and 40 real ssh sessions to answer on a busy
# 2-core machine (about 85 ms of it each; the gateway's start counts against it too).
TIMEOUT = 6.0

# Every host a test here may reach: sshd's ssh_config names each one.
HOSTS = [
    "gw1", "gw2", "direct01", "hang01",
    *(f"n{i:02d}" for i in range(1, 41)),
    *(f"slow{i:02d}" for i in range(1, 6)),
    *(f"gpu{i:03d}" for i in range(1, 25)),
]  # fmt: skip
# hang01's sshd accepts its session and never speaks, in every test.
ALWAYS = {"hang01": "hang"}


@dataclass
class Site:
    """One machine playing admin host, gateways and nodes, all reached through sshd."""

    sshd: SshSite
    dir: Path
    remote: str  # the command each node runs
    inventories: Path
    env: dict[str, str]
    slow_for: str
    frozen: list[int] = field(default_factory=list)  # process groups a test stopped

    def topology(self, routes: str) -> Path:
        path = self.dir / f"topology{random.randrange(10**6)}.conf"
        path.write_text(f"[routes]\n{root_name()}: gw[1-2]\n{textwrap.dedent(routes)}")
        return path

    def prepare(self, node: str, job_id: int) -> None:
        doc = {
            "schema": "spurctl.inventory/v1",
            "node": node,
            "collected_at": "2026-12-02T10:00:00Z",
            "source": "cgroup+proc",
            "error": None,
            "held": [
                {
                    "job_id": job_id,
                    "cpus": 8,
                    "memory_mb": 1024,
                    "gpus": [0],
                    "pids": [4000 + job_id],
                    "started_at": "2026-12-01T22:14:05Z",
                }
            ],
        }
        (self.inventories / f"{node}.out").write_text(json.dumps(doc) + "\n")
        if node.startswith("slow"):  # answers after a while
            (self.inventories / f"{node}.sleep").write_text(self.slow_for)

    def contacted(self) -> list[str]:
        """Every host sshd ran a session for (a dead gateway's never starts one)."""
        return self.sshd.contacted()

    def ssh(self, like: Mapping[str, str] | None = None) -> str:
        """The ssh program; `like` fails a host by name (down, hang, die)."""
        return self.sshd.ssh({**ALWAYS, **(like or {})})

    def args(self, topology: Path, like: Mapping[str, str] | None = None) -> list[str]:
        return [
            "--topology",
            str(topology),
            "--ssh",
            self.ssh(like),
            "--remote-command",
            self.remote,
        ]

    def collect(
        self, nodes: str, topology: Path, *extra: str, like: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`spurctl collect --nodes NODES` through `topology`; `like` fails hosts by name."""
        return run_process(
            "collect", "--nodes", nodes, *extra, *self.args(topology, like),
            env=self.env, timeout=60,
        )  # fmt: skip

    def leftovers(self) -> list[int]:
        """What this test started that still runs, but for the hosts it froze: the ssh
        clients (spurctl's and the gateways'), the gateways, the slow nodes' sleeps. A
        hung host's own session is left out: sshd keeps it when the client goes, as a
        real node would (the site ends it at teardown)."""
        clients = set(self.sshd.clients())
        slow = self.slow_for.encode()
        found = []
        for pid, argv in self.sshd.sessions().items():
            if argv[-4:] == [b"-I", b"-S", b"-", b""] or argv[:2] == [b"sleep", slow]:
                clients.add(pid)
        for pid in clients:
            try:
                if os.getpgid(pid) not in self.frozen:
                    found.append(pid)
            except ProcessLookupError:
                pass
        return sorted(found)

    def wait_until_gone(self, deadline: float = 10.0) -> list[int]:
        end = time.monotonic() + deadline
        while (left := self.leftovers()) and time.monotonic() < end:
            time.sleep(0.1)
        return left

    def freeze_once_contacted(self, node: str, gateway: str) -> threading.Thread:
        """A thread that, once `node` has a session (its gateway is at work), SIGSTOPs
        every process of `gateway`'s session: a gateway host that froze mid-run."""

        def freeze() -> None:
            deadline = time.monotonic() + 30
            while node not in self.contacted():
                assert time.monotonic() < deadline, f"{node} was never contacted"
                time.sleep(0.02)
            pid = self.sshd.session_pid(gateway)
            assert pid is not None, f"{gateway} has no session"
            group = os.getpgid(pid)
            self.frozen.append(group)
            os.killpg(group, signal.SIGSTOP)

        thread = threading.Thread(target=freeze, daemon=True)
        thread.start()
        return thread


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    inventories = tmp_path / "inventories"
    inventories.mkdir()
    # The remote command: a node's `spurctl node-inventory`, as prepared for the test, by
    # the shared stand-in; the session names the node in $SPURCTL_TEST_NODE.
    remote = node_line.answers_command(inventories).replace("%h", '"$SPURCTL_TEST_NODE"')
    env: dict[str, str] = {}
    # A sleep length no other process on this machine uses: how leftovers are found.
    slow_for = f"3.0{os.getpid()}{random.randrange(10**6)}"
    with ssh_site(tmp_path, HOSTS, die_after=1.0) as sshd:
        yield Site(sshd, tmp_path, remote, inventories, env, slow_for)
        # ssh_site's teardown ends every session, the frozen ones too (SIGKILL).


@pytest.fixture
def env_of(site: Site, monkeypatch: pytest.MonkeyPatch) -> Site:
    """The site's variables in this process too, for tests that call collect() here."""
    for key, value in site.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    return site


TWO_GATEWAYS = """\
    gw1: n[01-20],hang01
    gw2: n[21-40]
    """


def records(stdout: str) -> dict[str, dict[str, object]]:
    docs = [json.loads(line) for line in stdout.splitlines()]
    by_node = {d["node"]: d for d in docs}
    assert len(by_node) == len(docs), "a node has two records"
    return by_node


def test_forty_nodes_behind_two_gateways_each_end_as_their_own_inventory(site: Site) -> None:
    nodes = [f"n{i:02d}" for i in range(1, 41)]
    for i, node in enumerate(nodes, 1):
        site.prepare(node, 1000 + i)
    topology = site.topology(TWO_GATEWAYS)

    run = site.collect("n[01-40]", topology)

    assert run.returncode == 0, run.stderr
    got = records(run.stdout)
    assert sorted(got) == nodes
    for i, node in enumerate(nodes, 1):
        assert got[node]["error"] is None
        held = got[node]["held"]
        assert isinstance(held, list) and [h["job_id"] for h in held] == [1000 + i]
    assert "collected 40 of 40 nodes" in run.stderr
    # spurctl reached each gateway once and every node through them, nothing else.
    contacted = site.contacted()
    assert sorted(contacted) == sorted(["gw1", "gw2", *nodes])


def test_a_dead_gateway_fails_each_of_its_nodes_by_name_and_the_others_answer(
    site: Site,
) -> None:
    for i in range(1, 41):
        site.prepare(f"n{i:02d}", 1000 + i)
    topology = site.topology(TWO_GATEWAYS)

    run = site.collect("n[01-40]", topology, like={"gw2": "down"})

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert len(got) == 40
    for i in range(1, 21):
        assert got[f"n{i:02d}"]["error"] is None
    for i in range(21, 41):
        doc = got[f"n{i:02d}"]
        # Never an empty inventory that would read as "holds nothing".
        assert doc["error"] == (
            f"gateway gw2 failed: ssh: connect to host 127.0.0.4 port {site.sshd.port}: "
            "Connection refused"
        )
        assert doc["held"] == [] and doc["source"] == "collect"
    assert "failed (20): n[21-40]" in run.stderr
    assert not any(n.startswith("n") and int(n[1:]) > 20 for n in site.contacted())


def test_a_dead_gateway_of_a_shared_route_fails_its_share_naming_it_and_the_sibling_answers(
    site: Site,
) -> None:
    for i in range(1, 11):
        site.prepare(f"n{i:02d}", 1000 + i)
    topology = site.topology("gw[1-2]: n[01-10]\n")

    run = site.collect("n[01-10]", topology, like={"gw1": "down"})

    # The route's nodes are spread over both gateways; gw1's share is not rerouted
    # through gw2 (docs/collecting.md): each fails naming gw1, never "holds nothing".
    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    failed = sorted(n for n, doc in got.items() if doc["error"] is not None)
    assert failed and len(failed) < 10
    for node in failed:
        assert str(got[node]["error"]).startswith("gateway gw1 failed"), got[node]
        assert got[node]["held"] == []
    assert "gw2" in site.contacted()


def test_a_hung_node_behind_a_gateway_is_killed_there_and_named(site: Site) -> None:
    for i in range(1, 41):
        site.prepare(f"n{i:02d}", 1000 + i)
    topology = site.topology(TWO_GATEWAYS)

    t0 = time.monotonic()
    run = site.collect("n[01-40],hang01", topology, "--node-timeout", str(TIMEOUT))
    wall = time.monotonic() - t0

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert len(got) == 41
    assert got["hang01"]["error"] == f"no answer within {TIMEOUT:g} s; killed by gateway gw1"
    assert all(got[f"n{i:02d}"]["error"] is None for i in range(1, 41)), [
        (n, d["error"]) for n, d in got.items() if d["error"]
    ]
    assert wall < 30
    # The gateway killed its ssh to the hung node: no ssh or gateway of the run is left
    # (the hung node's own session stays, as sshd keeps it on a real node).
    assert site.wait_until_gone() == []


def test_a_gateway_that_never_answers_is_given_up_after_the_timeout(site: Site) -> None:
    for i in range(1, 41):
        site.prepare(f"n{i:02d}", 1000 + i)
    topology = site.topology(TWO_GATEWAYS)

    run = site.collect("n[01-40]", topology, "--node-timeout", str(TIMEOUT), like={"gw1": "hang"})

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    for i in range(1, 21):
        assert got[f"n{i:02d}"]["error"] == f"gateway gw1 did not answer within {TIMEOUT:g} s"
        assert got[f"n{i:02d}"]["held"] == []
    assert all(got[f"n{i:02d}"]["error"] is None for i in range(21, 41))
    assert site.wait_until_gone() == []


def test_a_gateway_that_dies_mid_run_fails_the_nodes_it_had_not_answered_for(
    site: Site,
) -> None:
    nodes = [f"slow{i:02d}" for i in range(1, 6)] + [f"n{i:02d}" for i in range(21, 26)]
    for i, node in enumerate(nodes, 1):
        site.prepare(node, 1000 + i)
    topology = site.topology("gw1: slow[01-05]\ngw2: n[21-25]\n")

    run = site.collect(
        "slow[01-05],n[21-25]",
        topology,
        "--node-timeout",
        "10",
        like={"gw1": "die"},  # its session is SIGKILLed after 1 s
    )

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    assert len(got) == 10
    for i in range(1, 6):
        error = got[f"slow{i:02d}"]["error"]
        assert isinstance(error, str) and error.startswith("gateway gw1 failed"), error
        assert got[f"slow{i:02d}"]["held"] == []
    assert all(got[f"n{i:02d}"]["error"] is None for i in range(21, 26))
    # The dead gateway's node commands end on their own (as sshd ends a session).
    assert site.wait_until_gone() == []


def test_a_gateway_that_stops_mid_run_is_given_up_at_the_trees_deadline(site: Site) -> None:
    nodes = [f"slow{i:02d}" for i in range(1, 4)] + [f"n{i:02d}" for i in range(21, 24)]
    for i, node in enumerate(nodes, 1):
        site.prepare(node, 1000 + i)
    topology = site.topology("gw1: slow[01-03]\ngw2: n[21-23]\n")

    freezer = site.freeze_once_contacted("slow01", "gw1")
    t0 = time.monotonic()
    run = site.collect("slow[01-03],n[21-23]", topology, "--node-timeout", "2.5")
    wall = time.monotonic() - t0
    freezer.join(timeout=5)
    assert site.frozen, "gw1 was never frozen"

    assert run.returncode == 1, run.stderr
    got = records(run.stdout)
    # Its nodes could each take 2.5 s, 64 at once: 2.5 s x (1 wave + 2) is the limit.
    for i in range(1, 4):
        assert got[f"slow{i:02d}"]["error"] == "gateway gw1 did not finish within 7.5 s"
    assert all(got[f"n{i:02d}"]["error"] is None for i in range(21, 24))
    assert wall < 20
    assert site.wait_until_gone() == []


def test_the_progress_counts_each_node_once_whatever_became_of_it(env_of: Site) -> None:
    site = env_of
    for i in range(1, 41):
        site.prepare(f"n{i:02d}", 1000 + i)
    ticks: list[int] = []
    nodes = [f"n{i:02d}" for i in range(1, 41)] + ["hang01", "direct01"]
    site.prepare("direct01", 2000)
    tree = Tree(site.topology(TWO_GATEWAYS), site.remote, site.ssh({"gw2": "down"}))
    out = run_tree(nodes, tree, fanout=64, timeout=TIMEOUT, on_done=lambda: ticks.append(1))

    # 42 nodes, 42 ticks: gateways are not counted, a failed or killed node is.
    assert len(ticks) == len(nodes) == 42
    assert out["direct01"].via is None and out["direct01"].rc == 0  # not routed: reached here
    assert out["hang01"].timed_out and out["hang01"].via == "gw1"
    assert (out["n30"].gateway_error or "").startswith("gateway gw2 failed")
    assert site.wait_until_gone() == []


def test_one_process_can_collect_through_two_topologies_in_turn(env_of: Site) -> None:
    site = env_of
    for i in range(1, 5):
        site.prepare(f"n{i:02d}", 1000 + i)
    first = Tree(site.topology("gw1: n[01-04]\n"), site.remote, site.ssh())
    second = Tree(site.topology("gw2: n[01-04]\n"), site.remote, site.ssh())

    one = collect([f"n{i:02d}" for i in range(1, 5)], tree=first, progress=False)
    two = collect([f"n{i:02d}" for i in range(1, 5)], tree=second, progress=False)

    assert all(inv.error is None for inv in one + two)
    assert site.contacted().count("gw1") == 1 and site.contacted().count("gw2") == 1


def test_audit_collect_through_the_gateways_sees_what_the_inventory_file_shows(
    site: Site, tmp_path: Path
) -> None:
    with SimCluster(incident(), agents=False) as sim:
        names = sorted(sim.state.nodes)
        for node in names:
            doc = inventory_to_dict(sim.inventory(node))
            (site.inventories / f"{node}.out").write_text(dump_json(doc, indent=None) + "\n")
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        half = len(names) // 2
        topology = site.topology(f"gw1: {','.join(names[:half])}\ngw2: {','.join(names[half:])}\n")
        address = sim.controller_address

        live = run_process(
            "audit", "--controller", address, "--collect", *site.args(topology),
            "--format", "json", env=site.env, timeout=60,
        )  # fmt: skip
        files = run_process(
            "audit", "--controller", address, "--inventory", str(inventory), "--format", "json"
        )

    assert live.returncode == files.returncode, live.stderr
    assert sorted(set(site.contacted())) == sorted(["gw1", "gw2", *names])

    def findings(stdout: str) -> list[object]:
        doc = json.loads(stdout)
        return [(f["node"], f.get("job_id"), f["kind"]) for f in doc["findings"]]

    assert findings(live.stdout) == findings(files.stdout)
    assert findings(live.stdout), "the incident has findings"


def test_operator_mistakes_with_the_tree_options_are_one_line_and_exit_2(site: Site) -> None:
    other_root = site.dir / "other.conf"
    other_root.write_text("[routes]\nadmin-elsewhere: gw1\ngw1: n[1-4]\n")
    cases = [
        (["--topology", str(site.dir / "missing.conf")], ["missing.conf", "no such file"]),
        (["--topology", str(other_root)], ["do not start at this host", root_name()]),
        (["--remote-command", "spurctl node-inventory --hostname x"], ["needs --topology"]),
        (["--ssh", site.ssh()], ["--ssh needs --topology"]),
        (
            ["--topology", str(site.topology("gw1: n[1-4]\n")), "--command", "ssh %h x"],
            ["--remote-command"],
        ),
    ]
    for extra, words in cases:
        one_line_error(run_process("collect", "--nodes", "n[1-4]", *extra), *words)
    # The same through --collect: before the controller is even asked.
    one_line_error(
        run_process(
            "audit", "--controller", "http://127.0.0.1:9", "--collect",
            "--topology", str(other_root),
        ),
        "do not start at this host",
    )  # fmt: skip
    assert site.contacted() == []


def serve_live_lines(sim: SimCluster, site: Site, tmp_path: Path) -> Path:
    """Write `sim`'s agent map (tmp_path/agents.json) and live inventory file, and make
    each node's remote command print its line of it; returns the inventory file."""
    (tmp_path / "agents.json").write_text(json.dumps(sim.agent_map()))
    live = sim.write_inventories(tmp_path / "live.jsonl")
    # This node's line of the live inventory file (what it holds now), by the shared
    # stand-in; the session names the node in $SPURCTL_TEST_NODE.
    site.remote = node_line.command(live).replace("%h", '"$SPURCTL_TEST_NODE"')
    return live


def test_reclaim_collects_and_re_collects_through_the_gateways_and_confirms(
    incident_cluster: tuple[SimCluster, Path, Path], site: Site, tmp_path: Path
) -> None:
    from tests.e2e.test_reclaim_confirm import NODES, SENT, kept_fresh
    from tests.reclaim import cancelled

    sim = incident_cluster[0]
    live = serve_live_lines(sim, site, tmp_path)
    names = sorted(sim.state.nodes)
    half = len(names) // 2
    topology = site.topology(f"gw1: {','.join(names[:half])}\ngw2: {','.join(names[half:])}\n")

    with kept_fresh(sim, live):
        run = run_process(
            "reclaim", "--controller", sim.controller_address, "--node", NODES,
            "--collect", *site.args(topology), "--settle", "0.5",
            "--agent-map", str(tmp_path / "agents.json"), "--journal", str(tmp_path / "j.jsonl"),
            "--yes", env=site.env, timeout=60,
        )  # fmt: skip

    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(cancelled(sim)) == sorted(SENT)
    assert "Confirmed: a re-collect of 3 nodes no longer shows 3 jobs." in run.stdout
    # Planned from one collect through the tree and confirmed by a second one.
    contacted = site.contacted()
    nodes = sorted(c for c in contacted if not c.startswith("gw"))
    assert nodes == sorted(2 * [n for n, _ in SENT])
    gateways = [c for c in contacted if c.startswith("gw")]
    assert gateways and len(gateways) == 2 * len(set(gateways))


def test_nodes_behind_a_dead_gateway_are_not_inventoried_and_nothing_is_reclaimed_there(
    incident_cluster: tuple[SimCluster, Path, Path], site: Site, tmp_path: Path
) -> None:
    from tests.reclaim import cancelled

    sim = incident_cluster[0]
    serve_live_lines(sim, site, tmp_path)
    # gpu003 and gpu004 hold stranded runs; they sit behind gw1, which is dead.
    topology = site.topology("gw1: gpu[003-004]\ngw2: gpu012\n")

    run = run_process(
        "reclaim", "--controller", sim.controller_address, "--node", "gpu[003-004,012]",
        "--collect", *site.args(topology, like={"gw1": "down"}), "--settle", "0",
        "--agent-map", str(tmp_path / "agents.json"), "--journal", str(tmp_path / "j.jsonl"),
        "--yes", "--format", "json",
        env=site.env, timeout=60,
    )  # fmt: skip

    assert run.returncode == 1, run.stdout + run.stderr
    # Only gpu012, reached through gw2, is acted on: a gateway's failure is never
    # read as "this node holds nothing".
    assert {node for node, _ in cancelled(sim)} == {"gpu012"}
    assert "gpu003" not in {o["node"] for o in json.loads(run.stdout)["outcomes"]}


def test_checklist_through_the_gateways_keeps_nodes_behind_a_dead_one_not_inventoried(
    site: Site,
) -> None:
    from spurctl_sim import post_wipe

    with SimCluster(post_wipe()) as sim:
        names = sorted(sim.state.nodes)
        for node in names:
            doc = inventory_to_dict(sim.inventory(node))
            (site.inventories / f"{node}.out").write_text(dump_json(doc, indent=None) + "\n")
        behind_gw1 = ["gpu001", "gpu002", "gpu003"]
        rest = [n for n in names if n not in behind_gw1]
        topology = site.topology(f"gw1: {','.join(behind_gw1)}\ngw2: {','.join(rest)}\n")

        def checklist(**like: str) -> dict[str, Any]:
            run = run_process(
                "checklist", "post-wipe", "--controller", sim.controller_address,
                "--collect", *site.args(topology, like), "--format", "json",
                env=site.env, timeout=60,
            )  # fmt: skip
            assert run.returncode == 1, run.stderr
            doc: dict[str, Any] = json.loads(run.stdout)
            return doc

        everyone = checklist()
        dead_gw1 = checklist(gw1="down")

    assert everyone["nodes_not_inventoried"] == []
    assert "gpu001" in everyone["nodes_to_recycle"]
    # Behind the dead gateway: not inventoried, never "holds nothing, nothing to recycle".
    assert dead_gw1["nodes_not_inventoried"] == behind_gw1
    to_recycle = set(everyone["nodes_to_recycle"]) - set(behind_gw1)
    assert set(dead_gw1["nodes_to_recycle"]) >= to_recycle
