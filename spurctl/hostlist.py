"""Slurm hostlists (`gpu[001-128,200]`) and id ranges (`0-3,6`).

The one place that speaks ClusterShell's NodeSet and RangeSet, and the one
place that says what a node name is and when two names loosely agree.

Two readers, one per source:

- A controller's nodelist (`expand`, `node_in`, `named_nodes`) is read exactly as
  spurctld reads it (spur_hostlist: Spur's `expand`): `gpu[01-100]` is a hundred
  nodes, `"gpu015 "` is gpu015. One naming more nodes than the controller lists
  (`nodelist_limit`) is counted, never expanded, and refused (UnreadableNodelist):
  its job is then one that may run on any node.
- An operator's hostlist (`parse_scope`) is read by ClusterShell, and only where
  Spur reads the same nodes: a malformed range (`n[8-9-10]`, which NodeSet reads as
  twenty names), mixed paddings and a digit before `[` are refused.

Most nodelists a controller reports name one node, so a list without `[` or `,`
is taken as that plain name without parsing: an audit of a large cluster asks
this question per holding.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterable
from itertools import repeat

from spurctl import spur_hostlist
from spurctl.errors import SpurctlError
from spurctl.spur_hostlist import WHITESPACE

_HINT = "use Slurm syntax like gpu[001-128,200]"
# Slurm hostlists only; ClusterShell's set operators (! & ^) and @groups are refused
# so that what an operator types means the same thing to spurctl and to Slurm.
_HOSTLIST_CHARS = re.compile(r"[A-Za-z0-9._\-\[\],]+")
# A node name goes into shell command lines (ssh, clush, scontrol): only host-name
# characters, and no leading "-" that ssh would take for an option. Anything else
# (a space, a ";", a "$(...)") could run something other than what was meant.
_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
# A cpuset-style list as the kernel writes it: "0-7,16-23".
_RANGES = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
_LEADING_ZEROS = re.compile(r"(?<![0-9])0+(?=[0-9])")


def plain_name(hostlist: str) -> str | None:
    """The one node a list without brackets or commas names, trimmed as `expand` trims
    it ("" for a blank list); None for any other list. Most jobs run on one node, and
    this reads them without building a set (classify asks it of every active job)."""
    return hostlist.strip(WHITESPACE) if "[" not in hostlist and "," not in hostlist else None


def normalize(hostlist: str) -> str:
    """`hostlist` as Spur reads it: each top-level part trimmed, empty parts dropped.

    `" gpu015 "` -> `"gpu015"`, `"gpu[001-002], gpu009,"` -> `"gpu[001-002],gpu009"`.
    """
    name = plain_name(hostlist)
    if name is not None:
        return name
    return ",".join(spur_hostlist.parts(hostlist))


# Far above any real cluster: the most names a controller's nodelist is read to when the
# node table's size is unknown, and an operator's hostlist at most. ClusterShell builds
# every index of a range while parsing, so a typo like gpu[1-100000000] would eat memory
# for minutes first.
MAX_NODES = 1_000_000
# A nodelist naming more nodes than the controller lists cannot be a real placement, but a
# small or half-listed table is no reason to doubt a list of a thousand names.
NODELIST_FLOOR = 1_024


def nodelist_limit(nodes_listed: int) -> int:
    """The most names a controller's nodelist is read to, for a controller listing
    `nodes_listed` nodes (0: unknown)."""
    return max(nodes_listed, NODELIST_FLOOR) if nodes_listed else MAX_NODES


class UnreadableNodelist(SpurctlError):
    """A controller's nodelist spurctl does not read; `why` finishes "job 4711's
    nodelist 'n[1-90000000]' ..." for the audit's notes."""

    def __init__(self, hostlist: str, message: str, why: str) -> None:
        super().__init__(f"bad hostlist {hostlist!r}: {message}")
        self.why = why


def _unreadable(hostlist: str, exc: spur_hostlist.BadNodelist) -> UnreadableNodelist:
    return UnreadableNodelist(
        hostlist, f"Spur cannot read it ({exc})", f"is not a valid hostlist ({exc})"
    )


