"""Hostlists: Slurm syntax through ClusterShell, plain names without it, clear errors."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ClusterShell import NodeSet as nodeset_module
from hypothesis import example, given
from hypothesis import strategies as st

from spurctl import hostlist, spur_hostlist
from spurctl.errors import SpurctlError


class _CountingNodeSet:
    """Stands in for ClusterShell's NodeSet and counts how often a hostlist is parsed."""

    calls: list[str]

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls = []

    def __call__(self, text: str, **kwargs: Any) -> Any:
        self.calls.append(text)
        return self.real(text, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    counter = _CountingNodeSet(nodeset_module.NodeSet)
    monkeypatch.setattr(nodeset_module, "NodeSet", counter)
    return counter.calls


def test_a_plain_node_name_is_never_parsed_by_nodeset(parses: list[str]) -> None:
    assert hostlist.expand("gpu-plain-017") == {"gpu-plain-017"}
    assert hostlist.node_in("gpu-plain-017", "gpu-plain-017")
    assert not hostlist.node_in("gpu-plain-017", "gpu-plain-0170")
    assert hostlist.fold(["gpu-plain-017"]) == "gpu-plain-017"
    assert hostlist.expand("") == frozenset()
    assert parses == []


def test_a_bracketed_or_comma_list_is_read_once_and_cached(
    parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = spur_hostlist.expand
    monkeypatch.setattr(spur_hostlist, "expand", lambda text: reads.append(text) or real(text))
    text = "cache[001-003,200],cachex"
    first = hostlist.expand(text)
    assert first == {"cache001", "cache002", "cache003", "cache200", "cachex"}
    assert hostlist.node_in(text, "cache200")
    assert not hostlist.node_in(text, "cache004")
    assert hostlist.expand(text) is first
    assert reads == [text]
    assert parses == []  # a controller's nodelist is Spur's to read, not ClusterShell's


def test_each_part_of_a_nodelist_is_trimmed_as_spur_does(parses: list[str]) -> None:
    # spur-core hostlist.rs `expand`: split at top-level commas, trim each part,
    # drop empty ones. A plain name with spaces still needs no NodeSet parse.
    assert hostlist.expand("gpu015 ") == {"gpu015"}
    assert hostlist.node_in("gpu015 ", "gpu015")
    assert hostlist.node_in("\tgpu015\n", "gpu015")
    assert hostlist.expand("  ") == frozenset()
    assert parses == []
    assert hostlist.expand(" gpu[014-015] , gpu020,") == {"gpu014", "gpu015", "gpu020"}
    assert hostlist.node_in("gpu020 ,, gpu[014-015] ", "gpu015")
    assert hostlist.expand("gpu015 , ") == {"gpu015"}


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("gpu015 ", "gpu015"),
        (" gpu[001-002] ,gpu009, ", "gpu[001-002],gpu009"),
        ("a,,b", "a,b"),
        ("gpu[1, 2]", "gpu[1, 2]"),  # inside brackets Spur does not trim either
    ],
)
def test_normalize_is_spurs_reading_of_a_nodelist(text: str, normal: str) -> None:
    assert hostlist.normalize(text) == normal


@pytest.mark.parametrize(
    ("text", "name", "named"),
    [
        ("gpu015 ", "gpu015", True),
        ("gpu014 gpu015", "gpu015", True),
        ("gpu[014,015]", "gpu015", False),  # a range is not the name's text
        ("gpu015,gpu016", "gpu016", True),
        ("gpu0150", "gpu015", False),
        ("xgpu015", "gpu015", False),
        ("", "gpu015", False),
    ],
)
def test_names_token_finds_a_node_name_as_a_whole_token(text: str, name: str, named: bool) -> None:
    assert hostlist.names_token(text, name) is named


