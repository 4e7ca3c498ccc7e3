"""Controller credentials: minted and verified the way Spur's HS256 tokens are."""

from __future__ import annotations

import time

import jwt
import pytest

from spurctl.sources import credentials as auth

KEY = "simulated-cluster-secret-0123456789abcdef"
OTHER_KEY = "another-clusters-secret-0123456789abcdef"


def test_mint_and_verify_round_trip_and_name_why_a_token_fails() -> None:
    token = auth.mint(KEY, "spurctld", uid=0, admin=True, lifetime_s=300)
    claims = auth.verify(token, KEY)
    assert (claims.sub, claims.admin, claims.exp - claims.iat) == ("spurctld", True, 300)
    with pytest.raises(auth.CredentialError) as info:
        auth.verify(token, OTHER_KEY)
    assert info.value.problem == "bad-signature"
    old = auth.mint(KEY, "alice", now=time.time() - 400)
    with pytest.raises(auth.CredentialError) as info:
        auth.verify(old, KEY)
    assert info.value.problem == "expired"
    assert auth.verify(old, KEY, leeway_s=200).sub == "alice"
    with pytest.raises(ValueError):
        auth.mint(KEY, "spurctld", lifetime_s=301)
    with pytest.raises(auth.CredentialError) as info:
        auth.bearer_token(None)
    assert info.value.problem == "missing"


def test_a_minted_credential_carries_spurs_claims_and_never_an_audience() -> None:
    # spurd decodes Spur's TokenClaims with jsonwebtoken's default Validation, which
    # expects no audience (docs/spur-facts.md, "Authentication"): no claim beyond Spur's.
    token = auth.mint(
        "cluster-key-0123456789-abcdefghijklmnop", auth.CONTROLLER_SUBJECT, now=1_000_000
    )
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert header["alg"] == "HS256"
    assert set(claims) == {"sub", "uid", "admin", "iat", "exp"}
    assert "aud" not in claims
    assert claims["sub"] == "spurctld" and claims["exp"] - claims["iat"] <= auth.MAX_LIFETIME_S
