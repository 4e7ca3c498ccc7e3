"""Faults and interruptions, met through the real CLI against a simulated cluster.

What an operator can rely on, whatever goes wrong: a dead controller endpoint is
passed over; one bad node never hides or stops the others; a Ctrl-C never loses
the record of a cancel that went out; and no secret ever reaches the screen, the
journal or a --debug trace. (Operator errors, one line each: test_errors.py.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from spurctl.sources import credentials as auth
from spurctl_sim import SimCluster, incident
from tests.cli import run_cli
from tests.reclaim import RECLAIM_NODES, reclaim_args, reclaim_files

KEY = "harden-test-cluster-key-Zq8v3XkP-0123456789"


OTHER_KEY = "harden-test-other-key-9Lm2Wd7R-0123456789"


def test_no_token_or_cluster_key_reaches_output_or_journal_even_with_debug(tmp_path: Path) -> None:
    with SimCluster(incident(), auth="required", jwt_key=KEY) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        agent_map = tmp_path / "agents.json"
        agent_map.write_text(json.dumps(sim.agent_map()))
        key_file = tmp_path / "jwt.key"
        key_file.write_text(KEY + "\n")
        wrong_key_file = tmp_path / "wrong.key"
        wrong_key_file.write_text(OTHER_KEY + "\n")
        journal = tmp_path / "journal.jsonl"
        token = auth.mint(KEY, "root", admin=True)
        forged = auth.mint(OTHER_KEY, "root", admin=True)
        home = tmp_path / "home"

        def reclaim(
            token: str, key: Path, node: str = RECLAIM_NODES
        ) -> subprocess.CompletedProcess[str]:
            args = reclaim_args(sim, inventory, agent_map, journal, node)
            return run_cli(
                "--debug", *args, "--token", token, "--jwt-key-file", str(key), home=home
            )

        runs = [
            # A rejected credential, traceback and all.
            reclaim(forged, key_file),
            # Agents refuse a credential minted with the wrong key: every entry fails.
            reclaim(token, wrong_key_file, "gpu013"),
            # A run that sends.
            reclaim(token, key_file),
        ]
        assert runs[0].returncode == 2 and "Traceback" in runs[0].stderr
        assert runs[1].returncode == 1 and "refused the controller credential" in runs[1].stdout
        assert runs[2].returncode == 1, runs[2].stderr  # sent, unconfirmed: nothing re-collected
        assert {c.subject for c in sim.cancels} == {"spurctld"}

        seen = [journal.read_text()] + [r.stdout + r.stderr for r in runs]
        for text in seen:
            for secret in (KEY, OTHER_KEY, token, forged):
                assert secret not in text


def test_an_agent_echoing_the_minted_credential_leaks_it_nowhere(tmp_path: Path) -> None:
    """The `spurctld` credential spurctl mints is a secret before it is sent."""
    with SimCluster(incident(), agent_auth="required", jwt_key=KEY, agent_echo=True) as sim:
        files = reclaim_files(sim, tmp_path, key=KEY)
        journal = files.journal
        args = reclaim_args(sim, files.inventory, files.agent_map, journal, "gpu[003,012]")
        runs = [
            run_cli(*args, "--jwt-key-file", str(files.key), *fmt, home=tmp_path / "home")
            for fmt in ((), ("--format", "json"))
        ]
        echoed = [r.detail for r in sim.refusals if "authorization=Bearer " in r.detail]
    assert echoed, "the simulated agents did not echo the credential"
    minted = {d.split("authorization=Bearer ", 1)[1].split(";")[0].strip() for d in echoed}
    assert all(len(t) > 40 for t in minted)
    for r in runs:
        assert r.returncode == 1, r.stderr
        assert "<redacted>" in r.stdout
    doc = json.loads(runs[1].stdout)
    assert doc
    text = journal.read_text()
    assert "<redacted>" in text
    for seen in [text] + [r.stdout + r.stderr for r in runs]:
        for token in minted:
            assert token not in seen
            assert token.split(".")[2] not in seen  # not even the signature
        assert KEY not in seen
