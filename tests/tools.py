"""The real programs some end-to-end tests drive (OpenSSH, node_exporter, promtool).

`require` finds one or says what to install: on a developer's machine a missing
program skips its tests with one line naming the Debian package; under CI=true
(.ci/run installs them) it is a failure, never a skip, so a green CI means they ran.
"""

from __future__ import annotations

import os
import shutil

import pytest

# program -> the Debian package that ships it
PACKAGES = {
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "prometheus-node-exporter": "prometheus-node-exporter",
    "promtool": "prometheus",
    "systemd-analyze": "systemd",
}

# Debian puts sshd in /usr/sbin, which a non-root PATH may lack.
_EXTRA_DIRS = ("/usr/sbin", "/sbin")


def require(program: str) -> str:
    """The path of `program`; skip (fail under CI=true) with what to install when absent."""
    found = shutil.which(program) or shutil.which(program, path=os.pathsep.join(_EXTRA_DIRS))
    if found is not None:
        return found
    package = PACKAGES.get(program, program)
    message = f"{program} not found: install it with `apt-get install {package}`"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI must run these tests, not skip them)")
    pytest.skip(message)
