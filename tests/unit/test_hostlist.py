"""Hostlists: Slurm syntax through ClusterShell, plain names without it, clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from ClusterShell import NodeSet as nodeset_module

from spurctl import hostlist
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


def test_a_bracketed_or_comma_list_is_parsed_once_and_cached(parses: list[str]) -> None:
    text = "cache[001-003,200],cachex"
    first = hostlist.expand(text)
    assert first == {"cache001", "cache002", "cache003", "cache200", "cachex"}
    assert hostlist.node_in(text, "cache200")
    assert not hostlist.node_in(text, "cache004")
    assert hostlist.expand(text) is first
    assert parses == [text]


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
        ("gpu[1-", "missing bracket"),
        ("gpu[3-1]", "bad range"),
        ("gpu[a-b]", "bad range"),
        ("gpu1,,gpu2", "missing nodeset operand"),
        ("", "it names no node"),
        ("gpu[1-4]!gpu2", "'!' not allowed"),
        ("@gpus", "'@' not allowed"),
        ("gpu1 gpu2", "' ' not allowed"),
        ("gpu[1-2],-x", "'-x' is not a node name"),
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
    with pytest.raises(SpurctlError, match=r"bad hostlist 'gpu\[1-': missing bracket"):
        hostlist.node_in("gpu[1-", "gpu1")
