"""What every report shares: the format choices, how findings are ordered and
worded, the JSON header, and how text reaches a file or stdout.

cli imports this module to declare its options, so it stays light: tabulate
and tempfile are imported where they are used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar, cast

import msgspec

from spurctl.errors import SpurctlError, redact, visible
from spurctl.hostlist import fold, natural_key
from spurctl.model import Action, AuditReport, Finding, Kind, NextStep, Watermark, format_time

if TYPE_CHECKING:
    from rich.console import Console

    from spurctl.render.environment import Environment

# -- format choices ----------------------------------------------------------


class AuditFormat(enum.StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    MARKDOWN = "markdown"
    PROMETHEUS = "prometheus"


class ReclaimFormat(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


class NodesFormat(enum.StrEnum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"


class ChecklistFormat(enum.StrEnum):
    MARKDOWN = "markdown"
    JSON = "json"


F = TypeVar("F", bound=enum.StrEnum)


def choose(choices: type[F], fmt: str, command: str | None = None) -> F:
    """`fmt` as one of `choices`; an operator error naming them all otherwise."""
    try:
        return choices(fmt)
    except ValueError:
        *most, last = (c.value for c in choices)
        where = f" for {command}" if command else ""
        raise SpurctlError(
            f"unknown format {fmt!r}{where}; use {', '.join(most)} or {last}"
        ) from None


# -- severity ----------------------------------------------------------------

# One label per severity wherever a screen or a document says it (stderr says
# errors.WARNING_PREFIX and NOTE_PREFIX): what the operator must weigh (an incomplete
# view, withheld findings), and what only informs (the controller-version note).
WARNING_LABEL = "WARNING:"
NOTE_LABEL = "NOTE:"


def note_label(note: str, version_note: str | None) -> str:
    """The label of one of a view's notes: NOTE for the controller-version note, WARNING
    for every other."""
    return NOTE_LABEL if note == version_note else WARNING_LABEL


# -- findings, in the order and words an operator reads them ----------------

# Most urgent first: what an operator acts on belongs at the top.
_ACTION_RANK = {Action.RECLAIM: 0, Action.INVESTIGATE: 1, Action.SPARE: 2, Action.NONE: 3}
ACTION_RANK: Mapping[Action, int] = _ACTION_RANK
ACTION_STYLE = {
    Action.RECLAIM: "red",
    Action.INVESTIGATE: "yellow",
    Action.SPARE: "cyan",
    Action.NONE: "green",
}


def grouped(findings: Iterable[Finding]) -> list[tuple[str, list[Finding]]]:
    """Findings grouped by node, in the order every format uses (nodes in natural
    order, then action, most urgent first, then job: `classify`'s order)."""
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.node, []).append(f)
    for rows in groups.values():
        rows.sort(key=lambda f: (_ACTION_RANK[f.action], f.job_id is None, f.job_id or 0))
    return sorted(groups.items(), key=lambda g: natural_key(g[0]))


def folded(
    findings: Iterable[Finding], extra: Callable[[Finding], tuple[str, ...]] | None = None
) -> list[tuple[Finding, Finding]]:
    """The findings as a person reads them, each as (what is drawn, a finding it stands
    for): findings that name no job and differ only in their node (same kind, action,
    live, controller state, allocated nodes, `extra` columns, and reason once the
    node's name is taken out) are one row, its node the folded hostlist and its
    reason saying how many nodes, as sinfo and clush fold. A row naming a job is
    always its own. Each row keeps the place of its first finding."""
    rows: list[tuple[Finding, list[Finding] | None]] = []
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for f in findings:
        if f.job_id is not None:
            rows.append((f, None))
            continue
        key = (
            f.kind,
            f.action,
            f.live,
            f.controller_state,
            f.allocated_nodes,
            f.reason.replace(f.node, "\0"),
            *(extra(f) if extra else ()),
        )
        group = groups.get(key)
        if group is None:
            groups[key] = group = []
            rows.append((f, group))  # the group's place: where its first finding was
        group.append(f)
    out: list[tuple[Finding, Finding]] = []
    for first, group in rows:
        if group is None or len(group) == 1:
            out.append((first, first))
            continue
        nodes = fold(f.node for f in group)
        reason = f"{first.reason.replace(first.node, nodes)} ({len(group):,} nodes)"
        out.append((msgspec.structs.replace(first, node=nodes, reason=reason), first))
    return out


# A folded row's node cell at most this wide: its reason carries the whole hostlist,
# which for scattered nodes (every other one) runs to thousands of ranges.
NODE_CELL = 40


