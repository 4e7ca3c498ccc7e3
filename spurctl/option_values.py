"""Values typed on the command line, read once: numbers in their range, durations, times.

Every numeric option of every command is parsed by one of these
(tests/unit/test_option_numbers.py checks it), so each says what it takes in the
same words, and no option takes a number any other way.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from spurctl.defaults import DEFAULT_LOCK_WAIT_S
from spurctl.errors import SpurctlError
from spurctl.model import MAX_JOB_ID

# The parsers every numeric option uses; tests/unit/test_option_numbers.py checks that
# no option of any command takes a number any other way.
NUMBER_PARSERS: set[Callable[..., Any]] = set()

# Upper bounds where nothing else bounds a number: a day for a wait, and Linux's own
# limits for ports.
DAY_S = 86_400.0


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _range_text(low: float, high: float | None) -> str:
    return f"of at least {_plain(low)}" if high is None else f"from {_plain(low)} to {_plain(high)}"


def number(kind: type[int] | type[float], low: float, high: float | None = None) -> Any:
    """A parser for a numeric option: a finite `kind` from `low` to `high` (None: no
    bound), else a usage error naming the option and the range (exit 2)."""
    what = "whole number" if kind is int else "number"

    def parse(value: str | int | float) -> int | float:
        text = str(value).strip()
        try:
            parsed: int | float = int(text) if kind is int else float(text)
        except ValueError:
            raise typer.BadParameter(
                f"{text!r} is not a {what}; give a {what} {_range_text(low, high)}"
            ) from None
        if not math.isfinite(parsed):
            raise typer.BadParameter(
                f"{text!r} is not a finite number; give a {what} {_range_text(low, high)}"
            )
        if parsed < low or (high is not None and parsed > high):
            raise typer.BadParameter(
                f"{text} is out of range; give a {what} {_range_text(low, high)}"
            )
        return parsed

    NUMBER_PARSERS.add(parse)
    return parse


def number_option(
    *names: str, kind: type[int] | type[float], low: float, high: float | None = None, **kw: Any
) -> Any:
    """typer.Option for a number, parsed by `number` (its range shown in --help)."""
    help_text = kw.pop("help", "")
    shown = f"[{_range_text(low, high)}]"
    return typer.Option(*names, parser=number(kind, low, high), help=f"{help_text}  {shown}", **kw)


def job_id_parser() -> Any:
    """A Spur job id: a uint32 (docs/spur-facts.md "Job ids")."""
    return number(int, 0, MAX_JOB_ID)


_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str | float) -> float:
    """'90s', '10m', '1h', '2d' or plain seconds -> seconds; a usage error otherwise."""
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip().lower()
        unit = _DURATION_UNITS.get(text[-1:]) if text else None
        number = text[:-1] if unit is not None else text
        try:
            seconds = float(number) * (unit or 1.0)
        except ValueError:
            raise typer.BadParameter(
                f"{value!r} is not a duration; write it like 90s, 10m or 1h"
            ) from None
    if not seconds > 0 or seconds == float("inf"):
        raise typer.BadParameter(f"{value!r} must be a positive duration, e.g. 10m")
    return seconds


NUMBER_PARSERS.add(parse_duration)


def since_time(value: str | datetime) -> datetime:
    """A time, or a span back from now: RFC 3339 / ISO 8601 (naive is UTC), or '2h',
    '30m', '90s', '2d'; a usage error naming both forms otherwise."""
    if isinstance(value, datetime):
        return value
    from spurctl.model import parse_time, utcnow

    text, when = value.strip(), None
    try:  # a span reaching back past the year 1 overflows: a usage error too
        if text[-1:].lower() in _DURATION_UNITS:
            return utcnow() - timedelta(seconds=parse_duration(text))
        when = parse_time(text)
    except (ValueError, OverflowError):
        pass
    if when is None:
        raise typer.BadParameter(
            f"{value!r} is neither a time (ISO 8601, e.g. 2026-12-02T14:00:00Z) nor a span "
            "back from now (e.g. 2h, 30m, 2d), either no earlier than the year 1"
        )
    return when


def rfc3339(text: str, option: str) -> datetime:
    """`option`'s value as a time, or the one line saying it is not one."""
    from spurctl.model import parse_time

    try:
        when = parse_time(text)
    except ValueError:
        when = None
    if when is None:
        raise SpurctlError(f"{option} {text!r} is not an RFC 3339 time (e.g. 2026-12-01T14:02:11Z)")
    return when


def _count_or_percent(text: str) -> tuple[int | None, float | None] | None:
    """`N` (0 or more) as (N, None), `P%` (above 0, at most 100) as (None, P); None for
    anything else. The one reading of `--max-unavailable` and `--breaker`."""
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if math.isfinite(percent) and 0 < percent <= 100:
                return None, percent
        elif (count := int(text)) >= 0:
            return count, None
    except ValueError:
        pass
    return None


