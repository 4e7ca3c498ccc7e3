"""The operator's own defaults: $XDG_CONFIG_HOME/spurctl/config.toml, or the file
$SPURCTL_CONFIG names.

Values an operator would otherwise type on every command (the agent map, the
controller, where inventories come from, the collect command, the acknowledged
controller version), read once per command. A command-line option or its
environment variable wins over the file; the file wins over spur.conf and the
built-in defaults (docs/contract.md "Defaults set once").
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from spurctl.errors import SpurctlError
from spurctl.sources import bounded


class ConfigFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The keys config.toml may hold; any other key is an error, never ignored."""

    controller: str | list[str] | None = None
    agent_map: str | None = None
    inventory: str | list[str] | None = None
    collect: bool | None = None
    collect_command: str | None = None
    ack_version: str | None = None


KEYS = tuple(ConfigFile.__struct_fields__)
# Names the config file to read instead of the XDG one; a file it names must exist.
CONFIG_ENV = "SPURCTL_CONFIG"


@dataclass(frozen=True, slots=True)
class UserConfig:
    """config.toml as read: `path` (None when there is none) and each key's value,
    paths made absolute against the file's own directory."""

    path: Path | None = None
    file: ConfigFile = field(default_factory=ConfigFile)

    @property
    def controller(self) -> str | None:
        c = self.file.controller
        return ",".join(c) if isinstance(c, list) else c

    @property
    def agent_map(self) -> Path | None:
        return self._path(self.file.agent_map)

    @property
    def inventory(self) -> list[str] | None:
        inv = self.file.inventory
        if inv is None:
            return None
        given = [inv] if isinstance(inv, str) else inv
        return [p if p == "-" else str(self._path(p)) for p in given]

    @property
    def collect(self) -> bool | None:
        return self.file.collect

    @property
    def collect_command(self) -> str | None:
        return self.file.collect_command

    @property
    def ack_version(self) -> str | None:
        return self.file.ack_version

    def _path(self, text: str | None) -> Path | None:
        if text is None:
            return None
        path = Path(text).expanduser()
        if not path.is_absolute() and self.path is not None:
            path = self.path.parent / path
        return path


def config_path(environ: dict[str, str] | None = None) -> Path:
    """$SPURCTL_CONFIG when set (one cluster's file, as KUBECONFIG), else
    $XDG_CONFIG_HOME/spurctl/config.toml, ~/.config when XDG_CONFIG_HOME is unset or
    relative (the XDG rule: a relative value is ignored)."""
    env = os.environ if environ is None else environ
    named = env.get(CONFIG_ENV, "")
    if named:
        return Path(named).expanduser()
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "spurctl" / "config.toml"


def _line_of(text: str, key: str) -> int | None:
    """The line (1-based) where `key` is set, for an error message."""
    pattern = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line) or line.strip() in (f"[{key}]", f"[[{key}]]"):
            return number
    return None


_FIX = "fix it or move it aside"


def parse(text: str, path: Path) -> UserConfig:
    """config.toml's text, decoded and validated in one declaration (ConfigFile):
    malformed TOML, an unknown key or a value of the wrong type is one SpurctlError
    naming the file and the line."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends "(at line N, column M)": lead with the place.
        message = str(exc)
        m = re.search(r"\(at (?:line (\d+), column \d+|end of document)\)$", message)
        last = len(text.splitlines()) or 1
        where = f"{path}:{m[1] or last}" if m else str(path)
        what = message[: m.start()].strip() if m else message
        raise SpurctlError(f"{where}: not valid TOML ({what}); {_FIX}") from None
    try:
        file = msgspec.convert(doc, ConfigFile)
    except msgspec.ValidationError as exc:
        message = str(exc)
        unknown = re.match(r"Object contains unknown field `([^`]*)`", message)
        if unknown:
            key = unknown[1]
            line = _line_of(text, key)
            where = f"{path}:{line}" if line else str(path)
            raise SpurctlError(
                f"{where}: unknown key {key!r}; the keys are {', '.join(KEYS)} ({_FIX})"
            ) from None
        at = re.search(r"- at `\$\.([A-Za-z_]+)", message)
        key = at[1] if at else None
        line = _line_of(text, key) if key else None
        where = f"{path}:{line}" if line else str(path)
        what = message.split(" - at ")[0]
        raise SpurctlError(f"{where}: {key or 'value'}: {what} ({_FIX})") from None
    if file.inventory is not None and file.collect:
        line = _line_of(text, "collect")
        raise SpurctlError(
            f"{path}:{line}: set inventory or collect = true, not both: they are two "
            f"sources of the same holdings ({_FIX})"
        )
    return UserConfig(path, file)


# Each file read once while it stays as it was (a command reads it for several options;
# commands called in-process one after another each see the file as it is then).
_loaded: dict[tuple[Path, int, int], UserConfig] = {}


def _stamp(path: Path) -> tuple[Path, int, int]:
    try:
        st = path.stat()
    except OSError:
        return path, -1, -1
    return path, st.st_mtime_ns, st.st_size


def load(path: Path | None = None) -> UserConfig:
    """config.toml (default config_path()); none is no defaults."""
    named = path is None and bool(os.environ.get(CONFIG_ENV))
    path = config_path() if path is None else path
    stamp = _stamp(path)
    if stamp in _loaded:
        return _loaded[stamp]
    try:
        text = bounded.read_text(path, bounded.USER_CONFIG)
    except FileNotFoundError:
        if named:
            raise SpurctlError(
                f"{CONFIG_ENV} names {path}, which does not exist; fix the path or unset "
                f"{CONFIG_ENV}"
            ) from None
        config = UserConfig()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise SpurctlError(f"cannot read {path}: {why}; {_FIX}") from None
    else:
        config = parse(text, path)
    _loaded[stamp] = config
    return config
