"""What the controller says of a held id: its job whole, or a glance at it.

The view's record of the job, else GetJob's answer about it (`confirmed`); a
live view that has not converted a job yet offers its state, nodelist and
submit time (`ControllerView.glance`), enough to tell a plainly healthy holding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

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


def glances(
    view: ControllerView, confirmed: Mapping[int, Job | None]
) -> Callable[[int], Job | JobGlance | None]:
    """A function of a held id: `controller_job`'s job, or only its state, nodelist and
    submit time when that is all a live view has read of it yet (`ControllerView.glance`),
    enough to tell a plainly healthy holding. Made once per audit and asked once per
    holding: the view's look-up is found once, not through two calls per holding."""
    # As ControllerView.glance: only a JobTable has `glance` (no isinstance against an ABC).
    table_glance = getattr(view.jobs, "glance", None)
    look: Callable[[int], Job | JobGlance | None] = (
        view.jobs.get if table_glance is None else table_glance
    )
    if not confirmed:
        return look

    def glance(job_id: int) -> Job | JobGlance | None:
        found = look(job_id)
        return confirmed.get(job_id) if found is None else found

    return glance
