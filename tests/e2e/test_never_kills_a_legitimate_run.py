"""The first promise, as a property: `spurctl reclaim` never kills a legitimate run.

Over random clusters (jobs in every state, nodelists written with spaces and in
other case, nodes holding current runs, stale copies, pre-wipe runs and ids the
controller never tracked; agent maps that are right, that point one node at
another's agent, or that leave a node out; no credential, an admin's, root's or
a plain user's; a controller showing other users' jobs redacted, not at all or
in full, and a spur.conf that is absent, silent on it or states it), the real
CLI runs `reclaim --dry-run` and then `reclaim --yes` against the simulated
cluster, and:

- the dry run sends nothing, to any agent or to the controller;
- no cancel reaches the agent of a node where its job legitimately runs: active
  (RUNNING, COMPLETING, SUSPENDED) with the node in its nodelist as Spur reads it
  (each comma-separated part trimmed, exact names). What counts is the agent
  that RECEIVED the cancel (`AgentCancel.node`), whatever node spurctl meant;
- no cancel kills a holding that may be a pre-wipe run of an id the controller
  issued again: a held id the controller tracks, whose run has no start time or
  began before the job was submitted (contract: such a holding is `investigate`);
- a refused run (exit 2) sends nothing, the controller's cluster-wide CancelJob
  is never used, and the CLI never ends in a traceback.

An agent map that swaps two nodes' agents consistently is not generated: no
address in it is shared or names another node's agent as the map itself knows
them, and Spur's agent cannot say whose it is, so no client can tell it from a
right map.

Reproducible in CI (derandomized, no example database). A failure prints the
(shrunk) cluster, every offending cancel and the CLI's output. Shrinking runs
the CLI too, so it stops trying new candidates once the test has run for
SHRINK_BUDGET_S after the first failure and reports the smallest failing cluster found by then.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import strategies as st

from spurctl.model import Job, JobState, utcnow
from spurctl.sources import credentials as auth
from spurctl.sources.controller import ControllerClient
from spurctl.sources.settings import Connection
from spurctl_sim import SimCluster
from spurctl_sim.controller_service import VISIBILITIES
from spurctl_sim.random_scenarios import (
    USERS,
    ClusterSpec,
    HoldSpec,
    JobSpec,
    MapEntry,
    Started,
    agent_map_of,
    hold_specs,
    legitimately_on,
    scenario_of,
    spur_conf_text,
    spur_nodes,
)
from spurctl_sim.scenario_parts import hostlist
from tests.cli import run_cli
from tests.live import KEY

MAX_EXAMPLES = 25
CLI_TIMEOUT_S = 30  # one reclaim of at most 8 nodes takes about a second
SHRINK_BUDGET_S = 30
UNTRACKED_BELOW = (4001, 4002)  # issued, finished, aged out of the controller's map
NEXT_JOB_ID = 6000
ABOVE_WATERMARK = 6001  # never issued by this controller
STATES = (
    JobState.RUNNING,
    JobState.COMPLETING,
    JobState.SUSPENDED,
    JobState.COMPLETED,
    JobState.FAILED,
    JobState.CANCELLED,
    JobState.PENDING,
    JobState.REQUEUED,
    JobState.PREEMPTED,
)
STARTS: tuple[Started, ...] = ("current", "earlier", "none", "pre_wipe")
# Subjects: no credential, an admin by claim, root (admin by name), a plain user.
CREDENTIALS = ("none", "ops", "root", "alice")


# -- generating clusters -------------------------------------------------------------


@st.composite
def nodelist_text(draw: st.DrawFn, on: list[str]) -> str:
    """`on` as an operator or a controller might have written it: folded or a comma list,
    with spaces around its parts and, now and then, in capitals."""
    if not on:
        return ""
    numbers = [int(n[3:]) for n in on]
    parts = [hostlist("gpu", numbers, 3)] if draw(st.booleans()) else sorted(on)
    pad = st.sampled_from(["", " ", "  "])
    text = ",".join(f"{draw(pad)}{p}{draw(pad)}" for p in parts)
    return text.upper() if draw(st.integers(0, 4)) == 4 else text


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSpec:
    nodes = tuple(f"gpu{i:03d}" for i in range(1, draw(st.integers(3, 8)) + 1))
    jobs = []
    for k in range(draw(st.integers(1, 5))):
        state = draw(st.sampled_from(STATES))
        ran = state.active or state.terminal
        # An active job with no nodes is one whose allocation is not committed yet.
        on = draw(
            st.lists(st.sampled_from(nodes), min_size=int(state.terminal), max_size=2, unique=True)
            if ran
            else st.just([])
        )
        user = draw(st.sampled_from(sorted(USERS)))
        jobs.append(JobSpec(5001 + k, state, user, draw(nodelist_text(on))))

    holds = []
    for job in jobs:  # the legitimate runs, usually held where they run
        if job.state.active:
            for node in sorted(spur_nodes(job.nodelist) & set(nodes)):
                if draw(st.integers(0, 5)) != 5:
                    started: Started = draw(st.sampled_from(("current", "none")))
                    holds.append(HoldSpec(node, job.job_id, True, started))
    ids = [j.job_id for j in jobs] + [*UNTRACKED_BELOW, ABOVE_WATERMARK]
    for node, job_id, live, started in draw(
        st.lists(
            st.tuples(
                st.sampled_from(nodes),
                st.sampled_from(ids),
                st.booleans(),
                st.sampled_from(STARTS),
            ),
            max_size=8,
        )
    ):
        holds.append(HoldSpec(node, job_id, live, started))

    host = st.sampled_from(["127.0.0.1", "localhost"])
    entries = {n: MapEntry(n, n, draw(host)) for n in nodes}
    wrong = draw(st.sampled_from(["right", "points at another's agent", "leaves a node out"]))
    if wrong == "points at another's agent":
        a = draw(st.sampled_from(nodes))
        b = draw(st.sampled_from([n for n in nodes if n != a]))
        entries[a] = MapEntry(a, b, draw(host))
    elif wrong == "leaves a node out":
        del entries[draw(st.sampled_from(nodes))]

    renamed = draw(st.lists(st.sampled_from(nodes), max_size=1))
    return ClusterSpec(
        nodes=nodes,
        jobs=tuple(jobs),
        holds=hold_specs(holds),
        agent_map=tuple(entries.values()),
        credential=draw(st.sampled_from(CREDENTIALS)),
        visibility=draw(st.sampled_from(VISIBILITIES)),
        conf=draw(st.sampled_from(("stated", "no_key", "absent"))),
        inventory_names=tuple(
            (n, draw(st.sampled_from([n.upper(), f"{n}.cluster"]))) for n in renamed
        ),
        next_job_id=NEXT_JOB_ID,
    )


def _plain_map(nodes: tuple[str, ...]) -> tuple[MapEntry, ...]:
    return tuple(MapEntry(n, n) for n in nodes)


NODES3 = ("gpu001", "gpu002", "gpu003")
# The issue's cases, each the smallest cluster that shows it.
WRONG_AGENT_MAP = ClusterSpec(
    nodes=NODES3,
    jobs=(JobSpec(5001, JobState.RUNNING, "bob", "gpu002"),),
    holds=(HoldSpec("gpu001", 5001, True, "earlier"), HoldSpec("gpu002", 5001, True, "current")),
    agent_map=(MapEntry("gpu001", "gpu002"), *_plain_map(NODES3)[1:]),
    credential="root",
    visibility="redacted",
    conf="stated",
    next_job_id=NEXT_JOB_ID,
    notes=("wrong agent map: gpu001's stale copy's cancel goes to gpu002's agent",),
)
OWNER_ONLY_NOT_FOUND = ClusterSpec(
    nodes=NODES3,
    jobs=(
        JobSpec(5001, JobState.RUNNING, "bob", "gpu002"),
        JobSpec(5002, JobState.PENDING, "alice", ""),
    ),
    holds=(HoldSpec("gpu002", 5001, True, "current"),),
    agent_map=_plain_map(NODES3),
    credential="alice",
    visibility="owner_only",
    conf="no_key",
    next_job_id=NEXT_JOB_ID,
    notes=("scoped credential: alice's GetJob of bob's job answers NOT_FOUND",),
)
NODELIST_WITH_A_SPACE = ClusterSpec(
    nodes=NODES3,
    jobs=(JobSpec(5001, JobState.RUNNING, "bob", "gpu002 "),),
    holds=(HoldSpec("gpu002", 5001, True, "current"),),
    agent_map=_plain_map(NODES3),
    credential="root",
    visibility="redacted",
    conf="stated",
    next_job_id=NEXT_JOB_ID,
    notes=("nodelist with a space: the nodelist is 'gpu002 '",),
)
NO_STARTED_AT = ClusterSpec(
    nodes=NODES3,
    jobs=(JobSpec(5001, JobState.RUNNING, "bob", "gpu002"),),
    holds=(HoldSpec("gpu001", 5001, True, "none"), HoldSpec("gpu002", 5001, True, "current")),
    agent_map=_plain_map(NODES3),
    credential="root",
    visibility="redacted",
    conf="stated",
    next_job_id=NEXT_JOB_ID,
    notes=("no start time: gpu001's run of 5001 has no start time (a pre-wipe run?)",),
)


# -- running one cluster ----------------------------------------------------------------


def _token(subject: str) -> str | None:
    if subject == "none":
        return None
    return auth.mint(
        KEY, subject, uid=USERS.get(subject, 0), admin=subject == "ops", lifetime_s=300
    )


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _intents(journal: Path) -> set[tuple[str, int]]:
    """(node, job id) of every cancel the journal says spurctl meant to send."""
    if not journal.exists():
        return set()
    out = set()
    for line in journal.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") == "intent":
            out.add((str(rec.get("node")), int(rec.get("job_id", 0))))
    return out


def _likely_cause(spec: ClusterSpec, node: str, job_id: int, meant: set[tuple[str, int]]) -> str:
    """Which known hole a bad cancel most likely went through, in words."""
    if (node, job_id) not in meant:
        aimed = sorted(n for n, j in meant if j == job_id) or ["no node in the journal"]
        return (
            f"spurctl meant it for {', '.join(aimed)}: the agent map sent it to {node}'s agent "
            "(likely a wrong agent map)"
        )
    held = next((h for h in spec.holds if (h.node, h.job_id) == (node, job_id)), None)
    job = next((j for j in spec.jobs if j.job_id == job_id), None)
    causes = []
    if job is not None and " " in job.nodelist:
        causes.append("a nodelist with spaces")
    if (
        job is not None
        and spec.credential == "alice"
        and job.user != "alice"
        and spec.visibility == "owner_only"
        and spec.conf != "stated"
    ):
        causes.append("NOT_FOUND from a non-admin credential under owner_only")
    if held is not None and held.started == "none":
        causes.append("a holding without started_at")
    return "likely " + " or ".join(causes) if causes else "cause not one of the known"


def _check(spec: ClusterSpec) -> list[str]:
    """Run the dry run and the real reclaim on `spec`'s cluster; every broken promise, in words."""
    now = utcnow()
    problems: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="spurctl-property-") as tmp,
        SimCluster(
            scenario_of(spec, now),
            job_info_visibility=spec.visibility,
            auth="permissive",
            agent_auth="required",
            jwt_key=KEY,
        ) as sim,
    ):
        d = Path(tmp)
        inventory = sim.write_inventories(d / "inventory.jsonl")
        agents = d / "agents.json"
        agents.write_text(json.dumps(agent_map_of(spec, sim.agent_map())))
        key = d / "jwt.key"
        key.write_text(KEY)
        key.chmod(0o600)
        args = [
            "reclaim",
            "--controller", sim.controller_address,
            "--node", hostlist("gpu", range(1, len(spec.nodes) + 1), 3),
            "--inventory", str(inventory),
            "--agent-map", str(agents),
            "--jwt-key-file", str(key),
            "--journal", str(d / "journal.jsonl"),
            "--timeout", "5",
        ]  # fmt: skip
        conf = spur_conf_text(spec)
        if conf is not None:
            (d / "spur.conf").write_text(conf)
            args += ["--conf", str(d / "spur.conf")]
        token = _token(spec.credential)
        env = {"SPUR_AUTH_TOKEN": token} if token else {}
        jobs = {j.job_id: j for j in scenario_of(spec, now).jobs}
        holds = {(h.node, h.job_id): h for h in spec.holds}

        def ran(label: str, *extra: str) -> tuple[int, str]:
            proc = run_cli(*args, *extra, home=d / "home", env=env, timeout=CLI_TIMEOUT_S)
            output = (
                f"--- {label}: exit {proc.returncode}\n{_tail(proc.stdout)}\n{_tail(proc.stderr)}"
            )
            if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
                problems.append(f"{label} ended in an internal error (exit {proc.returncode})")
            return proc.returncode, output

        code, dry_output = ran("reclaim --dry-run", "--dry-run")
        if sim.cancels or sim.controller_cancels:
            problems.append(
                f"the dry run sent {[(c.node, c.job_id) for c in sim.cancels]} to agents and "
                f"{[c.job_id for c in sim.controller_cancels]} to the controller"
            )
        sim.cancels.clear()
        code, output = ran("reclaim --yes", "--yes")
        if code == 2 and sim.cancels:
            problems.append(f"the run was refused (exit 2) yet sent {len(sim.cancels)} cancel(s)")
        if sim.controller_cancels:
            problems.append("the controller's cluster-wide CancelJob was used")
        meant = _intents(d / "journal.jsonl")
        for c in sim.cancels:
            job = jobs.get(c.job_id)
            held = holds.get((c.node, c.job_id))
            if legitimately_on(job, c.node):
                assert job is not None
                problems.append(
                    f"KILLED A LEGITIMATE RUN: the cancel of job {c.job_id} reached {c.node}'s "
                    f"agent, and the job is {job.state.name} there (nodelist {job.nodelist!r}); "
                    + _likely_cause(spec, c.node, c.job_id, meant)
                )
            elif job is not None and held is not None and held.started in ("none", "pre_wipe"):
                why = "no start time" if held.started == "none" else "a start before its submission"
                problems.append(
                    f"KILLED A POSSIBLE PRE-WIPE RUN: the cancel of job {c.job_id} reached "
                    f"{c.node}'s agent, whose run of it has {why}, while the controller "
                    f"tracks job {c.job_id} ({job.state.name}); "
                    + _likely_cause(spec, c.node, c.job_id, meant)
                )
        if problems:
            sent = ", ".join(f"{c.job_id} -> {c.node}'s agent" for c in sim.cancels) or "none"
            problems.append(f"cancels received: {sent}\n{dry_output}\n{output}")
    return problems


