"""Spur's hostlists as spurctld writes and reads them (spur-core hostlist.rs, v0.8.0 and
main 4cc3da8): upstream's own test cases, then its rules as properties.

The rules, read from hostlist.rs: `split_top_level` splits at commas at bracket depth 0,
a `]` never taking the depth below 0 (#643); each part is trimmed (`str::trim`) and
empty ones dropped; `expand_single` reads the first `[` and the first `]` of a term, an
item with a `-` is a range split at its first `-` (both ends u64, start <= end, every
number zero-filled to the start token's width), one without is put in as it is, and a
`[` left in the suffix is read again name by name. `compress` groups names by the text
before their trailing digits, folds each group's sorted numbers into runs where Slurm's
`_width_equiv` lets two widths share one, and orders terms by prefix, bare names first.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from spurctl import spur_hostlist as spur

# -- upstream's cases (hostlist.rs `mod tests`), each as Spur asserts it -------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("node[001-003]", ["node001", "node002", "node003"]),
        ("node[1,3,5-7]", ["node1", "node3", "node5", "node6", "node7"]),
        ("gpu[01-02],cpu[01-02]", ["gpu01", "gpu02", "cpu01", "cpu02"]),
        ("login01", ["login01"]),
        ("node1,node2,node3", ["node1", "node2", "node3"]),
        ("gpu[1-2],login01,cpu[01-03]", ["gpu1", "gpu2", "login01", "cpu01", "cpu02", "cpu03"]),
        ("node[5]", ["node5"]),
        ("", []),
        ("node1,node2,", ["node1", "node2"]),
        (",node1,,node2", ["node1", "node2"]),
        ("rack[1-2]-node[1-2]", ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]),
        ("node]1", ["node]1"]),  # a ']' with no '[' is a plain name
        ("x],y", ["x]", "y"]),  # #643: a stray ']' never takes the depth below 0
        ("node01],node02", ["node01]", "node02"]),
        ("],y", ["]", "y"]),
        ("x,]y", ["x", "]y"]),
        ("x]],y", ["x]]", "y"]),
        ("x]", ["x]"]),
        # The width rule: every number zero-filled to the start token's width.
        ("gpu[01-100]", [f"gpu{i:02d}" for i in range(1, 101)]),
        ("gpu[09-100]", [f"gpu{i:02d}" for i in range(9, 101)]),
        ("gpu[001-1000]", [f"gpu{i:03d}" for i in range(1, 1001)]),
        ("node[9,010-011]", ["node9", "node010", "node011"]),
        ("gpu[1-010]", [f"gpu{i}" for i in range(1, 11)]),
        # Text in brackets is put in as it is; an empty [] names its prefix.
        ("n[a]", ["na"]),
        ("n[]", ["n"]),
        ("[]", []),
        (" gpu015 ", ["gpu015"]),
        ("gpu[1, 2]", ["gpu1", "gpu 2"]),  # inside brackets nothing is trimmed
        ("\x1cgpu1", ["\x1cgpu1"]),  # Rust's trim keeps what Python's strip() drops
        ("\u3000gpu1\u00a0", ["gpu1"]),
        ("gpu1[1-10]", [f"gpu1{i}" for i in range(1, 11)]),  # concatenation: ten names
        ("n[+1-3]", ["n01", "n02", "n03"]),  # u64::from_str takes a '+'; width 2
    ],
)
def test_expand_reads_what_spur_reads(text: str, names: list[str]) -> None:
    assert spur.expand(text) == names
    assert spur.size(text) == len(names)


@pytest.mark.parametrize(
    "text",
    [
        "node[1-3",  # unmatched [
        "node[5-3]",  # reversed
        "n]ode[1-2]",  # ']' before '[' (#639; v0.8.0 panicked)
        "a]b[1-2]",
        "][",
        "node[1-2]a]b[3-4]",  # the recursive suffix's ']' comes first
        "n[8-9-10]",  # split at the first '-': "9-10" is no number
        "n[1-]",
        "n[-3]",
        "n[1 -90000000]",  # " 1" is no u64 either: Spur reads nothing of it
        "n[1-18446744073709551616]",  # past u64
    ],
)
def test_expand_refuses_what_spur_refuses(text: str) -> None:
    with pytest.raises(spur.BadNodelist):
        spur.expand(text)
    with pytest.raises(spur.BadNodelist):
        spur.size(text)


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["node001", "node002", "node003"], "node[001-003]"),
        (["node001", "node002", "node003", "node005"], "node[001-003,005]"),
        (["cpu001", "cpu002", "gpu001", "gpu002"], "cpu[001-002],gpu[001-002]"),
        (["gpu002", "cpu001", "gpu001", "cpu002"], "cpu[001-002],gpu[001-002]"),
        (["crsuse2-m2m-028", "crsuse2-m2m-219"], "crsuse2-m2m-[028,219]"),
        (["node", "node1"], "node,node1"),
        (["node1", "node"], "node,node1"),
        (["master", "login"], "login,master"),
        (["node9", "node010", "node011"], "node[9,010-011]"),
        (["rack10-n1", "rack2-n1", "rack1-n1"], "rack1-n1,rack2-n1,rack10-n1"),
        (["node8", "node9", "node10"], "node[8-10]"),
        (["node001", "node001"], "node001"),
        (["node001", "node002", "node001"], "node[001-002]"),
        (["gpu001"], "gpu001"),
        (["master"], "master"),
        ([], ""),
        (["café1", "café2"], "café[1-2]"),
        (["12345"], "12345"),
        (["7", "7"], "7"),
        # Issue 49: the forms ClusterShell refuses.
        ([f"gpu{i:02d}" for i in range(1, 100)] + ["gpu100"], "gpu[01-100]"),
        ([f"gpu{i:02d}" for i in range(9, 100)] + ["gpu100"], "gpu[09-100]"),
        ([f"gpu{i:03d}" for i in range(1, 1000)] + ["gpu1000"], "gpu[001-1000]"),
        (["gpu1", "gpu01"], "gpu[1,01]"),
    ],
)
def test_compress_writes_what_spur_writes(names: list[str], text: str) -> None:
    assert spur.compress(names) == text


# -- the rules, as properties ----------------------------------------------------------

_NAMES = st.builds(
    lambda prefix, number, pad, bare: prefix if bare else f"{prefix}{number:0{pad}d}",
    st.sampled_from(["gpu", "node", "n", "rack1-n", "x.y-", "café", "GPU"]),
    st.integers(min_value=0, max_value=1_200),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=0, max_value=9).map(lambda r: r == 0),
)


@given(st.lists(_NAMES, max_size=60))
@example([f"gpu{i:02d}" for i in range(1, 101)] + ["gpu100"])
@example(["node9", "node010", "node011", "gpu001", "gpu003", "master", "cpu10", "cpu8"])
def test_whatever_spur_compresses_it_expands_back_to_the_same_names(names: list[str]) -> None:
    text = spur.compress(names)
    assert sorted(spur.expand(text)) == sorted(set(names))
    assert spur.size(text) == len(set(names))
    assert spur.compress(reversed(names)) == text  # whatever the order


@given(
    st.integers(min_value=0, max_value=3_000),
    st.integers(min_value=0, max_value=3_000),
    st.integers(min_value=0, max_value=5),
    st.integers(min_value=0, max_value=5),
)
def test_every_number_of_a_range_is_zero_filled_to_its_start_tokens_width(
    lo: int, hi: int, lo_pad: int, hi_pad: int
) -> None:
    lo, hi = min(lo, hi), max(lo, hi)
    start = f"{lo:0{lo_pad}d}"
    text = f"n[{start}-{hi:0{hi_pad}d}]"
    assert spur.expand(text) == [f"n{i:0{len(start)}d}" for i in range(lo, hi + 1)]


def _reference(text: str) -> list[str]:
    """Spur's `expand`, read as plainly as possible: no fast path, no counting."""
    depth, start, raw = 0, 0, []
    for i, c in enumerate(text):
        depth = depth + 1 if c == "[" else max(depth - 1, 0) if c == "]" else depth
        if c == "," and depth == 0:
            raw.append(text[start:i])
            start = i + 1
    raw.append(text[start:])
    out: list[str] = []

    def single(term: str) -> None:
        if "[" not in term:
            out.append(term)
            return
        opened, closed = term.index("["), term.find("]")
        if closed < opened:  # -1 included: no ']' at all
            raise spur.BadNodelist(term)
        prefix, inner, suffix = term[:opened], term[opened + 1 : closed], term[closed + 1 :]
        for item in inner.split(","):
            if "-" in item:
                a, b = item.split("-", 1)
                for token in (a, b):  # u64::from_str: an optional '+', ASCII digits
                    digits = token[1:] if token.startswith("+") else token
                    if not (digits.isascii() and digits.isdigit()) or int(digits) >= 1 << 64:
                        raise spur.BadNodelist(item)
                if int(a) > int(b):
                    raise spur.BadNodelist(item)
                values = [f"{v:0{len(a)}d}" for v in range(int(a), int(b) + 1)]
            else:
                values = [item]
            for v in values:
                (single if "[" in suffix else out.append)(prefix + v + suffix)

    for part in raw:
        single(part.strip(spur.WHITESPACE))
    return [n for n in out if n]


