"""Who a call to the simulated cluster comes from: spurctld's and spurd's bearer ruling.

Each daemon reads its own spur.conf `[auth] mode`: `disabled` takes every call as
anonymous, `permissive` verifies a presented token and lets an anonymous call pass,
`required` refuses a call without one. A header that is not "Bearer <token>" is
refused in every mode; where spur.conf has no `[auth] jwt_key` (the cluster's
`keyless` endpoints), a presented token is refused unless the mode is `disabled`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import grpc

from spurctl.sources import credentials as auth
from spurctl_sim.node_admin import Refused as _Refused

AuthMode = Literal["disabled", "permissive", "required"]
AUTH_MODES: tuple[AuthMode, ...] = ("disabled", "permissive", "required")
# spurctld's jsonwebtoken validation tolerates 60 s of clock skew on exp.
TOKEN_LEEWAY_S = 60


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    uid: int
    admin: bool


Body = Callable[[Any, Identity | None], Any]


def authenticate(
    metadata: Any,
    *,
    mode: AuthMode,
    missing_hint: str,
    endpoint: str,
    keyless: frozenset[str],
    jwt_key: str,
    admins: frozenset[str],
) -> Identity | None:
    """spurctld/spurd's bearer ruling: an identity, None (anonymous), or a refusal."""
    header = next((str(v) for k, v in metadata or () if k == "authorization"), None)
    if header is None:
        if mode == "required":
            raise _Refused(
                grpc.StatusCode.UNAUTHENTICATED, f"authentication required: {missing_hint}"
            )
        return None
    # As in Spur, a header that is not "Bearer <token>" is refused in every mode.
    try:
        token = auth.bearer_token(header)
    except auth.CredentialError as exc:
        raise _Refused(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None
    if mode == "disabled":
        return None
    if endpoint in keyless:
        # spur-core auth.rs authenticate_bearer: no key, so no token can be verified.
        raise _Refused(
            grpc.StatusCode.UNAUTHENTICATED,
            "a token was presented but no auth.jwt_key is configured",
        )
    try:
        claims = auth.verify(token, jwt_key, leeway_s=TOKEN_LEEWAY_S)
    except auth.CredentialError as exc:
        raise _Refused(grpc.StatusCode.UNAUTHENTICATED, f"invalid credential: {exc}") from None
    admin = claims.admin or claims.sub == "root" or claims.sub in admins
    return Identity(claims.sub, claims.uid, admin)
