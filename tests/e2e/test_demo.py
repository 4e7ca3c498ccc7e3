"""`spurctl demo`: the whole loop on a simulated cluster, run as an operator would run it."""

from __future__ import annotations

import io
import json
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from spurctl import demo
from spurctl.cli import app
from spurctl.model import Kind
from spurctl.sources import credentials as auth
from tests.cli import clean_env, cli_process, lines_of, run_cli

REPO = Path(__file__).resolve().parents[2]
KEY = "demo-test-cluster-key-0123456789abcdef"
KINDS = "|".join(re.escape(k.value) for k in Kind)
# One row of the audit table: "<node>  <job>  <kind>  <action>", the node blank on
# a node's later rows.
ROW = re.compile(rf"^\s*(?:\S+\s+)?(?:\d+|-)\s+(?P<kind>{KINDS})\s+(?P<action>[a-z]+)\b", re.M)


def _sections(out: str) -> list[str]:
    """The text under each of the four headings, in order."""
    starts = [out.index(h) for h in demo.HEADINGS]
    ends = [*starts[1:], len(out)]
    return [out[s:e] for s, e in zip(starts, ends, strict=True)]


def _rows(section: str) -> list[tuple[str, str]]:
    return [(m["kind"], m["action"]) for m in ROW.finditer(section)]


def test_demo_closes_the_loop_in_seconds_with_exit_0_and_no_noise(tmp_path: Path) -> None:
    # A hostile environment: the operator's own token and spur.conf must not leak into
    # the demo (a token the simulated controller cannot verify would fail every read).
    (tmp_path / ".spur").mkdir()
    (tmp_path / ".spur" / "token").write_text("not-a-real-token\n")
    (tmp_path / ".spur" / "token").chmod(0o600)
    env = {
        "SPUR_AUTH_TOKEN": "operator-token-of-a-real-cluster",
        "SPUR_CONF": str(tmp_path / "no-such-spur.conf"),
        "SPUR_CONTROLLER_ADDR": "http://127.0.0.1:9",
    }
    started = time.monotonic()
    proc = run_cli("demo", home=tmp_path, env=env, cwd=REPO)
    elapsed = time.monotonic() - started

    assert proc.returncode == 0, proc.stderr
    assert elapsed < 20
    assert proc.stderr == ""  # no GOAWAY or other gRPC chatter, no warnings
    first, dry_run, real_run, again = _sections(proc.stdout)

    before = _rows(first)
    assert ("active-elsewhere", "reclaim") in before
    assert {"terminal-held", "below-watermark-unknown"} <= {k for k, a in before if a == "reclaim"}
    after = _rows(again)
    assert after, "the second audit printed no table rows"
    assert not [row for row in after if row[1] == "reclaim"]
    investigate = {k for k, a in after if a == "investigate"}
    assert {"phantom-alloc", "above-watermark-unknown", "name-mismatch"} <= investigate

    planned = sum(1 for _, a in before if a == "reclaim")
    assert f"Reclaim plan: {planned} cancel{'' if planned == 1 else 's'}" in dry_run
    assert "Reclaim result" not in dry_run
    # The demo's reclaim re-collects nothing: every cancel is sent and unconfirmed.
    assert f"{planned} planned: {planned} sent ({planned} unconfirmed), 0 skipped, 0 failed." in (
        real_run
    )
    assert "eyJ" not in proc.stdout  # no JWT (every token starts with its encoded header)

    directory = re.search(r"are in (/\S+), removed on exit", proc.stdout.replace("\n", " "))
    assert directory is not None
    assert not Path(directory[1]).exists()


def test_demo_reclaims_only_with_the_minted_controller_credential_and_never_prints_the_key() -> (
    None
):
    out = io.StringIO()
    result = demo.run(out, jwt_key=KEY)
    text = out.getvalue()

    assert result.ok
    assert result.agent_subjects and set(result.agent_subjects) == {auth.CONTROLLER_SUBJECT}
    assert result.refusals == 0
    assert result.reclaimed_nodes == "gpu[003-008,012-013]"
    assert KEY not in text
    assert "jwt.key" in text  # the key is named by its file, never shown


def test_a_secret_known_before_that_is_part_of_the_key_leaves_the_key_file_whole() -> None:
    # The key file holds the key itself: written through the redacting writer, a secret
    # registered earlier in the process ("cluster-key", a substring of KEY) cut it to
    # "e2e-<redacted>-...", and every agent refused the credential signed with it.
    from spurctl import errors

    saved = errors.secrets_state()
    try:
        errors.register_secret("cluster-key")
        with demo.demo_cluster(KEY) as cluster:
            assert cluster.key_file.read_text() == KEY + "\n"
            assert cluster.connection().jwt_key == KEY
    finally:
        errors.restore_secrets(saved)


