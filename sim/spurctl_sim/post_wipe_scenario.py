"""A controller state wipe, as a scenario: the job ids restarted at 1 while the nodes
still run what the old controller started, some of them under ids issued again.
"""

from __future__ import annotations

from datetime import timedelta

from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import SPUR_VERSION, utc_time
from spurctl_sim.scenario_tables import holdings_from_table, jobs_from_table, nodes_for_jobs

# Since the 06:00 wipe: ids 1-40. 12 completed and 35 is pending, 23 runs on gpu010;
# all three ids are also held by pre-wipe runs on gpu003-005.
_POST_WIPE_JOBS = """
1  alice  research gpu RUNNING   009     0-3 - 12-02T06:31:10 12-02T06:31:30 smoke-test
12 alice  research gpu COMPLETED 013     0-7 - 12-02T07:30:05 12-02T07:30:20 nccl-check
23 dmitri research gpu RUNNING   010     0-7 - 12-02T08:25:40 12-02T08:25:51 train-small
31 dmitri research gpu RUNNING   011-012 0-7 - 12-02T09:05:12 12-02T09:05:30 train-multi
35 dmitri research gpu PENDING   -       0-3 - 12-02T09:25:03 -              eval
36 alice  research gpu RUNNING   014     0-3 - 12-02T09:30:44 12-02T09:30:51 preprocess
38 carol  research gpu RUNNING   013     0-7 - 12-02T09:40:09 12-02T09:40:15 train-small
39 dmitri research gpu RUNNING   009     4-7 - 12-02T09:45:30 12-02T09:45:41 eval
40 alice  research gpu PENDING   -       0-3 - 12-02T09:50:17 -              train-small
"""
_POST_WIPE_ENDED = {12: "12-02T07:42:00"}
# gpu001-008 still run what the old controller started; gpu009-016 were recycled.
_POST_WIPE_HOLDINGS = """
001 44 0-7 - 12-01T21:30:00 live
002 57 0-3 - 12-02T01:12:45 live
002 63 4-7 - 12-02T03:55:10 live
003 23 0-7 - 12-01T18:59:30 live
004 12 0-7 - 12-01T16:04:00 live
005 35 0-3 - 12-01T20:15:20 live
006 61 0-7 - 12-02T02:20:00 live
007 61 0-7 - 12-02T02:20:00 live
009 1  0-3 - 12-02T06:31:31 live
009 39 4-7 - 12-02T09:45:42 live
010 23 0-7 - 12-02T08:25:52 live
011 31 0-7 - 12-02T09:05:31 live
012 31 0-7 - 12-02T09:05:31 live
013 38 0-7 - 12-02T09:40:16 live
014 36 0-3 - 12-02T09:30:52 live
"""
_POST_WIPE_USERS = {"alice": 1001, "bob": 1002, "carol": 1003, "dmitri": 1004}


def _post_wipe_short_jobs() -> tuple[str, dict[int, str]]:
    """The other ids issued since the wipe: short jobs that finished on the recycled nodes."""
    rows, ended = [], {}
    users = list(_POST_WIPE_USERS)
    for job_id in range(2, 41):
        if job_id in (12, 23, 31, 35, 36, 38, 39, 40):
            continue
        submit = utc_time("2026-12-02T06:30:00") + timedelta(
            minutes=5 * job_id, seconds=job_id % 50
        )
        start = submit + timedelta(seconds=8)
        end = start + timedelta(minutes=3 + job_id % 11)
        state = "FAILED" if job_id % 9 == 0 else "COMPLETED"
        submitted, started, ended[job_id] = (
            t.strftime("%m-%dT%H:%M:%S") for t in (submit, start, end)
        )
        rows.append(
            f"{job_id} {users[job_id % 4]} research gpu {state} {9 + job_id % 8:03d} 0,1 - "
            f"{submitted} {started} hello-gpu"
        )
    return "\n".join(rows), ended


def post_wipe() -> Scenario:
    """Controller state wiped at 06:00 and submissions resumed before the agents were recycled.

    next_job_id restarted at 1 and is now 41. gpu001-008 still hold pre-wipe
    runs (their agents started before the wipe): 44, 57, 61 (two nodes) and 63
    are above the watermark and will be cancelled once the counter reaches
    them; 23 was reissued to a new run on gpu010, 12 to a run that has
    completed, 35 to one still pending. Each reissued id's held run started
    before the new job was submitted. gpu009-016 were recycled after the wipe.
    """
    short_jobs, short_ended = _post_wipe_short_jobs()
    jobs = jobs_from_table(
        _POST_WIPE_JOBS + short_jobs,
        _POST_WIPE_USERS,
        {35: "Resources", 40: "Priority"},
        {**_POST_WIPE_ENDED, **short_ended},
    )
    nodes = nodes_for_jobs(
        16,
        jobs,
        out_of_service={},
        phantom={},
        agent_start={i: f"12-02T06:{10 + i:02d}:00" for i in range(9, 17)},
        default_agent_start="11-25T12:00:00",
        partitions={},
    )
    return Scenario(
        version=SPUR_VERSION,
        jobs=jobs,
        nodes=nodes,
        holdings=holdings_from_table(_POST_WIPE_HOLDINGS),
        next_job_id=41,
        users=dict(_POST_WIPE_USERS),
        hostname="spurctld-1",
        # Each node's spurd, as /proc shows it, started when the node registered (no
        # restart since); tests that make slurmd_start_time lie change the node, not this.
        agent_started_at={n.name: n.agent_start_time for n in nodes if n.agent_start_time},
    )
