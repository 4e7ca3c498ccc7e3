"""A stand-in for `ssh NODE spurctl node-inventory` where no sshd runs: NODE's line of an
inventory file. The one such stand-in: the demo's --command and the tests' use it.

Run as a script by a clean interpreter (`python -I -S node_line.py NODE FILE
[UNREACHABLE...]`), so it imports nothing but the standard library. It prints
the line whose node is NODE, or NODE's FQDN (an agent may report
gpu021.cluster.local: ssh gpu021 still reaches it); a node listed as
unreachable, or in no line, fails as ssh does, with status 255.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path


def command(inventory: Path, unreachable: Sequence[str] = ()) -> str:
    """A collect --command template running this stand-in for node %h."""
    argv = [sys.executable, "-I", "-S", __file__, "%h", str(inventory), *unreachable]
    return " ".join(shlex.quote(word) if word != "%h" else word for word in argv)


def main(argv: Sequence[str]) -> int:
    node, inventory, *unreachable = argv
    if node in unreachable:
        print(f"ssh: connect to host {node} port 22: Connection refused", file=sys.stderr)
        return 255
    with open(inventory, encoding="utf-8") as lines:
        for line in lines:
            if line.strip() and json.loads(line).get("node", "").split(".")[0] == node:
                print(line, end="")
                return 0
    print(f"ssh: Could not resolve hostname {node}: Name or service not known", file=sys.stderr)
    return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