def _too_long(hostlist: str, size: int, limit: int) -> UnreadableNodelist:
    why = f"names {size:,} nodes, more than the {limit:,} one nodelist is read to here"
    return UnreadableNodelist(hostlist, f"it {why}", why)


@functools.lru_cache(maxsize=65536)
def _spur_names(hostlist: str) -> frozenset[str]:
    # Sized for one audit's active multi-node jobs (one read each, reused for every
    # holding and node that asks); bounded so a long-lived process cannot grow without end.
    # Only asked once `_read` has counted it within its limit.
    return frozenset(spur_hostlist.expand(hostlist))


@functools.lru_cache(maxsize=65536)
def _size(hostlist: str) -> int:
    """How many names Spur reads in `hostlist`; BadNodelist where it fails, or where
    release v0.8.0 splits the list otherwise than later ones (a stray `]` before a
    comma, #643): which release answers, a version string of 0.8.0 cannot tell."""
    if "]" in hostlist and spur_hostlist.split_top_level(
        hostlist, clamped=False
    ) != spur_hostlist.split_top_level(hostlist):
        raise spur_hostlist.BadNodelist(
            "a stray ']' before a comma, which Spur v0.8.0 and later releases split apart (#643)"
        )
    return spur_hostlist.size(hostlist)


def _read(hostlist: str, limit: int) -> frozenset[str]:
    # Asked once per multi-node holding of an audit: two cache look-ups, nothing between.
    try:
        size = _size(hostlist)
    except spur_hostlist.BadNodelist as exc:
        raise _unreadable(hostlist, exc) from None
    if size > limit:
        raise _too_long(hostlist, size, limit)
    return _spur_names(hostlist)


def expand(hostlist: str, limit: int = MAX_NODES) -> frozenset[str]:
    """The node names of a controller's nodelist, read as Spur's `expand` reads it
    (spur_hostlist); raises UnreadableNodelist when Spur cannot read it or it names
    more than `limit` nodes (counted before any is built)."""
    name = plain_name(hostlist)
    if name is not None:
        return frozenset((name,)) if name else frozenset()
    return _read(hostlist, limit)


def node_in(hostlist: str, name: str, limit: int = MAX_NODES) -> bool:
    """Whether `name` is one of the nodes of a controller's nodelist, read as `expand`
    reads it: exact string equality after trimming each part of the list, as Spur does."""
    if "[" not in hostlist and "," not in hostlist:  # plain_name's test, inlined: an
        return hostlist.strip(WHITESPACE) == name  # audit asks this of ~50,000 holdings
    return name in _read(hostlist, limit)


def may_name(hostlist: str, name: str, limit: int = MAX_NODES) -> bool:
    """Whether a job with this nodelist may run on `name`: the list names it, or its
    text does as a token, or it cannot be read (then the job may be anywhere)."""
    try:
        return node_in(hostlist, name, limit) or names_token(hostlist, name)
    except SpurctlError:
        return True


# What separates node names in a nodelist's text, whatever its syntax.
_TOKEN_SEPARATORS = re.compile(r"[\s,\[\]]+")


def names_token(hostlist: str, name: str) -> bool:
    """Whether `name` appears as a whole token of `hostlist`'s text (split on commas,
    whitespace and brackets), whatever the list means once parsed.

    A conservative test, not a parse: "gpu015 " and "gpu015,gpu[016-017]" name
    gpu015 by it. A node that passes it is never judged to be outside the job.
    """
    return name in _TOKEN_SEPARATORS.split(hostlist)


def named_nodes(hostlist: str) -> set[str]:
    """Every node a job's nodelist may name: its expansion, plus every bare name in its text.

    The names are a backstop for the endpoint check before a reclaim: a name
    written in the nodelist counts as a node the job runs on even when the
    list does not parse. Blanks are dropped before expanding, so a list
    written with spaces inside its brackets still expands.
    """
    names = {t for t in _BARE_SEPARATORS.split(hostlist) if t and "[" not in t and "]" not in t}
    with contextlib.suppress(SpurctlError):
        names |= expand(_BLANKS.sub("", hostlist))
    return names


_BARE_SEPARATORS = re.compile(r"[\s,]+")
_BLANKS = re.compile(r"\s+")


