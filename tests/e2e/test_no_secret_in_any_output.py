"""No registered secret leaves spurctl, whatever the cluster echoes back.

A controller that echoes the caller's bearer token in its version, a node name, a
job's name, user and state reason, and in its error details (and agents that echo
the credential spurctl mints for them) must never get that token onto stdout,
stderr, an `-o` file or the journal: every format, explain, journal and --debug.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import msgspec
import pytest

from spurctl.model import Node, NodeState
from spurctl.sources import credentials as auth
from spurctl_sim import Scenario, SimCluster, incident
from tests.cli import run_cli
from tests.reclaim import reclaim_files

KEY = "echo-test-cluster-key-Hq4v8XkP-0123456789"
TOKEN = auth.mint(KEY, "root", admin=True)
FORGED = auth.mint("echo-test-other-key-Lm2Wd7R9-0123456789", "root", admin=True)
ECHO_NODE = f"gpu099-{TOKEN}"  # a node whose name carries the token
HOLDER = f"gpu098-{TOKEN}"  # another, holding a finished job (a Prometheus series names it)
HELD = 4702  # the incident's finished job still held on gpu012


def echoing_scenario() -> Scenario:
    s = incident()
    s.version = f"0.8.0+build.{TOKEN}"
    s.jobs = [
        msgspec.structs.replace(
            j, name=f"train-{TOKEN}", user=f"alice{TOKEN}", state_reason=f"ended: {TOKEN}"
        )
        if j.job_id == HELD
        else j
        for j in s.jobs
    ]
    s.users = {j.user: j.uid for j in s.jobs if j.user}
    s.nodes = [
        *s.nodes,
        Node(ECHO_NODE, NodeState.IDLE, state_reason=f"drained by {TOKEN}"),
        Node(HOLDER, NodeState.IDLE),
    ]
    s.holdings[HOLDER] = list(s.holdings["gpu012"])
    return s


def pieces(secret: str) -> list[str]:
    """Every 12-character run of the secret's signature: a table that folds a long
    cell across lines must not print the secret in parts either."""
    signature = secret.split(".")[-1]
    return [secret, *(signature[i : i + 12] for i in range(0, len(signature) - 11, 4))]


SECRETS = [*pieces(TOKEN), *pieces(FORGED), KEY]


@pytest.fixture(autouse=True, scope="module")
def fresh_token() -> None:
    """The token minted again as this module's tests start: a credential lives five
    minutes at most, and the import was at collection, maybe longer ago on a slow run."""
    global TOKEN, ECHO_NODE, HOLDER, SECRETS
    TOKEN = auth.mint(KEY, "root", admin=True)
    ECHO_NODE, HOLDER = f"gpu099-{TOKEN}", f"gpu098-{TOKEN}"
    SECRETS = [*pieces(TOKEN), *pieces(FORGED), KEY]


def assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked in:\n{text[:2000]}"


def make_sim() -> SimCluster:
    # the `sim` fixture (tests/conftest.py)
    return SimCluster(echoing_scenario(), auth="required", jwt_key=KEY, controller_echo=True)


def cli(*args: str, home: Path, token: bool = True) -> subprocess.CompletedProcess[str]:
    credential = ("--token", TOKEN) if token else ()
    return run_cli(*args, *credential, home=home, env={"COLUMNS": "80"})


def inventories_but_the_echo_node(sim: SimCluster, path: Path) -> Path:
    """Every inventory but the echo node's: its not-inventoried row shows its name."""
    sim.write_inventories(path)
    lines = path.read_text().splitlines()
    path.write_text("".join(f"{line}\n" for line in lines if "gpu099-" not in line))
    return path


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown", "prometheus"])
def test_an_echoed_token_is_redacted_in_every_audit_format_on_stdout_and_in_o_files(
    sim: SimCluster, tmp_path: Path, fmt: str
) -> None:
    inventory = inventories_but_the_echo_node(sim, tmp_path / "inventory.jsonl")
    base = ("audit", "--controller", sim.controller_address, "--inventory", str(inventory))
    shown = cli(*base, "--format", fmt, home=tmp_path / "home")
    out = tmp_path / f"audit.{fmt}"
    written = cli(*base, "--format", fmt, "-o", str(out), home=tmp_path / "home")
    assert shown.returncode == 1, shown.stderr
    assert written.returncode == 1, written.stderr
    assert_clean(shown.stdout, shown.stderr, written.stdout, written.stderr, out.read_text())
    # The echo reached the output, redacted: the version at least (every format shows it).
    assert "<redacted>" in shown.stdout and "<redacted>" in out.read_text()
    if fmt == "json":
        doc = json.loads(shown.stdout)
        assert doc["controller"]["version"] == "0.8.0+build.<redacted>"