@given(st.text(alphabet="gn01239[]-,+ \t\x1c", max_size=20))
@example("x]],[y,z]")
@example("a[1-2]b[3,x]c")
@example("[[1-2]]")
def test_expand_and_size_agree_with_a_plain_reading_of_spurs_rules(text: str) -> None:
    try:
        expected = _reference(text)
    except spur.BadNodelist:
        with pytest.raises(spur.BadNodelist):
            spur.size(text)
        with pytest.raises(spur.BadNodelist):
            spur.expand(text)
        return
    assert spur.expand(text) == expected
    assert spur.size(text) == len(expected)


def test_size_counts_without_building_a_name() -> None:
    assert spur.size("n[1-90000000]") == 90_000_000
    assert spur.size("a[1-1000]b[1-1000]c[1-1000]") == 10**9
    assert spur.size("x[" + ",".join(["q"] * 200) + "]") == 200


def test_a_list_too_intricate_to_count_is_refused() -> None:
    with pytest.raises(spur.BadNodelist):
        spur.size("n" + "[a,b]" * 20)  # each text item is read on its own: 2**20 steps
    with pytest.raises(spur.BadNodelist):
        spur.size("n" + "[1]" * 100)


@pytest.mark.parametrize(
    ("n", "wn", "m", "wm", "width"),
    [
        (1, 2, 100, 3, 2),  # gpu01..gpu99 then gpu100: the range keeps width 2
        (8, 1, 10, 2, 1),  # node8, node9, node10
        (9, 1, 10, 3, None),  # node9 and node010 cannot share a range
        (5, 3, 6, 3, 3),
    ],
)
def test_two_widths_share_a_range_as_slurms_width_equiv_says(
    n: int, wn: int, m: int, wm: int, width: int | None
) -> None:
    assert spur.shared_width(n, wn, m, wm) == width