def node_cell(hostlist: str) -> str:
    """A folded row's node column: the hostlist, cut with an ellipsis past NODE_CELL."""
    return hostlist if len(hostlist) <= NODE_CELL else hostlist[: NODE_CELL - 1] + "…"


def live_text(live: bool | None) -> str:
    return "" if live is None else ("yes" if live else "no")


def job_text(job_id: int | None) -> str:
    return "-" if job_id is None else str(job_id)


def _count(n: int, word: str) -> str:
    """'1 node', '24 nodes': a count as the summary lines print it (no thousands commas,
    as they always have)."""
    return f"{n} {word if n == 1 else word + 's'}"


def summary_line(report: AuditReport) -> str:
    counts = report.by_kind
    # Contract order, so the same kinds always appear in the same place.
    by_kind = ", ".join(f"{k.value} {counts[k.value]}" for k in Kind if k.value in counts)
    return (
        f"{_count(report.nodes_in_scope, 'node')} in scope, "
        f"{report.nodes_inventoried} inventoried; "
        f"findings: {by_kind or 'none'}; {report.needs_action} "
        f"{'needs' if report.needs_action == 1 else 'need'} action."
    )


def spur_version(version: str) -> str:
    """What a report header says of the controller's version (PingResponse.version)."""
    return f"Spur {version}" if version else "Spur version not reported"


