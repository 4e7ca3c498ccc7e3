"""Saved plans as terraform's (#43.4): through the real CLI against the simulated cluster.

- `reclaim --dry-run -o plan.json` ends by saying where the plan went and the command
  that applies it, which pasted on a terminal and answered yes sends exactly the plan;
- a saved plan refused as too old (or from another controller) ends with the command
  that makes a fresh one, which works as written and whose own apply command sends;
- re-applying a plan already applied says its holdings are no longer held, cancelled by
  the earlier run the journal records, not that the job "is now RUNNING";
- `--dry-run --detailed-exitcode` says whether the real run would send anything.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spurctl_sim import SimCluster
from tests.cli import answer_on_a_terminal, one_line_error, run_cli
from tests.reclaim import cancelled, journal_records

Cluster = tuple[SimCluster, Path, Path]


def _given(sim: SimCluster, inventory: Path, agent_map: Path, journal: Path) -> list[str]:
    return ["--controller", sim.controller_address, "--inventory", str(inventory),
            "--agent-map", str(agent_map), "--journal", str(journal)]  # fmt: skip


def _apply(plan: Path, given: list[str]) -> list[str]:
    """`reclaim --plan PLAN` reading what `given` reads."""
    return ["reclaim", "--plan", str(plan), *given]


def _saved(run_stderr: str, plan: Path) -> list[str]:
    """The apply command a dry run with -o ends with, as argv after `spurctl`."""
    lines = run_stderr.splitlines()
    assert lines[-2] == f"Saved the plan to {plan}; apply it with:", run_stderr
    assert lines[-1].startswith("  spurctl reclaim --plan "), run_stderr
    words = shlex.split(lines[-1])
    assert words[0] == "spurctl"
    return words[1:]


def test_a_saved_plan_ends_with_the_command_that_applies_exactly_it(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal, plan = tmp_path / "journal.jsonl", tmp_path / "plan.json"
    given = _given(sim, inventory, agent_map, journal)
    # 4711 on gpu003 only, though gpu007's 4719 is reclaimable too.
    dry = run_cli("reclaim", "--node", "gpu[003,007]", "--job", "4711", *given,
                  "--dry-run", "-o", str(plan), home=tmp_path / "home")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[-1] == "DRY RUN: nothing sent"
    apply = _saved(dry.stderr, plan)
    assert apply[:2] == ["reclaim", "--plan"] and apply[2] == str(plan)
    assert "--yes" not in apply  # the operator still sees the plan and answers
    assert sim.cancels == []

    # Pasted as printed, on a terminal: the fresh plan, the prompt, yes.
    status, seen = answer_on_a_terminal(apply, tmp_path / "home", b"y\r")
    assert status == 1, seen.decode()  # sent, unconfirmed: nothing re-collected
    assert cancelled(sim) == [("gpu003", 4711)]
    assert [
        (r["node"], r["job_id"]) for r in journal_records(journal) if r["event"] == "intent"
    ] == [("gpu003", 4711)]


def test_a_stale_plans_refusal_ends_with_a_fresh_plan_command_that_works_as_written(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal, plan = tmp_path / "journal.jsonl", tmp_path / "plan.json"
    given = _given(sim, inventory, agent_map, journal)
    dry = run_cli("reclaim", "--node", "gpu[003,007]", "--job", "4711", *given,
                  "--dry-run", "-o", str(plan), home=tmp_path / "home")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    apply = _apply(plan, given)
    # An hour later.
    doc = json.loads(plan.read_text())
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    doc["taken_at"] = hour_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
    plan.write_text(json.dumps(doc))
    stale = run_cli(*apply, "--yes", home=tmp_path / "home")
    line = one_line_error(stale, "--max-inventory-age", "nothing sent", "make a fresh one with")
    assert sim.cancels == []
    (fresh,) = line.split("`")[1:2]
    words = shlex.split(fresh)
    assert words[:2] == ["spurctl", "reclaim"] and "--dry-run" in words
    assert words[words.index("-o") + 1] == str(plan)
    assert words[words.index("--nodes") + 1] == "gpu[003,007]"
    assert words[words.index("--job") + 1] == "4711"  # the plan's jobs, no wider

    # As written: a fresh plan over the stale one, and its own apply command sends it.
    again = run_cli(*words[1:], home=tmp_path / "home")
    assert again.returncode == 0, again.stderr
    assert json.loads(plan.read_text())["taken_at"] > doc["taken_at"]
    sent = run_cli(*_apply(plan, given), "--yes", home=tmp_path / "home")
    assert sent.returncode == 1, sent.stderr  # sent, unconfirmed
    assert cancelled(sim) == [("gpu003", 4711)]

    # A plan made from another controller points at the same fresh plan.
    doc = json.loads(plan.read_text())
    doc["controller"] = {"address": "http://other-ctl:6817", "version": "0.1.0"}
    plan.write_text(json.dumps(doc))
    foreign = one_line_error(run_cli(*apply, "--yes", home=tmp_path / "home"), "other-ctl")
    assert foreign.split("`")[1] == fresh


def test_re_applying_a_spent_plan_says_no_longer_held_by_the_run_that_cancelled_it(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    journal, plan = tmp_path / "journal.jsonl", tmp_path / "plan.json"
    given = _given(sim, inventory, agent_map, journal)
    dry = run_cli("reclaim", "--node", "gpu[003,007]", *given, "--dry-run", "-o", str(plan),
                  home=tmp_path / "home")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    apply = _apply(plan, given)
    first = run_cli(*apply, "--yes", "--format", "json", home=tmp_path / "home")
    assert first.returncode == 1, first.stderr  # sent, unconfirmed
    assert sorted(cancelled(sim)) == [("gpu003", 4711), ("gpu007", 4719)]
    sent_by = {
        (r["node"], r["job_id"]): r for r in journal_records(journal) if r["event"] == "outcome"
    }
    # The nodes freed the runs: what they hold now, as a fresh collect would read it.
    sim.write_inventories(inventory)

    again = run_cli(*apply, "--yes", "--format", "json", home=tmp_path / "home")
    assert again.returncode == 1, again.stderr  # nothing sent: everything skipped
    assert len(sim.cancels) == 2  # no second cancel
    outcomes = {(o["node"], o["job_id"]): o for o in json.loads(again.stdout)["outcomes"]}
    for key, outcome in outcomes.items():
        record = sent_by[key]
        assert outcome["result"] == "skipped"
        assert outcome["detail"] == (
            f"not sent: no longer held (cancelled by the run of {record['at']}, journal run "
            f"{record['run']}): {key[0]} no longer holds job {key[1]}"
        )
        assert "is now RUNNING" not in outcome["detail"]
    # The table says it too.
    table = run_cli(*apply, "--yes", home=tmp_path / "home")
    assert "no longer held (cancelled by the run of" in " ".join(table.stdout.split())


def test_a_dry_runs_detailed_exit_code_says_whether_anything_would_be_sent(
    incident_cluster: Cluster, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    given = _given(sim, inventory, agent_map, tmp_path / "journal.jsonl")

    def dry(*args: str, read: list[str] = given) -> int:
        run = run_cli("reclaim", *read, "--dry-run", "--detailed-exitcode", *args,
                      home=tmp_path / "home")  # fmt: skip
        assert "error" not in run.stderr, run.stderr
        return run.returncode

    assert dry("--node", "gpu003") == 1  # a cancel would be sent
    assert dry("--node", "gpu001") == 0  # a healthy node: nothing
    assert dry("--node", "gpu014") == 0  # only a finding to investigate: nothing
    assert dry("--node", "gpu003", "--format", "json") == 1
    assert dry("--node", "gpu006", "--job", "99999") == 0  # said, but nothing to send
    # Every entry would be skipped for an old inventory: nothing would be sent.
    aged = _given(sim, _aged(inventory, tmp_path), agent_map, tmp_path / "journal.jsonl")
    assert dry("--node", "gpu003", read=aged) == 0
    assert sim.cancels == []
    # Without --dry-run it means nothing: a usage error, nothing sent.
    one_line_error(
        run_cli("reclaim", *given, "--node", "gpu003", "--yes", "--detailed-exitcode",
                home=tmp_path / "home"),
        "--detailed-exitcode", "--dry-run",
    )  # fmt: skip
    assert sim.cancels == []


def _aged(inventory: Path, tmp_path: Path) -> Path:
    """The inventory as collected an hour ago."""
    aged = tmp_path / "aged.jsonl"
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = []
    for line in inventory.read_text().splitlines():
        doc = json.loads(line)
        doc["collected_at"] = hour_ago
        lines.append(json.dumps(doc))
    aged.write_text("\n".join(lines) + "\n")
    return aged