def parse_max_unavailable(value: str | object) -> Any:
    """`--max-unavailable N|P%`: a number of nodes (0 or more), or a percentage of the
    nodes the controller lists (more than 0, at most 100; never fewer than one node)."""
    from spurctl.decide.budget import MaxUnavailable

    if isinstance(value, MaxUnavailable):
        return value
    text = str(value).strip()
    read = _count_or_percent(text)
    if read is not None:
        return MaxUnavailable(count=read[0], percent=read[1])
    raise typer.BadParameter(
        f"{text!r} is neither a number of nodes (0 or more) nor a percentage of the "
        "controller's nodes (above 0%, at most 100%), e.g. 5 or 2%"
    )


NUMBER_PARSERS.add(parse_max_unavailable)


def parse_breaker(value: str | object) -> Any:
    """`--breaker N|P%`: a number of nodes needing action (0: any), or a percentage of the
    audited nodes (above 0, at most 100; never below 10 nodes)."""
    from spurctl.decide.autopilot import Threshold

    if isinstance(value, Threshold):
        return value
    text = str(value).strip()
    read = _count_or_percent(text)
    if read is not None:
        return Threshold(count=read[0], percent=read[1])
    raise typer.BadParameter(
        f"{text!r} is neither a number of nodes (0 or more) nor a percentage of the audited "
        "nodes (above 0%, at most 100%), e.g. 10 or 5%"
    )


NUMBER_PARSERS.add(parse_breaker)


def parse_per_hour(value: str | int) -> int:
    """`--max-actions N/h` (or N): mutating calls in a sliding hour, 1 or more."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    number_text = text.removesuffix("/h")
    if number_text.isdigit() and int(number_text) >= 1:
        return int(number_text)
    raise typer.BadParameter(f"{text!r} is not a number of calls per hour, e.g. 60/h")


NUMBER_PARSERS.add(parse_per_hour)


def parse_wait(value: str | float) -> float:
    """A duration that may be 0 (`--grace 0`: act at first sight), as parse_duration."""
    if isinstance(value, int | float) and value == 0:
        return 0.0
    if isinstance(value, str) and value.strip().lower() in ("0", "0s", "0.0"):
        return 0.0
    return parse_duration(value)


NUMBER_PARSERS.add(parse_wait)


def journal_at(given: Path | None) -> Path:
    """The journal a command reads or writes: --journal, else the default. Resolved at the
    command's edge, once; everything below takes the path it is handed."""
    # Named through user_config, not act/journal.py: a command that only reads the journal
    # (audit) would import the journal's writer (~6 ms) to name it.
    from spurctl.sources.user_config import default_journal

    return given if given is not None else default_journal()


@dataclass(frozen=True, slots=True)
class ChangeOptions:
    """How a changing command was told to go (options.changing): a dry run or not, whether
    to prompt, its journal; where a dry run's plan is saved (-o), which saved plan to
    carry out (--plan)."""

    dry_run: bool = False
    yes: bool = False
    # --journal as typed: the printed next steps repeat it only when it was given.
    journal_path: Path | None = None
    output: Path | None = None
    plan_file: Path | None = None
    # --lock-wait: how long a real run waits for the journal's lock before it refuses.
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S

    @property
    def journal(self) -> Path:
        """The journal this run reads and writes (--journal, else the default)."""
        return journal_at(self.journal_path)


# -- options back as argv: which values a printed next command must state ----------------

# ctx.meta's key: the options whose value came from the environment or config.toml.
_IMPLIED = "spurctl.implied_options"


def note_implied(ctx: typer.Context, given: dict[str, Any], values: dict[str, Any]) -> None:
    """Remember which options' values the command line did not state (an environment
    variable's, config.toml's): a printed command pasted here finds them as this one did,
    so it leaves them out and the nodes it names stand out."""
    implied: set[str] = ctx.meta.setdefault(_IMPLIED, set())
    for name in given:
        source = getattr(ctx.get_parameter_source(name), "name", "DEFAULT")
        if source == "ENVIRONMENT" or (source != "COMMANDLINE" and values[name] != given[name]):
            implied.add(name)


def _implied() -> set[str]:
    from typer.main import get_current_context

    ctx = get_current_context(silent=True)
    return set() if ctx is None else set(ctx.meta.get(_IMPLIED, ()))


def as_flags(group: object, options: list[tuple[str, Any, Any]]) -> list[str]:
    """The argv words that give each of `options` the value `group` holds, for those
    not at their default nor set by the environment or config.toml (a command pasted
    here reads those as this one did), read off the options' own declarations."""
    words: list[str] = []
    implied = _implied()
    for name, annotated, default in options:
        value = getattr(group, name)
        if value == default or name in implied:
            continue
        info = typing.get_args(annotated)[1]
        flag = next(n for n in (info.default, *info.param_decls) if str(n).startswith("--"))
        if isinstance(value, list):  # a repeatable option: once per value
            words += [w for v in value for w in (flag, str(v))]
        else:
            words += [flag] if value is True else [flag, str(value)]
    return words
