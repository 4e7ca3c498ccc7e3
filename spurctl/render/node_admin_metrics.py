"""spurctl's own node administration in the audit's Prometheus output.

Counters (from the journal, which is only appended to, so they only grow):
`spurctl_repairs_total{result}`, `spurctl_drains_total{command}`,
`spurctl_resumes_total`; gauges: `spurctl_nodes_left_drained` (nodes a drain of
spurctl's still holds) and `spurctl_node_drained_since_timestamp_seconds{node}`
(when spurctl drained it), which the alert SpurctlDrainLeftTooLong reads. A node spurctl
drained that Spur v0.8.0 then marked DOWN `Not responding` on a heartbeat timeout (its
reason no longer spurctl's, its lock kept: it never recovers by itself) is in neither:
it has its own pair, `spurctl_nodes_drain_reason_lost` and
`spurctl_node_drain_reason_lost_since_timestamp_seconds{node}` (when spurctl drained it),
which the alert SpurctlDrainReasonLost reads. Apart, so the existing series keep their
meaning (a drain whose reason is spurctl's, which plain `spurctl resume` lifts) and each
alert names the one command that lifts its nodes.
"""

from __future__ import annotations

from spurctl.errors import visible
from spurctl.model import AuditReport

REPAIR_RESULTS = ("repaired", "refused", "not-back", "failed")
DRAIN_COMMANDS = ("drain", "repair")


def _label(value: str) -> str:
    value = visible(value, keep_newlines=True)
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP spurctl_{name} {help_text}", f"# TYPE spurctl_{name} {kind}"]
    lines.extend(f"spurctl_{name}{labels} {_number(value)}" for labels, value in samples)
    return lines


def node_admin_series(report: AuditReport) -> list[str]:
    """The families (none when the audit read no journal); every result and command gets a
    series, 0 when absent, so that a rate never sees one appear from nothing."""
    m = report.node_admin
    if m is None:
        return []
    return [
        *_family(
            "repairs_total", "counter", "Repairs spurctl journaled, by how each ended.",
            [(f'{{result="{r}"}}', m.repairs.get(r, 0)) for r in REPAIR_RESULTS],
        ),
        *_family(
            "drains_total", "counter", "Drains spurctl sent, by the command that sent them.",
            [(f'{{command="{c}"}}', m.drains.get(c, 0)) for c in DRAIN_COMMANDS],
        ),
        *_family(
            "resumes_total", "counter", "spurctl drains that resume lifted.", [("", m.resumes)]
        ),
        *_family(
            "nodes_left_drained", "gauge",
            "Nodes in the audit's view that a drain spurctl journaled still holds.",
            [("", len(m.drained))],
        ),
        *_family(
            "node_drained_since_timestamp_seconds", "gauge",
            "Unix time spurctl drained the node, for each node its drain still holds.",
            [
                (f'{{node="{_label(node)}"}}', at.timestamp())
                for node, at in sorted(m.drained.items())
                if at is not None
            ],
        ),
        *_family(
            "nodes_drain_reason_lost", "gauge",
            "Nodes in the audit's view that spurctl drained and Spur (v0.8.0 or older) then "
            "marked DOWN 'Not responding', keeping the lock: they never recover by themselves.",
            [("", len(m.lost))],
        ),
        *_family(
            "node_drain_reason_lost_since_timestamp_seconds", "gauge",
            "Unix time spurctl drained the node, for each node whose drain's reason Spur "
            "replaced with 'Not responding'.",
            [(f'{{node="{_label(node)}"}}', at.timestamp()) for node, at in sorted(m.lost.items())],
        ),
    ]  # fmt: skip