def text_time(moment: datetime) -> str:
    """A time as text reports show it: `2026-12-02 14:47 UTC` (machine output keeps
    RFC 3339)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def context_line(report: AuditReport) -> str:
    if report.view_complete:
        # Every job that can hold a node (an audit reads those and the held ids, not every
        # ended job: the JSON `view` counts them); one line at 120 columns.
        view = "complete"
    else:
        view = f"INCOMPLETE ({report.jobs_seen} of {_count(report.jobs_total, 'job')} seen)"
    cluster = getattr(report, "cluster", None)
    return (
        (f"Cluster {cluster}: controller " if cluster else "Controller ")
        + f"{report.controller_address} ({spur_version(report.controller_version)}), "
        "view taken "
        f"{text_time(report.taken_at)}: {view}; watermark {report.watermark.value} "
        f"({report.watermark.source})."
    )


def no_discrepancies(report: AuditReport) -> str:
    """What an audit without findings says: "No discrepancies" only when every node in
    scope was audited (docs/contract.md, "Exit status")."""
    unaudited = report.nodes_in_scope - report.nodes_inventoried
    if unaudited > 0:
        return (
            f"No findings shown, but {unaudited} of {_count(report.nodes_in_scope, 'node')} in "
            "scope were not audited."
        )
    return (
        f"No discrepancies: {_count(report.nodes_in_scope, 'node')}, "
        f"{report.nodes_inventoried} inventoried."
    )


# -- the JSON header ---------------------------------------------------------


class ViewedReport(Protocol):
    """A report made from one controller view: what its JSON header says."""

    @property
    def controller_address(self) -> str: ...
    @property
    def controller_version(self) -> str: ...
    @property
    def taken_at(self) -> datetime: ...
    @property
    def watermark(self) -> Watermark: ...
    @property
    def view_complete(self) -> bool: ...
    @property
    def jobs_seen(self) -> int: ...
    @property
    def jobs_total(self) -> int: ...
    @property
    def notes(self) -> Sequence[str]: ...


def watermark_document(watermark: Watermark) -> dict[str, Any]:
    return {"value": watermark.value, "source": str(watermark.source)}


def report_header(report: ViewedReport) -> dict[str, Any]:
    """The controller, watermark, view and notes keys every report document carries."""
    return {
        "controller": {
            # The cluster's name (spur.conf's cluster_name, else the config file's); null
            # when neither names it.
            "cluster": getattr(report, "cluster", None),
            "address": report.controller_address,
            "version": report.controller_version,
            # Seconds: no reader needs more of a report's moment (a snapshot keeps the
            # exact one, which offline inventory ages are computed from).
            "taken_at": format_time(report.taken_at.replace(microsecond=0)),
        },
        "watermark": watermark_document(report.watermark),
        "view": {
            "complete": report.view_complete,
            "jobs_seen": report.jobs_seen,
            "jobs_total": report.jobs_total,
        },
        "notes": list(report.notes),
    }


def dump_json(doc: Any) -> str:
    """The document as indented JSON, keys in their order, text unescaped.

    msgspec encodes in C; the json module's indented encoder is pure Python and took
    0.4 s for a 10,000-finding audit.
    """
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode()


# -- text from the cluster ---------------------------------------------------------

T = TypeVar("T")
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        if hasattr(cls, "__struct_fields__"):
            names = tuple(cls.__struct_fields__)
        else:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
        _FIELDS[cls] = names
    return names


# What JSON makes of a control character (an escape, or DEL, a C1 control or an
# invisible line-breaker left as UTF-8): found in the encoded value at C speed, so
# a cluster without such text costs one encode, not a walk through every finding.
_CONTROL_IN_JSON = re.compile(
    rb"\\(?:u00|u20[0-2]|u206|ufeff|[bfnrt])|\x7f|\xc2[\x80-\x9f]|"
    rb"\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xef\xbb\xbf"
)


def escaped(value: T) -> T:
    """`value` with every control character in its text written out (errors.visible):
    what a text renderer draws, so that a node name carrying ESC, an OSC title, BEL
    or CR is shown rather than acted on by the terminal. JSON is never escaped.

    Strings inside dicts, lists, tuples, dataclasses and msgspec structs are
    escaped; an object with nothing to escape is returned as it is (no copy).
    """
    try:
        text = msgspec.json.encode(value)
        # Plain ASCII with no escape and no DEL holds no control character; a scan of
        # every byte for them all costs 4x as much (a 20,000-node watch round: 20 ms).
        if text.isascii() and b"\\" not in text and b"\x7f" not in text:
            return value
        if not _CONTROL_IN_JSON.search(text):
            return value
    except (TypeError, ValueError):  # a type JSON cannot encode: look at every string
        pass
    return cast(T, _escape(value, {}))


def _escape(value: Any, seen: dict[int, Any]) -> Any:
    if value is None or isinstance(value, int | float | enum.Enum | datetime):
        return value
    if isinstance(value, str):
        return visible(value)
    # One copy per object: two references to one finding (a watch round's report and
    # its history) stay one object, so what is looked up by identity is still found.
    done = seen.get(id(value))
    if done is not None:
        return done
    out: Any = value
    if isinstance(value, dict):
        pairs = [(_escape(k, seen), _escape(v, seen)) for k, v in value.items()]
        if any(
            a is not b or x is not y for (a, x), (b, y) in zip(pairs, value.items(), strict=True)
        ):
            out = type(value)(pairs)
    elif isinstance(value, list | tuple):
        items = [_escape(v, seen) for v in value]
        if any(a is not b for a, b in zip(items, value, strict=True)):
            out = (
                items
                if isinstance(value, list)
                else getattr(type(value), "_make", type(value))(items)
            )
    elif hasattr(type(value), "__struct_fields__") or dataclasses.is_dataclass(value):
        changed = {}
        for name in _fields(type(value)):
            old = getattr(value, name)
            new = _escape(old, seen)
            if new is not old:
                changed[name] = new
        if changed and hasattr(type(value), "__struct_fields__"):
            out = msgspec.structs.replace(value, **changed)
        elif changed:
            out = dataclasses.replace(value, **changed)
    seen[id(value)] = out
    return out


def csv_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run as a formula: OWASP's rule, a leading
    quote on a cell that starts with = + - @ tab or CR. Otherwise exact, as JSON is:
    the csv module quotes what needs it."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


# -- layout ------------------------------------------------------------------

_PIPE_WIDTH = 120


def console_for(env: Environment, file: TextIO | None = None) -> Console:
    """A rich console that takes every string as text, never as markup, for what `env`
    says stdout is: a terminal (its width, colour unless NO_COLOR), or else a pipe or a
    file, where every line is whole however long (colour only under FORCE_COLOR)."""
    from rich.console import Console

    from spurctl.render.sink import styled

    out = styled(file or sys.stdout)  # the data is escaped before it is drawn
    return Console(
        file=out,
        width=env.width if env.tty and env.width else WHOLE,
        force_terminal=env.tty or env.colour,
        no_color=not env.colour,
        soft_wrap=False,
        highlight=False,
        emoji=False,
        markup=False,
    )


# The width of whole lines: a pipe or a file gets every line whole, for grep.
WHOLE = 1_000_000


def pipe_width() -> int:
    """Width for output that is not a terminal: $COLUMNS, else wide enough for the table."""
    try:
        return int(os.environ.get("COLUMNS", "")) or _PIPE_WIDTH
    except ValueError:
        return _PIPE_WIDTH


def md_cell(text: str) -> str:
    # A raw | ends the cell and a newline ends the table; a backslash is escaped
    # first so one already in the text cannot swallow the pipe escape.
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.splitlines())


def markdown_table(headers: list[str], rows: Iterable[list[str]], *, padded: bool = True) -> str:
    """A GitHub table of text cells, each escaped; `padded` lines the columns up
    (unless a cell is longer than 200 characters: every row would be padded to it).

    Cells are text as given: numparse off, so a node named "1e3" or a job id
    prints as written.
    """
    from tabulate import tabulate

    cells = [[md_cell(cell) for cell in row] for row in rows]
    padded = padded and all(len(cell) <= 200 for row in cells for cell in row)
    return tabulate(
        cells,
        headers=headers,
        tablefmt="github",
        disable_numparse=True,
        stralign="left" if padded else None,
    )


# -- output ------------------------------------------------------------------


# Metrics are not secret, and node_exporter reads them as its own user.
PUBLIC_FILE_MODE = 0o644


def write_output(text: str, output: Path | None, *, create_mode: int = 0o600) -> None:
    """Write to FILE atomically (never a half-written document), or stdout; every
    secret spurctl knows redacted (the sink's rule for files: render/sink.py).

    Only a regular file, or nothing, is replaced (a temp file beside it, renamed over
    it); a symlink is followed and its target replaced, the link kept. A device or
    FIFO is written to in place, as a shell's `>` would: renaming over `/dev/null`
    would replace the system's device. A socket or directory is refused.
    A new file is created `create_mode`, 0600 unless the caller says otherwise (mkstemp's
    guarantee, kept by the rename): key files are written this way too; `--format
    prometheus` asks for PUBLIC_FILE_MODE. A file that exists keeps its read bits (a
    .prom file an operator made readable to node_exporter's group stays so), never
    more than 0644.
    """
    text = redact(text)
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        return
    _write_file(text, output, create_mode)


def write_key_file(key: str, output: Path) -> None:
    """A key file whose content is the key itself, mode 0600, written as write_output
    writes a file but never redacted: a secret registered earlier that is part of the
    key would otherwise be cut out of it (the demo's and the simulated cluster's own
    keys, which they hand to the operator)."""
    _write_file(key, output, 0o600)


def _write_file(text: str, output: Path, create_mode: int) -> None:
    import stat
    import tempfile

    target = Path(os.path.realpath(output)) if output.is_symlink() else output
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise SpurctlError(f"cannot write {output}: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISSOCK(mode) or stat.S_ISDIR(mode):
            what = "a socket" if stat.S_ISSOCK(mode) else "a directory"
            raise SpurctlError(f"cannot write {output}: it is {what}; give -o a file's path")
        try:  # a device or FIFO: written in place, never replaced
            with open(target, "w") as fh:
                fh.write(text)
        except OSError as exc:
            raise SpurctlError(f"cannot write {output}: {exc.strerror or exc}") from None
        return
    directory = target.parent if str(target.parent) else Path(".")
    tmp: str | None = None
    try:
        # A dot name without FILE's suffix: node_exporter's collector reads only *.prom.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        # Set on the temp file before the rename: FILE is never seen with other bits.
        os.chmod(tmp, (mode & 0o644) | 0o600 if mode is not None else create_mode)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:  # FILE stays as it was, and no half-written temp file is left
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise SpurctlError(f"cannot write {output}: {exc.strerror or exc}") from None


def write_told(text: str, output: Path | None, what: str, *, create_mode: int = 0o600) -> None:
    """write_output, and when it went to a file, one stderr line saying what was written
    where: `-o FILE` never leaves an empty screen that reads as "all clear"."""
    write_output(text, output, create_mode=create_mode)
    if output is not None and str(output) != "-":
        print(f"wrote {what} to {output}", file=sys.stderr)


def same_version(ack: str | None, version: str) -> bool:
    """Whether `ack` (--ack-version, SPURCTL_ACK_VERSION, config ack_version) names the
    controller `version`: `v0.8.0` and `0.8.0` are one version."""
    if ack is None or not version:
        return False
    return ack.strip().lstrip("vV") == version.strip().lstrip("vV")


def command_line(step: NextStep) -> str:
    """The step as a shell command line: each word quoted as the shell needs it (a
    hostlist's brackets too, which bash would glob) and every control character written
    out; a step run on another host as `ssh HOST 'COMMAND'`; a step with no command as
    a `# why` comment. Print it on a line of its own and never wrap it: a command broken
    over two lines does not paste."""
    import shlex

    if not step.argv:
        return visible(f"# {step.why}")
    words = step.argv if step.where is None else ("ssh", step.where, shlex.join(step.argv))
    return visible(shlex.join(words))


Asked = TypeVar("Asked")


def asker(
    ask: Callable[[str], bool] | None, question: Callable[[Asked], str]
) -> Callable[[Asked], bool] | None:
    """The question before a real run (`question` of what is about to be sent), put with
    `ask` (the terminal's prompt; None: there is no terminal to ask on, so nothing may
    be asked). A Ctrl-C at it ends the command, nothing sent (errors.Aborted)."""
    if ask is None:
        return None
    return lambda subject: ask(visible(question(subject)))
