"""The production incident of PR #623, as a scenario: a controller restart marked
healthy nodes DOWN and requeued their jobs, which the old nodes still run; around
them, one of each other case a reconciler must tell apart.
"""

from __future__ import annotations

from spurctl.model import NodeState
from spurctl_sim.scenario import Scenario
from spurctl_sim.scenario_parts import SPUR_VERSION, job_allocation
from spurctl_sim.scenario_tables import holdings_from_table, jobs_from_table, nodes_for_jobs

_INCIDENT_USERS = {
    "alice": 1001,
    "bob": 1002,
    "carol": 1003,
    "dmitri": 1004,
    "erin": 1005,
    "frank": 1006,
    "grace": 1007,
    "henry": 1008,
}

# The requeued jobs (4711-4720) show their NEW run: started after the 22:14 restart.
_INCIDENT_JOBS = """
4690 frank  llm      gpu   RUNNING   001-002 0-7 -  11-30T08:12:40 11-30T08:15:02 gpt-13b-pretrain
4702 henry  infra    gpu   COMPLETED 012     0-3 -  12-01T23:02:19 12-01T23:02:30 nccl-bench
4711 alice  llm      gpu   RUNNING   015     0-7 -  12-01T13:40:12 12-01T22:16:05 llama-70b-sft
4712 bob    llm      gpu   RUNNING   016-017 0-7 -  12-01T16:21:55 12-01T22:16:31 moe-pretrain
4715 carol  research gpu   RUNNING   018     0-3 -  12-01T19:05:00 12-01T22:17:12 eval-sweep-a
4716 carol  research gpu   RUNNING   018     4-7 -  12-01T19:05:01 12-01T22:17:12 eval-sweep-b
4719 dmitri llm      gpu   RUNNING   019     0-7 -  12-01T20:44:31 12-01T22:18:40 rlhf-ppo
4720 erin   research gpu   RUNNING   020     0-7 -  12-01T21:10:07 12-01T22:19:03 vit-finetune
4950 alice  research gpu   RUNNING   012     4-7 -  12-02T01:15:00 12-02T01:15:08 tokenize-shard
4960 grace  research gpu   RUNNING   021     0-7 -  12-02T02:40:00 12-02T02:41:26 diffusion-xl
4980 dmitri llm      gpu   COMPLETED 022     4-7 -  12-02T03:00:00 12-02T03:00:05 rm-eval
5001 bob    llm      gpu   RUNNING   022     0-3 -  12-02T04:05:10 12-02T04:05:16 moe-ablation-3
5040 frank  llm      gpu   RUNNING   023     -   32 12-02T05:00:00 12-02T05:00:03 data-dedup
5077 henry  infra    debug SUSPENDED 024     4-7 -  12-02T06:30:00 12-02T06:30:05 protein-fold
5090 erin   research gpu   FAILED    020     0   -  12-02T08:00:00 12-02T08:00:04 vit-ft-1
5100 frank  llm      gpu   CANCELLED 023     -   4  12-02T08:40:00 12-02T08:40:02 dedup-old
5105 alice  research gpu   TIMEOUT   022     4,5 -  12-02T08:50:00 12-02T08:50:09 q-eval
5113 alice  llm      gpu   PENDING   -       0-7 -  12-02T07:12:00 -              llama-70b-dpo
5114 bob    llm      gpu   PENDING   -       0-7 -  12-02T09:10:00 -              moe-ablation-4
5118 grace  research gpu   PENDING   -       0,1 -  12-02T09:59:41 -              sd-eval
5119 erin   research gpu   RUNNING   -       0-7 -  12-02T09:59:30 12-02T09:59:58 vit-finetune-2
5120 carol  research gpu   PENDING   -       0-3 -  12-02T09:59:59 -              eval-sweep-c
"""
_INCIDENT_ENDED = {
    4702: "12-01T23:40:51",
    4980: "12-02T03:48:12",
    5090: "12-02T08:00:31",
    5100: "12-02T08:59:10",
    5105: "12-02T09:50:09",
}
_INCIDENT_REASONS = {
    5077: "suspended by admin",
    5090: "NonZeroExitCode",
    5105: "TimeLimit",
    5113: "launch failed on gpu006: controller-allocated GPUs unavailable on this node",
    5114: "Priority",
    5120: "Resources",
}
# Stale runs on gpu003-008 started before the restart and are still alive.
_INCIDENT_HOLDINGS = """
001 4690 0-7 -  11-30T08:15:04 live
002 4690 0-7 -  11-30T08:15:04 live
003 4711 0-7 -  12-01T14:02:11 live
004 4712 0-7 -  12-01T16:30:40 live
005 4712 0-7 -  12-01T16:30:40 live
006 4715 0-3 -  12-01T19:05:09 live
006 4716 4-7 -  12-01T19:05:10 live
007 4719 0-7 -  12-01T20:47:02 live
008 4720 0-7 -  12-01T21:10:15 live
010 5118 0,1 -  12-02T09:59:50 idle
011 5119 0-7 -  12-02T09:59:58 live
012 4702 0-3 -  12-01T23:02:31 idle
012 4950 4-7 -  12-02T01:15:09 live
013 4388 0-3 -  11-29T11:20:44 idle
014 5187 0-7 -  12-02T08:31:17 live
015 4711 0-7 -  12-01T22:16:06 live
016 4712 0-7 -  12-01T22:16:32 live
017 4712 0-7 -  12-01T22:16:32 live
018 4715 0-3 -  12-01T22:17:13 live
018 4716 4-7 -  12-01T22:17:13 live
019 4719 0-7 -  12-01T22:18:41 live
020 4720 0-7 -  12-01T22:19:04 live
021 4960 0-7 -  12-02T02:41:27 live
022 5001 0-3 -  12-02T04:05:17 live
023 5040 -   32 12-02T05:00:04 live
024 5077 4-7 -  12-02T06:30:06 live
"""


