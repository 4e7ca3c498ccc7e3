"""The terminal itself: the reclaim prompt, and what ended a command as one line."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import typer


def usage_error(exc: BaseException) -> str | None:
    """One line for a Click usage error (unknown option, missing or bad value), else None.

    Click's own report is three lines (usage, a hint, the error); the contract
    promises one. Typer vendors Click in recent versions and used Click itself before.
    """
    import importlib

    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            click_exceptions = importlib.import_module(module)
        except ImportError:
            continue
        if not isinstance(exc, click_exceptions.UsageError):
            return None
        no_args = getattr(click_exceptions, "NoArgsIsHelpError", None)
        if no_args is not None and isinstance(exc, no_args):
            exc.show()  # bare `spurctl`: the help is the answer
            return ""
        ctx = getattr(exc, "ctx", None)
        where = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
        no_option = getattr(click_exceptions, "NoSuchOption", None)
        if no_option is not None and isinstance(exc, no_option):
            habit = _habit(exc.option_name, ctx)
            if habit is not None:
                return f"no such option: {exc.option_name}: {habit}"
            return f"no such option: {exc.option_name}{_close(exc)}{where}"
        extra = _extra_arguments(exc, ctx)
        if extra is not None:
            return extra
        return f"{exc.format_message().rstrip('.')}{where}"
    return None


def _options_of(ctx: Any) -> set[str]:
    return {o for p in getattr(ctx.command, "params", ()) for o in getattr(p, "opts", ())}


def _habit(typed: str, ctx: Any) -> str | None:
    """What an option from another tool's habits (kubectl's -o, apt's -y, head's -n,
    sinfo's -t on a command that is not `nodes`) is called here, or None."""
    if ctx is None:
        return None
    path = ctx.command_path
    have = _options_of(ctx)
    if typed == "-o" and "--format" in have:
        return f"the output format is --format here (`{path} ... --format json`)"
    if typed == "-y" and "--yes" in have:
        return f"spurctl spells it --yes (`{path} --yes`)"
    if typed == "-n" and "--last" in have:
        return f"the newest runs are --last N here (`{path} --last 5`)"
    if typed in ("-t", "--state") and "--state" not in have:
        return (
            "choosing nodes by their state is `spurctl nodes -t STATE`'s (as sinfo -t); "
            "list them with it, then name them here with -w"
        )
    return None


def _extra_arguments(exc: Any, ctx: Any) -> str | None:
    """`spurctl reclaim gpu003`: the nodes go to --node on the commands that take them."""
    message = exc.format_message()
    if (
        ctx is None
        or "unexpected extra argument" not in message
        or "--node" not in _options_of(ctx)
    ):
        return None
    import re

    from spurctl.model import NextStep
    from spurctl.render.common import command_line

    given = re.search(r"\(([^()]*)\)\s*\.?$", message.strip())
    nodes = ",".join((given.group(1) if given else "").split()) or "HOSTLIST"
    example = command_line(NextStep((*ctx.command_path.split(), "--node", nodes)))
    return f"{ctx.command_path} takes its nodes as --node HOSTLIST, not as an argument: `{example}`"


def _close(exc: Any) -> str:
    """The options close to what was typed, as a suggestion ("" when none is close):
    Click offers every option sharing a few letters (`--formt`: --fanout, --format)."""
    import difflib

    typed = exc.option_name
    scored = sorted(
        ((difflib.SequenceMatcher(None, typed, p).ratio(), p) for p in exc.possibilities or ()),
        reverse=True,
    )
    close = [p for score, p in scored if score >= 0.6 and score >= scored[0][0] - 0.05]
    if not close:
        return ""
    return f"; did you mean {' or '.join(sorted(close))}?"


def report(exc: BaseException, *, debug: bool) -> int:
    """One line on stderr for what ended the command (with --debug, the traceback
    first, secrets still redacted), and the exit status it earns. The message is one line
    whatever it quotes: a line break or a control character in it (a value from a file,
    from the cluster) is written out (errors.visible), never acted on."""
    from spurctl.errors import Aborted, ExitStatus, Interrupted, SpurctlError, visible
    from spurctl.render.common import command_line

    if isinstance(exc, Aborted):
        print(f"spurctl: aborted: {visible(str(exc))}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, SpurctlError):
        _traceback(debug)
        step = f" `{command_line(exc.step)}`" if exc.step is not None else ""
        print(f"spurctl: error: {visible(str(exc))}{step}", file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt | Interrupted):
        print("spurctl: interrupted", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    if isinstance(exc, typer.Abort):
        print("spurctl: aborted", file=sys.stderr)
        return ExitStatus.ACTION_NEEDED
    usage = usage_error(exc)
    if usage is not None:
        if usage:
            print(f"spurctl: error: {visible(usage)}", file=sys.stderr)
        return ExitStatus.ERROR
    _traceback(debug)
    print(
        f"spurctl: internal error: {type(exc).__name__}: {visible(str(exc))} "
        "(rerun with --debug for a traceback and report it)",
        file=sys.stderr,
    )
    return ExitStatus.ERROR


def _traceback(debug: bool) -> None:
    if debug:
        import traceback

        print(traceback.format_exc(), file=sys.stderr, end="")


def debug_lines(lines: list[str]) -> None:
    """--debug's account of the command's settings: one stderr line each."""
    for line in lines:
        print(f"spurctl: debug: {line}", file=sys.stderr)


def warn_lines(notes: Iterable[str]) -> None:
    """Each note as one warning line, its line breaks spaces and any control character
    it quotes from the cluster written out: where stdout carries a table's rows alone
    (--no-header), what the view's notes say still reaches stderr."""
    from spurctl.errors import visible, warn

    for note in notes:
        warn(visible(" ".join(note.splitlines())))