def test_the_demo_takes_the_ack_version_its_note_names(tmp_path: Path) -> None:
    # Every screen of the walkthrough shows the controller-version note, which ends
    # "Hide this note with --ack-version 0.8.0": the demo takes that option too.
    shown = run_cli("demo", home=tmp_path / "a", cwd=REPO)
    assert shown.returncode == 0, shown.stderr
    assert "Hide this note with --ack-version 0.8.0" in shown.stdout
    hidden = run_cli("demo", "--ack-version", "0.8.0", home=tmp_path / "b", cwd=REPO)
    assert hidden.returncode == 0, hidden.stderr
    assert "NOTE: Spur 0.8.0" not in hidden.stdout
    assert "Phantom allocations: 1 before (gpu009), 0 after." in hidden.stdout


def test_demo_help_says_what_it_does_and_shows_an_example() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"])
    assert result.exit_code == 0
    assert "simulated Spur cluster" in result.output
    assert "Examples:" in result.output
    assert re.search(r"^\s+spurctl demo$", result.output, re.M)
    assert "--serve" in result.output


def test_serve_answers_the_printed_commands_then_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    with cli_process("demo", "--serve", home=tmp_path, cwd=REPO) as proc:
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        printed: list[str] = []
        deadline = time.monotonic() + 30
        while not printed or not printed[-1].startswith("Serving"):
            printed.append(lines.get(timeout=max(deadline - time.monotonic(), 0.1)))
        banner = "".join(printed)

        exports = dict(re.findall(r"^\s*export (\w+)=(\S+)$", banner, re.M))
        assert exports["SPUR_CONTROLLER_ADDR"].startswith("http://127.0.0.1:")
        key_file = Path(exports["SPUR_JWT_KEY_FILE"])
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert key_file.read_text().strip() not in banner
        directory = key_file.parent

        commands = [line.strip() for line in printed if line.strip().startswith("spurctl ")]
        audit_cmd = next(c for c in commands if c.startswith("spurctl audit"))
        dry_run_cmd = next(c for c in commands if "--dry-run" in c)

        audit = run_cli(*shlex.split(audit_cmd)[1:], home=tmp_path, env=exports, cwd=REPO)
        assert audit.returncode == 1, audit.stderr  # findings that need action
        assert ("active-elsewhere", "reclaim") in _rows(audit.stdout)
        assert "view taken " in audit.stdout and ": complete; watermark 5121" in audit.stdout

        dry_run = run_cli(*shlex.split(dry_run_cmd)[1:], home=tmp_path, env=exports, cwd=REPO)
        assert dry_run.returncode == 0, dry_run.stderr
        assert "Reclaim plan: 1 cancel" in dry_run.stdout

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert proc.stderr is not None
        stderr = proc.stderr.read()
        assert "Traceback" not in stderr and "GOAWAY" not in stderr.upper()
        assert not directory.exists()


def _banner(proc: Any) -> list[str]:
    lines = lines_of(proc.stdout)
    printed: list[str] = []
    deadline = time.monotonic() + 30
    while not printed or not printed[-1].startswith("Serving"):
        printed.append(lines.get(timeout=max(deadline - time.monotonic(), 0.1)))
    return printed


def test_serve_tours_every_command_collects_from_its_nodes_and_keeps_inventories_fresh(
    tmp_path: Path,
) -> None:
    with cli_process(
        "demo", "--serve", home=tmp_path, cwd=REPO, env={"SPURCTL_DEMO_HEARTBEAT_S": "1"}
    ) as proc:
        printed = _banner(proc)
        banner = "".join(printed)
        exports = dict(re.findall(r"^\s*export (\w+)=(\S+)$", banner, re.M))
        commands = [line.strip() for line in printed if line.strip().startswith("spurctl ")]
        for name in (
            "audit", "explain", "collect", "reclaim", "journal", "snapshot", "node-inventory"
        ):  # fmt: skip
            assert any(c.split()[1] == name for c in commands), name
        explain_cmd = next(c for c in commands if c.startswith("spurctl explain"))
        explained = run_cli(*shlex.split(explain_cmd)[1:], home=tmp_path, env=exports, cwd=REPO)
        assert explained.returncode == 0, explained.stderr
        assert "active-elsewhere" in explained.stdout
        assert any("--watch" in c for c in commands)
        assert not any("--yes" in c for c in commands)  # the real reclaim asks first

        collect_cmd = next(c for c in commands if c.startswith("spurctl collect"))
        collect = run_cli(*shlex.split(collect_cmd)[1:], home=tmp_path, env=exports, cwd=REPO)
        assert collect.returncode == 0, collect.stderr
        written = Path(shlex.split(collect_cmd)[-1])
        nodes = [json.loads(line)["node"] for line in written.read_text().splitlines()]
        assert len(nodes) == 24 and "gpu021.cluster.local" in nodes

        # Each heartbeat rewrites the inventories: collected_at moves on by itself.
        inventory = Path(re.findall(r"inventory: (\S+)", banner)[0])
        first = json.loads(inventory.read_text().splitlines()[0])["collected_at"]
        deadline = time.monotonic() + 15
        while json.loads(inventory.read_text().splitlines()[0])["collected_at"] == first:
            assert time.monotonic() < deadline, "the served inventories were never refreshed"
            time.sleep(0.2)

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


