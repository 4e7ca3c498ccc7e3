"""What the controller says of a held id: its job whole, or a glance at it.

The view's record of the job, else GetJob's answer about it (`confirmed`); a
live view that has not converted a job yet offers its state, nodelist and
submit time (`ControllerView.glance`), enough to tell a plainly healthy holding.
"""

from __future__ import annotations

from collections.abc import Mapping

from spurctl.model import ControllerView, Job, JobGlance


def controller_job(
    view: ControllerView, confirmed: Mapping[int, Job | None], job_id: int
) -> tuple[Job | None, bool]:
    """The controller's job for a held id (None: untracked or unknown), and whether it
    came from GetJob (asked)."""
    job = view.jobs.get(job_id)
    if job is None and job_id in confirmed:
        return confirmed[job_id], True
    return job, False


def controller_glance(
    view: ControllerView, confirmed: Mapping[int, Job | None], job_id: int
) -> Job | JobGlance | None:
    """`controller_job`'s job, or only its state, nodelist and submit time when that is
    all a live view has read of it yet: enough to tell a plainly healthy holding."""
    glance = view.glance(job_id)
    if glance is None:
        return confirmed.get(job_id)
    return glance
