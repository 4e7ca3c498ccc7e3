"""The pure parts of the reclaim guards: endpoint conflicts, inventory age, the
re-check under doubt, --job misses, durations and re-collect verdicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import typer

from spurctl.decide import confirm
from spurctl.decide import plan as rc
from spurctl.decide.plan import (
    Endpoint,
    Entry,
    duration,
    endpoint_conflicts,
    recheck,
    stale_reason,
    unmatched_jobs,
)
from spurctl.hostlist import named_nodes
from spurctl.model import Action, Finding, Job, JobState, Kind
from spurctl.option_values import parse_duration
from spurctl.sources.agent_endpoints import endpoints
from spurctl.sources.send_targets import agent_addresses
from spurctl.sources.settings import Connection

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def entry(
    node: str, job_id: int, address: str = "", *, collected_at: datetime | None = NOW
) -> Entry:
    finding = Finding(node, job_id, Kind.ACTIVE_ELSEWHERE, Action.RECLAIM, "stale run")
    return Entry(finding, address or f"{node}:6818", collected_at)


def ep(*members: tuple[str, int]) -> Endpoint:
    return frozenset(members)


def test_an_entry_on_the_endpoint_of_a_node_its_job_runs_on_is_refused() -> None:
    e = entry("gpu003", 4711, "10.0.0.15:6818")
    endpoints = {
        "gpu003": ep(("10.0.0.15", 6818)),
        "gpu015": ep(("gpu015", 6818), ("10.0.0.15", 6818)),
    }
    (problem,) = endpoint_conflicts([e], endpoints, {4711: {"gpu015"}})
    assert "gpu015, where job 4711 legitimately runs" in problem


def test_two_nodes_sharing_any_address_are_refused_and_distinct_ones_pass() -> None:
    a, b = entry("gpu007", 4719), entry("gpu008", 4720)
    shared = {"gpu007": ep(("::1", 6818), ("localhost", 6818)), "gpu008": ep(("::1", 6818))}
    (problem,) = endpoint_conflicts([a, b], shared, {})
    assert "gpu007 and gpu008 resolve to one agent endpoint" in problem
    apart = {"gpu007": ep(("10.0.0.7", 6818)), "gpu008": ep(("10.0.0.7", 6819))}
    assert endpoint_conflicts([a, b], apart, {4719: {"gpu019"}}) == []


def test_a_job_running_on_the_entrys_own_node_is_not_a_conflict() -> None:
    # (classify never plans that; the comparison still must not trip on it)
    e = entry("gpu003", 4711)
    assert endpoint_conflicts([e], {"gpu003": ep(("gpu003", 6818))}, {4711: {"gpu003"}}) == []


def test_endpoints_resolve_through_the_map_and_loose_names() -> None:
    conn = Connection(("http://c:1",), agent_map={"GPU015.cluster": "10.0.0.15:6818"})
    fake = {"gpu015:6818": ep(("gpu015", 6818)), "10.0.0.15:6818": ep(("10.0.0.15", 6818))}
    got = endpoints(agent_addresses(["gpu015"], conn), resolve=fake.__getitem__)
    assert got["gpu015"] == ep(("gpu015", 6818), ("10.0.0.15", 6818))
    assert conn.agent_map_lacks("gpu015")
    # Without a map every address is a guess; a map's own entry is not.
    assert Connection(("x",)).agent_map_lacks("gpu015")
    assert not conn.agent_map_lacks("GPU015.cluster")


def test_nodelist_names_trim_parts_and_keep_bare_tokens() -> None:
    assert named_nodes("gpu015 ") == {"gpu015"}
    assert named_nodes("gpu[015-016], gpu020") >= {"gpu015", "gpu016", "gpu020"}
    assert "gpu015" in named_nodes("gpu015,gpu[")  # unparseable: the tokens still count


def test_an_inventory_older_than_the_limit_or_undated_is_stale() -> None:
    fresh = entry("gpu003", 1, collected_at=NOW - timedelta(minutes=9))
    old = entry("gpu003", 2, collected_at=NOW - timedelta(minutes=11))
    undated = entry("gpu003", 3, collected_at=None)
    assert stale_reason(fresh, NOW, 600) is None
    why = stale_reason(old, NOW, 600)
    assert why is not None and "11m ago" in why and "--max-inventory-age 10m" in why
    assert "re-collect" in why
    assert "no collected_at" in (stale_reason(undated, NOW, 600) or "")


def test_an_inventory_dated_more_than_a_minute_ahead_is_skipped_as_a_clock_ahead() -> None:
    # reclaim's own backstop under the audit's clock-ahead finding: a negative age
    # would pass any --max-inventory-age.
    ahead = entry("gpu003", 1, collected_at=NOW + timedelta(minutes=5))
    why = stale_reason(ahead, NOW, 600)
    assert why is not None and "ahead of this host's clock" in why
    assert "node's clock is ahead" in why
    assert (
        stale_reason(entry("gpu003", 2, collected_at=NOW + timedelta(seconds=30)), NOW, 600) is None
    )


def test_not_found_at_recheck_under_doubt_is_a_skip() -> None:
    e = Entry(
        Finding("gpu013", 4388, Kind.BELOW_WATERMARK_UNKNOWN, Action.RECLAIM, "aged out"), "a:1"
    )
    assert recheck(e, None, 5121) is None  # NOT_FOUND is proof without doubt
    why = recheck(e, None, 5121, "the credential is not an admin's")
    assert why is not None and "not proof" in why


def test_unmatched_jobs_and_durations() -> None:
    entries = [entry("gpu006", 4716)]
    assert unmatched_jobs(entries, [4716, 99999, 99999]) == [99999]
    assert unmatched_jobs(entries, None) == []
    assert [duration(s) for s in (90, 600, 3600, 5400, 660)] == ["90s", "10m", "1h", "90m", "11m"]
    assert [parse_duration(v) for v in ("90s", "10m", "1h", "45", " 2D ")] == [
        90.0,
        600.0,
        3600.0,
        45.0,
        172800.0,
    ]
    for bad in ("", "m", "soon", "-1m", "0", "inf", "nan"):
        with pytest.raises(typer.BadParameter):
            parse_duration(bad)


def test_verify_calls_a_cancel_whose_node_could_not_be_re_collected_unconfirmed() -> None:
    def sent(node: str, job_id: int) -> rc.Outcome:
        return rc.Outcome(entry(node, job_id), rc.Result.SENT, "accepted")

    run = rc.ReclaimRun(outcomes=[sent("a", 1), sent("b", 2), sent("c", 3), sent("d", 4)])
    changed = confirm.verify(run, {"a": set(), "b": {2}}, 5, {"c": "ssh: refused"})
    assert [o.result for o in run.outcomes] == [
        rc.Result.SENT,
        rc.Result.FAILED,
        rc.Result.UNCONFIRMED,  # the re-collect failed
        rc.Result.UNCONFIRMED,  # no inventory came back at all
    ]
    assert "ssh: refused" in run.outcomes[2].detail
    assert len(changed) == 3 and not run.ok


def test_recheck_never_sends_to_a_node_the_nodelist_text_names() -> None:
    # Spur reads "gpu015 gpu016" as one odd name, so gpu015 is not in it by Spur's rule;
    # the text still names gpu015, and a run there may be the legitimate one.
    e = Entry(
        Finding("gpu015", 4711, Kind.ACTIVE_ELSEWHERE, Action.RECLAIM, "runs elsewhere"), "a:1"
    )
    moved = Job(4711, JobState.RUNNING, nodelist="gpu020")
    assert recheck(e, moved, 5121) is None
    ambiguous = Job(4711, JobState.RUNNING, nodelist="gpu015 gpu016")
    why = recheck(e, ambiguous, 5121)
    assert why is not None and "names gpu015" in why
