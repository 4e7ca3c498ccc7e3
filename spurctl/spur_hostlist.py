"""Spur's own hostlists: how spurctld writes a job's nodelist, and how it reads one back.

spurctld writes every nodelist with spur-core's `compress` and reads one with its
`expand` (crates/spur-core/src/hostlist.rs, docs/spur-facts.md "Hostlists"). Some of
what it writes, ClusterShell reads otherwise or not at all: `gpu[01-100]` is gpu01 to
gpu99 and gpu100 to Spur (every number zero-filled to the width of the range's first
token), and "mixes paddings" to NodeSet. So a controller's nodelist is read here, by
Spur's rules in spurctl's own words, and the simulated controller writes its lists
with `compress` here, as spurctld does.

Reading, as Spur does:

- the list is split at commas outside brackets; a `]` with no `[` open is literal text
  and never closes anything (its bracket depth stays at 0, Spur #643);
- each part is trimmed of whitespace (Rust's `char::is_whitespace`); a part that comes
  out empty names nothing;
- a part with a `[` reads its first `[` and its first `]` (a `]` before that `[` is an
  error); each comma-separated item between them is either a range `lo-hi` (split at
  its first `-`, both ends unsigned integers, `lo <= hi`, every number zero-filled to
  `lo`'s width) or, without a `-`, text put in as it is (`n[a]` is `na`, `n[]` is `n`);
  a `[` left in what follows the bracket is read the same way, name by name.

`size` counts the names a list expands to without building one of them, so that a
list of ninety million names is refused before it costs anything.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator

from spurctl.errors import SpurctlError

# What Rust's str::trim strips (char::is_whitespace, Unicode White_Space). Python's own
# strip() also strips \x1c-\x1f, which Spur keeps in a name.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_U64_MAX = (1 << 64) - 1
# What Rust's u64::from_str accepts: an optional '+', then ASCII digits.
_U64 = re.compile(r"\+?[0-9]+")
# Far more than any nodelist a controller writes: one that needs more steps to count
# (text in brackets, bracket after bracket), or more brackets in one part (each is one
# level of reading), is refused rather than read at any cost.
_MAX_STEPS = 10_000
_MAX_BRACKETS = 64


class BadNodelist(SpurctlError):
    """A nodelist Spur's `expand` refuses, or one too intricate to count."""


def split_top_level(text: str, *, clamped: bool = True) -> list[str]:
    """The comma-separated parts of `text` outside brackets, untrimmed, a stray `]`
    clamped at depth 0 (Spur's `split_top_level` since #643). `clamped=False` splits as
    release v0.8.0 did: a stray `]` takes the depth below 0, and no comma splits until
    a `[` brings it back."""
    if "[" not in text and (clamped or "]" not in text):  # every comma splits
        return text.split(",")
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(depth - 1, 0) if clamped else depth - 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parts(text: str) -> list[str]:
    """The non-empty trimmed parts of `text`, each one term of Spur's `expand_single`."""
    return [p for p in (raw.strip(WHITESPACE) for raw in split_top_level(text)) if p]


def _u64(token: str, item: str) -> int:
    if not _U64.fullmatch(token) or int(token) > _U64_MAX:
        raise BadNodelist(f"{item!r} is not a range of two whole numbers")
    return int(token)


def _bounds(item: str) -> tuple[int, int, int] | None:
    """(lo, hi, width) of a range item, None for an item without '-' (put in as it is)."""
    lo_text, dash, hi_text = item.partition("-")
    if not dash:
        return None
    lo, hi = _u64(lo_text, item), _u64(hi_text, item)
    if lo > hi:
        raise BadNodelist(f"the range {item!r} runs backwards")
    return lo, hi, len(lo_text)


def _brackets(term: str) -> tuple[str, str, str]:
    """(prefix, what the first brackets hold, suffix) of a term with a '['."""
    opened, closed = term.index("["), term.find("]")
    if closed < 0:
        raise BadNodelist("a '[' is never closed")
    if closed < opened:
        raise BadNodelist("a ']' comes before its '['")
    return term[:opened], term[opened + 1 : closed], term[closed + 1 :]


