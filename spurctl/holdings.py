"""What node agents hold: a node's inventory (`spurctl.inventory/v1`) and its records.

The node scan (node/node_scan.py, also shipped to a node as one standard-library
program: node/shipped_scan.py) builds these; the inventory documents
(sources/inventory_document.py) read and write them; decide/ weighs each holding
against the controller's view (model.py), which is the other half of what spurctl
reasons about. They are the node's side, apart from model.py (the controller's side
and the findings), which still offers Holding, Inventory and AgentProcess because
most of spurctl imports them from there. This module imports nothing from spurctl,
so model.py can import it without a cycle, and the shipped scanner can stand in for
it with plain records.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

import msgspec

# JobInfo.job_id is a uint32 on the wire: a larger id can name no Spur job.
MAX_JOB_ID = 2**32 - 1

# The bounds an inventory document's holding is read with (sources/inventory_document.py
# decodes a document's holdings straight into Holding): declared on the fields, checked
# only when a document is decoded, never when a Holding is built.
_Count = Annotated[int, msgspec.Meta(ge=0)]
_JobId = Annotated[int, msgspec.Meta(ge=0, le=MAX_JOB_ID)]
_Name = Annotated[str, msgspec.Meta(min_length=1)]


class SessionBinding(enum.StrEnum):
    """What /proc says of a spurstepd descriptor's pid and start ticks."""

    LIVE = "live"  # that process runs: the run's supervisor (Spur #754)
    STALE = "stale"  # gone, or the pid now names another process: the supervisor died


class Session(msgspec.Struct, frozen=True, gc=False):
    """One spurstepd session of a held job: `<state-dir>/runtime/<job>.<attempt>.<step>/
    descriptor.json` (Spur #754), bound to /proc by the pid and start ticks it records."""

    attempt: int
    step: int
    supervisor: int  # the descriptor's pid: spurstepd itself
    binding: SessionBinding
    why: str = ""  # stale: what /proc shows in the supervisor's place
    workload: int | None = None  # the workload's pid, when it runs with its recorded start
    cgroup: str = ""  # the cgroup the descriptor records ("" for an allocation-only job)


class SessionRefusal(msgspec.Struct, frozen=True, gc=False):
    """A session descriptor whose binding could not be trusted, and what was seen."""

    path: str  # the session directory
    why: str
    job_id: int | None = None  # from the directory name, when it reads as one
    attempt: int | None = None
    step: int | None = None


# A msgspec Struct, built in C: an inventory file of 10,000 nodes holds ~50,000.
class Holding(msgspec.Struct, gc=False):
    """One job a node agent holds, as its node inventory saw it. Treat as read-only."""

    job_id: _JobId
    cpus: _Count | None = None
    memory_mb: _Count | None = None
    gpus: tuple[_Count, ...] = ()
    pids: tuple[_Count, ...] = ()
    started_at: datetime | None = None
    # The run's attempt: its live spurstepd session's, else its `job_<id>_<attempt>`
    # cgroup's (newer spurd); None for `job_<id>`, no cgroup, or sessions that disagree.
    attempt: _Count | None = None
    # What showed the holding on the node: HOLDING_TRACES (empty: not recorded).
    traces: tuple[_Name, ...] = ()
    # Of `pids`, those descended from the node's current spurd: its own run of the job
    # (after a graceful restart a requeued run shares the cgroup with the old one's orphans).
    tracked_pids: tuple[_Count, ...] = ()
    # Live `spurstepd` supervisors of the job (Spur #754): spurd adopts their runs.
    supervisors: tuple[_Count, ...] = ()
    # Its spurstepd sessions, live and stale (Spur #754): the strongest binding of a run.
    sessions: tuple[Session, ...] = ()

    @property
    def live(self) -> bool:
        """A process of this job is still running on the node."""
        return bool(self.pids)


@dataclass(slots=True)  # not frozen, as Holding
class Inventory:
    """What one node holds (`spurctl.inventory/v1`); `error` set when it could not be read.
    Treat as read-only."""

    node: str
    collected_at: datetime | None
    source: str
    error: str | None = None
    held: tuple[Holding, ...] = ()
    # Written by `spurctl node-inventory`; None/empty in older documents.
    agent: AgentProcess | None = None
    hostname: str | None = None
    # The SPUR_TARGET_NODE every job process carries, when they all agree.
    target_node: str | None = None
    # Every distinct SPUR_TARGET_NODE seen (more than one: the processes disagree).
    target_nodes: tuple[str, ...] = ()
    # True when the scan looked for spurd: `agent` None then means none runs.
    agent_checked: bool = False
    # Every top-level spurd when more than one runs (then `agent` is None and
    # `agent_checked` False: which one is the agent cannot be told).
    agents: tuple[AgentProcess, ...] = ()
    # spurd's own `--hostname` (its command line), when it was started with one: the
    # name it registers under, while it reports completions under `hostname` (Spur #684).
    agent_hostname: str | None = None
    # True when the scan found spurd and traced every job process's parents up to pid 1:
    # then a holding's empty `tracked_pids` means none of its processes descends from spurd.
    ancestry_read: bool = False
    # spurstepd descriptors whose binding could not be trusted (the reason says what was seen).
    session_refusals: tuple[SessionRefusal, ...] = ()
    # The controller URL(s) and cluster name `spurctl collect` was told (sources/cluster_binding).
    controller: str | None = None
    cluster: str | None = None
    # The node's own word (node/agent_config.py): the controller URL(s) its spurd was
    # started with and the cluster_name of the spur.conf it reads.
    agent_controller: str | None = None
    agent_cluster: str | None = None


@dataclass(frozen=True, slots=True)
class AgentProcess:
    """The node's spurd process, as /proc shows it."""

    pid: int
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobProcess:
    """A process a job's cgroup or environment names, as `spurctl node-release` weighs it."""

    pid: int
    ticks: int | None  # /proc/<pid>/stat field 22: with the pid, one process for the boot
    started_at: datetime | None
    lineage: tuple[int, ...]  # its parent, grandparent, ... as far as /proc could be read
    env_job: int | None  # the job its SPUR_JOB_ID names
    cgroup_job: int | None  # the job whose `job_<id>` cgroup it sits in
    comm: str | None = None


HOLDING_TRACES = ("cgroup", "process", "spool", "session")


def inventories_by_node(invs: Iterable[Inventory]) -> dict[str, Inventory]:
    """Index inventories by node; the latest collected wins when a node repeats."""
    out: dict[str, Inventory] = {}
    for inv in invs:
        prev = out.get(inv.node)
        if prev is None or (inv.collected_at or _EPOCH) >= (prev.collected_at or _EPOCH):
            out[inv.node] = inv
    return out


def held_ids(invs: Iterable[Inventory]) -> frozenset[int]:
    """Every job id the inventories hold: what the controller is asked about."""
    return frozenset(h.job_id for inv in invs for h in inv.held)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