def placement_unread(hostlist: str, limit: int = MAX_NODES) -> bool:
    """Whether a job's nodelist says nothing spurctl can read about where the job runs:
    blank (its allocation not recorded yet) or a list `expand` does not read. Such a
    job may be on any node (may_name)."""
    try:
        return not expand(hostlist, limit)
    except SpurctlError:
        return True


_LAST_NUMBER = re.compile(r"(.*?)([0-9]+)([^0-9]*)")


def fold(names: Iterable[str]) -> str:
    """The compressed hostlist of some node names (`gpu[001-003]`); "" for none.

    Plain node names (the usual case) are folded by pattern without ClusterShell:
    each name is read once, split at its last number, and the numbers of one
    pattern and padding become ranges. A NodeSet parses every name, tens of
    microseconds each, which an audit of 10,000 uninventoried nodes would pay.
    Names that are not plain node names go through NodeSet; one NodeSet cannot
    parse (a bracket or a control character in a name) is listed as it is.
    """
    names = list(dict.fromkeys(names))
    if len(names) <= 1:
        return names[0] if names else ""
    if len(names) < _REMEMBER_FROM:
        return _fold(names)
    # A watch folds the same thousands of nodes every round, some of them twice
    # (the nodes without evidence, their not-inventoried row): ~2 us a name.
    key = frozenset(names)
    with _folded_lock:
        done = _folded.get(key)
    if done is None:
        done = _fold(names)
        with _folded_lock:
            if len(_folded) >= _FOLDED_KEPT:
                del _folded[next(iter(_folded))]
            _folded[key] = done
    return done


# The last few large folds, by the names folded (the result does not depend on their order).
_REMEMBER_FROM = 64
_FOLDED_KEPT = 8
_folded: dict[frozenset[str], str] = {}
_folded_lock = threading.Lock()


def _fold(names: list[str]) -> str:
    """`fold` of distinct names, two or more."""
    one = _fold_one_pattern(names)
    return one if one is not None else _fold_by_pattern(names)