def test_fold_compresses_names_into_slurm_syntax_and_back() -> None:
    names = ["gpu003", "gpu001", "gpu002", "gpu200", "login1"]
    folded = hostlist.fold(names)
    assert folded == "gpu[001-003,200],login1"
    assert hostlist.expand(folded) == set(names)
    assert hostlist.fold([]) == ""


def test_parse_scope_accepts_slurm_hostlists() -> None:
    assert hostlist.parse_scope(" gpu[001-002],cpu7 ") == {"gpu001", "gpu002", "cpu7"}
    assert hostlist.parse_scope("node1.example.com") == {"node1.example.com"}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("gpu[1-", "a '[' is never closed"),
        ("gpu[3-1]", "runs backwards"),
        ("gpu[a-b]", "only numbers"),
        ("gpu1,,gpu2", "an empty name between commas"),
        (",", "an empty name between commas"),
        (" , ", "an empty name between commas"),
        ("gpu1,", "an empty name between commas"),
        ("", "it names no node"),
        ("  ", "it names no node"),
        ("gpu[1-4]!gpu2", "'!' not allowed"),
        ("@gpus", "'@' not allowed"),
        ("gpu1 gpu2", "' ' not allowed"),
        ("gpu[1-2],-x", "'-x' is not a node name"),
        ("gpu1[1-10]", "a digit right before '['"),
        ("gpu[1-2],rack4[01-02]", "a digit right before '['"),
    ],
)
def test_a_bad_hostlist_says_what_is_wrong_and_shows_the_syntax(text: str, why: str) -> None:
    with pytest.raises(SpurctlError) as caught:
        hostlist.parse_scope(text)
    message = str(caught.value)
    assert message.startswith(f"bad hostlist {text!r}: ")
    assert why in message
    assert message.endswith("; use Slurm syntax like gpu[001-128,200]")
    assert "\n" not in message


def test_expand_raises_spurctl_error_for_a_malformed_nodelist() -> None:
    with pytest.raises(
        SpurctlError, match=r"bad hostlist 'gpu\[1-': Spur cannot read it \(a '\[' is never closed"
    ):
        hostlist.node_in("gpu[1-", "gpu1")


# -- id ranges -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        ([], ""),
        ([3], "3"),
        ([0, 1, 2, 3, 6], "0-3,6"),
        ([6, 3, 2, 1, 0, 3], "0-3,6"),  # any order, repeats once
        ([9, 10, 11], "9-11"),  # across a change of width, no padding
        ([0, 2, 4], "0,2,4"),
        ([7, 100, 101], "7,100-101"),
    ],
)
def test_ids_fold_into_ranges(ids: list[int], text: str) -> None:
    assert hostlist.ranges(ids) == text


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("0-3,6", {0, 1, 2, 3, 6}),
        ("0-3,2-5", {0, 1, 2, 3, 4, 5}),
        ("01,1", {1}),  # zero padding means nothing for numbers
        ("1-03", {1, 2, 3}),
    ],
)
def test_ranges_expand_into_ids(text: str, ids: set[int]) -> None:
    assert hostlist.expand_ranges(text) == ids


@pytest.mark.parametrize("text", ["", "3-1", "0-", "-3", "0,,1", "0-10/2", "0 - 3", "\u0663"])
def test_a_bad_range_list_raises_spurctl_error(text: str) -> None:
    with pytest.raises(SpurctlError, match="bad range list"):
        hostlist.expand_ranges(text)


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=40))
def test_ranges_are_written_as_clustershells_rangeset_writes_them(ids: list[int]) -> None:
    from ClusterShell.RangeSet import RangeSet

    assert hostlist.ranges(ids) == str(RangeSet.fromlist([str(i) for i in ids]))


@given(st.sets(st.integers(min_value=0, max_value=5000), max_size=40))
def test_ranges_round_trip(ids: set[int]) -> None:
    text = hostlist.ranges(ids)
    assert (hostlist.expand_ranges(text) if text else frozenset()) == ids


