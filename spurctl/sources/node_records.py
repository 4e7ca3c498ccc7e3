"""One node's record and the jobs on it, read fresh; and what spur.conf says about rejoining.

A repair reads a node again just before it removes it (GetNode, the active jobs
that list it or whose placement cannot be read), and waits for it to register
again (GetNode until it answers). Whether a removed node can come back at all is
a cluster setting spur.conf holds (docs/spur-facts.md, "Phantom charges and node
administration"): a WireGuard mesh (`[network] wg_enabled`) or Spur-managed k0s
(`[cluster] enabled`) prunes the removed node's mesh peer, and under
`[admission] mode = "token"` its spurd must present a join token that may have
expired since it first joined.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spurctl.hostlist import may_name, placement_unread
from spurctl.model import Job, Node
from spurctl.proto import slurm_pb2 as pb
from spurctl.sources.wire import node_from_pb

if TYPE_CHECKING:
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.settings import SpurConf

# A spur.conf is a few KiB; one larger than this is not one.
CONF_LIMIT = 1 << 20


def read_node(client: ControllerClient, name: str) -> Node | None:
    """GetNode: the controller's record of `name`, or None when it has none (NOT_FOUND)."""
    answer = client.read("GetNode", pb.GetNodeRequest(name=name), missing_ok=True)
    return None if answer is None else node_from_pb(answer)


def active_jobs_on(client: ControllerClient, name: str, version: str) -> list[Job]:
    """The active jobs that may be on `name`: those whose nodelist names it, and those
    whose placement cannot be read (no nodelist yet: state and allocation commit apart;
    or one spurctl does not read), which may be anywhere. Every active job is read
    (`ControllerClient.active_jobs`: by state and job-id range under the answer limit,
    shared by a pass over many nodes) and filtered here, whatever the release: the
    `nodes` filter (0.9.0 on) never answers a job with no allocated node, and release
    v0.8.0 ignores it. `version` is the controller's, for callers that pass it."""
    return [
        j
        for j in client.active_jobs().values()
        if j.state.active and (placement_unread(j.nodelist) or may_name(j.nodelist, name))
    ]


@dataclass(frozen=True, slots=True)
class RejoinConf:
    """What spur.conf says about a removed node registering again.

    `path` None: no spur.conf was read, so none of it is known. A setting spur.conf
    leaves out is Spur's default (no mesh, no k0s, open admission), as the daemons
    reading that file would take it; `unreadable` names a value that is not one.
    """

    path: str | None
    wg_enabled: bool = False
    k0s_enabled: bool = False
    admission: str = "open"
    unreadable: str | None = None


def rejoin_conf(conf: SpurConf) -> RejoinConf:
    """The mesh, k0s and admission settings of the spur.conf `conf` was read from."""
    if conf.path is None:
        return RejoinConf(None)
    where = str(conf.path)
    try:
        with open(conf.path, "rb") as fh:
            raw = fh.read(CONF_LIMIT + 1)
    except OSError as exc:
        return RejoinConf(where, unreadable=f"cannot read it again ({exc.strerror})")
    if len(raw) > CONF_LIMIT:
        return RejoinConf(where, unreadable=f"it is larger than {CONF_LIMIT} bytes")
    try:
        doc = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        return RejoinConf(where, unreadable=f"not TOML ({exc})")
    values: dict[str, Any] = {}
    for section, key, kind in (
        ("network", "wg_enabled", bool),
        ("cluster", "enabled", bool),
        ("admission", "mode", str),
    ):
        table = doc.get(section, {})
        value = table.get(key) if isinstance(table, dict) else None
        if value is not None and not isinstance(value, kind):
            return RejoinConf(
                where, unreadable=f"[{section}] {key} = {value!r} is not a {kind.__name__}"
            )
        values[f"{section}.{key}"] = value
    admission = str(values["admission.mode"] or "open").lower()
    if admission not in ("open", "token"):
        return RejoinConf(
            where, unreadable=f"[admission] mode = {admission!r} is not a mode Spur has"
        )
    return RejoinConf(
        where,
        wg_enabled=bool(values["network.wg_enabled"]),
        k0s_enabled=bool(values["cluster.enabled"]),
        admission=admission,
    )