def _count(term: str, steps: list[int]) -> int:
    """How many non-empty names `term` expands to. Every range expands alike (only its
    number changes, and a number holds no bracket), so one of its names is read for all."""
    steps[0] += 1
    if steps[0] > _MAX_STEPS:
        raise BadNodelist(f"it takes more than {_MAX_STEPS:,} steps to read")
    if "[" not in term:
        return 1 if term else 0
    prefix, inner, suffix = _brackets(term)
    nested = "[" in suffix
    total = 0
    for item in inner.split(","):
        bounds = _bounds(item)
        if bounds is None:
            name = prefix + item + suffix
            total += _count(name, steps) if nested else (1 if name else 0)
        else:
            lo, hi, width = bounds
            each = _count(f"{prefix}{lo:0{width}d}{suffix}", steps) if nested else 1
            total += (hi - lo + 1) * each
    return total


def _names(term: str) -> Iterator[str]:
    """The names of one term, in Spur's order (empty ones included; the caller drops them)."""
    if "[" not in term:
        yield term
        return
    prefix, inner, suffix = _brackets(term)
    nested = "[" in suffix
    for item in inner.split(","):
        bounds = _bounds(item)
        if bounds is None:
            values: Iterable[str] = (item,)
        else:
            lo, hi, width = bounds
            values = (f"{n:0{width}d}" for n in range(lo, hi + 1))
        for value in values:
            name = prefix + value + suffix
            if nested:
                yield from _names(name)
            else:
                yield name


# The common multi-node list, a name and one bracketed list of ranges: gpu[0001-0128,200].
_ONE_RANGE_LIST = re.compile(
    r"([^\[\],]*)\[([0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)\]([^\[\],]*)"
)


@functools.lru_cache(maxsize=65536)
def size(text: str) -> int:
    """How many names Spur's `expand` gives for `text` (repeats counted), without
    expanding it; raises BadNodelist where `expand` fails."""
    total = 0
    for term in parts(text):
        m = _ONE_RANGE_LIST.fullmatch(term)
        if m is not None:
            for item in m.group(2).split(","):
                lo, hi, _ = _bounds(item) or (0, 0, 0)
                total += hi - lo + 1
        elif term.count("[") > _MAX_BRACKETS:
            raise BadNodelist(f"it has more than {_MAX_BRACKETS} '[' in one name")
        else:
            total += _count(term, [0])
    return total


def expand(text: str) -> list[str]:
    """The names Spur's `expand` gives for `text`, in its order, repeats kept; raises
    BadNodelist where it fails. Ask `size` first: this builds every name."""
    out: list[str] = []
    for term in parts(text):
        m = _ONE_RANGE_LIST.fullmatch(term)
        if m is None:
            out.extend(name for name in _names(term) if name)
            continue
        prefix, ranges, suffix = m.groups()
        for item in ranges.split(","):
            lo, hi, width = _bounds(item) or (int(item), int(item), len(item))
            out.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(lo, hi + 1))
    return out


# -- compress: how spurctld writes a nodelist ------------------------------------------


def _split_number(name: str) -> tuple[str, int, int] | None:
    """(prefix, number, digits) of a name ending in ASCII digits after some other text;
    None for a name without them, or all digits, or a number past u64 (a bare name)."""
    start = len(name)
    while start > 0 and "0" <= name[start - 1] <= "9":
        start -= 1
    if start == 0 or start == len(name):
        return None
    number = int(name[start:])
    return (name[:start], number, len(name) - start) if number <= _U64_MAX else None


def _padding(number: int, width: int) -> int:
    """How many zeros fill `number` out to `width` (Slurm's `_zero_padded`)."""
    return max(width - len(str(number)), 0)


