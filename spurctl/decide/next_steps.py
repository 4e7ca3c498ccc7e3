"""What an audit's findings ask of the operator next, beyond a reclaim: the commands for
what reclaim cannot free (docs/contract.md "Findings").

- Ids from before a controller wipe (`above-watermark-unknown`, `id-reuse-suspected`) are
  freed only by recycling those nodes' agents: `spurctl checklist post-wipe` walks it. A
  wipe shows as an id reissued since, or as such ids on several nodes; one node holding
  an id from elsewhere is that node's to investigate (explain, a drain).
- A live holding spurctl can only investigate, or an agent orphan no CancelJob frees, keeps
  taking dispatches the node then rejects until it is drained: `spurctl drain` (which sets
  its drain only on a node's own name, as here).

Pure: the findings and the options that made the view in, next steps out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from spurctl.hostlist import fold
from spurctl.model import Action, Finding, Kind, NextStep

# A held id this controller never issued, or issued again since: a wiped controller's mark.
PRE_WIPE = frozenset({Kind.ABOVE_WATERMARK_UNKNOWN, Kind.ID_REUSE_SUSPECTED})
# Held where no agent cancel frees it (decide/drains.py drains these).
_NODE_RELEASE = frozenset({Kind.AGENT_ORPHAN, Kind.LEFTOVER})


def needs_drain(f: Finding) -> bool:
    """Whether `f` holds what spurctl cannot free now, so its node takes a drain
    (decide/drains.py drain_plan's test, before any cancel's outcome is known)."""
    if f.job_id is None:
        return False
    return f.kind in _NODE_RELEASE or (f.action is Action.INVESTIGATE and f.live is True)


def _nodes(findings: Iterable[Finding]) -> str:
    return fold(sorted({f.node for f in findings}))


def post_wipe_step(findings: Sequence[Finding], flags: Sequence[str]) -> NextStep | None:
    """`spurctl checklist post-wipe` of the nodes holding ids from before a wipe, or None."""
    pre = [f for f in findings if f.kind in PRE_WIPE]
    wiped = any(f.kind is Kind.ID_REUSE_SUSPECTED for f in pre) or len({f.node for f in pre}) > 1
    if not wiped:
        return None
    nodes = _nodes(pre)
    return NextStep.spurctl(
        "checklist", "post-wipe", "--nodes", nodes, *flags,
        why=f"Ids held on {nodes} are from before a controller wipe (or another controller) and "
        "no reclaim frees them: recycle the agents step by step with",
    )  # fmt: skip


def drain_step(findings: Sequence[Finding], flags: Sequence[str]) -> NextStep | None:
    """`spurctl drain` of the nodes holding what spurctl cannot free now, or None."""
    held = [f for f in findings if needs_drain(f)]
    if not held:
        return None
    nodes = _nodes(held)
    return NextStep.spurctl(
        "drain", "--node", nodes, *flags,
        why=f"Drain {nodes} so the scheduler stops dispatching there while what spurctl cannot "
        "free is looked into (it shows its plan and asks before it sends)",
    )  # fmt: skip


def beyond_reclaim(
    findings: Sequence[Finding], flags: Sequence[str], *, reclaiming: bool = False
) -> list[NextStep]:
    """The next steps for what reclaim cannot free: the post-wipe checklist, then a drain.
    `reclaiming`: a reclaim is the screen's next step, so the drain is left to `spurctl
    explain NODE` (which every such finding's node shows) and the screen stays one screen."""
    drain = None if reclaiming else drain_step(findings, flags)
    return [s for s in (post_wipe_step(findings, flags), drain) if s is not None]


def applying(step: NextStep) -> NextStep:
    """The command a dry run stands for, without `--dry-run`: what applies its plan."""
    return NextStep(tuple(w for w in step.argv if w != "--dry-run"), step.why, step.where)