# -- node names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("gpu001", True),
        ("gpu001.example.com", True),
        ("_gpu1", True),
        ("-oProxyCommand=x", False),
        (".hidden", False),
        ("gpu 1", False),
        ("gpu1;reboot", False),
        ("$(id)", False),
        ("", False),
    ],
)
def test_a_node_name_is_safe_in_a_shell_command(name: str, ok: bool) -> None:
    assert hostlist.is_node_name(name) is ok


def test_names_of_one_node_share_a_loose_key_across_case_and_domain() -> None:
    assert hostlist.loose_key("GPU001.example.com") == hostlist.loose_key("gpu001") == "gpu001"
    assert hostlist.loose_key("gpu001") != hostlist.loose_key("gpu002")


_PREFIXES = st.sampled_from(["gpu", "node", "r1n", "a-", "x.y", "GPU", "n_"])
_SUFFIXES = st.sampled_from(["", ".example", "-ib", "a"])


@st.composite
def _node_names(draw: st.DrawFn) -> str:
    number = draw(st.integers(min_value=0, max_value=1200))
    pad = draw(st.integers(min_value=0, max_value=4))
    digits = f"{number:0{pad}d}" if draw(st.booleans()) else str(number)
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        return draw(_PREFIXES) + draw(st.sampled_from(["", "x", "login"]))  # no number
    return f"{draw(_PREFIXES)}{digits}{draw(_SUFFIXES)}"


@given(st.lists(_node_names(), max_size=40))
def test_a_folded_hostlist_names_exactly_the_names_folded(names: list[str]) -> None:
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    folded = hostlist.fold(names)
    assert hostlist.expand(folded) == frozenset(names)
    if names:  # and it reads the same to ClusterShell, as an operator's clush would
        assert set(NodeSet(folded, resolver=RESOLVER_NOGROUP)) == set(names)


def test_folding_a_numbered_run_gives_slurm_ranges() -> None:
    assert hostlist.fold(["gpu003", "gpu001", "gpu002", "gpu010"]) == "gpu[001-003,010]"
    assert hostlist.fold(["gpu099", "gpu100"]) == "gpu[099-100]"
    assert hostlist.fold(["gpu1", "gpu01"]) == "gpu1,gpu01"  # two nodes, not one
    assert hostlist.fold(["n1.example", "n2.example", "login"]) == "login,n[1-2].example"
    assert hostlist.fold(["gpu[1-2]", "x"]) == "gpu[1-2],x"  # not plain: NodeSet's reading


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("gpu[024-001]", "the range 024-001 runs backwards: write 001-024"),
        ("gpu[1-", "a '[' is never closed"),
        ("gpu[a-b]", "[a-b] holds 'a-b': only numbers and ranges like 001-024"),
        ("gpu[]", "an empty [] names no number"),
        ("gpu[[1]]", "its brackets do not pair up"),
        ("gpu[01-100]", "the range 01-100 mixes paddings"),
    ],
)
def test_a_bad_hostlist_is_explained_in_the_operators_words(text: str, said: str) -> None:
    with pytest.raises(SpurctlError) as caught:
        hostlist.parse_scope(text)
    message = str(caught.value)
    assert message.startswith(f"bad hostlist {text!r}: {said}")
    assert "ClusterShell" not in message and "invalid values" not in message


@given(st.text(alphabet="gpu0123[]-, .", max_size=24))
def test_a_plain_name_is_what_expand_reads_from_a_one_node_list(text: str) -> None:
    name = hostlist.plain_name(text)
    if name is None:
        assert "[" in text or "," in text
        return
    assert hostlist.expand(text) == (frozenset((name,)) if name else frozenset())


@given(st.text(max_size=16))
def test_natural_order_reads_numbers_as_numbers_and_ignores_case(name: str) -> None:
    key = hostlist.natural_key(name)
    assert key[-1] == name  # ties broken by the name itself
    assert all(isinstance(p, int) for p in key[1:-1:2])
    assert all(isinstance(p, str) and p == p.lower() for p in key[0:-1:2])


