"""PKCE (RFC 7636, S256 only) and the `state` value of an authorization request."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

__all__ = ["new_verifier", "s256_challenge", "new_state", "same_secret"]


def new_verifier() -> str:
    """A fresh code verifier: 43 to 128 unreserved characters; 64 random
    bytes give 86 characters of URL-safe base64."""
    return secrets.token_urlsafe(64)


def s256_challenge(verifier: str) -> str:
    """The S256 code challenge: base64url(SHA-256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def new_state() -> str:
    """An unguessable `state`, binding the redirect to the request we made."""
    return secrets.token_urlsafe(32)


def same_secret(a: str | None, b: str | None) -> bool:
    """Compare two secrets (such as `state`) in constant time."""
    if a is None or b is None:
        return False
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
