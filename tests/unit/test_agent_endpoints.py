"""Agent addresses: one accepted form, and one canonical endpoint per place an address leads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.sources.agent_endpoints import (
    LOOPBACK,
    AddressError,
    dial_target,
    endpoint,
    endpoints,
    parse_agent_address,
)
from spurctl.sources.settings import load_agent_map


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("gpu003:6818", ("gpu003", 6818)),
        ("gpu003.cluster.local:6818", ("gpu003.cluster.local", 6818)),
        ("10.0.3.17:6818", ("10.0.3.17", 6818)),
        ("[fd00::17]:6818", ("fd00::17", 6818)),
        ("[::ffff:127.0.0.1]:7000", ("::ffff:127.0.0.1", 7000)),
        ("unix:1234", ("unix", 1234)),  # a host named unix: dialled as a host (dial_target)
    ],
)
def test_the_one_form_is_host_colon_port_ipv6_in_brackets(
    text: str, parsed: tuple[str, int]
) -> None:
    assert parse_agent_address(text) == parsed


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ipv4:127.0.0.1:6818", "more than one ':'"),
        ("ipv6:[::1]:6818", "brackets"),
        ("dns:///127.0.0.1:6818", "target URI"),
        ("dns:127.0.0.1:6818", "more than one ':'"),
        ("unix:/run/spurd.sock", "target URI"),
        ("unix-abstract:spurd", "no :PORT"),
        ("127.0.0.1:6818,127.0.0.2:6818", "a list"),
        ("0.0.0.0:6818", "wildcard"),
        ("[::]:6818", "wildcard"),
        ("[::ffff:0.0.0.0]:6818", "wildcard"),
        ("::1:6818", "more than one ':'"),
        ("[gpu003]:6818", "brackets"),
        ("[fd00::zz]:6818", "brackets"),
        ("[1.2.3.4]:6818", "not an IPv6 address"),
        ("gpu003", "no :PORT"),
        ("gpu003:0", "1-65535"),
        ("gpu003:65536", "1-65535"),
        ("gpu 003:6818", "whitespace"),
        ("-oProxy:6818", "not a host name"),
        ("", "empty"),
    ],
)
def test_every_other_form_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(AddressError, match=why):
        parse_agent_address(text)


def test_the_agent_pool_dials_the_checked_form_through_the_named_dns_resolver() -> None:
    assert dial_target("unix:1234") == "dns:///unix:1234"
    assert dial_target("[fd00::17]:6818") == "dns:///[fd00::17]:6818"
    with pytest.raises(AddressError):
        dial_target("ipv4:127.0.0.1:6818")


def fake_dns(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    return lambda host, port: table.get(host, [])


def test_an_ipv4_mapped_address_is_the_ipv4_address_it_maps() -> None:
    dns = fake_dns({"::ffff:10.0.3.17": ["::ffff:10.0.3.17"], "10.0.3.17": ["10.0.3.17"]})
    mapped = endpoint("[::ffff:10.0.3.17]:6818", dns)
    plain = endpoint("10.0.3.17:6818", dns)
    assert ("10.0.3.17", 6818) in mapped & plain


def test_every_loopback_address_is_one_member() -> None:
    dns = fake_dns({"localhost": ["::1", "127.0.0.1"], "127.0.0.2": ["127.0.0.2"]})
    assert (LOOPBACK, 7000) in endpoint("localhost:7000", dns) & endpoint("127.0.0.2:7000", dns)
    assert not endpoint("localhost:7000", dns) & endpoint("127.0.0.2:7001", dns)


def test_a_name_that_resolves_to_a_wildcard_address_is_refused() -> None:
    with pytest.raises(AddressError, match="wildcard"):
        endpoint("blackhole:6818", fake_dns({"blackhole": ["0.0.0.0"]}))


def test_an_unresolvable_name_keeps_its_written_form_only() -> None:
    assert endpoint("GPU003.:6818", fake_dns({})) == frozenset({("gpu003", 6818)})


def test_endpoints_name_the_node_whose_address_is_refused() -> None:
    with pytest.raises(AddressError, match=r"gpu004's agent address 'dns:///x:1'"):
        endpoints(
            {"gpu003": {"gpu003:6818"}, "gpu004": {"dns:///x:1"}},
            lambda a: endpoint(a, fake_dns({})),
        )


@pytest.mark.parametrize("value", ["ipv4:127.0.0.1:7000", "dns:///127.0.0.1:7000", "0.0.0.0:7000"])
def test_an_agent_map_with_another_form_is_refused_in_one_line(tmp_path: Path, value: str) -> None:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"gpu003": value}))
    with pytest.raises(SpurctlError) as err:
        load_agent_map(path)
    text = str(err.value)
    assert "\n" not in text and "'gpu003'" in text and repr(value) in text
    assert 'write "host:port"' in text
