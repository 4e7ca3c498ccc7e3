"""The node scanner as one standard-library program, sent to a node's `python3 -`.

`collect --ship-scanner` audits nodes that have only Python 3 (3.11 or newer):
instead of running an installed `spurctl node-inventory`, it writes this program
to each ssh's standard input, as Ansible ships its modules. The program carries
node_scan.py's own source, unchanged, with the node-side modules it imports
(node_files, cgroup_limits, stepd_sessions) and errors.py (all standard library
only); what they take from the rest of spurctl is replaced by standard-library
stand-ins: the inventory's records (holdings.py: the stand-ins only remember what
they were built with), SessionBinding, model's `utcnow` and MAX_JOB_ID, and
hostlist's range-list reader. So the scan is the same code `spurctl node-inventory`
runs.

The node prints what the scan built, field by field; this side builds the real
records from it and reads them back through the inventory document's own
validation, so a node's answer is checked exactly as a node-inventory document is.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from spurctl.errors import DocumentError
from spurctl.holdings import AgentProcess, Holding, Inventory, JobProcess, Session, SessionRefusal
from spurctl.model import MAX_JOB_ID

SCHEMA = "spurctl.node-scan/v1"
SHIP_COMMAND = "ssh -o BatchMode=yes %h python3 -"

# Every holdings record the node scan imports: the node gets a plain stand-in of each.
_RECORDS: dict[str, type] = {
    cls.__name__: cls
    for cls in (Inventory, Holding, AgentProcess, JobProcess, Session, SessionRefusal)
}
# node_scan's own imports from the rest of spurctl.node, shipped before it in this order.
_SHIPPED = ("node_files", "cgroup_limits", "stepd_sessions", "node_procs", "agent_config")

# Runs on the node with only the standard library; the sources are filled in below.
_BOOTSTRAP = """\
import argparse, enum, json, re, sys, types
from datetime import UTC, datetime
from pathlib import Path

SCHEMA = {schema!r}


def module(name, source=None):
    mod = types.ModuleType(name)
    mod.__path__ = []
    sys.modules[name] = mod
    if source is not None:
        exec(compile(source, name.replace(".", "/") + ".py", "exec"), mod.__dict__)
    return mod


spurctl = module("spurctl")
spurctl.errors = module("spurctl.errors", {errors!r})
hostlist = spurctl.hostlist = module("spurctl.hostlist")
_RANGES = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")


def expand_ranges(text):
    # hostlist.expand_ranges without ClusterShell: the same accepted form and result.
    if not _RANGES.fullmatch(text):
        raise spurctl.errors.SpurctlError(f"bad range list {{text!r}}")
    out = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return frozenset(out)


hostlist.expand_ranges = expand_ranges
model = spurctl.model = module("spurctl.model")
holdings = spurctl.holdings = module("spurctl.holdings")


class Record:
    def __init__(self, **fields):
        self.__dict__.update(fields)


for name in {records!r}:
    setattr(holdings, name, type(name, (Record,), {{}}))
model.MAX_JOB_ID = {max_job_id!r}
model.utcnow = lambda: datetime.now(UTC)
holdings.SessionBinding = enum.StrEnum("SessionBinding", {{"LIVE": "live", "STALE": "stale"}})
spurctl.node = module("spurctl.node")
for name, source in {shipped!r}:
    setattr(spurctl.node, name, module("spurctl.node." + name, source))
node_scan = module("spurctl.node.node_scan", {node_scan!r})


def plain(value):
    if isinstance(value, Record):
        fields = {{k: plain(v) for k, v in vars(value).items()}}
        return {{"$record": type(value).__name__, **fields}}
    if isinstance(value, datetime):
        return {{"$time": value.isoformat()}}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


parser = argparse.ArgumentParser(prog="python3 - (spurctl node scanner)")
parser.add_argument("--cgroup-root", type=Path)
parser.add_argument("--proc-root", type=Path, default=Path("/proc"))
parser.add_argument("--hostname")
parser.add_argument("--state-dir", type=Path, default=node_scan.STATE_DIR)
args = parser.parse_args()
inventory, denied = node_scan.scan_this_node(
    args.cgroup_root, args.proc_root, args.hostname, state_dir=args.state_dir
)
if denied:
    print(f"{{denied}} processes' environments were unreadable: run as root", file=sys.stderr)
print(json.dumps({{"schema": SCHEMA, "inventory": plain(inventory)}}))
"""


def scanner_program() -> bytes:
    """The program `python3 -` runs on a node: node_scan.py and errors.py as shipped."""
    from importlib import import_module

    from spurctl import errors
    from spurctl.node import node_scan

    def source(module: Any) -> str:
        return Path(module.__file__).read_text(encoding="utf-8")

    return _BOOTSTRAP.format(
        schema=SCHEMA,
        errors=source(errors),
        node_scan=source(node_scan),
        shipped=tuple((name, source(import_module(f"spurctl.node.{name}"))) for name in _SHIPPED),
        max_job_id=MAX_JOB_ID,
        records=tuple(_RECORDS),
    ).encode()


def read_scan(text: str, *, name: str) -> list[Inventory]:
    """The inventory a shipped scanner printed, validated as a node-inventory document."""
    from spurctl.sources.documents import dump_json
    from spurctl.sources.inventory_document import inventory_to_dict, parse_inventory_text

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise DocumentError(f"{name}: not the node scanner's JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise DocumentError(f"{name}: not a {SCHEMA} document")
    try:
        inventory = _rebuild(doc.get("inventory"))
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise DocumentError(
            f"{name}: a record the node scanner cannot have built ({exc})"
        ) from None
    if not isinstance(inventory, Inventory):
        raise DocumentError(f"{name}: the node scanner printed no inventory")
    return list(
        parse_inventory_text(dump_json(inventory_to_dict(inventory), indent=None), name=name)
    )


def _rebuild(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$time"}:
            return datetime.fromisoformat(value["$time"])
        fields = {k: _rebuild(v) for k, v in value.items() if k != "$record"}
        return _RECORDS[value["$record"]](**fields)
    if isinstance(value, list):
        return tuple(_rebuild(v) for v in value)
    return value