def _fold_one_pattern(names: list[str]) -> str | None:
    """`_fold_by_pattern` of names that are all one prefix and a number of one width
    (`gpu00001`, `gpu00003`, ...: a large cluster's names), read with a few passes in C
    instead of a regex and a dict per name (~3 against ~10 ms for 10,000 names); None
    for any other names. Its numbers all have the prefix's one width, so each is written
    back padded to it, as the general path writes them (a property test holds the two
    to the same text)."""
    first = names[0]
    prefix = first.rstrip(_ASCII_DIGITS)
    start, size = len(prefix), len(first)
    if start == size or _NODE_NAME.fullmatch(first) is None:
        return None
    if len(set(map(len, names))) != 1 or not all(map(str.startswith, names, repeat(prefix))):
        return None
    tails = [name[start:] for name in names]
    digits = "".join(tails)
    if not (digits.isascii() and digits.isdigit()):  # only 0-9, as _LAST_NUMBER reads
        return None
    runs = _runs(sorted(map(int, tails)))
    width = size - start
    text = ",".join(
        [str(a).zfill(width) if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
    )
    return f"{prefix}{text}" if len(runs) == 1 and runs[0][0] == runs[0][1] else f"{prefix}[{text}]"


def _fold_by_pattern(names: list[str]) -> str:
    """`fold` of distinct names, two or more: each split at its last number."""
    if not all(_NODE_NAME.fullmatch(n) for n in names):
        from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetError

        try:
            return str(NodeSet.fromlist(names, resolver=RESOLVER_NOGROUP))
        except NodeSetError:
            shaped = [n for n in names if _NODE_NAME.fullmatch(n)]
            odd = sorted(n for n in names if not _NODE_NAME.fullmatch(n))
            return ",".join([fold(shaped), *odd] if shaped else odd)
    plain: list[str] = []
    # (prefix, suffix) -> padded width (0: none) -> numbers
    patterns: dict[tuple[str, str], dict[int, list[int]]] = {}
    for name in names:
        m = _LAST_NUMBER.fullmatch(name)
        if m is None:
            plain.append(name)
            continue
        prefix, digits, suffix = m.groups()
        width = len(digits) if digits[0] == "0" and len(digits) > 1 else 0
        patterns.setdefault((prefix, suffix), {}).setdefault(width, []).append(int(digits))
    parts = sorted(plain)
    for (prefix, suffix), by_width in sorted(patterns.items()):
        unpadded = by_width.pop(0, [])
        for n in unpadded:  # 100 belongs with 001-099: same width, no zero to pad
            if len(str(n)) in by_width:
                by_width[len(str(n))].append(n)
            else:
                by_width.setdefault(0, []).append(n)
        for width, numbers in sorted(by_width.items()):
            runs = _runs(sorted(set(numbers)))
            # zfill, not a nested format spec: ~0.25 us a number less (10,000 of them in the
            # not-inventoried note of a large cluster); the same for numbers >= 0.
            text = ",".join(
                [str(a).zfill(width) if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
            )
            single = len(runs) == 1 and runs[0][0] == runs[0][1]
            parts.append(f"{prefix}{text}{suffix}" if single else f"{prefix}[{text}]{suffix}")
    return ",".join(parts)


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct integers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


@functools.lru_cache(maxsize=1 << 16)  # a watch sorts the same node names every round
def natural_key(name: str) -> tuple[object, ...]:
    """gpu2 before gpu10, as an operator reads a hostlist (and `sort -V`)."""
    # Splitting on a group alternates text and digits, so equal positions always
    # compare like types. (An audit sorts one key per finding: ~10,000 of them.)
    low = name.lower()
    head = low.rstrip(_ASCII_DIGITS)
    if len(head) < len(low) and _DIGIT_RUNS.search(head) is None:
        # Most node names (gpu00017): one run of digits, last. The split's key, built
        # without the split (0.65 against 1.1 us a name, fresh in every process).
        return (head, int(low[len(head) :]), "", name)
    text = _DIGIT_RUNS.split(low)
    parts: list[object] = list(text)
    parts[1::2] = map(int, text[1::2])
    parts.append(name)
    return tuple(parts)


_DIGIT_RUNS = re.compile(r"(\d+)")
_ASCII_DIGITS = "0123456789"


def is_node_name(name: str) -> bool:
    """Whether `name` is a node name that can go into a shell command as is."""
    return _NODE_NAME.fullmatch(name) is not None


def loose_key(name: str) -> str:
    """What names of one node share across case and domain: `GPU001.example` ~ `gpu001`."""
    if "." not in name and name.islower():  # most names are their own key: no new string
        return name
    return name.split(".", 1)[0].lower()


def ranges(ids: Iterable[int]) -> str:
    """The folded range list of some integers: 0,1,2,3,6 -> '0-3,6'; "" for none.

    As ClusterShell's RangeSet writes unpadded numbers, from their runs: a finding's GPUs
    and pids need no RangeSet (tens of microseconds each, and ClusterShell's import)."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in _runs(sorted(set(ids))))


def expand_ranges(text: str) -> frozenset[int]:
    """The integers of a range list ('0-3,6' -> 0,1,2,3,6); raises SpurctlError if it is not one."""
    if not _RANGES.fullmatch(text):
        raise SpurctlError(f"bad range list {text!r}: use ranges like 0-7,16-23")
    from ClusterShell.RangeSet import RangeSet, RangeSetParseError

    # RangeSet reads "01" as a zero-padded name, unequal to "1"; these are plain numbers.
    numbers = _LEADING_ZEROS.sub("", text)
    try:
        return frozenset(int(i) for i in RangeSet(numbers).striter())
    except RangeSetParseError as exc:
        raise SpurctlError(f"bad range list {text!r}: {exc}") from None


# -- an operator's hostlist -------------------------------------------------------------

_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
# A digit right before a bracket: gpu1[1-10] (docs/spur-facts.md, "Hostlists").
_DIGIT_BRACKET = re.compile(r"[0-9]\[")


def _what_is_wrong(text: str) -> str | None:
    """Why an operator's hostlist is malformed, in an operator's words (not ClusterShell's);
    None when each bracket holds only numbers and upward ranges of one padding, which
    ClusterShell and Spur read alike. NodeSet itself reads some malformed ranges as
    something (n[8-9-10]: twenty names, n-9 to n10), so they are refused before it."""
    depth = 0
    for c in text:
        depth += {"[": 1, "]": -1}.get(c, 0)
        if depth < 0 or depth > 1:
            return "its brackets do not pair up (one level of [...] per name)"
    if depth:
        return "a '[' is never closed"
    for inner in _BRACKETED.findall(text):
        if not inner.strip():
            return "an empty [] names no number"
        for item in inner.split(","):
            lo, dash, hi = item.strip().partition("-")
            if not lo.isdigit() or (dash and not hi.isdigit()):
                return f"[{inner}] holds {item.strip()!r}: only numbers and ranges like 001-024"
            if dash and int(lo) > int(hi):
                return f"the range {lo}-{hi} runs backwards: write {hi}-{lo}"
            if dash and len(lo) != len(hi) and (lo.startswith("0") or hi.startswith("0")):
                return f"the range {lo}-{hi} mixes paddings: give both ends the same width"
    return None


def _nodeset(text: str, hostlist: str) -> frozenset[str]:
    """The names ClusterShell reads in a well-formed operator's hostlist, once Spur is known
    to read the same ones."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetError

    try:
        names = frozenset(NodeSet(text, resolver=RESOLVER_NOGROUP))
    except NodeSetError as exc:
        raise SpurctlError(f"bad hostlist {hostlist!r}: {exc}; {_HINT}") from None
    if names != frozenset(spur_hostlist.expand(text)):
        # The checks above leave no such list; should one pass, neither reading is taken.
        raise SpurctlError(
            f"bad hostlist {hostlist!r}: Spur and ClusterShell read it as different nodes; {_HINT}"
        )
    return names


def parse_scope(hostlist: str) -> frozenset[str]:
    """The nodes an operator named with --nodes; raises SpurctlError on a bad hostlist."""
    text = hostlist.strip()
    if not text:
        raise SpurctlError(f"bad hostlist {hostlist!r}: it names no node; {_HINT}")
    if not _HOSTLIST_CHARS.fullmatch(text):
        bad = sorted({c for c in text if not _HOSTLIST_CHARS.fullmatch(c)})
        shown = " ".join(repr(c) for c in bad)
        raise SpurctlError(f"bad hostlist {hostlist!r}: {shown} not allowed; {_HINT}")
    if any(not part.strip() for part in spur_hostlist.split_top_level(text)):
        # Spur skips an empty part of a job's nodelist; an operator's is likely a typo.
        raise SpurctlError(f"bad hostlist {hostlist!r}: an empty name between commas; {_HINT}")
    if _DIGIT_BRACKET.search(text):
        # Slurm and Spur write each number after the digit (gpu1[1-10]: gpu11 to gpu110, ten
        # nodes); ClusterShell folds the digit into the range (gpu[11-110], a hundred). The
        # scope must mean what the operator meant: neither reading is taken.
        raise SpurctlError(
            f"bad hostlist {hostlist!r}: a digit right before '[' names other nodes to Slurm "
            "and Spur than to ClusterShell (gpu1[1-10]: gpu11 to gpu110, or gpu[11-110]), "
            f"so put the whole number inside the brackets; {_HINT}"
        )
    with contextlib.suppress(spur_hostlist.BadNodelist):  # counted, whatever else is wrong
        size = spur_hostlist.size(text)
        if size > MAX_NODES:
            raise SpurctlError(
                f"bad hostlist {hostlist!r}: it names up to {size:,} nodes, more than "
                f"{MAX_NODES:,}; check its ranges"
            )
    why = _what_is_wrong(text)
    if why is not None:
        raise SpurctlError(f"bad hostlist {hostlist!r}: {why}; {_HINT}")
    plain = plain_name(text)
    names = frozenset((plain,)) if plain is not None else _nodeset(text, hostlist)
    for name in sorted(names):
        if not is_node_name(name):
            raise SpurctlError(f"bad hostlist {hostlist!r}: {name!r} is not a node name; {_HINT}")
    return names