def _split_key(name: str) -> tuple[object, ...]:
    """natural_key's definition: the lowered name split on digit runs, the runs as numbers,
    then the name itself."""
    text = re.split(r"(\d+)", name.lower())
    return (*(int(t) if k % 2 else t for k, t in enumerate(text)), name)


# Names as clusters spell them (one run of digits, last), beside every other shape: digits
# inside or first, none, Unicode digits (which \d reads and rstrip does not), case.
_NAME_PARTS = st.sampled_from(
    ["gpu", "GPU", "node-", "a.b", "x1y", "", "0", "007", "19", "\u0663", "\u0130", "-"]
)


@given(st.lists(_NAME_PARTS, max_size=5).map("".join) | st.text(max_size=12))
@example("gpu00017")
@example("\u0663\u0664")  # Arabic-Indic digits only: no ASCII run to strip
@example("gpu\u06631")  # a Unicode digit before the ASCII ones
def test_natural_key_of_a_name_ending_in_digits_is_the_split_key(name: str) -> None:
    hostlist.natural_key.cache_clear()
    assert hostlist.natural_key(name) == _split_key(name)


def test_natural_order_puts_gpu2_before_gpu10_whatever_the_case() -> None:
    names = ["gpu10", "GPU2", "gpu1", "gpu002a", "gpu2"]
    assert sorted(names, key=hostlist.natural_key) == ["gpu1", "GPU2", "gpu2", "gpu002a", "gpu10"]


@st.composite
def _range_lists(draw: st.DrawFn) -> str:
    """`prefix[ranges]suffix`: any widths, paddings and directions, as a controller or
    an operator might write them."""
    items = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        lo = draw(st.integers(min_value=0, max_value=120))
        hi = draw(st.integers(min_value=0, max_value=120))
        lo_text = f"{lo:0{draw(st.integers(min_value=0, max_value=4))}d}"
        hi_text = f"{hi:0{draw(st.integers(min_value=0, max_value=4))}d}"
        items.append(lo_text if draw(st.booleans()) else f"{lo_text}-{hi_text}")
    prefix = draw(st.sampled_from(["", "gpu", "gpu1", "n-", "rack.a", "_x"]))
    suffix = draw(st.sampled_from(["", "-ib", ".example", "x1"]))
    return f"{prefix}[{','.join(items)}]{suffix}"


@given(_range_lists())
@example("gpu1[1-10]")  # NodeSet: gpu[11-110], 100 names; Spur: gpu11 to gpu110, 10
@example("gpu[01-100]")  # NodeSet refuses it; Spur writes it for gpu01..gpu100
def test_an_operators_hostlist_is_read_only_where_spur_reads_the_same_nodes(text: str) -> None:
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetError

    try:
        spur: frozenset[str] | None = frozenset(spur_hostlist.expand(text))
    except spur_hostlist.BadNodelist:
        spur = None
    try:
        read = hostlist.parse_scope(text)
    except SpurctlError:
        return  # refused: never a scope wider than what was named
    assert read == spur
    try:
        assert read == frozenset(NodeSet(text, resolver=RESOLVER_NOGROUP))
    except NodeSetError:
        pytest.fail(f"{text!r} reads as {sorted(read)} where NodeSet refuses it")


