"""Every failure an operator can cause or meet: one line on stderr, exit 2, no traceback.

Each case runs the real CLI as a subprocess against simulated clusters (a plain
one, one that requires credentials, one too slow to answer) or bad files, and
the one line must carry the words that say what is wrong and how to fix it.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spurctl.sources import credentials as auth
from spurctl_sim import SimCluster, incident
from tests.cli import dead_url, one_line_error, run_cli, stderr_lines

KEY = "errors-test-cluster-key-Zq8v3XkP-0123456789"
OTHER_KEY = "errors-test-other-key-9Lm2Wd7R-0123456789"


@dataclass
class World:
    """Clusters and files the error cases point the CLI at."""

    url: str
    secured_url: str
    slow_url: str
    files: Path

    @property
    def inventory(self) -> str:
        return str(self.files / "inventory.jsonl")

    def write(self, name: str, text: str) -> str:
        path = self.files / name
        path.write_text(text)
        return str(path)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    files = tmp_path_factory.mktemp("files")
    with (
        SimCluster(incident(), agents=False) as sim,
        SimCluster(incident(), agents=False, auth="required", jwt_key=KEY) as secured,
        SimCluster(incident(), agents=False, controller_latency=2.0) as slow,
    ):
        sim.write_inventories(files / "inventory.jsonl")
        yield World(
            sim.controller_address, secured.controller_address, slow.controller_address, files
        )


def inventory_line(node: str, **fields: Any) -> str:
    doc = {"schema": "spurctl.inventory/v1", "node": node, "held": [], **fields}
    return json.dumps(doc) + "\n"


Case = Callable[[World], tuple[list[str], list[str]]]


def audit_at(url: str, *extra: str) -> list[str]:
    return ["audit", "--controller", url, *extra]


def unreachable(w: World) -> tuple[list[str], list[str]]:
    url = dead_url()
    return audit_at(url, "--inventory", w.inventory), [url, "unreachable", "connection refused"]


def all_down(w: World) -> tuple[list[str], list[str]]:
    a, b = dead_url(), dead_url()
    args = audit_at(f"{a},{b}", "--inventory", w.inventory)
    return args, ["no controller endpoint answered", a, b, "SPUR_CONTROLLER_ADDR"]


def timeout(w: World) -> tuple[list[str], list[str]]:
    args = audit_at(w.slow_url, "--inventory", w.inventory, "--timeout", "0.2")
    return args, [w.slow_url, "no answer within 0.2 s", "--timeout"]


def credential(token: Callable[[], str | None], words: list[str]) -> Case:
    def case(w: World) -> tuple[list[str], list[str]]:
        t = token()
        extra = ["--token", t] if t else []
        return audit_at(w.secured_url, "--inventory", w.inventory, *extra), words

    return case


def malformed_inventory(w: World) -> tuple[list[str], list[str]]:
    path = w.write("torn.jsonl", inventory_line("gpu001") + '{"schema": "spurctl.inv\n')
    return audit_at(w.url, "--inventory", path), [path, "line 2", "not valid JSON"]


def wrong_schema_inventory(w: World) -> tuple[list[str], list[str]]:
    text = inventory_line("gpu001") + inventory_line("gpu002")
    text += json.dumps({"schema": "spurctl.audit/v1", "node": "gpu003"}) + "\n"
    path = w.write("wrong.jsonl", text)
    return audit_at(w.url, "--inventory", path), [path, "line 3", "spurctl.inventory/v1"]


def out_of_range_job(w: World) -> tuple[list[str], list[str]]:
    path = w.write("huge.json", inventory_line("gpu001", held=[{"job_id": 2**32}]))
    return audit_at(w.url, "--inventory", path), [path, "job_id", "32-bit"]


def missing_inventory(w: World) -> tuple[list[str], list[str]]:
    path = str(w.files / "no-such-dir" / "inventory.jsonl")
    return audit_at(w.url, "--inventory", path), [path, "no such file"]


def missing_snapshot(w: World) -> tuple[list[str], list[str]]:
    path = str(w.files / "nowhere.json")
    return ["audit", "--snapshot", path, "--inventory", w.inventory], [path, "snapshot"]


def missing_conf(w: World) -> tuple[list[str], list[str]]:
    path = str(w.files / "nowhere.conf")
    return audit_at(w.url, "--conf", path, "--inventory", w.inventory), [path, "--conf"]


def bad_hostlist(w: World) -> tuple[list[str], list[str]]:
    args = audit_at(w.url, "--inventory", w.inventory, "--nodes", "gpu[001-")
    return args, ["bad hostlist", "gpu[001-", "gpu[001-128,200]"]


def huge_hostlist(w: World) -> tuple[list[str], list[str]]:
    args = audit_at(w.url, "--inventory", w.inventory, "--nodes", "gpu[0-999999999]")
    return args, ["bad hostlist", "1,000,000,000 nodes", "check its ranges"]


def reclaim_at(w: World, node: str, *extra: str) -> list[str]:
    return ["reclaim", "--controller", w.url, "--inventory", w.inventory, "--node", node, *extra]


def bad_reclaim_hostlist(w: World) -> tuple[list[str], list[str]]:
    return reclaim_at(w, "gpu[3-1]", "--dry-run"), ["bad hostlist", "gpu[3-1]"]


def unknown_node(w: World) -> tuple[list[str], list[str]]:
    words = ["unknown node", "gpu999", "spurctl nodes --inventory"]
    return reclaim_at(w, "gpu999", "--dry-run"), words


def unreadable_agent_map(w: World) -> tuple[list[str], list[str]]:
    path = str(w.files)  # a directory: exists, cannot be read as a file
    return reclaim_at(w, "gpu003", "--dry-run", "--agent-map", path), ["--agent-map", path]


def malformed_agent_map(w: World) -> tuple[list[str], list[str]]:
    path = w.write("agents.json", '{"gpu003": "127.0.0.1:6818",\n')
    args = reclaim_at(w, "gpu003", "--dry-run", "--agent-map", path)
    return args, [path, "neither JSON nor TOML", '{"gpu017": "10.0.3.17:6818"}']


def no_cluster_key(w: World) -> tuple[list[str], list[str]]:
    conf = w.write("required.conf", '[auth]\nmode = "required"\n')
    args = reclaim_at(w, "gpu003", "--yes", "--conf", conf, "--journal", str(w.files / "j.jsonl"))
    return args, ["no cluster key", "--jwt-key-file", "SPUR_JWT_KEY_FILE"]


def unwritable_journal(w: World) -> tuple[list[str], list[str]]:
    blocker = w.write("not-a-dir", "")
    journal = f"{blocker}/journal.jsonl"
    return reclaim_at(w, "gpu003", "--yes", "--journal", journal), ["journal", blocker]


def unwritable_snapshot(w: World) -> tuple[list[str], list[str]]:
    path = str(w.files / "no-such-dir" / "snap.json")
    return ["snapshot", "--controller", w.url, "-o", path], ["cannot write", path]


def token_with_spaces(w: World) -> tuple[list[str], list[str]]:
    args = audit_at(w.secured_url, "--inventory", w.inventory, "--token", "eyJ hbG ciOi")
    return args, ["--token", "whitespace or non-ASCII"]


def unknown_option(w: World) -> tuple[list[str], list[str]]:
    return ["audit", "--nodez", "gpu001"], ["no such option", "--nodez", "--help"]


def missing_option(w: World) -> tuple[list[str], list[str]]:
    return ["reclaim", "--dry-run"], ["missing option", "--node", "--help"]


def symlink_loop_inventory(w: World) -> tuple[list[str], list[str]]:
    path = w.files / "loop.json"
    if not path.is_symlink():
        path.symlink_to(path)
    return audit_at(w.url, "--inventory", str(path)), [str(path), "symlink loop"]


def not_utf8_inventory(w: World) -> tuple[list[str], list[str]]:
    path = w.files / "latin1.jsonl"
    path.write_bytes(inventory_line("gpu001").encode() + b'{"node": "gpu\xe9"}\n')
    return audit_at(w.url, "--inventory", str(path)), [str(path), "line 2", "not UTF-8"]


def tied_inventories(w: World) -> tuple[list[str], list[str]]:
    at = "2026-12-02T10:00:00Z"
    one = w.write("one.jsonl", inventory_line("gpu020", collected_at=at))
    held = [{"job_id": 4711, "started_at": "2026-12-01T22:14:05Z"}]
    two = w.write("two.jsonl", inventory_line("gpu020", collected_at=at, held=held))
    args = audit_at(w.url, "--inventory", one, "--inventory", two)
    return args, ["gpu020", "same time", f"{one} and {two}"]


def bool_agent_port(w: World) -> tuple[list[str], list[str]]:
    conf = w.write("boolport.conf", "[network]\nagent_port = true\n")
    args = reclaim_at(w, "gpu013", "--dry-run", "--conf", conf)
    return args, [conf, "agent_port", "port number", "True"]


def huge_inventory_line(w: World) -> tuple[list[str], list[str]]:
    path = w.files / "huge-line.jsonl"
    if not path.exists():
        with path.open("wb") as fh:
            fh.write(inventory_line("gpu001").encode())
            fh.write(b'{"node": "gpu002", "junk": "')
            chunk = b"x" * 2**20
            for _ in range(65):
                fh.write(chunk)
            fh.write(b'"}\n')
    return audit_at(w.url, "--inventory", str(path)), [str(path), "line 2", "longer than 64 MiB"]


def https_to_a_plain_controller(w: World) -> tuple[list[str], list[str]]:
    # grpc's own handshake log line stays out of stderr, and no ": OK)" tail.
    url = w.url.replace("http://", "https://")
    return audit_at(url, "--inventory", w.inventory, "--timeout", "5"), [
        "TLS handshake failed: the endpoint does not speak TLS; for a plain one use http://)"
    ]


def misspelt_option(w: World) -> tuple[list[str], list[str]]:
    # Click would offer "--fanout, --format": only the close one is suggested.
    return audit_at(w.url, "--formt", "json"), ["no such option: --formt; did you mean --format?"]


def far_option(w: World) -> tuple[list[str], list[str]]:
    return audit_at(w.url, "--xyz"), ["no such option: --xyz; see `", "audit --help`"]


CASES: dict[str, Case] = {
    "controller-unreachable": unreachable,
    "https-to-a-plain-controller": https_to_a_plain_controller,
    "every-ha-endpoint-down": all_down,
    "timeout": timeout,
    "credential-missing": credential(lambda: None, ["credential missing", "--token"]),
    "credential-expired": credential(
        lambda: auth.mint(KEY, "alice", now=time.time() - 7200), ["credential expired"]
    ),
    "credential-wrong-key": credential(
        lambda: auth.mint(OTHER_KEY, "alice"), ["wrong key", "jwt_key"]
    ),
    "token-with-whitespace": token_with_spaces,
    "malformed-inventory": malformed_inventory,
    "wrong-schema-inventory": wrong_schema_inventory,
    "job-id-out-of-range": out_of_range_job,
    "missing-inventory": missing_inventory,
    "missing-snapshot": missing_snapshot,
    "missing-conf": missing_conf,
    "bad-hostlist": bad_hostlist,
    "hostlist-too-large": huge_hostlist,
    "bad-reclaim-hostlist": bad_reclaim_hostlist,
    "unknown-node": unknown_node,
    "unreadable-agent-map": unreadable_agent_map,
    "malformed-agent-map": malformed_agent_map,
    "no-cluster-key": no_cluster_key,
    "unwritable-journal": unwritable_journal,
    "unwritable-snapshot": unwritable_snapshot,
    "unknown-option": unknown_option,
    "misspelt-option": misspelt_option,
    "far-option": far_option,
    "missing-option": missing_option,
    "inventory-symlink-loop": symlink_loop_inventory,
    "inventory-not-utf8": not_utf8_inventory,
    "two-inventories-of-a-node-tie": tied_inventories,
    "agent-port-true": bool_agent_port,
    "inventory-line-over-64mib": huge_inventory_line,
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_an_operator_error_is_one_line_on_stderr_with_exit_2(
    world: World, case: Case, tmp_path: Path
) -> None:
    args, words = case(world)
    one_line_error(run_cli(*args, home=tmp_path), *words)


@pytest.mark.parametrize("where", ["before", "after"])
def test_with_debug_an_operator_error_adds_a_traceback_and_still_ends_in_the_line(
    world: World, tmp_path: Path, where: str
) -> None:
    url = dead_url()
    args = audit_at(url, "--inventory", world.inventory)
    args = ["--debug", *args] if where == "before" else [*args, "--debug"]
    proc = run_cli(*args, home=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr
    assert stderr_lines(proc)[-1].startswith("spurctl: error: the controller did not answer")


def test_a_token_file_others_can_read_is_one_warning_and_is_not_sent(tmp_path: Path) -> None:
    # Permissive mode accepts no credential but refuses a bad one, so the audit
    # succeeding proves the (badly signed) token in the loose file was not sent.
    with SimCluster(incident(), agents=False, auth="permissive", jwt_key=KEY) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        token = tmp_path / "home" / ".spur" / "token"
        token.parent.mkdir(parents=True)
        token.write_text(auth.mint(OTHER_KEY, "alice") + "\n")
        token.chmod(0o640)
        proc = run_cli(
            *audit_at(sim.controller_address, "--inventory", str(inventory)), home=tmp_path / "home"
        )
        assert proc.returncode == 1, proc.stderr  # findings, from an anonymous audit
        (warning,) = stderr_lines(proc)
        assert warning == (
            f"spurctl: warning: ignoring {token}: it is readable by group or others "
            f"(mode 0640); run `chmod 600 {token}`"
        )
        assert sim.refusals == []

        token.chmod(0o600)  # now it is used, and the controller refuses the bad signature
        proc = run_cli(
            *audit_at(sim.controller_address, "--inventory", str(inventory)), home=tmp_path / "home"
        )
        one_line_error(proc, "wrong key")


# -- bad input that used to slip through -----------------------------------------------


def test_invalid_utf8_on_stdin_is_exit_2_as_for_a_file(world: World, tmp_path: Path) -> None:
    import subprocess

    from tests.cli import clean_env, home_for, spurctl_argv

    data = (
        inventory_line("gpu001").encode()
        + b'{"schema": "spurctl.inventory/v1", "node": "gpu\xff"}\n'
    )
    proc = subprocess.run(
        spurctl_argv(*audit_at(world.url, "--inventory", "-", "--format", "json")),
        input=data,
        capture_output=True,
        timeout=60,
        env=clean_env(home_for(tmp_path)),
    )
    text = subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )
    one_line_error(text, "<stdin>", "line 2", "not UTF-8")
    assert proc.stdout == b""


def test_a_fifo_in_an_inventory_directory_is_skipped_and_named(
    world: World, tmp_path: Path
) -> None:
    import os

    directory = tmp_path / "inventories"
    directory.mkdir()
    (directory / "gpu001.json").write_text(inventory_line("gpu001"))
    os.mkfifo(directory / "stuck.json")  # nobody ever writes to it: reading it would block
    proc = run_cli(*audit_at(world.url, "--inventory", str(directory)), home=tmp_path, timeout=30)
    assert proc.returncode in (0, 1), proc.stderr
    (warning,) = stderr_lines(proc)
    assert warning == (
        f"spurctl: warning: --inventory {directory}: "
        "skipped stuck.json (a FIFO, not a regular file)"
    )

    os.remove(directory / "gpu001.json")  # only the FIFO left: nothing to read is an error
    proc = run_cli(*audit_at(world.url, "--inventory", str(directory)), home=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert "holds no .json or .jsonl files that are regular files" in proc.stderr


def test_a_cluster_key_others_can_read_is_one_warning(world: World, tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_text(KEY + "\n")
    key.chmod(0o644)
    conf = tmp_path / "spur.conf"
    conf.write_text(f'[auth]\njwt_key = "{KEY}"\n')
    conf.chmod(0o640)
    for flags, expected in (
        (["--jwt-key-file", str(key)], f"--jwt-key-file {key} is readable by group or others "
         f"(mode 0644); run `chmod 600 {key}`"),
        (["--conf", str(conf)], f"{conf} holds [auth] jwt_key and is readable by group or "
         f"others (mode 0640); run `chmod 600 {conf}`"),
    ):  # fmt: skip
        proc = run_cli(*reclaim_at(world, "gpu013", "--dry-run", *flags), home=tmp_path / "home")
        assert proc.returncode == 0, proc.stderr
        assert stderr_lines(proc) == [f"spurctl: warning: {expected}"]
        assert KEY not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("env", "coloured"),
    [({"FORCE_COLOR": "1"}, True), ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False), ({}, False)],
)
def test_force_color_colours_a_piped_table_and_no_color_wins(
    world: World, tmp_path: Path, env: dict[str, str], coloured: bool
) -> None:
    proc = run_cli(*audit_at(world.url, "--inventory", world.inventory), home=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr
    assert ("\x1b[" in proc.stdout) is coloured
    assert "gpu021.cluster.local" in proc.stdout


def test_a_token_sent_to_a_controller_with_no_key_configured_names_that_cause(
    tmp_path: Path,
) -> None:
    with SimCluster(
        incident(), agents=False, auth="permissive", jwt_key=KEY, keyless=["controller"]
    ) as sim:
        token = auth.mint(KEY, "root", admin=True, lifetime_s=300)
        env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
        refused = run_cli(
            "snapshot", "-o", str(tmp_path / "s.json"), env={**env, "SPUR_AUTH_TOKEN": token}
        )
        anonymous = run_cli("snapshot", "-o", str(tmp_path / "a.json"), env=env)
    line = one_line_error(refused, "no [auth] jwt_key configured", "would pass")
    assert "a token was presented but no auth.jwt_key is configured" in line
    assert "the token is not at fault" in line and token not in line
    assert anonymous.returncode == 0, anonymous.stderr  # as the sentence says


class _NotFound(http.server.BaseHTTPRequestHandler):
    """A web server where spurctld was expected: every GET is 404."""

    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, *_: Any) -> None:  # the test's output stays its own
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    """http://127.0.0.1:PORT of a real stdlib HTTP/1 server, stopped at the end."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_port_speaking_http_not_grpc_is_named_as_not_a_spur_controller(
    web_server: str, lone_controller: SimCluster, tmp_path: Path
) -> None:
    run = run_cli("snapshot", "-o", str(tmp_path / "s.json"), "--controller", web_server)
    line = one_line_error(run, "--controller")
    assert (
        f"{web_server} answered, but not as a Spur controller (an agent's port? an HTTP "
        "proxy?): HTTP status 404 over HTTP/1, not gRPC"
    ) in line
    assert "HTTP/2" not in line  # grpc's frame-parsing words stay out of it
    # Beside a real controller it is skipped, and the failover note says why.
    both = f"{web_server},{lone_controller.controller_address}"
    inventory = lone_controller.write_inventories(tmp_path / "inventory.jsonl")
    run = run_cli("audit", "--json", "--inventory", str(inventory), "--controller", both)
    assert run.returncode == 1, run.stderr
    (note,) = [n for n in json.loads(run.stdout)["notes"] if "failover" in n]
    assert f"{web_server} answered, but not as a Spur controller" in note
    assert "HTTP status 404 over HTTP/1" in note
