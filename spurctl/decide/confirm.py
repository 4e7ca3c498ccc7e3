"""Whether each sent cancel freed its node: judged by the node's re-collected inventory.

"Sent" is not "freed": spurd's CancelJob answers Ok for an id it does not track
while doing nothing (its running map does not survive a restart, Spur #803). A
sent cancel is confirmed only by a re-collect of its node that no longer shows
the job; until then it is sent and unconfirmed, and the next step is the audit
that re-collects those nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spurctl.decide.plan import Outcome, ReclaimRun, Result, confirmed
from spurctl.hostlist import fold
from spurctl.model import NextStep


def verify(
    run: ReclaimRun,
    held_now: Mapping[str, set[int]],
    settle: float,
    failed: Mapping[str, str] | None = None,
    waited: Mapping[tuple[str, int], float] | None = None,
) -> list[Outcome]:
    """Judge each SENT outcome by the node's re-collected inventory.

    Still held: FAILED. No inventory (the node is in `failed`, with why, or
    absent from `held_now`): UNCONFIRMED, since nothing shows the job gone.
    Gone: stays SENT, its detail saying the node confirmed it. `waited` is how
    long after the sends each (node, job) was last looked at (default `settle`),
    kept in the outcome's `waited_s`. Returns the outcomes whose result it changed.
    """
    failed = failed or {}
    waited = waited or {}
    changed = []
    for o in run.outcomes:
        if o.result is not Result.SENT:
            continue
        node, j = o.entry.node, o.entry.job_id
        after = waited.get((node, j), settle)
        if node in failed or node not in held_now:
            why = failed.get(node) or "no inventory came back"
            o.result = Result.UNCONFIRMED
            o.detail = (
                f"sent, but the re-collect of {node} failed ({why}), so nothing shows job "
                f"{j} gone; check the node"
            )
            changed.append(o)
            continue
        o.waited_s = after
        if j in held_now[node]:
            o.result = Result.FAILED
            if o.entry.finding.live is False:
                # spurd's CancelJob acts only on jobs in its running map; a job with no
                # process is not in it (docs/spur-facts.md, "The agent's CancelJob").
                o.detail = (
                    f"sent, but {node} still holds job {j} {after:g} s later and no process "
                    "of it runs: a leftover no further agent cancel removes (the next audit "
                    f"calls it leftover); free it on the node with `spurctl node-release`, as "
                    f"`spurctl explain {node} {j}` gives it"
                )
            else:
                o.detail = f"sent, but {node} still holds job {j} {after:g} s later; check the node"
            changed.append(o)
        else:
            o.detail = f"{o.detail}; confirmed: {node} no longer holds it {after:g} s later"
    return changed


def unconfirmed_nodes(run: ReclaimRun, verified: bool) -> list[str]:
    """The nodes of every sent cancel that no re-collect has shown freed."""
    return sorted({o.entry.node for o in run.outcomes if confirmed(o.result, verified) is False})


def confirm_step(nodes: Sequence[str], flags: Sequence[str] = ()) -> NextStep:
    """The audit that confirms from the nodes themselves that their cancels freed them:
    a re-collect of `nodes`, with the collect and controller options (`flags`) the run
    used."""
    return NextStep.spurctl(
        "audit",
        "--nodes",
        fold(nodes),
        "--collect",
        *flags,
        why="confirm from the nodes that the sent cancels freed them",
    )
