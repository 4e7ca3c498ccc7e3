"""The operator's defaults, in one order: option > environment variable > config file >
built-in. Every option group (spurctl/options.py) and the commands that read a config
key themselves resolve their values here; under --debug each says where it came from.
"""

from __future__ import annotations

import typing
from typing import Any

import typer

# Option name -> the config.toml key (sources/user_config.py) that may set it.
CONFIG_KEYS = {
    "controller": "controller",
    "conf": "conf",
    "agent_map": "agent_map",
    "inventory": "inventory",
    "collect": "collect",
    "command": "collect_command",
    "ack_version": "ack_version",
}

# Where holdings come from is one choice: either option on the command line
# overrides both of the file's.
SOURCE_OPTIONS = ("inventory", "collect")


def _declared(annotated: Any) -> tuple[str, str | None]:
    info = typing.get_args(annotated)[1]
    flag = next(n for n in (info.default, *info.param_decls) if str(n).startswith("--"))
    envvar = info.envvar if isinstance(info.envvar, str) else None
    return str(flag), envvar


def _shown(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    return str(value)


def configured(
    ctx: typer.Context, given: dict[str, Any], options: list[tuple[str, Any, Any]]
) -> dict[str, Any]:
    """`given` with each option the operator left unset taken from config.toml when the
    file sets it; under --debug, one stderr line per such option saying where its
    value came from."""
    from spurctl.sources import user_config

    keyed = [(name, annotated) for name, annotated, _ in options if name in CONFIG_KEYS]
    if not keyed:
        return given
    config = user_config.load()
    source = {name: getattr(ctx.get_parameter_source(name), "name", "DEFAULT") for name, _ in keyed}
    source_given = any(source.get(n, "DEFAULT") != "DEFAULT" for n in SOURCE_OPTIONS)
    out = dict(given)
    told: list[str] = []
    for name, annotated in keyed:
        flag, envvar = _declared(annotated)
        from_file = getattr(config, CONFIG_KEYS[name])
        if source[name] == "COMMANDLINE":
            origin = "command line"
        elif source[name] == "ENVIRONMENT":
            origin = f"environment variable {envvar}"
        elif name == "command" and given.get("topology") is not None:
            origin = "built-in default (--topology runs --remote-command instead)"
        elif from_file is not None and not (name in SOURCE_OPTIONS and source_given):
            out[name] = from_file
            origin = f"config file {config.path}"
        elif name in SOURCE_OPTIONS and source_given and from_file is not None:
            origin = f"built-in default (the command line chose the source over {config.path})"
        else:
            origin = "built-in default"
        if name == "controller" and out[name] is None:
            origin += " (spur.conf [controller] hosts if it lists any, else http://localhost:6817)"
        told.append(f"{flag} = {_shown(out[name])} (from {origin})")
    if ctx.find_root().params.get("debug"):
        from spurctl.render.terminal import debug_lines

        debug_lines(told)
    return out
