"""systemd's notify protocol (sd_notify(3)) without a dependency: one datagram to
$NOTIFY_SOCKET per message (READY=1, WATCHDOG=1, STATUS=...). Nothing happens
outside a Type=notify service (no $NOTIFY_SOCKET); a message that cannot be sent is
dropped (systemd's watchdog then says so, which is its job)."""

from __future__ import annotations

import os
import socket


def notify(*fields: str) -> bool:
    """Send `fields` (KEY=VALUE) as one message; whether it was sent."""
    where = os.environ.get("NOTIFY_SOCKET")
    if not where:
        return False
    address = "\0" + where[1:] if where.startswith("@") else where
    payload = "\n".join(f.replace("\n", " ") for f in fields).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(payload, address)
    except OSError:
        return False
    return True
