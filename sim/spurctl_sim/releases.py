"""Which Spur the simulated cluster plays: what differs between the releases a cluster runs.

`SimCluster(scenario, spur_release=V0_8_0)` answers as release v0.8.0 would; tests
and benchmarks read the flags (`sim.spur_release.deregister_keeps_node`, ...) to
know what they face. Each flag is one upstream change, read in upstream's source
at the tag or commit named, or (marked) only from its pull request
(docs/spur-facts.md, "Releases differ").
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from spurctl.model import Job, JobState
from spurctl.proto import slurm_pb2 as pb

# spurctld's heartbeat reclaim arms (docs/spur-facts.md, "The controller's own reclaim").
ARMS_580 = frozenset({1})  # #580, in release v0.8.0: a held id it records as terminal
ARMS_623 = frozenset({1, 2, 6})  # #623, main 2026-08-16, 0.9.0: the whole predicate


@dataclass(frozen=True, slots=True)
class SpurRelease:
    """One Spur release as the simulated controller and agents play it."""

    name: str
    # What Ping answers (PingResponse.version); None: the scenario's own version.
    version: str | None
    # GetJobsRequest.nodes = 7 (#628). Without it the field is skipped: no filter.
    nodes_filter: bool
    # JobState REQUEUED = 12 (#629). Without it the state is dropped from `states`
    # (`filter_map(from_proto_i32)`), and JobMetrics.by_state has no entry for it.
    requeued_state: bool
    # The arms of spurctld's heartbeat reclaim (#580: terminal only; #623: all).
    reclaim_arms: frozenset[int]
    # #784 (after 0.11, from its pull request): DeregisterAgent marks the node Down and
    # keeps its record; before it, the record is removed and the next spurd registers
    # a fresh one (new slurmd_start_time, drain and admin labels gone).
    deregister_keeps_node: bool
    # #754 (from its pull request): per-run `spurstepd` supervisors that outlive spurd.
    spurstepd: bool
    # #836 (from its pull request): health-check jobs `_spur-health.*` and their drains.
    health_checks: bool
    # #860 (merged after 0.11.0, from its pull request): NodeInfo.reason_uid, who set the
    # node's reason (the caller's uid from its JWT); a resume clears it.
    reason_uid: bool = False
    # #624 (33b65f6, main 2026-08-16, 0.9.0): a heartbeat timeout on an admin hold keeps
    # the hold's own reason. Before it (release v0.8.0 and older, cluster.rs
    # `apply_health_actions`, v0.8.0 l. 2311-2340) the reason becomes `Not responding`
    # and the lock is kept all the same.
    hold_keeps_reason: bool = True

    def knows(self, state: JobState) -> bool:
        """Whether this release's JobState has `state`."""
        return self.requeued_state or state is not JobState.REQUEUED

    def played(self, job: Job) -> Job:
        """`job` as this release can hold it: before #629 a requeued job is PENDING again."""
        if self.knows(job.state):
            return job
        return msgspec.structs.replace(job, state=JobState.PENDING)


V0_8_0 = SpurRelease(
    "v0.8.0",
    "0.8.0",
    nodes_filter=False,
    requeued_state=False,
    reclaim_arms=ARMS_580,
    deregister_keeps_node=False,
    spurstepd=False,
    health_checks=False,
    hold_keeps_reason=False,
)
# main at 4cc3da8 (2026-08-23), the newest commit read in source: #628, #629 and #623,
# and still the workspace version 0.8.0. What the simulated cluster always played.
MAIN_4CC3DA8 = SpurRelease(
    "main-4cc3da8",
    None,
    nodes_filter=True,
    requeued_state=True,
    reclaim_arms=ARMS_623,
    deregister_keeps_node=False,
    spurstepd=False,
    health_checks=False,
)
# 0.9.0 (2026-08-24) to 0.11: the filters and #623 released, the node removed on a
# graceful spurd stop.
V0_9_TO_0_11 = SpurRelease(
    "0.9-0.11",
    "0.11.0",
    nodes_filter=True,
    requeued_state=True,
    reclaim_arms=ARMS_623,
    deregister_keeps_node=False,
    spurstepd=False,
    health_checks=False,
)
# The newest: #754, #784, #836 and #860, read from their pull requests only.
NEWEST = SpurRelease(
    "newest",
    "0.12.0",
    nodes_filter=True,
    requeued_state=True,
    reclaim_arms=ARMS_623,
    deregister_keeps_node=True,
    spurstepd=True,
    health_checks=True,
    reason_uid=True,
)

SPUR_RELEASES = {r.name: r for r in (V0_8_0, MAIN_4CC3DA8, V0_9_TO_0_11, NEWEST)}


def as_received(release: SpurRelease, request: pb.GetJobsRequest) -> pb.GetJobsRequest:
    """`request` as `release`'s spurctld decodes it: an unknown field skipped (prost), an
    unknown state dropped (`filter_map(JobState::from_proto_i32)`). An empty `states`
    or `nodes` filters nothing, so `states=[REQUEUED]` alone asks for every job there."""
    if release.nodes_filter and release.requeued_state:
        return request
    seen = pb.GetJobsRequest()
    seen.CopyFrom(request)
    if not release.nodes_filter:
        seen.ClearField("nodes")
    if not release.requeued_state:
        kept = [s for s in seen.states if s != JobState.REQUEUED]
        seen.ClearField("states")
        seen.states.extend(kept)
    return seen
