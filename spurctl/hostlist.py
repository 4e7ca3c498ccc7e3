"""Slurm hostlists (`gpu[001-128,200]`) and id ranges (`0-3,6`), by ClusterShell.

The one place that speaks ClusterShell's NodeSet and RangeSet, and the one
place that says what a node name is and when two names loosely agree.

Most nodelists a controller reports name one node, so a list without `[` or `,`
is taken as that plain name without parsing: a NodeSet parse costs tens of
microseconds, and an audit of a large cluster asks this question per holding.

Names are read as Spur reads them (`spur-core` hostlist.rs `expand`): the list
is split at commas outside brackets, each part is trimmed of whitespace, and
empty parts name nothing. So `"gpu015 "` is node gpu015, as it is to spurctld.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterable

from spurctl.errors import SpurctlError

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
    return hostlist.strip() if "[" not in hostlist and "," not in hostlist else None


def _top_level_parts(hostlist: str) -> list[str]:
    """The comma-separated parts of `hostlist` outside brackets, untrimmed (Spur's
    `split_top_level`)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(hostlist):
        depth += (c == "[") - (c == "]")
        if c == "," and depth <= 0:
            parts.append(hostlist[start:i])
            start = i + 1
    parts.append(hostlist[start:])
    return parts


def normalize(hostlist: str) -> str:
    """`hostlist` as Spur reads it: each top-level part trimmed, empty parts dropped.

    `" gpu015 "` -> `"gpu015"`, `"gpu[001-002], gpu009,"` -> `"gpu[001-002],gpu009"`.
    """
    name = plain_name(hostlist)
    if name is not None:
        return name
    return ",".join(p for p in (part.strip() for part in _top_level_parts(hostlist)) if p)


# Far above any real cluster. ClusterShell builds every index of a range while
# parsing, so a typo like gpu[1-100000000] would eat memory for minutes first.
MAX_NODES = 1_000_000
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def _size_bound(hostlist: str) -> int:
    """How many names `hostlist` can expand to at most, read off its ranges without expanding."""
    total = 0
    for pattern in _top_level_parts(hostlist):
        size = 1
        for group in _BRACKETS.findall(pattern):
            count = 0
            for item in group.split(","):
                lo, _, hi = item.partition("-")
                hi = hi.partition("/")[0]
                count += int(hi) - int(lo) + 1 if lo.isdigit() and hi.isdigit() else 1
            size *= max(count, 1)
        total += size
    return total


@functools.lru_cache(maxsize=65536)
def _expand_nodeset(hostlist: str) -> frozenset[str]:
    # Sized for one audit's active multi-node jobs (one parse each, reused for every
    # holding and node that asks); bounded so a long-lived process cannot grow without end.
    text = normalize(hostlist)
    name = plain_name(text)
    if name is not None:  # e.g. "gpu015, " once trimmed
        return frozenset((name,)) if name else frozenset()
    bound = _size_bound(text)
    if bound > MAX_NODES:
        raise SpurctlError(
            f"bad hostlist {hostlist!r}: it names up to {bound:,} nodes, more than "
            f"{MAX_NODES:,}; check its ranges"
        )
    simple = _expand_one_range_list(text)
    if simple is not None:
        return simple
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetError

    try:
        return frozenset(NodeSet(text, resolver=RESOLVER_NOGROUP))
    except NodeSetError:
        raise SpurctlError(f"bad hostlist {hostlist!r}: {_what_is_wrong(text)}; {_HINT}") from None


# A name, one bracketed range list in it (_RANGES), the rest of the name: most
# multi-node nodelists (gpu[00001-00004]).
_ONE_RANGE_LIST = re.compile(rf"([A-Za-z0-9_.\-]*)\[({_RANGES.pattern})\]([A-Za-z0-9_.\-]*)")


def _expand_one_range_list(text: str) -> frozenset[str] | None:
    """The names of `text` when it is one bracketed range list between a prefix not ending
    in a digit and a suffix, each range running upwards with both ends one width or
    neither zero-padded; None for any other list, which NodeSet reads. For those lists
    this reads what NodeSet reads (tests/unit/test_hostlist.py holds the two side by
    side), without a NodeSet parse of tens of microseconds each, or importing
    ClusterShell at all."""
    m = _ONE_RANGE_LIST.fullmatch(text)
    if m is None:
        return None
    prefix, ranges, suffix = m.groups()
    if prefix[-1:].isdigit():  # NodeSet reads gpu1[1-10] as gpu[11-110], not 10 names
        return None
    names: list[str] = []
    for item in ranges.split(","):
        lo, _, hi = item.partition("-")
        hi = hi or lo
        if len(lo) == len(hi):
            width = len(lo)
        elif lo[0] != "0" and hi[0] != "0":
            width = 0
        else:  # padding that NodeSet settles its own way
            return None
        first, last = int(lo), int(hi)
        if first > last:
            return None
        names.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(first, last + 1))
    return frozenset(names)


