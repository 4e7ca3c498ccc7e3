"""The snapshot document (`spurctl.snapshot/v1`): a saved controller view and its
watermark, as `spurctl snapshot -o FILE` writes it and `--snapshot FILE` reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spurctl.errors import DocumentError, redact
from spurctl.model import (
    ControllerView,
    Job,
    Node,
    Watermark,
    WatermarkSource,
    format_time,
)
from spurctl.sources import bounded
from spurctl.sources.documents import (
    SNAPSHOT_SCHEMA,
    job_from_dict,
    job_to_dict,
    json_object,
    node_from_dict,
    node_to_dict,
    str_field,
    time_field,
    u32_field,
)
from spurctl.sources.nesting import too_deep


def snapshot_to_dict(view: ControllerView, watermark: Watermark) -> dict[str, Any]:
    return {
        "schema": SNAPSHOT_SCHEMA,
        "controller": {
            "address": view.address,
            "version": view.version,
            "taken_at": format_time(view.taken_at),
        },
        "taken_at": format_time(view.taken_at),
        "watermark": {"value": watermark.value, "source": str(watermark.source)},
        "view": {
            "complete": view.complete,
            "jobs_seen": len(view.jobs),
            "jobs_total": view.jobs_total,
        },
        "jobs": [job_to_dict(j) for j in view.jobs.values()],
        "nodes": [node_to_dict(n) for n in view.nodes.values()],
    }


def snapshot_from_dict(d: Any, *, where: str) -> tuple[ControllerView, Watermark]:
    """A saved controller view. Its completeness is read, never inferred from absence.

    `view.jobs_total` is required (a snapshot without it would make every id it
    lacks look untracked); `view.jobs_seen` and `view.complete`, when present,
    must agree with the jobs the file holds, so a truncated or edited file is
    refused. Job ids, the watermark and the counts are uint32, as in Spur.
    """
    d = json_object(d, where=where)
    if d.get("schema") != SNAPSHOT_SCHEMA:
        raise DocumentError(
            f"{where}: schema is {d.get('schema')!r}, expected {SNAPSHOT_SCHEMA!r} "
            "(save one with `spurctl snapshot -o FILE`)"
        )
    fix = "save a fresh one with `spurctl snapshot -o FILE`"
    ctl = json_object(d.get("controller") or {}, where=f"{where}: controller")
    if "view" not in d or "jobs_total" not in json_object(d["view"], where=f"{where}: view"):
        raise DocumentError(
            f"{where}: missing 'view.jobs_total', so nothing says whether the snapshot "
            f"holds every job; {fix}"
        )
    view_meta = json_object(d["view"], where=f"{where}: view")
    wm = json_object(d.get("watermark") or {}, where=f"{where}: watermark")
    if "value" not in wm:
        raise DocumentError(f"{where}: missing 'watermark.value'; {fix}")
    jobs_raw, nodes_raw = d.get("jobs"), d.get("nodes")
    if not isinstance(jobs_raw, list) or not isinstance(nodes_raw, list):
        raise DocumentError(f"{where}: 'jobs' and 'nodes' must be lists")
    jobs: dict[int, Job] = {}
    for i, j in enumerate(jobs_raw):
        job = job_from_dict(j, where=f"{where}: jobs[{i}]")
        if job.job_id in jobs:
            raise DocumentError(f"{where}: jobs[{i}]: job_id {job.job_id} appears twice; {fix}")
        jobs[job.job_id] = job
    nodes: dict[str, Node] = {}
    for i, n in enumerate(nodes_raw):
        node = node_from_dict(n, where=f"{where}: nodes[{i}]")
        nodes[node.name] = node
    taken_at = time_field(d, "taken_at", where=where)
    if taken_at is None:
        raise DocumentError(f"{where}: missing 'taken_at'")
    jobs_total = u32_field(view_meta, "jobs_total", where=f"{where}: view", default=None)
    if "jobs_seen" in view_meta:
        seen = u32_field(view_meta, "jobs_seen", where=f"{where}: view", default=None)
        if seen != len(jobs):
            raise DocumentError(
                f"{where}: field 'view.jobs_seen' says {seen} jobs but the file holds "
                f"{len(jobs)}: truncated or edited; {fix}"
            )
    if "complete" in view_meta:
        said = view_meta["complete"]
        if not isinstance(said, bool):
            raise DocumentError(f"{where}: field 'view.complete' must be true or false")
        if said != (len(jobs) >= jobs_total):
            raise DocumentError(
                f"{where}: field 'view.complete' is {str(said).lower()} but the file holds "
                f"{len(jobs)} of 'view.jobs_total' {jobs_total} jobs; {fix}"
            )
    view = ControllerView(
        address=str_field(ctl, "address", where=where),
        version=str_field(ctl, "version", where=where),
        taken_at=taken_at,
        jobs=jobs,
        nodes=nodes,
        jobs_total=jobs_total,
    )
    watermark = Watermark(
        u32_field(wm, "value", where=f"{where}: watermark", default=None), WatermarkSource.SNAPSHOT
    )
    return view, watermark


def read_snapshot(path: Path) -> tuple[ControllerView, Watermark]:
    try:
        text = redact(bounded.read_text(path, bounded.SNAPSHOT, f"--snapshot {path}"))
    except OSError as exc:
        raise DocumentError(f"cannot read snapshot {path}: {exc.strerror}") from None
    deep = too_deep(text)
    if deep is not None:
        raise DocumentError(
            f"{path}: not a {SNAPSHOT_SCHEMA} document ({deep}); "
            "save a fresh one with `spurctl snapshot -o FILE`"
        )
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}); "
            "save a fresh one with `spurctl snapshot -o FILE`"
        ) from None
    return snapshot_from_dict(doc, where=str(path))
