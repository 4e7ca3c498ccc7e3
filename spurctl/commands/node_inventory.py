"""spurctl node-inventory: what this node holds, as one JSON line (run on the node)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from spurctl import options as opt
from spurctl.errors import ExitStatus
from spurctl.node.stepd_sessions import STATE_DIR

NAME = "node-inventory"
EPILOG = None


def cgroup_root_option(help_text: str) -> Any:
    return typer.Option("--cgroup-root", help=help_text, show_default=False, metavar="DIR")


def proc_root_option(help_text: str) -> Any:
    return typer.Option("--proc-root", help=help_text, metavar="DIR")


CgroupRootOpt = Annotated[
    Path | None,
    cgroup_root_option(
        "Read job cgroups (job_<id>, job_<id>_<attempt>) only under this directory; "
        "absent is fine. Default: found. On the cgroup v2 mount (from /proc/self/mountinfo), "
        "walking up from spurd's own cgroup (/proc/<spurd pid>/cgroup, for a root systemd "
        "delegates) and from this command's, every ancestor named 'spur', with a 'spur' "
        "child, or holding job_* directories; then 'spur' at the top of the mount and "
        "/sys/fs/cgroup/spur (Spur main's fixed root). All found are read."
    ),
]
ProcRootOpt = Annotated[Path, proc_root_option("The node's /proc.")]
HostnameOpt = Annotated[
    str | None,
    typer.Option(
        "--hostname",
        help="Node name to report (default: this host's name, as spurd registers it).",
        show_default=False,
        metavar="NAME",
    ),
]
OutputOpt = Annotated[Path | None, opt.output_option("Write the document here, not stdout.")]
StateDirOpt = Annotated[
    Path,
    typer.Option(
        "--state-dir",
        help="spurd's state directory, whose runtime/ holds the spurstepd session "
        "descriptors (Spur #754); the one spurd itself was started with (its --state-dir, "
        "SPUR_STEPD_STATE_DIR or spur.conf) and the one each live spurstepd names are read too.",
        metavar="DIR",
    ),
]


def command(
    cgroup_root: CgroupRootOpt = None,
    proc_root: ProcRootOpt = Path("/proc"),
    hostname: HostnameOpt = None,
    output: OutputOpt = None,
    state_dir: StateDirOpt = STATE_DIR,
) -> int:
    """What this node holds, as one JSON line.

    Prints a spurctl.inventory/v1 document. Run it on the compute node as
    root: other users' processes are unreadable otherwise.

    \b
    Example:
      spurctl node-inventory -o /tmp/inventory.json
    """
    from spurctl.node.node_scan import scan_this_node
    from spurctl.render.collect import tell_scan
    from spurctl.render.common import write_told
    from spurctl.sources.documents import dump_json
    from spurctl.sources.inventory_document import inventory_to_dict

    inventory, denied = scan_this_node(cgroup_root, proc_root, hostname, state_dir=state_dir)
    tell_scan(inventory, denied, proc_root=str(proc_root), as_root=os.geteuid() == 0)
    document = dump_json(inventory_to_dict(inventory), indent=None) + "\n"
    held = len(inventory.held)
    write_told(document, output, f"{inventory.node}'s inventory ({held} held)")
    return ExitStatus.OK