def incident() -> Scenario:
    """The incident of PR #623: a controller restart marked healthy nodes DOWN.

    At 22:14 a new leader marked gpu003-gpu008 DOWN on stale heartbeats and
    requeued their jobs, which now RUN on gpu015-gpu020; the old nodes never
    died and still run them (live pids, GPUs held). gpu003-005 are still DOWN;
    an operator resumed gpu006-008, which now reject every GPU dispatch (5113).
    Around them, one of each other case a reconciler must tell apart:

    - gpu001-002: 4690, a healthy two-node job.
    - gpu009: a phantom allocation (alloc_resources set, no job lists the node).
    - gpu010: 5118 PENDING and reserved here: may be mid-dispatch.
    - gpu011: 5119 RUNNING with an empty nodelist: state committed, allocation not yet.
    - gpu012: 4702 COMPLETED but still reserved, next to a healthy 4950.
    - gpu013: 4388, aged out of the job map, below the watermark.
    - gpu014: 5187, at/above next_job_id 5121: from another controller.
    - gpu021: healthy 4960, but its agent reports gpu021.cluster.local.
    - gpu024: 5077 SUSPENDED (active, healthy).
    """
    jobs = jobs_from_table(_INCIDENT_JOBS, _INCIDENT_USERS, _INCIDENT_REASONS, _INCIDENT_ENDED)
    down = (NodeState.DOWN, "Not responding")
    return Scenario(
        version=SPUR_VERSION,
        jobs=jobs,
        nodes=nodes_for_jobs(
            24,
            jobs,
            out_of_service={3: down, 4: down, 5: down},
            phantom={9: job_allocation((0, 1, 2, 3), 1)},
            agent_start={},
            default_agent_start="11-18T07:31:10",
            partitions={i: ("gpu", "debug") for i in range(21, 25)},
        ),
        holdings=holdings_from_table(_INCIDENT_HOLDINGS),
        inventory_names={"gpu021": "gpu021.cluster.local"},
        next_job_id=5121,
        users=dict(_INCIDENT_USERS),
        hostname="spurctld-1",
    )