def _verdict(spec: ClusterSpec, problems: list[str]) -> str:
    return "\n".join(
        ["reclaim broke its first promise on this cluster:", spec.describe(), "", *problems]
    )


# -- the issue's cases, then the property ------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(WRONG_AGENT_MAP, id="item1-wrong-agent-map"),
        pytest.param(OWNER_ONLY_NOT_FOUND, id="item2-owner-only-not-found"),
        pytest.param(NODELIST_WITH_A_SPACE, id="item3-nodelist-with-a-space"),
        pytest.param(NO_STARTED_AT, id="item4-no-started-at"),
    ],
)
def test_the_issue_cases_kill_no_legitimate_run(spec: ClusterSpec) -> None:
    problems = _check(spec)
    assert not problems, _verdict(spec, problems)


# -- the property ----------------------------------------------------------------------

_first_failure: list[float] = []  # when the first failing cluster was seen
_failing: set[ClusterSpec] = set()


@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    # No explain phase: it re-runs the CLI to list code lines; the printed cluster says more.
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(clusters())
def test_reclaim_never_kills_a_legitimate_run(spec: ClusterSpec) -> None:
    out_of_time = _first_failure and time.monotonic() - _first_failure[0] > SHRINK_BUDGET_S
    if out_of_time and spec not in _failing:
        reject()  # shrinking out of time: report the smallest failing cluster found so far
    problems = _check(spec)
    if problems:
        _failing.add(spec)
        _first_failure[:1] = _first_failure[:1] or [time.monotonic()]
    assert not problems, _verdict(spec, problems)


# -- the simulation the property relies on ------------------------------------------------


def test_the_simulated_controller_shows_other_users_jobs_as_job_info_visibility_says() -> None:
    """GetJob of bob's running job: redacted, NOT_FOUND or whole for alice; whole for admins."""
    spec = dataclasses.replace(OWNER_ONLY_NOT_FOUND, visibility="redacted")
    answers: dict[tuple[str, str], Job | None] = {}
    for visibility in VISIBILITIES:
        with SimCluster(
            scenario_of(spec, utcnow()),
            job_info_visibility=visibility,
            auth="permissive",
            jwt_key=KEY,
        ) as sim:
            for subject in CREDENTIALS:
                conn = Connection((sim.controller_address,), token=_token(subject), timeout=5.0)
                with ControllerClient(conn) as client:
                    answers[visibility, subject] = client.get_job(5001)
    for (shown, subject), job in answers.items():
        if subject == "alice" and shown == "owner_only":
            assert job is None, (shown, subject)
        elif subject == "alice" and shown == "redacted":
            assert job is not None and job.nodelist == "", (shown, subject, job)
        else:
            assert job is not None and job.nodelist == "gpu002", (shown, subject, job)
