"""Spur's bearer credential: an HS256 JWT signed with the cluster's `[auth] jwt_key`.

Claims are Spur's: sub (user name), uid, admin, iat, exp. spurctl mints
short-lived ones (the agent credential, sub `spurctld`) and the simulated
cluster verifies them the way spurctld/spurd do.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Literal

import jwt

CONTROLLER_SUBJECT = "spurctld"
"""The subject node agents demand on controller-only RPCs such as CancelJob."""

MAX_LIFETIME_S = 300

# Spur accepts a jwt_key of any length and spurctl cannot choose it; PyJWT's
# short-key warning would only be noise on every command.
_short_key_warning = getattr(jwt, "InsecureKeyLengthWarning", None)
if _short_key_warning is not None:
    warnings.filterwarnings("ignore", category=_short_key_warning)

Problem = Literal["missing", "malformed", "expired", "bad-signature"]


class CredentialError(Exception):
    """A credential that does not verify. `problem` says why; the message never holds the token."""

    def __init__(self, problem: Problem, message: str) -> None:
        super().__init__(message)
        self.problem: Problem = problem


@dataclass(frozen=True, slots=True)
class Claims:
    sub: str
    uid: int
    admin: bool
    iat: int
    exp: int


def mint(
    key: str,
    sub: str,
    *,
    uid: int = 0,
    admin: bool = False,
    lifetime_s: int = MAX_LIFETIME_S,
    now: float | None = None,
) -> str:
    """A signed token for `sub`, valid for `lifetime_s` seconds (at most five minutes)."""
    if not key:
        raise ValueError("cannot mint a credential with an empty jwt key")
    if not 0 < lifetime_s <= MAX_LIFETIME_S:
        raise ValueError(f"credential lifetime must be 1..{MAX_LIFETIME_S} s, got {lifetime_s}")
    issued = int(time.time() if now is None else now)
    claims = {"sub": sub, "uid": uid, "admin": admin, "iat": issued, "exp": issued + lifetime_s}
    return jwt.encode(claims, key, algorithm="HS256")


def verify(token: str, key: str, *, leeway_s: int = 0, now: float | None = None) -> Claims:
    """The claims of a token signed with `key`; CredentialError when it does not verify."""
    try:
        raw = jwt.decode(
            token,
            key,
            algorithms=["HS256"],
            leeway=leeway_s,
            options={"require": ["sub", "exp"], "verify_iat": False, "verify_exp": now is None},
        )
    except jwt.ExpiredSignatureError:
        raise CredentialError("expired", "token expired") from None
    except jwt.InvalidSignatureError:
        raise CredentialError("bad-signature", "bad signature (signed with another key)") from None
    except jwt.InvalidTokenError as exc:
        raise CredentialError("malformed", f"malformed token ({type(exc).__name__})") from None
    if now is not None and int(raw["exp"]) + leeway_s < now:
        raise CredentialError("expired", "token expired")
    sub, uid = raw.get("sub"), raw.get("uid", 0)
    if not isinstance(sub, str) or isinstance(uid, bool) or not isinstance(uid, int):
        raise CredentialError("malformed", "malformed token (sub or uid has the wrong type)")
    return Claims(
        sub=sub,
        uid=uid,
        admin=raw.get("admin") is True,
        iat=int(raw.get("iat", 0)),
        exp=int(raw["exp"]),
    )


def bearer_token(authorization: str | None) -> str:
    """The token of an `authorization: Bearer <JWT>` header value."""
    if authorization is None:
        raise CredentialError("missing", "no credential presented")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise CredentialError(
            "malformed", "malformed authorization header: expected 'Bearer <JWT>'"
        )
    return token.strip()