def test_a_controllers_nodelist_is_read_without_nodeset(parses: list[str]) -> None:
    assert hostlist.expand("gpu[00001-00004]") == {f"gpu0000{i}" for i in range(1, 5)}
    assert hostlist.node_in(" gpu[9-10]-ib ", "gpu10-ib")
    assert hostlist.expand("gpu[01-02,7]") == {"gpu01", "gpu02", "gpu7"}
    assert hostlist.expand("gpu[0-10]") == {f"gpu{i}" for i in range(11)}
    assert hostlist.expand("a[1-2],b[3-4]") == {"a1", "a2", "b3", "b4"}
    # Spur's own folding, which NodeSet refuses ("mixes paddings"): zero-filled to the
    # first token's width.
    assert hostlist.expand("gpu[01-100]") == {f"gpu{i:02d}" for i in range(1, 101)}
    assert len(hostlist.expand("gpu[001-1000]")) == 1000
    with pytest.raises(SpurctlError, match="runs backwards"):
        hostlist.expand("gpu[5-3]")
    assert parses == []


@pytest.mark.parametrize("text", ["n[1-90000000]", "n[1-300]x[1-300]y[1-300]", "n[1 -90000000]"])
def test_a_controllers_nodelist_past_the_node_table_is_refused_unexpanded(text: str) -> None:
    import time

    began = time.monotonic()
    with pytest.raises(hostlist.UnreadableNodelist) as caught:
        hostlist.node_in(text, "n1", limit=hostlist.nodelist_limit(20_000))
    assert time.monotonic() - began < 1.0  # counted, never built
    assert hostlist.named_nodes(text) == set()  # nor built for the endpoint check
    assert hostlist.may_name(text, "n7") and hostlist.may_name(text, "elsewhere")
    assert str(caught.value).startswith(f"bad hostlist {text!r}: ")


@pytest.mark.parametrize("text", ["x],y", "gpu01],gpu02", "x],[y,z]"])
def test_a_nodelist_spur_releases_split_apart_is_not_read(text: str) -> None:
    # v0.8.0's split_top_level lets a stray ']' take the depth below 0 (no comma splits
    # after it); #643 clamps it at 0. "0.8.0" is both releases' version string.
    assert spur_hostlist.split_top_level(text) != spur_hostlist.split_top_level(text, clamped=False)
    with pytest.raises(hostlist.UnreadableNodelist, match="#643"):
        hostlist.node_in(text, "y")
    assert hostlist.may_name(text, "elsewhere")
    assert hostlist.expand("x]") == {"x]"}  # no comma after it: both releases read one name


def test_the_node_table_bounds_a_nodelist_with_a_floor_and_a_cap_when_unknown() -> None:
    assert hostlist.nodelist_limit(20_000) == 20_000
    assert hostlist.nodelist_limit(3) == hostlist.NODELIST_FLOOR
    assert hostlist.nodelist_limit(0) == hostlist.MAX_NODES
    assert len(hostlist.expand("n[1-2000]", limit=2_000)) == 2_000
    with pytest.raises(
        hostlist.UnreadableNodelist, match="2,001 nodes, more than the 2,000 one nodelist"
    ):
        hostlist.expand("n[0-2000]", limit=2_000)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("n[8-9-10]", "[8-9-10] holds '8-9-10'"),  # NodeSet: twenty names, n-9 to n10
        ("n[10-8]", "the range 10-8 runs backwards"),
        ("n[]", "an empty [] names no number"),
        ("n[1-]", "[1-] holds '1-'"),
        ("n[-3]", "[-3] holds '-3'"),  # NodeSet: the one name n-3
        ("n[1,,3]", "[1,,3] holds ''"),
        ("n[1-3", "a '[' is never closed"),
        ("n1-3]", "its brackets do not pair up"),
        ("n[1-3]]", "its brackets do not pair up"),
        ("n[[1-2]]", "its brackets do not pair up"),
        ("n[1 -3]", "' ' not allowed"),
        ("n[+1-3]", "'+' not allowed"),  # Spur: n01 to n03; NodeSet: n1 to n3
        ("n[1-3/2]", "'/' not allowed"),
    ],
)
def test_every_malformed_range_an_operator_types_is_one_clear_error(text: str, said: str) -> None:
    with pytest.raises(SpurctlError) as caught:
        hostlist.parse_scope(text)
    message = str(caught.value)
    assert message.startswith(f"bad hostlist {text!r}: {said}"), message
    assert "\n" not in message


