"""The operator's own defaults: $XDG_CONFIG_HOME/spurctl/config.toml, or the file
$SPURCTL_CONFIG names.

Values an operator would otherwise type on every command (the agent map, the
controller, spur.conf, the cluster's name, where inventories come from, the collect
command, the acknowledged controller version, the journal), read once per command; for several
clusters, one `[contexts.NAME]` table each, chosen by --context, SPURCTL_CONTEXT or
the file's `current_context`, as kubectl's contexts are. A command-line option or its
environment variable wins over the file; the file wins over spur.conf and the
built-in defaults (docs/contract.md "Defaults set once").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec

from spurctl.errors import SpurctlError
from spurctl.sources import bounded


class ContextKeys(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The keys one cluster's settings may hold, at the top of config.toml (every
    context's defaults) or in a `[contexts.NAME]` table (that cluster's own)."""

    controller: str | list[str] | None = None
    conf: str | None = None
    cluster: str | None = None
    agent_map: str | None = None
    inventory: str | list[str] | None = None
    collect: bool | None = None
    collect_command: str | None = None
    ack_version: str | None = None
    # The journal every command reads and writes when no --journal names one: one per
    # context keeps each cluster's runs apart (the demo's lives in its own directory).
    journal: str | None = None


class ConfigFile(ContextKeys, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The keys config.toml may hold; any other key is an error, never ignored.

    Several clusters (as kubectl's contexts): `[contexts.NAME]` tables, each with a
    cluster's own keys, and `current_context`, the one used when no --context names
    one. A file without contexts is one cluster's, as it always was.
    """

    current_context: str | None = None
    contexts: dict[str, ContextKeys] | None = None


KEYS = tuple(ConfigFile.__struct_fields__)
CONTEXT_KEYS = tuple(ContextKeys.__struct_fields__)
# Names the config file to read instead of the XDG one; a file it names must exist.
CONFIG_ENV = "SPURCTL_CONFIG"
# Names the context to use when --context does not (as --context, it must exist).
CONTEXT_ENV = "SPURCTL_CONTEXT"
# Where holdings come from is one choice: a context that sets either replaces both.
_SOURCE_KEYS = ("inventory", "collect")


@dataclass(frozen=True, slots=True)
class UserConfig:
    """config.toml as read: `path` (None when there is none), each key's value for the
    context in use (`context`, None: the file's top-level keys alone), paths made
    absolute against the file's own directory."""

    path: Path | None = None
    file: ContextKeys = field(default_factory=ConfigFile)
    context: str | None = None
    contexts: tuple[str, ...] = ()

    @property
    def cluster_name(self) -> str | None:
        """What the file calls the cluster: its `cluster` key, else the context's name."""
        return self.file.cluster or self.context

    @property
    def conf(self) -> Path | None:
        return self._path(self.file.conf)

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

    @property
    def journal(self) -> Path | None:
        return self._path(self.file.journal)

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


# A part of a dotted TOML key: bare, or quoted either way.
_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""


def _line_of(text: str, key: str) -> int | None:
    """The line (1-based) where `key` is set (alone, or as the last part of a dotted key:
    `contexts.a.collect = true`), or where table `key` opens, for an error message."""
    quoted = rf"""(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')"""
    pattern = re.compile(rf"^\s*(?:{_KEY_PART}\s*\.\s*)*{quoted}\s*=")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line) or line.strip() in (f"[{key}]", f"[[{key}]]"):
            return number
    return None


def _at(path: Path, line: int | None) -> str:
    """Where an error is: `PATH:LINE`, or the file alone when no line can be named."""
    return f"{path}:{line}" if line else str(path)


_FIX = "fix it or move it aside"


def parse(text: str, path: Path) -> UserConfig:
    """config.toml's text, decoded and validated in one declaration (ConfigFile):
    malformed TOML, an unknown key or a value of the wrong type is one SpurctlError
    naming the file and the line."""
    import tomllib  # only where a config.toml exists

    try:
        doc = tomllib.loads(text)
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise SpurctlError(f"{path}: not valid TOML (nested too deep to read); {_FIX}") from None
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
            where = _at(path, _line_of(text, key))
            in_table = " - at `$.contexts" in message
            allowed = CONTEXT_KEYS if in_table else KEYS
            what = "a context's keys are" if in_table else "the keys are"
            raise SpurctlError(
                f"{where}: unknown key {key!r}; {what} {', '.join(allowed)} ({_FIX})"
            ) from None
        at = re.search(r"- at `\$\.([A-Za-z_]+)", message)
        key = at[1] if at else None
        where = _at(path, _line_of(text, key) if key else None)
        what = message.split(" - at ")[0]
        raise SpurctlError(f"{where}: {key or 'value'}: {what} ({_FIX})") from None
    for keys in (file, *(file.contexts or {}).values()):
        if keys.inventory is not None and keys.collect:
            where = _at(path, _line_of(text, "collect"))
            raise SpurctlError(
                f"{where}: set inventory or collect = true, not both: they are two "
                f"sources of the same holdings ({_FIX})"
            )
    from spurctl.sources.cluster_binding import cluster_name

    for name, keys in [(None, file), *(file.contexts or {}).items()]:
        table = f"contexts.{name}" if name is not None else None
        where = _at(path, _line_of(text, table) if table else _line_of(text, "cluster"))
        if name is not None:
            _check_name(name, where)
        if keys.cluster is not None:
            cluster_name(keys.cluster, where)
    contexts = tuple(file.contexts or {})
    if file.current_context is not None and file.current_context not in contexts:
        where = _at(path, _line_of(text, "current_context"))
        raise SpurctlError(
            f"{where}: current_context {file.current_context!r} is not one of its "
            f"contexts ({_known(contexts)}); {_FIX}"
        )
    return UserConfig(path, file, None, contexts)


def _check_name(name: str, where: str) -> None:
    if not name or not name.isprintable() or name != name.strip() or "," in name:
        raise SpurctlError(f"{where}: a context's name must be a plain word, not {name!r} ({_FIX})")


def _known(contexts: tuple[str, ...]) -> str:
    return ", ".join(contexts) if contexts else "it has none: add [contexts.NAME] tables"


def in_context(config: UserConfig, name: str | None, *, named_by: str = "--context") -> UserConfig:
    """`config` as the context `name` sees it (None: the file's `current_context`, else
    its top-level keys alone): the context's keys over the top-level ones, the holdings'
    source taken whole from the context when it sets one. An unknown name is one
    SpurctlError listing the contexts there are."""
    whole = config.file
    if not isinstance(whole, ConfigFile):
        return config
    chosen = name or whole.current_context
    if chosen is None:
        return replace(config, file=_keys(whole))
    own = (whole.contexts or {}).get(chosen)
    if own is None:
        where = config.path or config_path()
        if config.path is None:
            raise SpurctlError(
                f"{named_by} {chosen}: there is no config file ({where}); write one with "
                "[contexts.NAME] tables, or drop the context"
            )
        raise SpurctlError(
            f"{named_by} {chosen}: no such context in {where}; its contexts: "
            f"{_known(config.contexts)}"
        )
    merged = {key: getattr(whole, key) for key in CONTEXT_KEYS}
    given = {key: getattr(own, key) for key in CONTEXT_KEYS if getattr(own, key) is not None}
    if any(key in given for key in _SOURCE_KEYS):
        for key in _SOURCE_KEYS:
            merged[key] = None
    merged.update(given)
    return replace(config, file=ContextKeys(**merged), context=chosen)


def _keys(whole: ConfigFile) -> ContextKeys:
    return ContextKeys(**{key: getattr(whole, key) for key in CONTEXT_KEYS})


# Each file read once while it stays as it was (a command reads it for several options;
# commands called in-process one after another each see the file as it is then).
_loaded: dict[tuple[Path, int, int], UserConfig] = {}


def _stamp(path: Path) -> tuple[Path, int, int]:
    try:
        st = path.stat()
    except OSError:
        return path, -1, -1
    return path, st.st_mtime_ns, st.st_size


# The context this command uses (--context, SPURCTL_CONTEXT), set once per command by the
# app's root option (cli.py); None: the file's current_context, if any.
_context: list[str | None] = [None]


def use_context(name: str | None) -> None:
    """Use context `name` for the rest of this command (None: the file's own choice);
    a name the file does not have is an error now, before anything is read."""
    _context[0] = name
    if name is not None:
        load()


def context_flags() -> list[str]:
    """`--context NAME` for the context this command uses, for a command printed to run
    next: pasted later, it must read the same cluster whatever the file's current_context
    or the shell's SPURCTL_CONTEXT is by then (none when no context is in use)."""
    name = load().context
    return [] if name is None else ["--context", name]


def default_journal() -> Path:
    """The journal when no --journal names one: the config file's `journal` (the context's),
    else $XDG_STATE_HOME/spurctl/journal.jsonl. Here, not in act/journal.py: a command that
    only reads the journal (audit) would import the journal's writer (~6 ms) to name it."""
    named = load().journal
    if named is not None:
        return named
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "spurctl" / "journal.jsonl"


def load(path: Path | None = None) -> UserConfig:
    """config.toml (default config_path()) as the context in use sees it; none is no
    defaults."""
    return in_context(_read(path), _context[0])


def _read(path: Path | None = None) -> UserConfig:
    """config.toml (default config_path()), every context in it."""
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
