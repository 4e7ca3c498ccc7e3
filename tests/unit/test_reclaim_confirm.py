"""What a reclaim says of a cancel no node has confirmed (the pure part)."""

from __future__ import annotations

import io
import shlex
from pathlib import Path
from unittest.mock import patch

from spurctl.act.journal import Journal
from spurctl.decide import confirm
from spurctl.decide.plan import Entry, Outcome, ReclaimRun, Result
from spurctl.model import (
    Action,
    AuditReport,
    Finding,
    Holding,
    Inventory,
    Kind,
    Watermark,
    WatermarkSource,
    utcnow,
)
from spurctl.render.reclaim import (
    PlanFacts,
    confirm_command,
    confirmed,
    print_run,
    run_document,
    unconfirmed_nodes,
)
from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.usecases import reclaim as rc


def _outcome(node: str, job_id: int, result: Result = Result.SENT) -> Outcome:
    finding = Finding(node, job_id, Kind.TERMINAL_HELD, Action.RECLAIM, "ended")
    return Outcome(Entry(finding, f"{node}:6818"), result, "agent accepted CancelJob signal 0")


def _report() -> AuditReport:
    return AuditReport(
        controller_address="http://ctl:6817",
        controller_version="0.3.1",
        taken_at=utcnow(),
        watermark=Watermark(5121, WatermarkSource.ESTIMATED),
        view_complete=True,
        jobs_seen=1,
        jobs_total=1,
        findings=[],
        nodes_in_scope=4,
        nodes_inventoried=4,
    )


def _run() -> ReclaimRun:
    return ReclaimRun(
        outcomes=[
            _outcome("gpu003", 1),
            _outcome("gpu004", 2),
            _outcome("gpu009", 3, Result.SKIPPED),
            _outcome("gpu010", 4, Result.UNCONFIRMED),
        ]
    )


def test_a_sent_cancel_is_confirmed_only_by_a_re_collect() -> None:
    assert confirmed(Result.SENT, verified=False) is False
    assert confirmed(Result.SENT, verified=True) is True
    assert confirmed(Result.UNCONFIRMED, verified=True) is False
    assert confirmed(Result.SKIPPED, verified=False) is None
    assert confirmed(Result.FAILED, verified=True) is None
    assert unconfirmed_nodes(_run(), verified=False) == ["gpu003", "gpu004", "gpu010"]
    assert unconfirmed_nodes(_run(), verified=True) == ["gpu010"]


def test_the_confirm_command_folds_the_nodes_and_quotes_every_word() -> None:
    command = confirm_command(
        ["gpu004", "gpu003", "gpu010"], ["--command", "ssh -p 2222 %h spurctl node-inventory"]
    )
    assert shlex.split(command) == [
        "spurctl", "audit", "--nodes", "gpu[003-004,010]", "--collect",
        "--command", "ssh -p 2222 %h spurctl node-inventory",
    ]  # fmt: skip
    assert command.startswith("spurctl audit --nodes 'gpu[003-004,010]' --collect")


def test_verify_confirms_what_the_node_no_longer_holds_and_fails_what_it_still_does() -> None:
    run = ReclaimRun(outcomes=[_outcome("gpu003", 1), _outcome("gpu003", 2), _outcome("gpu004", 3)])
    changed = confirm.verify(run, {"gpu003": {2}}, settle=5, failed={"gpu004": "ssh: refused"})
    assert [(o.entry.job_id, o.result) for o in changed] == [
        (2, Result.FAILED),
        (3, Result.UNCONFIRMED),
    ]
    gone = run.outcomes[0]
    assert gone.result is Result.SENT
    assert gone.detail.endswith("; confirmed: gpu003 no longer holds it 5 s later")


def test_a_carried_run_is_a_reclaim_run_that_is_unverified_until_a_re_collect() -> None:
    carried = rc.Carried(outcomes=[_outcome("gpu003", 1)])
    assert isinstance(carried, ReclaimRun)
    assert carried.ok and not carried.verified