def test_explain_snapshot_and_checklist_redact_the_echoed_token(
    sim: SimCluster, tmp_path: Path
) -> None:
    inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
    home = tmp_path / "home"
    c = ("--controller", sim.controller_address)
    runs = [
        cli("explain", "gpu012", str(HELD), *c, "--inventory", str(inventory), home=home),
        cli("explain", "gpu099-<redacted>", *c, "--inventory", str(inventory), home=home),
        cli("explain", "gpu012", *c, "--inventory", str(inventory), "--format", "json", home=home),
        cli("snapshot", *c, "-o", str(tmp_path / "snap.json"), home=home),
        cli("checklist", "post-wipe", *c, "--inventory", str(inventory), home=home),
    ]
    for r in runs:
        assert r.returncode in (0, 1), r.stderr
        assert_clean(r.stdout, r.stderr)
    assert_clean((tmp_path / "snap.json").read_text())
    assert "<redacted>" in runs[0].stdout  # the job's name, user and reason were shown
    assert "gpu099-<redacted>" in runs[1].stdout + runs[1].stderr


def test_echoed_error_details_and_debug_tracebacks_are_redacted(
    sim: SimCluster, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    refused = run_cli(
        "--debug", "audit", "--controller", sim.controller_address, "--token", FORGED, home=home
    )
    assert refused.returncode == 2
    assert "Traceback" in refused.stderr and "<redacted>" in refused.stderr
    assert_clean(refused.stdout, refused.stderr)


def test_a_reclaim_against_echoing_agents_keeps_the_token_out_of_journal_and_output(
    tmp_path: Path,
) -> None:
    with SimCluster(
        echoing_scenario(), auth="required", jwt_key=KEY, agent_echo=True, controller_echo=True
    ) as sim:
        files = reclaim_files(sim, tmp_path, key=KEY)
        journal = files.journal
        home = tmp_path / "home"
        args = (
            "--controller", sim.controller_address, "--inventory", str(files.inventory),
            "--agent-map", str(files.agent_map), "--journal", str(journal),
            "--jwt-key-file", str(files.key),
        )  # fmt: skip
        runs = [
            cli("--debug", "reclaim", "--node", "gpu012", *args, "--yes", home=home),
            cli("reclaim", "--node", "gpu012", *args, "--yes", "--format", "json", home=home),
            cli("journal", "--journal", str(journal), home=home, token=False),
            cli("journal", "--journal", str(journal), "--format", "json", home=home, token=False),
        ]
        run_id = json.loads(runs[3].stdout)["runs"][0]["run"]
        shown = cli("journal", "--journal", str(journal), "--run", run_id, home=home, token=False)
        runs.append(shown)
        echoed = [r.detail for r in sim.refusals if "authorization=Bearer " in r.detail]
    assert echoed, "the simulated agents did not echo the credential"
    minted = {d.split("authorization=Bearer ", 1)[1].split(";")[0].strip() for d in echoed}
    for r in runs:
        assert r.returncode in (0, 1), r.stderr
        assert_clean(r.stdout, r.stderr)
        for token in minted:
            assert token.split(".")[2] not in r.stdout + r.stderr
    text = journal.read_text()
    assert_clean(text)
    assert "<redacted>" in text
    assert "<redacted>" in runs[4].stdout  # the refusal's detail, as the journal shows it
