"""What the node's own spurd is configured with, read from its process: its command line,
its environment and the spur.conf it reads (crates/spurd/src/main.rs `Args`).

- the controller it registers and heartbeats with: `--controller` (env
  `SPUR_CONTROLLER_ADDR`; a comma-separated list for HA); without either spurd
  dials its built-in `http://localhost:6817`, which names no cluster, so none is
  recorded;
- the cluster: the `cluster_name` of the spur.conf it reads, `-f/--config`
  (default `/etc/spur/spur.conf`); a spur.conf without one fails spurd's own
  validation and spurd runs on defaults, so none is recorded then either;
- where its spurstepd sessions live: `--state-dir` (env `SPUR_STEPD_STATE_DIR`),
  else that spur.conf's `[controller] state_dir`, else `/var/spool/spur` (#754);
- the user it runs as (its effective uid, /proc/<pid>/status): the owner of
  the state directories it makes.

The spur.conf is TOML, read up to MAX_CONF bytes and parsed, never executed; of
it only `cluster_name` and `[controller] state_dir` are kept (it also holds the
cluster's `jwt_key`, which goes nowhere). Standard library only: it is shipped to
nodes (node/shipped_scan.py).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from spurctl.node.node_files import SkipHook, read_bytes, read_text, read_whole
from spurctl.node.node_procs import option_value

CONF = "/etc/spur/spur.conf"
DEFAULT_STATE_DIR = "/var/spool/spur"
CONTROLLER_VAR = "SPUR_CONTROLLER_ADDR"
STATE_DIR_VAR = "SPUR_STEPD_STATE_DIR"
# A spur.conf is a few KiB; one far larger is no spur.conf spurd was meant to read.
MAX_CONF = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """spurd's settings as far as its process shows them (None: not shown, or not set)."""

    controller: str | None = None
    cluster: str | None = None
    state_dir: Path | None = None  # absolute, re-rooted under the scan's sys_root
    euid: int | None = None


def read(proc_root: Path, pid: int, sys_root: Path, skip: SkipHook) -> AgentConfig:
    """What spurd `pid` was started with, its spur.conf read under `sys_root`."""
    here = proc_root / str(pid)
    raw = read_bytes(here / "cmdline", skip, limit=1024 * 1024)
    args = [] if raw is None else [a.decode("utf-8", "replace") for a in raw.split(b"\0")[1:]]
    env = _environment(here / "environ", skip)
    cwd = _cwd(here)

    def given(long: str, var: str, short: str | None = None) -> str | None:
        # clap: the flag, else the environment variable; an empty value counts as unset.
        value = option_value(args, long, short)
        value = value if value is not None else env.get(var)
        return value.strip() or None if value is not None else None

    conf_path = _absolute(option_value(args, "--config", "-f") or CONF, cwd)
    cluster, conf_state_dir = _conf(conf_path, sys_root, skip)
    state_dir = given("--state-dir", STATE_DIR_VAR) or conf_state_dir or DEFAULT_STATE_DIR
    where = _absolute(state_dir, cwd)
    return AgentConfig(
        controller=given("--controller", CONTROLLER_VAR),
        cluster=cluster,
        state_dir=None if where is None else _under(sys_root, where),
        euid=_euid(here / "status", skip),
    )


def _environment(path: Path, skip: SkipHook) -> dict[str, str]:
    """The two variables spurd reads here from its environment, as it was at exec."""
    try:
        raw = read_whole(path)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            skip(path, exc)
        return {}
    out: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        name = key.decode("ascii", "replace")
        if sep and name in (CONTROLLER_VAR, STATE_DIR_VAR):
            out[name] = value.decode("utf-8", "replace")
    return out


def _cwd(here: Path) -> str | None:
    """spurd's working directory, against which it reads a relative path."""
    try:
        return os.readlink(here / "cwd")
    except OSError:
        return None


def _absolute(path: str, cwd: str | None) -> str | None:
    """`path` as spurd opens it; None when it is relative and spurd's directory is unknown."""
    if path.startswith("/"):
        return path
    return None if cwd is None else f"{cwd.rstrip('/')}/{path}"


def _under(sys_root: Path, absolute: str) -> Path:
    return sys_root.joinpath(*[p for p in absolute.split("/") if p])


def _conf(path: str | None, sys_root: Path, skip: SkipHook) -> tuple[str | None, str | None]:
    """spur.conf's `cluster_name` and `[controller] state_dir`, when spurd would load it."""
    if path is None:
        return None, None
    where = _under(sys_root, path)
    if not where.is_file():  # absent, or a FIFO or device an open() could wait on for ever
        return None, None
    raw = read_bytes(where, skip, limit=MAX_CONF)
    if raw is None:
        return None, None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        skip(where, exc)  # spurd fails to load it too, and runs on its defaults
        return None, None
    cluster = doc.get("cluster_name")
    if not isinstance(cluster, str) or not cluster:
        return None, None  # spur-core config.rs `validate`: MissingField("cluster_name")
    controller = doc.get("controller")
    state_dir = controller.get("state_dir") if isinstance(controller, dict) else None
    return cluster, state_dir if isinstance(state_dir, str) and state_dir else None


def _euid(path: Path, skip: SkipHook) -> int | None:
    """The effective uid on /proc/<pid>/status's `Uid:` line (real, effective, saved, fs)."""
    text = read_text(path, skip)
    for line in (text or "").splitlines():
        fields = line.split()
        if fields[:1] == ["Uid:"] and len(fields) >= 3 and fields[2].isdigit():
            return int(fields[2])
    return None
