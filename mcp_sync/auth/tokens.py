"""What the OAuth flow keeps: tokens and client registrations.

Both hold secrets, so neither shows them in `repr`; both convert to and
from plain JSON dictionaries for a `TokenStorage`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypeGuard

import attrs

from ..errors import AuthorizationError, OAuthError
from ._http import Answer

__all__ = ["Tokens", "ClientInfo", "tokens_from_answer", "oauth_error"]

#: A token this close to its expiry is refreshed before use, so it does not
#: expire on its way to the server.
EXPIRY_MARGIN = 30.0


def _known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a stored dict that are fields of `cls`: a store
    written by another release may hold more, or fewer."""
    names = {field.name for field in attrs.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def is_access_token(value: Any) -> TypeGuard[str]:
    """Whether `value` can be an access token: RFC 6749 A.12's visible
    ASCII (%x21-7E here: a space would split the `Authorization` header).
    Anything else cannot go into a header or a DPoP proof's `ath`."""
    return isinstance(value, str) and bool(value) and value.isascii() and value.isprintable() and " " not in value


def _check_stored(name: str, value: Any, kind: type | tuple[type, ...], *, optional: bool = True) -> None:
    """One field of a stored dict must have the type the flow relies on: a
    store is the user's (a file edited by hand, a database row another
    program wrote), and a wrong type would fail every later request."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"the stored {name!r} is not a {getattr(kind, '__name__', 'number')}")
    if isinstance(value, float) and value != value:  # NaN: never expired, never equal
        raise ValueError(f"the stored {name!r} is not a number")


@attrs.define(repr=False)
class Tokens:
    """An access token and what came with it.

    `expires_at` is a `time.time()` timestamp (None: the server did not
    say). `scope` is what the server granted (or, when it did not say,
    what was requested). `issuer` and `resource` say who issued the token
    and for which server, so it is never sent anywhere else.

    Its `repr` never shows the access or refresh token.

    Example::

        tokens = oauth.authorize()
        if "files:write" in tokens.scopes and not tokens.expired():
            ...

    Attributes:
        access_token (str): The access token itself (a secret).
        token_type (str): ``"Bearer"``, or ``"DPoP"`` for a token bound to
            a DPoP key.
        expires_at (float | None): When the token expires, in seconds since
            the epoch; None when the server did not say.
        refresh_token (str | None): The refresh token (a secret); None when
            the server gave none.
        scope (str | None): The granted scopes, space-separated as in OAuth;
            None when neither the server nor the request named any.
        issuer (str | None): The issuer URL of the authorization server that
            issued the token.
        resource (str | None): The resource indicator (RFC 8707: the MCP
            server's URL) the token was requested for.
        issued_at (float | None): When the token was received, in seconds
            since the epoch.
    """

    access_token: str
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = None
    scope: str | None = None
    issuer: str | None = None
    resource: str | None = None
    #: When the token was received (`time.time()`), to size the expiry margin.
    issued_at: float | None = None

    def expired(self, now: float | None = None, margin: float = EXPIRY_MARGIN) -> bool:
        """Whether the token is expired, or will be within `margin` seconds
        (30 by default; half its lifetime for a token that lives less than
        twice that), at `now` (a `time.time()` timestamp; default: now).
        Never True when `expires_at` is None.

        Args:
            now: The moment to judge at, as a `time.time()` timestamp; None:
                now.
            margin: Seconds before its expiry from which a token counts as
                expired.

        Returns:
            Whether a new token should be obtained.
        """
        if self.expires_at is None:
            return False
        if self.issued_at is not None:
            # A token living less than twice the margin is renewed at half its
            # lifetime: with the full margin it would count as expired from
            # the start, and every request would fetch a new one.
            margin = min(margin, max(0.0, (self.expires_at - self.issued_at) / 2))
        return (time.time() if now is None else now) >= self.expires_at - margin

    @property
    def scopes(self) -> set[str]:
        """`scope` as a set of scope names; empty when it is None."""
        return set(self.scope.split()) if self.scope else set()

    def to_dict(self) -> dict[str, Any]:
        """Every field, as a plain JSON-ready dict (for a `TokenStorage`;
        it holds the secrets)."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tokens:
        """The `Tokens` of a dict made by `to_dict()`. Keys that are not
        fields are ignored (a store written by another release); a missing
        `access_token` raises `TypeError`.

        Args:
            data: A dict from `to_dict()`.

        Returns:
            The tokens.

        Raises:
            TypeError: `data` has no `access_token`, or a field of the
                wrong type.
            ValueError: A value no token endpoint answer could have made
                (an access token that is not visible ASCII, an unknown
                token type, an empty refresh token, a NaN time).
        """
        fields = _known_fields(cls, data)
        if not is_access_token(fields.get("access_token")):
            raise TypeError("the stored 'access_token' is missing or not visible ASCII")
        if fields.get("token_type", "Bearer") not in ("Bearer", "DPoP"):
            raise ValueError("the stored 'token_type' is neither 'Bearer' nor 'DPoP'")
        for name in ("expires_at", "issued_at"):
            _check_stored(name, fields.get(name), (int, float))
        for name in ("refresh_token", "scope", "issuer", "resource"):
            _check_stored(name, fields.get(name), str)
        if fields.get("refresh_token") == "":
            raise ValueError("the stored 'refresh_token' is empty")
        return cls(**fields)

    def __repr__(self) -> str:
        expires = "unknown" if self.expires_at is None else f"{self.expires_at - time.time():.0f}s"
        refresh = "yes" if self.refresh_token else "no"
        return (f"Tokens(token_type={self.token_type!r}, scope={self.scope!r}, expires_in={expires}, "
                f"refresh_token={refresh}, access_token=<redacted>)")


@attrs.define(repr=False)
class ClientInfo:
    """A client identity at one authorization server (`issuer`): registered
    dynamically, pre-registered, or a client ID metadata document URL.

    Its `repr` never shows the client secret.

    Attributes:
        client_id (str): The client ID (for a metadata document, its URL).
        issuer (str): The issuer URL of the authorization server this
            identity belongs to; it is never used with another one.
        client_secret (str | None): The client secret (a secret); None for a
            public client.
        auth_method (str | None): The token endpoint authentication method
            (``"client_secret_basic"``, ``"client_secret_post"``,
            ``"private_key_jwt"`` or ``"none"``); None to choose one from
            the server's metadata and what the client holds.
        redirect_uris (list[str]): The redirect URIs registered for it.
        secret_expires_at (float | None): When the client secret expires, in
            seconds since the epoch; None or 0 (or a negative number, which
            RFC 7591 does not allow) when it does not.
        kind (str): How it was obtained: ``"registered"`` (dynamic
            registration), ``"pre-registered"`` or ``"metadata-document"``.
    """

    client_id: str
    issuer: str
    client_secret: str | None = None
    auth_method: str | None = None
    redirect_uris: list[str] = attrs.field(factory=list)
    secret_expires_at: float | None = None
    kind: str = "registered"  # "registered", "pre-registered" or "metadata-document"

    def secret_expired(self, now: float | None = None) -> bool:
        """Whether the client secret has expired at `now` (a `time.time()`
        timestamp; default: now). False when it never expires.

        Args:
            now: The moment to judge at, as a `time.time()` timestamp; None:
                now.

        Returns:
            Whether the secret has expired.
        """
        # RFC 7591: 0 means the secret does not expire. A negative time
        # (before 1970, so before any registration) means nothing RFC 7591
        # allows; an earlier release stored one as the server sent it, and
        # reading it as expired made every use register a new client.
        if self.secret_expires_at is None or self.secret_expires_at <= 0:
            return False
        return (time.time() if now is None else now) >= self.secret_expires_at

    def to_dict(self) -> dict[str, Any]:
        """Every field, as a plain JSON-ready dict (for a `TokenStorage`;
        it holds the secret)."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClientInfo:
        """The `ClientInfo` of a dict made by `to_dict()`. Keys that are not
        fields are ignored; a missing `client_id` or `issuer` raises
        `TypeError`.

        Args:
            data: A dict from `to_dict()`.

        Returns:
            The client registration.

        Raises:
            TypeError: `data` lacks `client_id` or `issuer`, or has a field
                of the wrong type.
            ValueError: An empty `client_id`, or a NaN expiry.
        """
        fields = _known_fields(cls, data)
        for name in ("client_id", "issuer"):
            _check_stored(name, fields.get(name), str, optional=False)
        if "kind" in fields:
            _check_stored("kind", fields["kind"], str, optional=False)
        if not fields["client_id"]:
            raise ValueError("the stored 'client_id' is empty")
        for name in ("client_secret", "auth_method"):
            _check_stored(name, fields.get(name), str)
        _check_stored("secret_expires_at", fields.get("secret_expires_at"), (int, float))
        uris = fields.get("redirect_uris", [])
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise TypeError("the stored 'redirect_uris' is not a list of strings")
        return cls(**fields)

    def __repr__(self) -> str:
        secret = "<redacted>" if self.client_secret else None
        return f"ClientInfo(client_id={self.client_id!r}, issuer={self.issuer!r}, client_secret={secret})"


def oauth_error(answer: Answer, what: str) -> AuthorizationError:
    """The error for a failed token or registration request (RFC 6749
    §5.2). The server's description is kept, cut short, since it is the
    server's words and never holds our secrets."""
    body = answer.json or {}
    code = body.get("error")
    if isinstance(code, str) and code:
        description = body.get("error_description")
        description = description[:300] if isinstance(description, str) else None
        detail = f": {description}" if description else ""
        return OAuthError(f"{what} failed with {code!r} (HTTP {answer.status}){detail}",
                          error=code, description=description, status=answer.status)
    return AuthorizationError(f"{what} failed with HTTP {answer.status} and no OAuth error in the answer")


#: The longest `expires_in` taken, in seconds (about 31 years): more is no
#: lifetime any server means, and past a float's range for a big integer.
MAX_EXPIRES_IN = 10**9


def tokens_from_answer(
    answer: Answer, *, requested_scope: str | None, issuer: str | None, resource: str | None,
    previous_refresh_token: str | None = None, now: float | None = None,
) -> Tokens:
    """Validate a token endpoint's success answer (RFC 6749 §5.1) into `Tokens`."""
    body = answer.json
    if body is None:
        raise AuthorizationError(f"the token endpoint {answer.url} answered with something that is not a JSON object")
    access_token = body.get("access_token")
    if not is_access_token(access_token):
        raise AuthorizationError("the token response has no valid 'access_token' (RFC 6749: visible ASCII): ask the "
                                 "authorization server's operator")
    token_type = body.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() not in ("bearer", "dpop"):
        raise AuthorizationError(f"the token response has an unsupported token_type {token_type!r}")
    expires_in = body.get("expires_in")
    # Some servers send a numeric string; that one lenient form is taken.
    # ASCII only: "²".isdigit() is True, but int("²") raises ValueError.
    # (At most `MAX_EXPIRES_IN`'s digits: int() refuses a string of 4,300.)
    if (isinstance(expires_in, str) and expires_in.isascii() and expires_in.isdigit()
            and len(expires_in) <= len(str(MAX_EXPIRES_IN))):
        expires_in = int(expires_in)
    # NaN and infinity (Python's json accepts both, and 1e999) would make a
    # token that never expires (`expired()` compares False with NaN), and an
    # integer past a float's range cannot be added to a timestamp.
    if expires_in is not None and (isinstance(expires_in, bool) or not isinstance(expires_in, (int, float))
                                   or not 0 <= expires_in <= MAX_EXPIRES_IN):
        raise AuthorizationError(f"the token response has an invalid 'expires_in' (a number of seconds from 0 "
                                 f"to {MAX_EXPIRES_IN} was expected): ask the authorization server's operator")
    # A null member is an absent one: a refresh answer with
    # "refresh_token": null keeps the refresh token we have (RFC 6749 §6).
    refresh_token = body.get("refresh_token")
    if refresh_token is None:
        refresh_token = previous_refresh_token
    if refresh_token is not None and (not isinstance(refresh_token, str) or not refresh_token):
        raise AuthorizationError("the token response has an invalid 'refresh_token'")
    scope = body.get("scope")
    if scope is None:
        scope = requested_scope
    if scope is not None and not isinstance(scope, str):
        raise AuthorizationError("the token response has an invalid 'scope'")
    stamp = time.time() if now is None else now
    normalized_type = {"bearer": "Bearer", "dpop": "DPoP"}.get(token_type.lower(), "Bearer")
    return Tokens(
        access_token=access_token, token_type=normalized_type,
        expires_at=None if expires_in is None else stamp + float(expires_in),
        refresh_token=refresh_token, scope=scope, issuer=issuer, resource=resource,
        issued_at=stamp,
    )
