"""After a controller wipe, the ordered steps that recycle the agents, and in a verify
pass which of them now hold (spurctl/decide/post_wipe.py judges the held ids and the
nodes). Each step's commands are NextSteps; render/checklist.py makes text of them.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime

from spurctl import hostlist
from spurctl.decide import supervision
from spurctl.decide.post_wipe import (
    AFTER_FILE,
    DRAIN_REASON,
    OUT_OF_SERVICE,
    Assessment,
    Checklist,
    NodeAssessment,
    Step,
    StepId,
)
from spurctl.model import NextStep, NodeState, format_time


def _scontrol(*words: str) -> NextStep:
    return NextStep(("scontrol", "update", *words))


def _fold(names: Iterable[str]) -> str:
    return hostlist.fold(sorted(names))


def _node_state(a: NodeAssessment) -> NodeState | None:
    return a.controller_node.state if a.controller_node else None


def _restarted(a: NodeAssessment, wiped_by: datetime | None) -> tuple[bool, str]:
    """Whether the node's own spurd started after the wipe, by its inventory's `agent`.

    Never by the controller's slurmd_start_time: a crash restart leaves it unchanged
    (a graceful one before Spur #784 renews it with a fresh node record).
    """
    if not a.inventoried:
        return False, "not inventoried"
    if a.agent is None:
        if a.agent_checked:
            return False, "no spurd runs on it (its inventory found none): start it"
        return False, (
            "restart not proven: its inventory records no spurd start time; collect it with "
            "`spurctl node-inventory`, which records the agent"
        )
    started = a.agent.started_at
    if started is None:
        return False, (
            f"restart not proven: its inventory records spurd (pid {a.agent.pid}) without a "
            "start time; re-collect it with `spurctl node-inventory`"
        )
    if wiped_by is None:
        return False, (
            f"restart not proven: spurd started {format_time(started)}, but the controller "
            "tracks no job whose submission dates the wipe; check by hand"
        )
    if started < wiped_by:
        return False, (
            f"agent not restarted since the wipe: spurd started {format_time(started)}, "
            f"before the controller's first tracked submission ({format_time(wiped_by)})"
        )
    return True, ""


def _stopped(a: NodeAssessment) -> tuple[bool, str]:
    """Whether no pre-wipe run (no hazard) remains on the node."""
    if not a.inventoried:
        return False, f"not inventoried ({a.error})"
    if not a.hazards:
        return True, ""
    runs = ", ".join(f"{h.job_id} ({h.hazard.value})" for h in a.hazards)
    why = f"still holds {runs}"
    agent = a.agent.started_at if a.agent is not None else None
    outlived = [h for h in a.hazards if agent is not None and h.started_at and h.started_at < agent]
    left = [(h.job_id, h.adopted) for h in a.hazards if h.adopted or h in outlived]
    return False, why + supervision.outlived(left)


def _release_commands(a: NodeAssessment) -> list[NextStep]:
    """On-node commands that stop each pre-wipe run, checked against its id and start."""
    out = supervision.release_commands(a.node, [(h.job_id, h.adopted) for h in a.hazards])
    for h in a.hazards:
        if h.adopted is not None:
            continue
        if h.started_at is None:
            why = (
                f"{a.node}: job {h.job_id}'s start is unknown; read it with "
                "`spurctl node-inventory` there, then node-release it"
            )
            out.append(NextStep((), why))
            continue
        when = format_time(h.started_at) or ""
        release = ("node-release", "--job", str(h.job_id), "--started-at", when)
        out.append(NextStep.spurctl(*release, where=a.node))
    return out


def _clean(a: NodeAssessment) -> tuple[bool, str]:
    if not a.inventoried:
        return False, f"not inventoried ({a.error})"
    if a.hazards:
        ids = ", ".join(f"{h.job_id} ({h.hazard.value})" for h in a.hazards)
        return False, f"still holds {ids}"
    if a.undetermined:
        ids = ", ".join(str(h.job_id) for h in a.undetermined)
        return False, f"holds {ids}, undetermined: check by hand"
    return True, ""


def _grouped(failures: Mapping[str, str]) -> str:
    """'gpu[001-002]: still holds ...; gpu005: not inventoried': nodes grouped by why."""
    by_why: dict[str, list[str]] = {}
    for node, why in failures.items():
        by_why.setdefault(why, []).append(node)
    groups = sorted(by_why.items(), key=lambda item: min(item[1]))
    return "; ".join(f"{_fold(nodes)}: {why}" for why, nodes in groups)


def build_steps(
    assessment: Assessment,
    nodes: Sequence[str],
    *,
    verify: bool,
    collect_flags: Sequence[str] = (),
    read_flags: Sequence[str] = (),
) -> list[Step]:
    """The seven steps for `nodes`; with `verify`, each checkable one ticked when it holds.
    The spurctl commands carry `collect_flags` (collect) and `read_flags` (checklist)."""
    nodes = tuple(sorted(nodes))
    if not nodes:
        return []
    hl = _fold(nodes)
    judged = [assessment.nodes[n] for n in nodes]

    # Per node, why each checkable step is not done yet (absent: done).
    not_clean: dict[str, str] = {}
    not_stopped: dict[str, str] = {}
    not_restarted: dict[str, str] = {}
    not_drained: dict[str, str] = {}
    still_drained: dict[str, str] = {}
    for a in judged:
        ok, why = _clean(a)
        if not ok:
            not_clean[a.node] = why
        ok, why = _stopped(a)
        if not ok:
            not_stopped[a.node] = why
        ok, why = _restarted(a, assessment.wiped_by)
        if not ok:
            not_restarted[a.node] = why
        state = _node_state(a)
        if state is None:
            not_drained[a.node] = "the controller has no such node"
        elif state in OUT_OF_SERVICE:
            still_drained[a.node] = f"controller shows {state.name}"
        else:
            not_drained[a.node] = f"controller shows {state.name}"
    clean = not not_clean

    partitions = assessment.partitions
    counter = (
        "the job counter is cluster-wide, so a submission to any partition brings the "
        "controller closer to reissuing a held id"
    )
    by_hand = "confirm by hand (Spur exposes no partition state over the RPCs spurctl uses)"
    if partitions:
        stop_cmds = tuple(_scontrol(f"PartitionName={p}", "State=DRAIN") for p in partitions)
        resume_cmds = tuple(_scontrol(f"PartitionName={p}", "State=UP") for p in partitions)
        which = (
            f"drain every partition ({', '.join(partitions)}), not only those of the nodes to "
            f"recycle: {counter}"
        )
    else:
        stop_cmds = resume_cmds = ()
        which = f"the controller reports no partition, so do it by hand: {counter}"

    if not verify:
        drain = (False, "so that no new work lands on them while their agents are recycled")
        stop = (
            False,
            "before spurd restarts: its runs' processes and cgroups outlive a restart, after "
            "which spurd no longer tracks them and its CancelJob frees nothing; let each run "
            "finish, or stop it on its node (`spurctl node-release`, checked against the run's "
            "id and start; it refuses a run spurd still tracks: wait that one out); never "
            "scancel these ids, the controller's job with that id is another run",
        )
        restart = (
            False,
            "once no pre-wipe run is left: a restarted spurd forgets the pre-wipe "
            "reservations; proven only by spurd's start time in the node's inventory, never "
            "by the controller's slurmd_start_time: a crash restart keeps it, a graceful one "
            "before Spur #784 renews it and drops the node's drain (drain it again)",
        )
        check = (False, "re-inventory them and re-read the controller; this ticks what is done")
        resume = (False, "only once their inventories are clean")
    else:
        if not not_drained:
            drain = (True, "the controller shows every one DRAIN, DRAINING or DOWN")
        elif clean:
            drain = (True, "back in service and no longer needed: their inventories are clean")
        else:
            drain = (False, "not yet: " + _grouped(not_drained))
        stop = (
            (True, "no pre-wipe run is left on them")
            if not not_stopped
            else (False, "not yet: " + _grouped(not_stopped))
        )
        restart = (
            (
                True,
                "each node's spurd started after the wipe, by the start time its inventory shows",
            )
            if not not_restarted
            else (False, "not yet: " + _grouped(not_restarted))
        )
        check = (
            (True, "no node holds a pre-wipe id")
            if clean
            else (False, "not yet: " + _grouped(not_clean))
        )
        if not clean:
            resume = (False, "not yet: their inventories are not clean")
        elif still_drained:
            resume = (False, "not yet: " + _grouped(still_drained))
        else:
            resume = (True, "back in service with clean inventories")

    def step(
        sid: StepId, title: str, commands: Iterable[NextStep], state: tuple[bool, str]
    ) -> Step:
        return Step(sid, title, nodes, tuple(commands), state[0], True, state[1])

    return [
        Step(
            StepId.STOP_SUBMISSIONS,
            "Stop submissions",
            nodes,
            stop_cmds,
            False,
            False,
            f"{which}; {by_hand}",
        ),
        step(
            StepId.DRAIN_NODES,
            "Drain the nodes to recycle",
            [_scontrol(f"NodeName={hl}", "State=DRAIN", f"Reason={DRAIN_REASON}")],
            drain,
        ),
        step(
            StepId.STOP_RUNS,
            "Stop or wait out their pre-wipe runs",
            [c for a in judged for c in _release_commands(a)],
            stop,
        ),
        step(
            StepId.RESTART_AGENTS,
            "Restart spurd on them",
            [NextStep(("clush", "-w", hl, "systemctl", "restart", "spurd"))],
            restart,
        ),
        step(
            StepId.VERIFY_INVENTORIES,
            "Verify their inventories hold no hazard",
            [
                NextStep.spurctl("collect", "--nodes", hl, *collect_flags, "-o", AFTER_FILE),
                NextStep.spurctl(
                    "checklist",
                    "post-wipe",
                    "--verify",
                    "--nodes",
                    hl,
                    "--inventory",
                    AFTER_FILE,
                    *read_flags,
                ),
            ],
            check,
        ),
        step(
            StepId.RESUME_NODES,
            "Resume the nodes",
            [_scontrol(f"NodeName={hl}", "State=RESUME")],
            resume,
        ),
        Step(
            StepId.RESUME_SUBMISSIONS,
            "Resume submissions",
            nodes,
            resume_cmds,
            False,
            False,
            f"only once every box above is ticked; {by_hand}",
        ),
    ]


def build(
    assessment: Assessment,
    *,
    verify_nodes: Collection[str] | None = None,
    collect_flags: Sequence[str] = (),
    read_flags: Sequence[str] = (),
) -> Checklist:
    """The plan (`verify_nodes` None: for the nodes to recycle) or a verify pass over them;
    its printed commands carry `collect_flags` and `read_flags` (Checklist)."""
    verify = verify_nodes is not None
    nodes = tuple(sorted(verify_nodes)) if verify_nodes is not None else assessment.nodes_to_recycle
    steps = build_steps(
        assessment, nodes, verify=verify, collect_flags=collect_flags, read_flags=read_flags
    )
    return Checklist(
        assessment, tuple(nodes), steps, verify, tuple(collect_flags), tuple(read_flags)
    )
