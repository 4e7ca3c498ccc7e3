"""A real OpenSSH server on loopback, and an ssh_config that makes its addresses "nodes".

One sshd of the test's own (own host key, own sshd_config, own authorized_keys, an
unprivileged port, `-D -e` in the foreground, killed at teardown) listens on
127.0.0.2 and up; the system's sshd service is never touched. `ssh -F
site.config NODE` then reaches each node by name, as an operator's ~/.ssh/config
would. Besides the nodes that answer, a site has each way a node can fail:

- `down`: its address has no sshd (connection refused);
- `hang`: its sshd accepts the session and runs a sleep (the session never answers);
- `die`: its sshd runs the command, then SIGKILLs the session's processes after
  `die_after` seconds (a host that dies mid-run);
- `badkey`: known_hosts holds another key for it (StrictHostKeyChecking yes);
- `refused`: it does not accept the client's key (BatchMode, no password).

`site.ssh(like={"gw2": "down"})` is an ssh whose config sends a named node the way
of `down`, `hang` or `die` (for a test that fails a gateway by name).

Every session runs through a ForceCommand script that logs the node it reached
(`site.contacted()`) and its pid (`site.session_pid`, in the session's group), so
a test can find what sshd really ran; every process a session starts carries the
site's marker in its environment, and all of them are killed at teardown.

Commands run as the same user on this machine, so a "node" runs this checkout's
spurctl (`PATH` and `PYTHONPATH` are set for every session); `SPURCTL_TEST_NODE`
in a session names the node it reached, for a command that is the same on all.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.cli import WORKTREE, kill_group, running
from tests.tools import require

FAILING = ("down", "hang", "die", "badkey", "refused")
# The failures a node can be given by name through `SshSite.ssh(like=...)`: by address.
BY_ADDRESS = ("down", "hang", "die")


@dataclass(frozen=True)
class SshSite:
    config: Path  # the ssh_config: pass it as `ssh -F config`
    addresses: dict[str, str]  # node name -> 127.0.0.x
    port: int
    dir: Path
    marker: str  # SPURCTL_TEST_SITE in every session's environment

    def ssh(self, like: Mapping[str, str] | None = None) -> str:
        """The ssh program with this site's config, as --ssh and --command take it;
        `like` sends each named node the way of a failing one (down, hang, die)."""
        program = shutil.which("ssh") or require("ssh")
        return f"{program} -F {self._config_like(like or {})}"

    def command(self, remote: str, like: Mapping[str, str] | None = None) -> str:
        """A collect --command template running `remote` on node %h."""
        return f"{self.ssh(like)} %h {remote}"

    def _config_like(self, like: Mapping[str, str]) -> Path:
        if not like:
            return self.config
        for role in like.values():
            assert role in BY_ADDRESS, f"{role}: a node can be made like {BY_ADDRESS}"
        # ssh_config takes each setting's first value: these blocks come before the base.
        blocks = "".join(
            f"Host {name}\n  HostName {self.addresses[role]}\n"
            for name, role in sorted(like.items())
        )
        path = self.config.with_name(f"ssh_config.{random.randrange(10**9)}")
        path.write_text(blocks + self.config.read_text())
        return path

    def contacted(self) -> list[str]:
        """The node of every session sshd ran, in order (one line per session)."""
        log = self.config.parent / "sessions.log"
        return log.read_text().split() if log.exists() else []

    def session_pid(self, node: str) -> int | None:
        """The pid of the latest session's command on `node` (os.getpgid gives the
        session's process group: everything it started, unless it made groups of its own)."""
        path = self.config.parent / "pids" / node
        return int(path.read_text()) if path.exists() else None

    def sessions(self) -> dict[int, list[bytes]]:
        """pid -> argv of each process this site's sessions started that still runs."""
        wanted = f"SPURCTL_TEST_SITE={self.marker}".encode()
        return {pid: argv for pid, argv, env in _processes() if wanted in env}

    def clients(self) -> list[int]:
        """The ssh clients still running with one of this site's configs."""
        home = str(self.config.parent).encode()
        return [
            pid for pid, argv, _env in _processes()
            if argv[:1] and Path(argv[0].decode()).name == "ssh"
            and any(arg.startswith(home) for arg in argv[1:])
        ]  # fmt: skip


def _processes() -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """(pid, argv, environment) of every process this user may read."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                env = (entry / "environ").read_bytes().split(b"\0")
                yield int(entry.name), argv, env


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


def _session_script(home: Path, hang_for: str, die_after: float) -> Path:
    # sshd runs this for every session (ForceCommand); the original command is in
    # SSH_ORIGINAL_COMMAND. sshd makes a session's process its own group leader.
    script = home / "session"
    script.write_text(
        "#!/bin/sh\n"
        'node="${SPURCTL_TEST_NODE:-unnamed}"\n'
        f'echo "$node" >> {home}/sessions.log\n'
        f'echo $$ > {home}/pids/"$node"\n'
        'case "$1" in\n'
        f"  hang) exec sleep {hang_for} ;;\n"
        # GNU timeout kills the whole group (not only its child) when not --foreground.
        f'  die) exec timeout -s KILL {die_after:g} /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;\n'
        "esac\n"
        'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
    )
    script.chmod(0o755)
    (home / "pids").mkdir()
    return script


@contextmanager
def ssh_site(base: Path, nodes: Sequence[str], die_after: float = 1.0) -> Iterator[SshSite]:
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
    marker = f"{port}.{os.getpid()}.{random.randrange(10**6)}"
    hang_for = f"600.{port}{os.getpid()}"
    session = _session_script(home, hang_for, die_after)
    # sshd listens on at most 16 sockets: the nodes that answer share one address
    # (told apart by HostKeyAlias); hang and die have their own for their Match
    # blocks, and nothing listens on the down node's.
    addresses = {
        **{name: "127.0.0.2" for name in [*nodes, "badkey", "refused"]},
        "hang": "127.0.0.3",
        "down": "127.0.0.4",
        "die": "127.0.0.5",
    }
    # Every session runs this checkout's spurctl with this interpreter.
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    listen = "".join(f"ListenAddress {addresses[a]}:{port}\n" for a in ("badkey", "hang", "die"))
    (home / "sshd_config").write_text(
        f"{listen}"
        f"HostKey {host_key}\n"
        f"AuthorizedKeysFile {home / 'authorized_keys'}\n"
        f"PidFile {home / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\nPrintMotd no\nPrintLastLog no\n"
        "MaxStartups 200\nMaxSessions 200\nLogLevel ERROR\n"
        # SHLVL=1: a login shell that is bash then skips ~/.bashrc, which it reads when
        # run by sshd (SSH_CLIENT set, SHLVL < 2); this user's dotfiles are not the site's.
        f"SetEnv PATH={path} PYTHONPATH={WORKTREE} SPURCTL_TEST_SITE={marker} SHLVL=1\n"
        "AcceptEnv SPURCTL_TEST_NODE\n"
        f"ForceCommand {session}\n"
        f"Match LocalAddress {addresses['hang']}\n"
        f"  ForceCommand {session} hang\n"
        f"Match LocalAddress {addresses['die']}\n"
        f"  ForceCommand {session} die\n"
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
        site = SshSite(config, addresses, port, base, marker)
        _wait_listening(proc, "127.0.0.2", port)
        try:
            yield site
        finally:
            kill_group(proc.pid)
            # Sessions are sshd's own process groups: a hung, stopped or orphaned one
            # outlives sshd, so end whatever carries this site's marker.
            for pid in site.sessions():
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


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
