"""A stand-in for ssh in tests of the gateway tree, where no sshd serves a name.

It takes ssh's options and drops them, exports the host it was asked for as
STANDIN_HOST, and runs the remote command with /bin/sh on this machine: a
gateway's relay or a node's command runs here as if on that host. Real OpenSSH
is driven where the test is about ssh itself (tests/sshd.py).
"""

from __future__ import annotations

from pathlib import Path

_SCRIPT = """\
#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -l|-p|-i|-F|-o) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
STANDIN_HOST=$1; export STANDIN_HOST; shift
{prelude}exec /bin/sh -c "$*"
"""


def write(path: Path, prelude: str = "") -> Path:
    """The stand-in at `path`, executable; `prelude` (shell lines) runs before the command,
    with STANDIN_HOST set."""
    if prelude and not prelude.endswith("\n"):
        prelude += "\n"
    path.write_text(_SCRIPT.format(prelude=prelude))
    path.chmod(0o755)
    return path