def shared_width(n: int, n_width: int, m: int, m_width: int) -> int | None:
    """The width a range starting at `n` (written `n_width` wide) keeps when `m`
    (`m_width` wide) joins it, or None when the two cannot share one range (Slurm's
    `_width_equiv`): a width that changes one number's zeros is the other's own."""
    if n_width == m_width:
        return n_width
    n_changes = _padding(n, n_width) != _padding(n, m_width)
    m_changes = _padding(m, m_width) != _padding(m, n_width)
    if n_changes and m_changes:
        return None
    return n_width if n_changes else m_width


def _runs(numbers: list[tuple[int, int]]) -> list[list[int]]:
    """Sorted (number, width) pairs as [first, last, width] runs (Spur's `coalesce_ranges`):
    the next number joins the run when it follows the run's last and `shared_width`
    allows it with the run's first; an exact repeat is dropped."""
    runs: list[list[int]] = []
    for number, width in numbers:
        if runs:
            last = runs[-1]
            if number == last[1] and width == last[2]:
                continue
            if number == last[1] + 1:
                joined = shared_width(last[0], last[2], number, width)
                if joined is not None:
                    last[1], last[2] = number, joined
                    continue
        runs.append([number, number, width])
    return runs


def _natural_order(a: str, b: str) -> int:
    """Spur's `natural_cmp` over the names' UTF-8 bytes: digit runs by value (the shorter
    run first on a tie), other bytes as bytes, then the shorter remainder first."""
    x, y = a.encode(), b.encode()
    i = j = 0
    while i < len(x) and j < len(y):
        if _digit(x[i]) and _digit(y[j]):
            i0, j0 = i, j
            while i < len(x) and _digit(x[i]):
                i += 1
            while j < len(y) and _digit(y[j]):
                j += 1
            p, q = _unpadded(x[i0:i]), _unpadded(y[j0:j])
            s, t = (len(p), p, i - i0), (len(q), q, j - j0)
            if s != t:
                return 1 if s > t else -1
        elif x[i] != y[j]:
            return 1 if x[i] > y[j] else -1
        else:
            i += 1
            j += 1
    rest = (len(x) - i) - (len(y) - j)
    return (rest > 0) - (rest < 0)


def _digit(byte: int) -> bool:
    return 48 <= byte <= 57


def _unpadded(run: bytes) -> bytes:
    """A digit run without its leading zeros, one digit kept."""
    k = 0
    while k < len(run) - 1 and run[k] == 48:
        k += 1
    return run[k:]


def compress(names: Iterable[str]) -> str:
    """The nodelist spurctld writes for `names` (spur-core hostlist.rs `compress`):
    `gpu01`..`gpu99` and `gpu100` fold to `gpu[01-100]`, which `expand` reads back."""
    bare: list[str] = []
    numbered: dict[str, list[tuple[int, int]]] = {}
    for name in dict.fromkeys(names):
        split = _split_number(name)
        if split is None:
            bare.append(name)
        else:
            numbered.setdefault(split[0], []).append(split[1:])
    # (prefix, bare first, lowest number, text)
    terms: list[tuple[str, bool, int, str]] = [(name, True, 0, name) for name in bare]
    for prefix, numbers in numbered.items():
        runs = _runs(sorted(numbers))
        body = ",".join(
            f"{lo:0{w}d}" if lo == hi else f"{lo:0{w}d}-{hi:0{w}d}" for lo, hi, w in runs
        )
        single = len(runs) == 1 and runs[0][0] == runs[0][1]
        terms.append((prefix, False, runs[0][0], prefix + (body if single else f"[{body}]")))

    def order(s: tuple[str, bool, int, str], t: tuple[str, bool, int, str]) -> int:
        by_prefix = _natural_order(s[0], t[0])
        if by_prefix:
            return by_prefix
        rest_s, rest_t = (not s[1], s[2], s[3]), (not t[1], t[2], t[3])
        return (rest_s > rest_t) - (rest_s < rest_t)

    return ",".join(t[3] for t in sorted(terms, key=functools.cmp_to_key(order)))