def test_serve_can_serve_the_post_wipe_scenario_for_the_checklist(tmp_path: Path) -> None:
    with cli_process("demo", "--serve", "--scenario", "post-wipe", home=tmp_path, cwd=REPO) as proc:
        printed = _banner(proc)
        exports = dict(re.findall(r"^\s*export (\w+)=(\S+)$", "".join(printed), re.M))
        commands = [line.strip() for line in printed if line.strip().startswith("spurctl ")]
        checklist_cmd = next(c for c in commands if c.startswith("spurctl checklist post-wipe"))
        checklist = run_cli(*shlex.split(checklist_cmd)[1:], home=tmp_path, env=exports, cwd=REPO)
        assert checklist.returncode == 1, checklist.stderr  # nodes to recycle
        assert "# Post-wipe agent recycle checklist" in checklist.stdout
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


def test_scenario_without_serve_is_one_clear_error(tmp_path: Path) -> None:
    run = run_cli("demo", "--scenario", "post-wipe", home=tmp_path)
    assert run.returncode == 2 and "--scenario is for --serve" in run.stderr


def test_demo_rebuilds_the_phantom_node_through_spurs_one_path() -> None:
    out = io.StringIO()
    result = demo.run(out)  # a key of its own: one registered as a secret is written redacted
    text = out.getvalue()
    assert result.ok
    assert (result.phantom_before, result.phantom_after) == (["gpu009"], [])
    repair = text[text.index(demo.REPAIR_HEADING) :]
    assert "DeregisterNode(force=false)" in repair
    assert "Repair result: 1 repaired, 0 refused after the re-read, 0 failed, 0 not back." in repair
    assert "Phantom allocations: 1 before (gpu009), 0 after." in repair


def test_serve_keeps_its_journal_in_its_own_directory_and_nothing_under_home(
    tmp_path: Path,
) -> None:
    # The served demo's config set no journal: a reclaim tried by hand without --journal
    # wrote the simulated cluster's runs to ~/.local/state/spurctl, whose next demo (the
    # same node names, the same job ids) read them as its own (issue 53.2).
    home = tmp_path / "home"
    with cli_process("demo", "--serve", home=home, cwd=REPO) as proc:
        printed = _banner(proc)
        exports = dict(re.findall(r"^\s*export (\w+)=(\S+)$", "".join(printed), re.M))
        inventory = re.findall(r"inventory: (\S+)", "".join(printed))[0]
        before = sorted(home.rglob("*"))
        reclaim = run_cli(
            "reclaim", "--node", "gpu003", "--inventory", inventory, "--yes",
            home=home, env=exports, cwd=REPO,
        )  # fmt: skip
        assert reclaim.returncode == 1, reclaim.stdout + reclaim.stderr  # sent, unconfirmed
        journal = Path(exports["SPURCTL_CONFIG"]).parent / "journal.jsonl"
        assert f"Journal: {journal}" in reclaim.stdout
        assert sorted(home.rglob("*")) == before
        shown = run_cli("journal", home=home, env=exports, cwd=REPO)
        assert "gpu003" in shown.stdout, shown.stdout + shown.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    assert not journal.exists()


def test_the_demo_down_a_pipe_prints_each_finding_on_one_line_as_audit_does(
    tmp_path: Path,
) -> None:
    proc = run_cli("demo", "--ack-version", "0.8.0", home=tmp_path, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    first = _sections(proc.stdout)[0]
    lines = first.splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith("node ")))
    rows = lines[at + 1 : at + 15]
    # Every row starts with its node, its reason whole on it: no line carries one on.
    assert all(re.match(r"gpu\d{3}", row) for row in rows), "\n".join(rows)
    assert any(row.endswith("different controller") for row in rows)


def test_without_the_simulator_demo_says_how_to_add_it_in_one_line(tmp_path: Path) -> None:
    # An admin host's spurctl has no simulator (it is spurctl-sim, a distribution of its
    # own). The real command, in a process whose imports cannot find it: a None in
    # sys.modules is what `import spurctl_sim` finds first, and fails on as on a missing one.
    hidden = (
        "import sys; sys.modules['spurctl_sim'] = None; "
        "sys.argv[0] = 'spurctl'; from spurctl.cli import entry; entry()"
    )
    for args in (["demo"], ["demo", "--serve"]):
        proc = subprocess.run(
            [sys.executable, "-c", hidden, *args], capture_output=True, text=True,
            timeout=60, env=clean_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == ""
        (line,) = proc.stderr.splitlines()
        assert line.startswith("spurctl: error: spurctl demo needs the simulated cluster")
        assert "pip install ./sim" in line and "pipx inject spurctl" in line
    # Every other command, and demo's own --help, runs without it.
    helped = subprocess.run(
        [sys.executable, "-c", hidden, "demo", "--help"], capture_output=True, text=True,
        timeout=60, env=clean_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert helped.returncode == 0, helped.stderr
    assert "--serve" in helped.stdout
