"""A stand-in for `ssh NODE spurctl node-inventory` where no sshd runs: NODE's line of an
inventory file. The one such stand-in: the demo's --command and the tests' use it.

Run as a script by a clean interpreter (`python -I -S node_line.py NODE FILE
[UNREACHABLE...]`), so it imports nothing but the standard library. It prints
the line whose node is NODE, or NODE's FQDN (an agent may report
gpu021.cluster.local: ssh gpu021 still reaches it); a node listed as
unreachable, or in no line, fails as ssh does, with status 255.
`--hang DIR NODE` is a node whose ssh never answers: it marks DIR/NODE as
started, then sleeps a minute (past the timeouts of the tests that use it).
`--answers DIR NODE` gives NODE's canned answer: after a `sleep DIR/NODE.sleep`,
DIR/NODE.out on stdout, DIR/NODE.err on stderr, exit status DIR/NODE.status
(default 0), and DIR/NODE.ran records when it ran (start and end of its sleep,
epoch seconds); with DIR/NODE.hang it writes its pid to DIR/NODE.pid and becomes
`sleep DIR/NODE.hang`, never answering; a node with neither .hang nor .out
fails as an unknown host does. (`sleep` processes, so a test can find leftovers.)
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def command(inventory: Path, unreachable: Sequence[str] = ()) -> str:
    """A collect --command template running this stand-in for node %h."""
    argv = [sys.executable, "-I", "-S", __file__, "%h", str(inventory), *unreachable]
    return " ".join(shlex.quote(word) if word != "%h" else word for word in argv)


def hanging_command(started: Path) -> str:
    """A collect --command template for a node %h that never answers (see --hang)."""
    argv = [sys.executable, "-I", "-S", __file__, "--hang", str(started)]
    return " ".join(shlex.quote(word) for word in argv) + " %h"


def answers_command(answers: Path) -> str:
    """A collect --command template giving node %h its canned answer (see --answers)."""
    argv = [sys.executable, "-I", "-S", __file__, "--answers", str(answers)]
    return " ".join(shlex.quote(word) for word in argv) + " %h"


def _answer(answers: Path, node: str) -> int:
    def part(suffix: str) -> str | None:
        path = answers / f"{node}.{suffix}"
        return path.read_text(encoding="utf-8") if path.exists() else None

    if (hang := part("hang")) is not None:
        (answers / f"{node}.pid").write_text(str(os.getpid()))
        os.execvp("sleep", ["sleep", hang.strip()])
    out = part("out")
    if out is None:
        return _unknown(node)
    started = time.time()
    if (sleep := part("sleep")) is not None:
        subprocess.run(["sleep", sleep.strip()], check=False)
    (answers / f"{node}.ran").write_text(f"{started} {time.time()}")  # how many ran at once
    print(out, end="", flush=True)
    print(part("err") or "", end="", file=sys.stderr)
    return int(part("status") or 0)


def _unknown(node: str) -> int:
    print(f"ssh: Could not resolve hostname {node}: Name or service not known", file=sys.stderr)
    return 255


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--answers"]:
        return _answer(Path(argv[1]), argv[2])
    if argv[:1] == ["--hang"]:
        started, node = argv[1:3]
        Path(started, node).touch()
        time.sleep(60)
        return 255
    node, inventory, *unreachable = argv
    if node in unreachable:
        print(f"ssh: connect to host {node} port 22: Connection refused", file=sys.stderr)
        return 255
    with open(inventory, encoding="utf-8") as lines:
        for line in lines:
            if line.strip() and json.loads(line).get("node", "").split(".")[0] == node:
                print(line, end="")
                return 0
    return _unknown(node)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
