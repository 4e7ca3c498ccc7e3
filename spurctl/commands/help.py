"""How `--help` reads: options in their groups, and every command's summary whole.

The app keeps Click's plain formatting (rich_markup_mode=None: a page that pipes and
greps as text); these classes only change what it lists. A command's own options come
first, then the shared groups each option names with `rich_help_panel=` (options.py):
Nodes, Holdings, Connection, Output, in that order. A group lists each subcommand's
first sentence whole, wrapped if it must be, never cut to "...".

`-h` is the help everywhere but on audit and nodes, where it is --no-header as on
sinfo and squeue (HELP_ONLY_LONG).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

from spurctl.errors import Interrupted

# The order --help lists the shared groups in, after the command's own options.
PANELS = ("Nodes", "Holdings", "Connection", "Output")
OWN = "Options"

# Root context settings: -h is --help on every command that does not take it back.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
# Where -h is --no-header (audit, nodes: as sinfo -h and squeue -h).
HELP_ONLY_LONG: dict[str, Any] = {"help_option_names": ["--help"]}

# Click cuts a summary past this many columns; a summary is one short sentence, so this
# only ever keeps it whole.
_WHOLE = 10_000


def _grouped_options(command: Any, ctx: Any, formatter: Any) -> None:
    """Arguments, then the command's own options, then each shared group's, each under
    its heading."""
    arguments: list[tuple[str, str]] = []
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        if param.param_type_name == "argument":
            arguments.append(record)
            continue
        panel = getattr(param, "rich_help_panel", None) or OWN
        panels.setdefault(panel, []).append(record)
    if arguments:
        with formatter.section("Arguments"):
            write_dl(formatter, arguments)
    known = [OWN, *PANELS]
    order = known + [p for p in panels if p not in known]
    for panel in order:
        if panel in panels:
            with formatter.section(panel):
                write_dl(formatter, panels[panel])


def write_dl(formatter: Any, rows: list[tuple[str, str]], col_max: int = 30) -> None:
    """Click's definition list (an option or command, then its help), its help wrapped
    at spaces only: a kind such as below-watermark-unknown is never cut at a hyphen."""
    import textwrap

    spacing = 2
    first_col = min(max(len(first) for first, _ in rows), col_max) + spacing
    indent = formatter.current_indent
    for first, second in rows:
        formatter.write(f"{'':>{indent}}{first}")
        if not second:
            formatter.write("\n")
            continue
        if len(first) <= first_col - spacing:
            formatter.write(" " * (first_col - len(first)))
        else:
            formatter.write("\n" + " " * (first_col + indent))
        width = max(formatter.width - first_col - 2, 10)
        lines = textwrap.wrap(second, width, break_on_hyphens=False, break_long_words=False)
        formatter.write(f"{lines[0] if lines else ''}\n")
        for line in lines[1:]:
            formatter.write(f"{'':>{first_col + indent}}{line}\n")


class HelpCommand(TyperCommand):
    """A command whose --help lists its options by group."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _grouped_options(self, ctx, formatter)


class ChangingCommand(HelpCommand):
    """A command that changes nodes or the controller: SIGTERM and SIGHUP stop it as Ctrl-C
    does (act/stops.stops_as_ctrl_c), so what it sent is said, whatever stopped it."""

    def invoke(self, ctx: Any) -> Any:
        from spurctl.act.stops import stops_as_ctrl_c

        with stops_as_ctrl_c():
            return super().invoke(ctx)


class HelpGroup(TyperGroup):
    """A group whose --help lists its options by group and each command's summary whole,
    and whose commands' Ctrl-C reaches `main` to be said (errors.Interrupted)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # Typer would end the run with 130, saying nothing
            raise Interrupted() from exc

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _grouped_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.get_short_help_str(_WHOLE)))
        if rows:
            with formatter.section("Commands"):
                write_dl(formatter, rows)
