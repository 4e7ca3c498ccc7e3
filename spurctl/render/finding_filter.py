"""Which findings a report shows: `audit --kind`, `--action`.

Every audit format takes the same filter (render/audit.py, render/prometheus.py,
render/audit_columns.py), so it lives below them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spurctl.model import Action, Finding, Kind


@dataclass(frozen=True, slots=True)
class FindingFilter:
    """Which findings a report shows (`audit --kind`, `--action`; empty: any).

    It chooses the rows only: the summary, the JSON `summary` and the exit
    status are the whole report's, and every format says how many rows it hid.
    """

    kinds: tuple[Kind, ...] = ()
    actions: tuple[Action, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.kinds or self.actions)

    def keeps(self, f: Finding) -> bool:
        return (not self.kinds or f.kind in self.kinds) and (
            not self.actions or f.action in self.actions
        )

    def shown(self, findings: Sequence[Finding]) -> list[Finding]:
        return [f for f in findings if self.keeps(f)] if self.active else list(findings)

    def flags(self) -> str:
        """The filter as typed, e.g. `--kind active-elsewhere --action reclaim`."""
        return " ".join(
            [*(f"--kind {k.value}" for k in self.kinds)]
            + [f"--action {a.value}" for a in self.actions]
        )

    def sentence(self, total: int, shown: int) -> str:
        """One line: the filter is on, and what it hid from the rows."""
        hidden = total - shown
        return (
            f"Filter {self.flags()}: showing {shown} of {total} findings, "
            f"{hidden} hidden; the summary and the exit status count all {total}."
        )


NO_FILTER = FindingFilter()
