"""What `spurctl audit` prints: one report, to stdout or -o (--watch: render/watch.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from spurctl.model import AuditReport
from spurctl.render.audit import (
    FindingFilter,
    filter_notice,
    print_audit,
    render_audit,
    warn_notes,
)
from spurctl.render.common import PUBLIC_FILE_MODE, AuditFormat, choose, write_output


def show_audit(
    report: AuditReport,
    fmt: AuditFormat | str,
    only: FindingFilter,
    output: Path | None,
    *,
    fold: bool = True,
    ack: str | None = None,
    header: bool = True,
) -> None:
    """The report as `fmt`, with the note a CSV's filter cannot carry on stderr;
    `fold`: same-reason rows as one hostlist row (render.common.folded); `ack`: the
    acknowledged controller version (render.audit.version_text); `header` False
    (`--no-header`): the table's rows alone, its notes on stderr. A file gets the
    table as a pipe does: one finding per line."""
    notice = filter_notice(report, fmt, only)
    if output is None:
        print_audit(report, fmt, only=only, fold=fold, ack=ack, header=header)
    else:  # whole or not at all: a textfile collector must never read half a report
        if not header:
            warn_notes(report)
        text = render_audit(report, fmt, only=only, fold=fold, ack=ack, whole=True, header=header)
        public = choose(AuditFormat, fmt) is AuditFormat.PROMETHEUS
        write_output(text, output, create_mode=PUBLIC_FILE_MODE if public else 0o600)
    if notice is not None:
        print(notice, file=sys.stderr)
