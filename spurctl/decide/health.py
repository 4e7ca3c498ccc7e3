"""Spur's node health checks (Spur #836): never reclaimed, repaired or undrained by spurctl.

Spur submits each configured check as an exclusive, whole-node job whose name
starts `_spur-health.`, and drains a node whose check fails, times out or starves
with a reason that starts `health-check(`: a sticky drain an operator (or the
check's own remediation) lifts. The health system owns both. So spurctl cancels
no health check's run, acts on no holding of a node a health check drained, and
every command that drains, resumes or repairs nodes asks `is_health_check_drain`
before it touches one. These two predicates are the one test for all of them
(docs/spur-facts.md, "Health checks").
"""

from __future__ import annotations

from spurctl.model import Job, Node

HEALTH_JOB_PREFIX = "_spur-health."
HEALTH_DRAIN_PREFIX = "health-check("


def is_health_check_job(name: str) -> bool:
    """A job Spur's health system submitted (its name starts `_spur-health.`)."""
    return name.startswith(HEALTH_JOB_PREFIX)


def is_health_check_drain(reason: str) -> bool:
    """A node state reason the health system wrote (it starts `health-check(`): whatever
    the node's state, spurctl neither lifts it nor replaces it."""
    return reason.lstrip().startswith(HEALTH_DRAIN_PREFIX)


def spare_reason(job: Job | None, node: Node | None, holder: str) -> str | None:
    """Why nothing may be freed for this holding: its job is a health check, or its node
    is held by the health system; None when neither."""
    if job is not None and is_health_check_job(job.name):
        return (
            f"job {job.job_id} ({job.name!r}) is a Spur health check (Spur #836), whose result "
            "drains or keeps the node: spurctl never frees one; it ends by its own time limit"
        )
    if node is not None and is_health_check_drain(node.state_reason):
        return (
            f"{holder} is {node.state.name} with reason {node.state_reason!r}, the health "
            "system's (Spur #836): spurctl acts on nothing of a node a health check holds; "
            "this stays until an operator or the check's remediation resolves it"
        )
    return None


def refused_send(job: Job | None) -> str | None:
    """reclaim's last re-check: why a cancel must not go out for `job` (the fresh GetJob)."""
    if job is not None and is_health_check_job(job.name):
        return (
            f"not sent: job {job.job_id} ({job.name!r}) is a Spur health check (Spur #836); "
            "spurctl never cancels one"
        )
    return None