def test_the_document_says_sent_and_unconfirmed_and_carries_the_command() -> None:
    facts = PlanFacts(confirm_flags=["--controller", "http://ctl:6817"])
    run = _run()
    doc = run_document(run, [o.entry for o in run.outcomes], _report(), dry_run=False, facts=facts)
    assert [(o["result"], o["confirmed"]) for o in doc["outcomes"]] == [
        ("sent", False),
        ("sent", False),
        ("skipped", None),
        ("unconfirmed", False),
    ]
    assert doc["confirmation"] == {
        "verified": False,
        "confirmed": 0,
        "unconfirmed": 3,
        "command": "spurctl audit --nodes 'gpu[003-004,010]' --collect "
        "--controller http://ctl:6817",
    }
    # The summary keeps its keys: it counts results, the confirmation what nodes showed.
    assert doc["summary"]["sent"] == 2 and doc["summary"]["unconfirmed"] == 1


def test_a_verified_document_confirms_and_a_dry_run_has_no_confirmation() -> None:
    run = ReclaimRun(outcomes=[_outcome("gpu003", 1)])
    entries = [run.outcomes[0].entry]
    doc = run_document(run, entries, _report(), dry_run=False, facts=PlanFacts(verified=True))
    assert doc["outcomes"][0]["confirmed"] is True
    assert doc["confirmation"] == {
        "verified": True,
        "confirmed": 1,
        "unconfirmed": 0,
        "command": None,
    }
    assert run_document(None, entries, _report(), dry_run=True)["confirmation"] is None


def test_the_table_marks_each_unconfirmed_cancel_and_prints_the_command_on_one_line() -> None:
    run = ReclaimRun(outcomes=[_outcome("gpu003", 1), _outcome("gpu004", 2)])
    out = io.StringIO()
    flags = ["--command", "x" * 300]  # longer than any terminal: still one line
    print_run(run, [o.entry for o in run.outcomes], _report(), fmt="table", file=out,
              facts=PlanFacts(confirm_flags=flags))  # fmt: skip
    text = out.getvalue()
    assert text.count("sent, unconfirmed") == 2
    assert "2 planned: 2 sent (2 unconfirmed), 0 skipped, 0 failed." in text
    assert "UNCONFIRMED: 2 sent cancels not shown freed" in text
    (line,) = [ln for ln in text.splitlines() if "spurctl audit" in ln]
    assert shlex.split(line)[-1] == "x" * 300

    verified = io.StringIO()
    print_run(run, [o.entry for o in run.outcomes], _report(), fmt="table", file=verified,
              facts=PlanFacts(verified=True))  # fmt: skip
    assert "unconfirmed" not in verified.getvalue().lower()
    assert "Confirmed: a re-collect of 2 nodes no longer shows 2 jobs." in verified.getvalue()


def test_the_unconfirmed_line_offers_only_the_confirmation_the_run_did_not_take() -> None:
    def said(run: ReclaimRun, facts: PlanFacts) -> str:
        out = io.StringIO()
        print_run(run, [o.entry for o in run.outcomes], _report(), fmt="table", file=out,
                  facts=facts)  # fmt: skip
        return " ".join(out.getvalue().split())

    plain = said(ReclaimRun(outcomes=[_outcome("gpu003", 1)]), PlanFacts())
    assert "or reclaim with --verify-inventory, which re-collects them" in plain
    # The re-collect ran and still saw the job: no use suggesting one.
    held = said(ReclaimRun(outcomes=[_outcome("gpu003", 1, Result.UNCONFIRMED)]),
                PlanFacts(verified=True))  # fmt: skip
    assert "re-collect still showed them held" in held and "--verify-inventory" not in held
    stopped = said(ReclaimRun(outcomes=[_outcome("gpu003", 1)], interrupted=True), PlanFacts())
    assert "stopped before a re-collect" in stopped and "--verify-inventory" not in stopped


