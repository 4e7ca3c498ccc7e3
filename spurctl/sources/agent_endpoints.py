"""Agent addresses: the one form spurctl accepts, and where an address really leads.

An agent address is `host:port`, an IPv6 literal in brackets (`[fd00::17]:6818`).
Nothing else: gRPC would read `ipv4:127.0.0.1:6818`, `dns:///host:6818`,
`unix:/path` or a comma list as a target URI that no name lookup here can follow,
so a check that compares written forms could not see that it is another node's
agent (issue 39.1). A wildcard address (`0.0.0.0`, `::`) is no agent's: a
connection to it lands on whatever listens on this host.

`endpoint` is where an address leads, in one canonical form: every address its
host resolves to, an IPv4-mapped IPv6 address as the IPv4 address it is, every
loopback address as one (an agent listening on the wildcard answers on all of
them), plus the host as written. Two addresses reach the same agent when their
endpoints share a member. The agent pool dials exactly the form checked here
(`dial_target`), so the check and the send cannot read one address two ways.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

# One agent endpoint: every (address, port) its "host:port" resolves to, and the
# host as written. Two endpoints are the same agent when they share any member.
Endpoint = frozenset[tuple[str, int]]

# Every loopback address (127.0.0.0/8, ::1, ::ffff:127.x) is this one member.
LOOPBACK = "loopback"

FORM = 'write "host:port", an IPv6 address in brackets: "[fd00::17]:6818"'

_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?\.?")
_BRACKETED = re.compile(r"\[([0-9A-Fa-f:.]+)\]:([0-9]+)")


class AddressError(ValueError):
    """An agent address spurctl will not dial; the message says why, for one line."""


def parse_agent_address(text: str) -> tuple[str, int]:
    """'gpu003:6818' -> ('gpu003', 6818); '[::1]:6818' -> ('::1', 6818).

    Raises AddressError for any other form: a gRPC target URI (`ipv4:`, `dns:`,
    `unix:`), a comma list, a missing or bad port, a wildcard address.
    """
    if not text:
        raise AddressError("is empty")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise AddressError("has whitespace or control characters in it")
    if "," in text:
        raise AddressError("is a list; give one address per node")
    if "/" in text or "@" in text or "%" in text or "?" in text or "#" in text:
        raise AddressError("is a gRPC target URI, not host:port")
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    bracketed = _BRACKETED.fullmatch(text)
    if bracketed:
        host, port_text = bracketed.group(1), bracketed.group(2)
        try:
            ip = ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressError(f"has {host!r} in brackets, which is not an IPv6 address") from None
    else:
        if "[" in text or "]" in text:
            raise AddressError("has brackets that do not hold an IPv6 address before :PORT")
        host, sep, port_text = text.rpartition(":")
        if not sep or not port_text.isdigit():
            raise AddressError("has no :PORT at its end")
        if ":" in host:
            raise AddressError(
                "has more than one ':' (a gRPC target URI such as ipv4:..., or an IPv6 "
                "address without brackets)"
            )
        if not _HOST.fullmatch(host):
            raise AddressError(f"has {host!r}, which is not a host name or an IPv4 address")
        with contextlib.suppress(ValueError):
            ip = ipaddress.IPv4Address(host)
    if not port_text.isascii() or not 0 < int(port_text) < 65536:
        raise AddressError("has a port outside 1-65535")
    if ip is not None and _canonical(ip) is None:
        raise AddressError("is a wildcard address, which is no one agent's")
    return host, int(port_text)


def check_agent_address(text: str) -> None:
    """Raise AddressError unless `text` is in the one accepted form."""
    parse_agent_address(text)


def dial_target(address: str) -> str:
    """The gRPC target for an accepted address: the DNS resolver, named, so that gRPC
    never reads a host as a URI scheme (a host called `unix` is a host)."""
    host, port = parse_agent_address(address)
    return f"dns:///[{host}]:{port}" if ":" in host else f"dns:///{host}:{port}"


def _canonical(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """The address as one member of an endpoint; None for a wildcard address."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:
        return None
    if ip.is_loopback:
        return LOOPBACK
    return str(ip)


def endpoint(
    address: str,
    lookup: Callable[[str, int], Iterable[str]] | None = None,
) -> Endpoint:
    """Every canonical (address, port) an agent "host:port" reaches, plus the host as written.

    A host that does not resolve keeps only its written form: its cancel would fail
    to connect, it cannot reach another node's agent. Raises AddressError for an
    address not in the accepted form, or one whose host resolves to a wildcard.
    """
    host, port = parse_agent_address(address)
    members = {(host.lower().rstrip("."), port)}
    for text in (lookup or _resolve)(host, port):
        try:
            ip = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            continue
        canonical = _canonical(ip)
        if canonical is None:
            raise AddressError(f"resolves to {ip}, a wildcard address, which is no one agent's")
        members.add((canonical, port))
    return frozenset(members)


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def endpoints(
    addresses: Mapping[str, Iterable[str]],
    resolve: Callable[[str], Endpoint] = endpoint,
) -> dict[str, Endpoint]:
    """Each node's endpoint: the union of where each of its addresses leads.

    Raises AddressError naming the node and the address for the first address not
    in the accepted form (or resolving to a wildcard).
    """
    unique = sorted({a for addrs in addresses.values() for a in addrs})
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(unique)))) as pool:
        found = list(pool.map(_tried(resolve), unique))
    resolved: dict[str, Endpoint] = {}
    for address, (ep, why) in zip(unique, found, strict=True):
        if why is not None:
            node = min(n for n, addrs in addresses.items() if address in addrs)
            raise AddressError(f"{node}'s agent address {address!r} {why}")
        assert ep is not None
        resolved[address] = ep
    return {
        node: frozenset(m for a in addrs for m in resolved[a]) for node, addrs in addresses.items()
    }


def _tried(
    resolve: Callable[[str], Endpoint],
) -> Callable[[str], tuple[Endpoint | None, str | None]]:
    def attempt(address: str) -> tuple[Endpoint | None, str | None]:
        try:
            return resolve(address), None
        except AddressError as exc:
            return None, str(exc)

    return attempt
