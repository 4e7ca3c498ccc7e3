"""What `spurctl audit` prints: one report, to stdout or -o (--watch: render/watch.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from spurctl.decide.reasons import plural
from spurctl.model import AuditReport, NextStep
from spurctl.render.audit import (
    FindingFilter,
    filter_notice,
    print_audit,
    render_audit,
    warn_notes,
)
from spurctl.render.common import PUBLIC_FILE_MODE, AuditFormat, choose, write_told
from spurctl.render.environment import Environment


def show_audit(
    report: AuditReport,
    fmt: AuditFormat | str,
    only: FindingFilter,
    output: Path | None,
    env: Environment,
    *,
    fold: bool = True,
    ack: str | None = None,
    header: bool = True,
    next_steps: Sequence[NextStep] = (),
) -> None:
    """The report as `fmt`, with the note a CSV's filter cannot carry on stderr;
    `fold`: same-reason rows as one hostlist row (render.common.folded) where a person
    reads them (a terminal, `env`; Markdown anywhere); `ack`: the acknowledged controller
    version (render.audit.version_text); `header` False (`--no-header`): the table's
    rows alone, its notes on stderr; `next_steps`: the table's last lines. A file gets
    the table as a pipe does: one finding per line, unfolded."""
    notice = filter_notice(report, fmt, only)
    if output is None:
        print_audit(
            report, fmt, env, only=only, fold=fold, ack=ack, header=header, next_steps=next_steps
        )
    else:  # whole or not at all: a textfile collector must never read half a report
        if not header:
            warn_notes(report)
        chosen = choose(AuditFormat, fmt)
        fold = fold and chosen is not AuditFormat.TABLE
        text = render_audit(
            report, fmt, only=only, fold=fold, ack=ack, whole=True, header=header,
            next_steps=next_steps,
        )  # fmt: skip
        public = chosen is AuditFormat.PROMETHEUS
        shown = len(only.shown(report.findings))
        what = f"the audit ({chosen}, {plural(shown, 'finding')}"
        what += f" of {len(report.findings)})" if only.active else ")"
        write_told(text, output, what, create_mode=PUBLIC_FILE_MODE if public else 0o600)
    if notice is not None:
        print(notice, file=sys.stderr)
