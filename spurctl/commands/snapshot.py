"""spurctl snapshot: save the controller's view for offline audits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from spurctl import options as opt
from spurctl.errors import ExitStatus

NAME = "snapshot"
EPILOG = "\b\nExample:\n  spurctl snapshot -o /var/tmp/spur-before-upgrade.json"

OutputOpt = Annotated[Path, opt.output_option("Where to save the snapshot.")]


@opt.connected()
def command(output: OutputOpt, conn: opt.ConnectionOptions = opt.ConnectionOptions()) -> int:
    """Save the controller's view for offline audits.

    Jobs, nodes, watermark and completeness, as one spurctl.snapshot/v1
    document; `spurctl audit --snapshot FILE` reaches the same findings from it.
    """
    from spurctl.render.snapshot import show_saved
    from spurctl.usecases.snapshot import take_snapshot

    show_saved(take_snapshot(conn.connect()), output)
    return ExitStatus.OK
