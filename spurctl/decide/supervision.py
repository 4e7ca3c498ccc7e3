"""Runs spurd adopts after a restart: those under a live spurstepd supervisor (Spur #754).

spurd hands each job step to a supervisor, double-forked so that it outlives
spurd, and a restarted spurd re-reads every session whose supervisor still runs
(the pid and start ticks in its descriptor.json) and adopts it. So "began before
the current spurd" proves no orphan for such a run: spurd tracks it again, node-release
must leave it to spurd, and restarting spurd does not end it. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from spurctl.holdings import Holding, SessionBinding
from spurctl.model import NextStep

# crates/spur-core/src/step.rs: the reserved step ids, as Slurm names them.
_STEP_NAMES = {0xFFFF_FFFE: "batch", 0xFFFF_FFFD: "extern", 0xFFFF_FFFC: "interactive"}


def step_name(step: int) -> str:
    """'batch', 'extern', 'interactive', or a numbered srun step's number."""
    return _STEP_NAMES.get(step, str(step))


def _pids(pids: Iterable[int]) -> str:
    return " ".join(str(p) for p in sorted(pids))


def adopted(holding: Holding) -> str | None:
    """Why spurd adopts `holding`'s run after a restart; None when nothing says it does.

    A live session (its descriptor's pid runs with the start ticks it records) is
    what spurd itself reads; a spurstepd process tied to the job otherwise (its
    cgroup, environment or an ancestor of the job's processes) is the weaker sign.
    """
    live = [s for s in holding.sessions if s.binding is SessionBinding.LIVE]
    if live:
        which = ", ".join(
            f"attempt {s.attempt} step {step_name(s.step)}: supervisor {s.supervisor}" for s in live
        )
        return (
            f"a live spurstepd session binds it ({which}, running with the start its "
            "descriptor.json records), and spurd adopts every live session when it starts "
            "(Spur #754)"
        )
    if holding.supervisors:
        return (
            f"it runs under spurstepd supervisor {_pids(holding.supervisors)}, whose runs "
            "spurd adopts after a restart (Spur #754)"
        )
    return None


def not_an_orphan(holding: Holding, holder: str, agent_started: str) -> str:
    """The agent-orphan verdict's replacement for an adopted run (`adopted` said why)."""
    j = holding.job_id
    return (
        f"{holder}'s run of job {j} began before its spurd started at {agent_started}, but "
        f"{adopted(holding)}, so it is not called an agent orphan; "
        "whether this spurd adopted it cannot be read on the node: check spurd's log "
        "before reclaiming"
    )


def release_commands(node: str, runs: Iterable[tuple[int, str | None]]) -> list[NextStep]:
    """The post-wipe checklist's note for each adopted pre-wipe run (job id, why adopted):
    node-release refuses it and a restarted spurd adopts it again, so it is waited out:
    no command, only why."""
    return [
        NextStep(
            (),
            f"{node}: job {j} is adopted across spurd restarts ({why}): node-release refuses "
            "it and restarting spurd does not end it; wait it out",
        )
        for j, why in runs
        if why is not None
    ]


def outlived(runs: Iterable[tuple[int, str | None]]) -> str:
    """The post-wipe checklist's note on pre-wipe runs a spurd restart does not end: each
    (job id, why spurd adopts it, or None for a run that merely outlived its restart);
    "" when there is none."""
    runs = list(runs)
    orphans = ", ".join(str(j) for j, why in runs if why is None)
    adopted = ", ".join(str(j) for j, why in runs if why is not None)
    out = ""
    if orphans:
        out += (
            f"; {orphans} outlived spurd's restart, which no longer tracks it: free it on the "
            "node with `spurctl node-release`"
        )
    if adopted:
        out += (
            f"; {adopted} runs under a live spurstepd supervisor, which a restarted spurd "
            "adopts again (Spur #754): node-release refuses it, so wait it out"
        )
    return out