_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
# A digit right before a bracket: gpu1[1-10] (docs/spur-facts.md, "Hostlists").
_DIGIT_BRACKET = re.compile(r"[0-9]\[")


def _what_is_wrong(text: str) -> str:
    """Why a hostlist does not read, in an operator's words (not ClusterShell's)."""
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
    return "it is not a hostlist"


def expand(hostlist: str) -> frozenset[str]:
    """The node names of a hostlist, each part trimmed as Spur does; raises SpurctlError
    when it cannot be parsed."""
    name = plain_name(hostlist)
    if name is not None:
        return frozenset((name,)) if name else frozenset()
    return _expand_nodeset(hostlist)


def node_in(hostlist: str, name: str) -> bool:
    """Whether `name` is one of the nodes of `hostlist`: exact string equality after
    trimming each part of the list, as Spur does."""
    if "[" not in hostlist and "," not in hostlist:  # plain_name's test, inlined: an
        return hostlist.strip() == name  # audit asks this of ~50,000 holdings
    return name in _expand_nodeset(hostlist)


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


def placement_unread(hostlist: str) -> bool:
    """Whether a job's nodelist says nothing spurctl can read about where the job runs:
    blank (its allocation not recorded yet) or not a list spurctl parses. Such a job may
    be on any node."""
    if "[" not in hostlist and "," not in hostlist:  # one plain name, or none
        return not hostlist.strip()
    try:
        return not expand(_BLANKS.sub("", hostlist))
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
            text = ",".join(
                f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs
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
    text = _DIGIT_RUNS.split(name.lower())
    parts: list[object] = list(text)
    parts[1::2] = map(int, text[1::2])
    parts.append(name)
    return tuple(parts)


_DIGIT_RUNS = re.compile(r"(\d+)")


def is_node_name(name: str) -> bool:
    """Whether `name` is a node name that can go into a shell command as is."""
    return _NODE_NAME.fullmatch(name) is not None


def loose_key(name: str) -> str:
    """What names of one node share across case and domain: `GPU001.example` ~ `gpu001`."""
    if "." not in name and name.islower():  # most names are their own key: no new string
        return name
    return name.split(".", 1)[0].lower()


def ranges(ids: Iterable[int]) -> str:
    """The folded range list of some integers: 0,1,2,3,6 -> '0-3,6'; "" for none."""
    ids = sorted(set(ids))
    if len(ids) <= 1:
        return str(ids[0]) if ids else ""
    return _fold_ranges(tuple(ids))


@functools.lru_cache(maxsize=4096)
def _fold_ranges(ids: tuple[int, ...]) -> str:
    # A finding's GPUs name one of a few sets (0-7 on most nodes), and a RangeSet
    # costs tens of microseconds: an audit --all of a large cluster asks per holding.
    from ClusterShell.RangeSet import RangeSet

    return str(RangeSet.fromlist([str(i) for i in ids]))


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


def parse_scope(hostlist: str) -> frozenset[str]:
    """The nodes an operator named with --nodes; raises SpurctlError on a bad hostlist."""
    text = hostlist.strip()
    if not text:
        raise SpurctlError(f"bad hostlist {hostlist!r}: it names no node; {_HINT}")
    if not _HOSTLIST_CHARS.fullmatch(text):
        bad = sorted({c for c in text if not _HOSTLIST_CHARS.fullmatch(c)})
        shown = " ".join(repr(c) for c in bad)
        raise SpurctlError(f"bad hostlist {hostlist!r}: {shown} not allowed; {_HINT}")
    if any(not part.strip() for part in _top_level_parts(text)):
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
    names = expand(text)
    for name in sorted(names):
        if not is_node_name(name):
            raise SpurctlError(f"bad hostlist {hostlist!r}: {name!r} is not a node name; {_HINT}")
    return names
