"""A controller's address as the URL spurctl dials.

--controller, spur.conf's controller hosts (settings.py) and the `controller` a file
names (cluster_binding.py) all read through here, below them both.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from spurctl.errors import SpurctlError

DEFAULT_CONTROLLER_PORT = 6817


def normalize_url(address: str, default_port: int = DEFAULT_CONTROLLER_PORT) -> str:
    """'ctl1' -> 'http://ctl1:6817'; keeps an explicit scheme and port."""
    address = address.strip()
    if not address:
        raise SpurctlError("empty controller address; use --controller http://HOST:6817")
    if "://" not in address:
        address = "http://" + address
    try:
        parts = urlsplit(address)
    except ValueError:  # an unclosed `[`: "Invalid IPv6 URL"
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpurctlError(
            f"bad controller address {address!r}; use http://HOST:PORT or https://HOST:PORT"
        )
    try:
        port = parts.port or default_port
    except ValueError:
        raise SpurctlError(f"bad port in controller address {address!r}") from None
    host = parts.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"
