"""`audit --format prometheus`: the gauges node_exporter's textfile collector reads.

Per audit: the findings by kind, the nodes covered, the view's completeness, the
watermark, the time. Per node, only for nodes with findings (cardinality bounded by
what is wrong, never by the cluster's size): how many reclaimable holdings each
holds, each kind of finding with its action (`spurctl_finding`), and when the
evidence dates it (`spurctl_finding_since_seconds`, decide/onset.py), so an alert can
name the node and say how long.

One audit is one moment: a "first seen" across audits is Prometheus's to keep
(`for:`, or the series' own history). What one audit can say honestly is the time
its evidence gives: a job's end, its move, a run's start, an inventory's collection.
A finding nothing dates (one about the node itself: a phantom allocation, a name
mismatch, an agent that did not answer) has no `since` sample; its alert counts
`for:`.
"""

from __future__ import annotations

from datetime import datetime

from spurctl.errors import visible
from spurctl.hostlist import natural_key
from spurctl.model import Action, AuditReport, Kind
from spurctl.render.finding_filter import NO_FILTER, FindingFilter
from spurctl.render.node_admin_metrics import node_admin_series


def _label_value(value: str) -> str:
    """Escape a label value per the Prometheus text exposition format; a control
    character other than the newline (which the format escapes) is written out."""
    value = visible(value, keep_newlines=True)
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render_prometheus(report: AuditReport, only: FindingFilter = NO_FILTER) -> str:
    """The gauges; a filter narrows only the per-node series (the counts are the
    whole audit's) and is said in a comment line, which the exposition format ignores."""
    lines: list[str] = []
    shown = only.shown(report.findings)
    if only.active:
        lines.append(f"# spurctl: {only.sentence(len(report.findings), len(shown))}")

    def family(name: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        # HELP and TYPE even without samples, so the family is always documented.
        lines.append(f"# HELP spurctl_{name} {help_text}")
        lines.append(f"# TYPE spurctl_{name} gauge")
        lines.extend(f"spurctl_{name}{labels} {_number(v)}" for labels, v in samples)

    counts = report.by_kind
    reclaimable: dict[str, int] = {}
    # (node, kind, action) -> how many, and the earliest time evidence dates one of them.
    per_node: dict[tuple[str, Kind, Action], int] = {}
    since: dict[tuple[str, Kind, Action], datetime] = {}
    for f in shown:
        if f.action is Action.RECLAIM:
            reclaimable[f.node] = reclaimable.get(f.node, 0) + 1
        if f.action is Action.NONE:  # a healthy row (--all) is no finding to alert on
            continue
        key = (f.node, f.kind, f.action)
        per_node[key] = per_node.get(key, 0) + 1
        if f.since is not None and (key not in since or f.since < since[key]):
            since[key] = f.since
    order = sorted(per_node, key=lambda k: (natural_key(k[0]), k[1].value, k[2].value))

    def labels(key: tuple[str, Kind, Action]) -> str:
        node, kind, action = (_label_value(str(v)) for v in key)
        return f'{{node="{node}",kind="{kind}",action="{action}"}}'

    # Every kind gets a series, 0 when absent, so alert rules never see one vanish.
    family(
        "findings",
        "Findings of the last spurctl audit, by kind.",
        [(f'{{kind="{_label_value(k.value)}"}}', counts.get(k.value, 0)) for k in Kind],
    )
    family(
        "node_reclaimable_holdings",
        "Holdings on the node that the last spurctl audit found reclaimable.",
        [
            (f'{{node="{_label_value(node)}"}}', reclaimable[node])
            for node in sorted(reclaimable, key=natural_key)
        ],
    )
    family(
        "finding",
        "Findings of the last spurctl audit on the node, of this kind and action "
        "(only nodes with findings).",
        [(labels(key), per_node[key]) for key in order],
    )
    family(
        "finding_since_seconds",
        "Unix time since when the evidence has the node's findings of this kind: the "
        "job's end, its move, the held run's start, or the inventory (the earliest of "
        "them); none where nothing dates it.",
        [(labels(key), since[key].timestamp()) for key in order if key in since],
    )
    family(
        "findings_needing_action",
        "Findings of the last spurctl audit whose action is reclaim or investigate.",
        [("", report.needs_action)],
    )
    family("nodes_in_scope", "Nodes the last spurctl audit covered.", [("", report.nodes_in_scope)])
    family(
        "nodes_inventoried",
        "Nodes whose holdings the last spurctl audit could read.",
        [("", report.nodes_inventoried)],
    )
    family(
        "controller_view_complete",
        "1 when the controller returned every job it tracks, 0 when its answer was partial.",
        [("", 1 if report.view_complete else 0)],
    )
    family(
        "watermark",
        "Lowest job id the controller had not issued, as the last spurctl audit took it.",
        [("", report.watermark.value)],
    )
    family(
        "audit_timestamp_seconds",
        "Unix time of the controller view the last spurctl audit used.",
        [("", report.taken_at.timestamp())],
    )
    return "\n".join([*lines, *node_admin_series(report)]) + "\n"  # repairs, drains
