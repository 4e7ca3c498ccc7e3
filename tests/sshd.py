"""A real OpenSSH server on loopback, and an ssh_config that makes its addresses "nodes".

One sshd of the test's own (own host key, own sshd_config, own authorized_keys, an
unprivileged port, `-D -e` in the foreground, killed at teardown) listens on
127.0.0.2 and up; the system's sshd service is never touched. `ssh -F
site.config NODE` then reaches each node by name, as an operator's ~/.ssh/config
would. Besides the nodes that answer, a site has each way a node can fail:

- `down`: its address has no sshd (connection refused);
- `hang`: its sshd runs a ForceCommand that sleeps (the session never answers;
  the sleeps are ended at teardown);
- `badkey`: known_hosts holds another key for it (StrictHostKeyChecking yes);
- `refused`: it does not accept the client's key (BatchMode, no password).

Commands run as the same user on this machine, so a "node" runs this checkout's
spurctl (`PATH` and `PYTHONPATH` are set for every session); `SPURCTL_TEST_NODE`
in a session names the node it reached, for a command that is the same on all.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.cli import WORKTREE, kill_group, running
from tests.tools import require

FAILING = ("down", "hang", "badkey", "refused")


@dataclass(frozen=True)
class SshSite:
    config: Path  # the ssh_config: pass it as `ssh -F config`
    addresses: dict[str, str]  # node name -> 127.0.0.x
    port: int
    dir: Path

    def ssh(self) -> str:
        """The ssh program with this site's config, as --ssh and --command take it."""
        return f"{shutil.which('ssh') or require('ssh')} -F {self.config}"

    def command(self, remote: str) -> str:
        """A collect --command template running `remote` on node %h."""
        return f"{self.ssh()} %h {remote}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _keygen(path: Path) -> str:
    subprocess.run(
        [require("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return Path(f"{path}.pub").read_text().strip()


@contextmanager
def ssh_site(base: Path, nodes: list[str]) -> Iterator[SshSite]:
    """sshd serving `nodes` (answering normally) and the FAILING ones, until the block ends."""
    sshd = require("sshd")
    require("ssh")
    home = base / "sshd"
    home.mkdir(mode=0o700)
    host_key, client_key, other_key, stranger = (
        home / "host_key", home / "id_client", home / "other_host_key", home / "id_stranger",
    )  # fmt: skip
    host_pub = _keygen(host_key)
    client_pub = _keygen(client_key)
    other_pub = _keygen(other_key)
    _keygen(stranger)
    (home / "authorized_keys").write_text(client_pub + "\n")
    port = _free_port()
    # The hang node's sleep outlives the killed ssh (sshd's session is its own): a
    # length no other site uses, so that teardown ends this site's sleeps and no other's.
    hang_for = f"600.{port}{os.getpid()}"
    # sshd listens on at most 16 sockets: the nodes that answer share one address
    # (told apart by HostKeyAlias); the hang node has its own for its Match block,
    # and nothing listens on the down node's.
    addresses = {
        **{name: "127.0.0.2" for name in [*nodes, "badkey", "refused"]},
        "hang": "127.0.0.3",
        "down": "127.0.0.4",
    }
    # Every session runs this checkout's spurctl with this interpreter.
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    listen = f"ListenAddress 127.0.0.2:{port}\nListenAddress 127.0.0.3:{port}\n"
    (home / "sshd_config").write_text(
        f"{listen}"
        f"HostKey {host_key}\n"
        f"AuthorizedKeysFile {home / 'authorized_keys'}\n"
        f"PidFile {home / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nPrintMotd no\nPrintLastLog no\n"
        "MaxStartups 200\nMaxSessions 200\nLogLevel ERROR\n"
        f"SetEnv PATH={path} PYTHONPATH={WORKTREE}\n"
        "AcceptEnv SPURCTL_TEST_NODE\n"
        f"Match LocalAddress {addresses['hang']}\n"
        f"  ForceCommand exec sleep {hang_for}\n"
    )
    user = os.environ.get("USER") or "root"
    known = home / "known_hosts"
    lines, hosts = [], []
    for name, addr in addresses.items():
        key = other_pub if name == "badkey" else host_pub
        lines.append(f"{name} {' '.join(key.split()[:2])}")
        identity = stranger if name == "refused" else client_key
        hosts.append(
            f"Host {name}\n  HostName {addr}\n  Port {port}\n  HostKeyAlias {name}\n"
            f"  IdentityFile {identity}\n  SetEnv SPURCTL_TEST_NODE={name}\n"
        )
    known.write_text("\n".join(lines) + "\n")
    config = home / "ssh_config"
    config.write_text(
        "".join(hosts) + "Host *\n"
        f"  User {user}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        "  ConnectTimeout 5\n  LogLevel ERROR\n"
    )
    # sshd's privilege separation needs this directory; a machine without sshd lacks it.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    argv = [sshd, "-D", "-e", "-f", str(home / "sshd_config")]
    with running(argv, stderr=subprocess.STDOUT) as proc:
        site = SshSite(config, addresses, port, base)
        _wait_listening(proc, "127.0.0.2", port)
        try:
            yield site
        finally:
            kill_group(proc.pid)
            _kill_sleeps(hang_for)


def _kill_sleeps(length: str) -> None:
    """End the `sleep LENGTH` processes still running (this site's hung sessions)."""
    wanted = b"sleep\x00" + length.encode() + b"\x00"
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                if (entry / "cmdline").read_bytes() == wanted:
                    with suppress(ProcessLookupError):
                        os.kill(int(entry.name), signal.SIGKILL)


def _wait_listening(proc: subprocess.Popen[str], address: str, port: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise AssertionError(f"sshd exited with {proc.returncode}: {out}") from None
            assert time.monotonic() < deadline, "sshd did not listen within 20 s"
            time.sleep(0.05)
