"""What every gRPC client of spurctl shares: how a channel is opened, and what a failed
call means.

The controller client (sources/controller.py), the node administration writer
(act/node_admin.py) and the agents' cancels (act/agents.py) all talk gRPC to a Spur
daemon; each opens its channels with spurctl's limits and turns a failed call into one
secret-free sentence here, so that a failure reads the same whichever command met it.
They lived in the controller client, which the other two imported for them alone.
"""

from __future__ import annotations

import grpc

from spurctl.errors import redact

# No 4 MiB receive cap (grpc's default) on spurctl's side: a controller's answer may be
# up to 32 MiB (docs/spur-facts.md, "32 MiB answer limit").
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
]


def open_channel(url: str, tls_ca: bytes | None) -> grpc.Channel:
    """A channel to `url`: TLS (checked against `tls_ca`, else the system's roots) for
    https://, plain otherwise."""
    scheme, _, target = url.partition("://")
    if scheme == "https":
        creds = grpc.ssl_channel_credentials(root_certificates=tls_ca)
        return grpc.secure_channel(target, creds, options=CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def describe_rpc_error(err: grpc.RpcError, timeout: float) -> str:
    """A short, secret-free description of why a call failed."""
    code = err.code() if isinstance(err, grpc.Call) else None
    # Redacted here, where it becomes text: a table may fold it across lines later.
    details = redact((err.details() if isinstance(err, grpc.Call) else "") or "")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"no answer within {timeout:g} s (raise --timeout if it is just slow)"
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"unreachable ({_unavailable_reason(details)})"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return credential_problem(details)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return f"permission denied ({details}); an admin credential may be needed"
    name = code.name if code is not None else "error"
    return f"{name}: {details}" if details else name


def _unavailable_reason(details: str) -> str:
    """grpc's connect failure, without the resolver chatter around the reason."""
    first = details.splitlines()[0] if details else "unavailable"
    if "resolving" in first or "DNS resolution failed" in first:
        return "cannot resolve the host name"
    if "WRONG_VERSION_NUMBER" in first:
        return "TLS handshake failed: the endpoint does not speak TLS; for a plain one use http://"
    if "handshake failed" in first.lower():
        return "TLS handshake failed: check the certificate authority (--tls-ca)"
    first = first.removesuffix(": OK")  # grpc appends the status it never reached
    _, marker, reason = first.rpartition("Failed to connect to remote host:")
    return reason.strip().lower() if marker and reason.strip() else first


def credential_problem(details: str) -> str:
    """Which of missing, expired or wrong key the controller's UNAUTHENTICATED means, and the fix.

    Spur's detail texts: "authentication required: ..." (none sent), "invalid
    credential: token expired", "invalid credential: invalid token:
    InvalidSignature" (signed with another key); the simulated cluster words the
    last one "bad signature".
    """
    said = details or "unauthenticated"
    lowered = said.lower()
    if "authentication required" in lowered or "no credential" in lowered:
        return (
            f"credential missing: the controller requires one ({said}); pass --token, "
            "set SPUR_AUTH_TOKEN, or write it to ~/.spur/token with mode 0600"
        )
    if "no auth.jwt_key is configured" in lowered:
        # spur-core auth.rs authenticate_bearer: the controller has no key, so it verifies
        # no token; only a call without one passes (docs/spur-facts.md, "Authentication").
        return (
            f"the controller has no [auth] jwt_key configured, so it refuses every token "
            f"while a call without one would pass (auth.mode permissive) ({said}); the token "
            "is not at fault: run without one (no --token, SPUR_AUTH_TOKEN or "
            "~/.spur/token), or set the cluster's jwt_key in the controller's spur.conf"
        )
    if "expired" in lowered:
        return (
            f"credential expired ({said}); get a fresh token (`spur token user`) "
            "and pass it with --token or SPUR_AUTH_TOKEN"
        )
    if "signature" in lowered:
        return (
            f"credential signed with the wrong key ({said}): it was not minted with this "
            "cluster's [auth] jwt_key; get a token from this cluster"
        )
    return f"credential rejected ({said}); check --token, SPUR_AUTH_TOKEN or ~/.spur/token"