def test_an_operators_hostlist_that_slurm_and_clustershell_read_apart_is_refused() -> None:
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    # Slurm and Spur (spur-core hostlist.rs `expand_single`) write each number after the
    # text before '[': ten nodes. ClusterShell folds the digit into the range: a hundred.
    # A reclaim's --nodes must not reach ninety nodes the operator did not name.
    slurm = {f"gpu1{i}" for i in range(1, 11)}
    clustershell = set(NodeSet("gpu1[1-10]", resolver=RESOLVER_NOGROUP))
    assert len(slurm) == 10 and len(clustershell) == 100 and slurm < clustershell
    with pytest.raises(SpurctlError, match=r"put the whole number inside the brackets"):
        hostlist.parse_scope("gpu1[1-10]")
    assert hostlist.parse_scope("gpu[11-19,110]") == slurm  # what the error says to write


@given(st.text(max_size=16))
def test_a_loose_key_is_its_own_loose_key(name: str) -> None:
    # not_inventoried skips the key of a name found among the keys: it must be the name.
    key = hostlist.loose_key(name)
    assert hostlist.loose_key(key) == key


@st.composite
def _one_pattern_names(draw: st.DrawFn) -> list[str]:
    """Names mostly of one prefix and one number width (the shortcut's shape), now and
    then one that breaks it: another width, prefix or suffix, a digit 0-9 does not spell."""
    prefix = draw(st.sampled_from(["gpu", "node", "r1n", "a-", "x.y", "GPU", "n_", "", "9x"]))
    width = draw(st.integers(min_value=1, max_value=5))
    numbers = draw(st.sets(st.integers(min_value=0, max_value=10**width - 1), min_size=2))
    padded = draw(st.booleans())
    names = [prefix + (str(n).zfill(width) if padded else str(n)) for n in numbers]
    tail = "1" * (width - 1)
    near = ["", "12", "1x", "\u0663", "\u00b2"]  # the width, one more, a suffix, not 0-9
    odd = draw(st.sampled_from([prefix + tail + end for end in near] + ["q" + tail + "1"]))
    if odd and draw(st.booleans()):
        names.insert(draw(st.integers(min_value=0, max_value=len(names))), odd)
    return list(dict.fromkeys(names))


@given(_one_pattern_names())
@example(["gpu1", "gpu01"])
@example(["gpu10", "gpu01", "gpu00"])
@example(["0", "1", "2"])
def test_the_one_pattern_fold_is_the_general_fold(names: list[str]) -> None:
    # The shortcut for names of one prefix and width must write what the general
    # path writes, and decline (None) whatever it cannot read that way.
    if len(names) < 2:
        return
    one = hostlist._fold_one_pattern(names)
    if one is not None:
        assert one == hostlist._fold_by_pattern(names)
    assert hostlist.fold(names) == hostlist._fold_by_pattern(names)


def test_the_one_pattern_fold_takes_a_large_clusters_names_and_declines_others() -> None:
    names = [f"gpu{i:05d}" for i in range(1, 20001, 2)]
    assert hostlist._fold_one_pattern(names) == hostlist._fold_by_pattern(names)
    assert hostlist._fold_one_pattern(["gpu001", "gpu002", "gpu003"]) == "gpu[001-003]"
    assert hostlist._fold_one_pattern(["gpu1", "gpu01"]) is None  # two widths
    assert hostlist._fold_one_pattern(["gpu01", "cpu01"]) is None  # two prefixes
    assert hostlist._fold_one_pattern(["gpu01a", "gpu02a"]) is None  # a suffix
    assert hostlist._fold_one_pattern(["gpu01", "gpu0\u0663"]) is None  # not 0-9
    assert hostlist._fold_one_pattern(["gpu", "gpv"]) is None  # no number