class _Nodes:
    """A fake clock and the nodes a re-collect sees: `frees[node]` is when (seconds after
    the sends) the node stops showing its jobs; every look is recorded."""

    def __init__(self, frees: dict[str, float]) -> None:
        self.now = 0.0
        self.frees = frees
        self.looks: list[tuple[float, list[str]]] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def collect(self, nodes: list[str], **_: object) -> list[Inventory]:
        self.looks.append((self.now, list(nodes)))
        self.now += 0.3  # a collect takes time too
        gone = {n for n in nodes if self.now - 0.3 >= self.frees[n]}
        return [
            Inventory(n, utcnow(), "test", held=() if n in gone else (Holding(job_id=1),))
            for n in nodes
        ]


def _reverify(nodes: _Nodes, settle: float, tmp_path: Path) -> ReclaimRun:
    run = ReclaimRun(outcomes=[_outcome(n, 1) for n in sorted(nodes.frees)])
    src = Sources(scope=Scope(), inventory=None, collect=True, command="true %h", fanout=4)
    journal = Journal(tmp_path / "j.jsonl")
    with patch("spurctl.sources.collect.collect", nodes.collect), journal as j:
        assert rc.reverify(
            run, j, sorted(nodes.frees), src, settle,
            clock=nodes.clock, sleep=nodes.sleep,
        )  # fmt: skip
    return run


def test_the_re_collect_waits_past_spurds_grace_until_the_job_is_gone(tmp_path: Path) -> None:
    # A run that ignores SIGTERM: spurd SIGKILLs it at 5 s and releases it by 7 s.
    nodes = _Nodes({"gpu003": 0.0, "gpu004": 7.0})
    run = _reverify(nodes, 15.0, tmp_path)
    assert [o.result for o in run.outcomes] == [Result.SENT, Result.SENT]
    # Every 2 s, and only the nodes that still show a job after the first look.
    assert nodes.looks == [
        (2.0, ["gpu003", "gpu004"]),
        (4.0, ["gpu004"]),
        (6.0, ["gpu004"]),
        (8.0, ["gpu004"]),
    ]
    assert [o.waited_s for o in run.outcomes] == [2.0, 8.0]
    assert run.outcomes[1].detail.endswith("; confirmed: gpu004 no longer holds it 8 s later")
    assert run.waited_s == 8.3


def test_a_job_still_held_at_the_deadline_fails_saying_how_long_it_waited(tmp_path: Path) -> None:
    nodes = _Nodes({"gpu004": 99.0})
    run = _reverify(nodes, 5.0, tmp_path)
    assert [t for t, _ in nodes.looks] == [2.0, 4.0, 5.0]  # the last look at the deadline
    [o] = run.outcomes
    assert o.result is Result.FAILED and o.waited_s == 5.0
    assert "still holds job 1 5 s later" in o.detail


def test_settle_zero_looks_once_at_once(tmp_path: Path) -> None:
    nodes = _Nodes({"gpu004": 1.0})
    run = _reverify(nodes, 0.0, tmp_path)
    assert nodes.looks == [(0.0, ["gpu004"])]
    assert run.outcomes[0].result is Result.FAILED


def test_the_document_and_table_say_how_long_the_re_collect_waited() -> None:
    run = ReclaimRun(outcomes=[_outcome("gpu003", 1)])
    run.outcomes[0].waited_s = 2.0
    facts = PlanFacts(verified=True, waited_s=2.3, settle_s=15.0)
    entries = [o.entry for o in run.outcomes]
    doc = run_document(run, entries, _report(), dry_run=False, facts=facts)
    assert doc["outcomes"][0]["waited_s"] == 2.0
    assert (doc["confirmation"]["waited_s"], doc["confirmation"]["settle_s"]) == (2.3, 15.0)
    out = io.StringIO()
    print_run(run, entries, _report(), fmt="table", file=out, facts=facts)
    assert "Waited 2.3 s for the nodes to free them (--settle 15 at most)." in out.getvalue()
