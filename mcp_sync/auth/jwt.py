"""Compact JWS signing (RFC 7515): just enough for OAuth client assertions
(RFC 7523), DPoP proofs (RFC 9449) and tests.

What it holds: `SigningKey` (a private key and the JWA algorithm it signs
with), `client_assertion()` (the `private_key_jwt` / `client_secret_jwt`
client authentication token), `jwk_thumbprint()` (RFC 7638), the base64url
helpers and `decode_unverified()` for reading a token's header and claims.

It signs; it does not verify. Verifying tokens is the servers' business,
and a client that "verified" a token it received would only be guessing at
which keys to trust.

HMAC (HS256/384/512) needs only the standard library. Every asymmetric
algorithm (ES*, RS*, PS*, EdDSA) needs the `cryptography` package, an
optional extra (``pip install 'mcp-sync-client[jwt]'``): it is imported inside the
functions that use it, so the core library never requires it.

Example::

    key = SigningKey.from_pem(open("client-key.pem").read(), key_id="2026-01")
    token = client_assertion(key, "my-client", "https://as.example.com/token")
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

from ..errors import AuthorizationError
from ..waiting import check_seconds

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.hashes import HashAlgorithm

    _AsymmetricKey = Union[
        ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey, ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey,
    ]

__all__ = [
    "SigningKey",
    "client_assertion",
    "jwk_thumbprint",
    "decode_unverified",
    "b64url",
    "b64url_decode",
]

# JWA names (RFC 7518 §3.1, RFC 8037 §3.1) and what each one needs.
_HMAC_DIGESTS = {"HS256": "sha256", "HS384": "sha384", "HS512": "sha512"}
# EC algorithm -> (JWK "crv", cryptography's curve name); the curve fixes the algorithm.
_EC_CURVES = {"ES256": ("P-256", "secp256r1"), "ES384": ("P-384", "secp384r1"), "ES512": ("P-521", "secp521r1")}
_RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EDDSA = "EdDSA"
_GENERATABLE = (*_EC_CURVES, *_RSA_ALGORITHMS, _EDDSA)
_SUPPORTED = (*_HMAC_DIGESTS, *_GENERATABLE)

# RFC 7518 §3.3: RSA keys "of size 2048 bits or larger MUST be used".
_MIN_RSA_BITS = 2048
_INSTALL_HINT = "pip install 'mcp-sync-client[jwt]'"

# RFC 7638 §3.2: the thumbprint covers only the required members of each key type.
_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),  # RFC 8037 §2
    "oct": ("k", "kty"),
}

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 7515 §2), as JWS uses everywhere."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """The inverse of `b64url`. Raises ValueError on anything that is not
    unpadded base64url (standard base64 and padding included), rather than
    silently dropping characters as `base64.urlsafe_b64decode` would."""
    if not isinstance(text, str) or not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:  # pragma: no cover - the pattern above already rules this out
        raise ValueError("not unpadded base64url text") from exc


def _json(value: Any) -> bytes:
    # Compact and strict: no whitespace, and no NaN/Infinity, which are not JSON.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _need_cryptography(purpose: str) -> None:
    """Fail with an install hint when the optional `cryptography` is missing."""
    try:
        import cryptography.hazmat.primitives.asymmetric  # noqa: F401
    except ImportError as exc:
        raise AuthorizationError(f"{purpose} needs the 'cryptography' package: {_INSTALL_HINT}") from exc


def _int_bytes(value: int, size: int | None = None) -> bytes:
    # JWK integers are big-endian octets: minimal for RSA (RFC 7518 §6.3.1),
    # the full field size for EC coordinates (§6.2.1.2), so pass `size` there.
    if size is None:
        size = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(size, "big")


def _hash_for(algorithm: str) -> HashAlgorithm:
    from cryptography.hazmat.primitives import hashes

    bits = algorithm[-3:]
    if bits == "256":
        return hashes.SHA256()
    if bits == "384":
        return hashes.SHA384()
    return hashes.SHA512()


def _check_algorithm(key: _AsymmetricKey, algorithm: str | None) -> str:
    """The algorithm this key signs with: `algorithm` if the key type allows
    it, the key type's default when None; ValueError on a mismatch."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if algorithm is not None and algorithm not in _SUPPORTED:
        raise ValueError(f"unsupported JWS algorithm {algorithm!r}; supported: {', '.join(_SUPPORTED)}")
    if isinstance(key, ec.EllipticCurvePrivateKey):
        # ECDSA ties the curve to the hash, so there is exactly one right answer.
        expected = next((alg for alg, (_, curve) in _EC_CURVES.items() if curve == key.curve.name), None)
        if expected is None:
            raise ValueError(f"unsupported EC curve {key.curve.name}; use P-256, P-384 or P-521")
        if algorithm is not None and algorithm != expected:
            raise ValueError(f"an EC {_EC_CURVES[expected][0]} key signs with {expected}, not {algorithm}")
        return expected
    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < _MIN_RSA_BITS:
            raise ValueError(f"an RSA key must have at least {_MIN_RSA_BITS} bits (RFC 7518 §3.3), not {key.key_size}")
        if algorithm is None:
            return "RS256"
        if algorithm not in _RSA_ALGORITHMS:
            raise ValueError(f"an RSA key signs with one of {', '.join(_RSA_ALGORITHMS)}, not {algorithm}")
        return algorithm
    if isinstance(key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)):
        if algorithm is not None and algorithm != _EDDSA:
            raise ValueError(f"an Edwards-curve key signs with {_EDDSA}, not {algorithm}")
        return _EDDSA
    raise ValueError(f"unsupported key type {type(key).__name__}; use an EC, RSA or Ed25519 private key")


class SigningKey:
    """An immutable private key and the JWS algorithm it signs with.

    Build one with `from_pem`, `generate` or `from_secret` (HMAC), or wrap a
    key object already loaded with `cryptography`. The key material never
    appears in `repr()` or in error messages.

    Example::

        key = SigningKey.generate("ES256", key_id="k1")
        key.public_jwk()     # {"kty": "EC", "crv": "P-256", "x": ..., "y": ..., "kid": "k1"}
        key.sign({"sub": "me"})   # "eyJhbGciOiJFUzI1NiIs..."
        key                  # SigningKey(ES256, kid='k1', <private>)
    """

    __slots__ = ("_key", "_algorithm", "_key_id")

    _key: _AsymmetricKey | bytes
    _algorithm: str
    _key_id: str | None

    def __init__(self, key: _AsymmetricKey | bytes, algorithm: str | None = None, *, key_id: str | None = None) -> None:
        """`key` is a `cryptography` private key object (EC, RSA, Ed25519,
        Ed448) or the bytes of an HMAC secret; `algorithm` defaults to the
        key type's usual one (HS256 for a secret)."""
        if key_id is not None and (not isinstance(key_id, str) or not key_id):
            raise ValueError("key_id must be a non-empty string")
        if isinstance(key, str):
            raise TypeError("pass an HMAC secret with SigningKey.from_secret() and a PEM key with SigningKey.from_pem()")
        if isinstance(key, (bytes, bytearray, memoryview)):
            secret = bytes(key)
            algorithm = "HS256" if algorithm is None else algorithm
            if algorithm not in _HMAC_DIGESTS:
                raise ValueError(f"a secret signs with one of {', '.join(_HMAC_DIGESTS)}, not {algorithm}")
            # RFC 7518 §3.2: the key MUST be at least as long as the hash output.
            needed = hashlib.new(_HMAC_DIGESTS[algorithm]).digest_size
            if len(secret) < needed:
                raise ValueError(f"an {algorithm} secret must be at least {needed} bytes (RFC 7518 §3.2)")
            stored: _AsymmetricKey | bytes = secret
        else:
            _need_cryptography("asymmetric JWS signing")
            algorithm = _check_algorithm(key, algorithm)
            stored = key
        # Immutable: __setattr__ refuses, so set the slots through object.
        object.__setattr__(self, "_key", stored)
        object.__setattr__(self, "_algorithm", algorithm)
        object.__setattr__(self, "_key_id", key_id)

    # -- constructors ------------------------------------------------------------

    @classmethod
    def from_pem(
        cls, pem: str | bytes, algorithm: str | None = None, *, key_id: str | None = None,
        password: str | bytes | None = None,
    ) -> SigningKey:
        """Load a PEM private key (PKCS#8, or the traditional EC/RSA forms).

        EC keys sign with the algorithm of their curve (P-256: ES256,
        P-384: ES384, P-521: ES512), RSA keys with RS256 unless `algorithm`
        says RS384/RS512/PS256/PS384/PS512, Ed25519/Ed448 keys with EdDSA.
        An `algorithm` the key cannot sign with raises ValueError.

        Args:
            pem: The PEM text.
            algorithm: The JWA algorithm; None: the key's own (see above).
            key_id: The `kid` put in each header, or None.
            password: The password of an encrypted key.

        Returns:
            The key.

        Raises:
            ValueError: Not a private key this module can sign with, or an
                `algorithm` the key cannot sign with.
        """
        _need_cryptography("loading a PEM key")
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        data = pem.encode("utf-8") if isinstance(pem, str) else bytes(pem)
        secret = password.encode("utf-8") if isinstance(password, str) else password
        try:
            key = load_pem_private_key(data, password=secret)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            # Say what was expected; the cause stays chained for debugging
            # (cryptography's messages describe the format, never the data).
            raise ValueError(
                "could not load a private key from the PEM data (expected '-----BEGIN PRIVATE KEY-----' "
                "or an EC/RSA private key; an encrypted key needs password=)"
            ) from exc
        return cls(key, algorithm, key_id=key_id)  # type: ignore[arg-type]  # unsupported types fail in __init__

    @classmethod
    def generate(cls, algorithm: str = "ES256", *, key_id: str | None = None) -> SigningKey:
        """A fresh random key for ES256, ES384, ES512, RS256/384/512, PS256/384/512
        (2048-bit RSA) or EdDSA (Ed25519).

        Args:
            algorithm: The JWA algorithm the key signs with.
            key_id: The `kid` put in each header, or None.

        Returns:
            The key.

        Raises:
            ValueError: An algorithm not listed above.
        """
        if algorithm in _HMAC_DIGESTS:
            raise ValueError("HMAC secrets are issued by the authorization server: use SigningKey.from_secret()")
        if algorithm not in _GENERATABLE:
            raise ValueError(f"cannot generate a key for {algorithm!r}; choose one of {', '.join(_GENERATABLE)}")
        _need_cryptography(f"generating an {algorithm} key")
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        key: _AsymmetricKey
        if algorithm in _EC_CURVES:
            curves: dict[str, ec.EllipticCurve] = {
                "secp256r1": ec.SECP256R1(), "secp384r1": ec.SECP384R1(), "secp521r1": ec.SECP521R1(),
            }
            key = ec.generate_private_key(curves[_EC_CURVES[algorithm][1]])
        elif algorithm in _RSA_ALGORITHMS:
            key = rsa.generate_private_key(public_exponent=65537, key_size=_MIN_RSA_BITS)
        else:
            key = ed25519.Ed25519PrivateKey.generate()
        return cls(key, algorithm, key_id=key_id)

    @classmethod
    def from_secret(cls, secret: str | bytes, algorithm: str = "HS256", *, key_id: str | None = None) -> SigningKey:
        """An HMAC key (HS256, HS384, HS512) from a shared secret, for
        example a client secret for `client_secret_jwt`. A str is UTF-8.

        Args:
            secret: The shared secret.
            algorithm: HS256, HS384 or HS512.
            key_id: The `kid` put in each header, or None.

        Returns:
            The key.

        Raises:
            ValueError: A secret shorter than the algorithm's hash (32
                bytes for HS256, RFC 7518 §3.2), or another algorithm.
        """
        if not isinstance(secret, (str, bytes)):
            raise TypeError("the secret must be str or bytes")
        data = secret.encode("utf-8") if isinstance(secret, str) else secret
        return cls(data, algorithm, key_id=key_id)

    # -- what it is ------------------------------------------------------------

    @property
    def algorithm(self) -> str:
        """The JWA name used as the header's `alg`, e.g. ``"ES256"``."""
        return self._algorithm

    @property
    def key_id(self) -> str | None:
        """The `kid` put in every header and public JWK, or None."""
        return self._key_id

    def public_jwk(self) -> dict[str, str]:
        """The public key as a JWK: public members only, plus `kid` when set.
        An HMAC key has no public half, so that raises ValueError."""
        key = self._key
        if isinstance(key, bytes):
            raise ValueError("an HMAC key is a shared secret and has no public JWK")
        _need_cryptography("building a public JWK")
        from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        jwk: dict[str, str]
        if isinstance(key, ec.EllipticCurvePrivateKey):
            numbers = key.public_key().public_numbers()
            size = (key.curve.key_size + 7) // 8
            jwk = {
                "kty": "EC", "crv": _EC_CURVES[self._algorithm][0],
                "x": b64url(_int_bytes(numbers.x, size)), "y": b64url(_int_bytes(numbers.y, size)),
            }
        elif isinstance(key, rsa.RSAPrivateKey):
            numbers_rsa = key.public_key().public_numbers()
            jwk = {"kty": "RSA", "n": b64url(_int_bytes(numbers_rsa.n)), "e": b64url(_int_bytes(numbers_rsa.e))}
        else:
            crv = "Ed25519" if isinstance(key, ed25519.Ed25519PrivateKey) else "Ed448"
            assert isinstance(key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey))
            raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            jwk = {"kty": "OKP", "crv": crv, "x": b64url(raw)}
        if self._key_id is not None:
            jwk["kid"] = self._key_id
        return jwk

    def thumbprint(self) -> str:
        """The RFC 7638 SHA-256 thumbprint of the public key (base64url); the
        `kid` is not part of it. ValueError for an HMAC key."""
        return jwk_thumbprint(self.public_jwk())

    # -- signing -----------------------------------------------------------------

    def sign(self, claims: Mapping[str, Any], header: Mapping[str, Any] | None = None) -> str:
        """The compact serialization of a JWS over `claims` (a JSON object).

        The header is ``{"alg": ..., "typ": "JWT"}`` plus `kid` when the key
        has one, updated with `header`; a member set to None there is left
        out. `header` cannot change `alg`: the key decides it.

        Args:
            claims: The JWT's claims.
            header: Header members to add or replace (None removes one).

        Returns:
            The JWS, ``header.payload.signature`` in base64url.

        Raises:
            ValueError: `header` names another `alg`.
        """
        if not isinstance(claims, Mapping):
            raise TypeError("claims must be a mapping (a JSON object)")
        protected: dict[str, Any] = {"alg": self._algorithm, "typ": "JWT"}
        if self._key_id is not None:
            protected["kid"] = self._key_id
        if header:
            if header.get("alg", self._algorithm) != self._algorithm:
                raise ValueError(f"this key signs with {self._algorithm}; the header cannot say {header['alg']!r}")
            protected.update(header)
        protected = {name: value for name, value in protected.items() if value is not None}
        signing_input = f"{b64url(_json(protected))}.{b64url(_json(dict(claims)))}"
        signature = self._signature(signing_input.encode("ascii"))
        return f"{signing_input}.{b64url(signature)}"

    def _signature(self, data: bytes) -> bytes:
        key = self._key
        if isinstance(key, bytes):
            return hmac.new(key, data, _HMAC_DIGESTS[self._algorithm]).digest()
        _need_cryptography(f"{self._algorithm} signing")
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        if isinstance(key, ec.EllipticCurvePrivateKey):
            # cryptography returns DER; JWS wants the fixed-width R || S
            # (RFC 7518 §3.4), each the size of the curve's field.
            r, s = decode_dss_signature(key.sign(data, ec.ECDSA(_hash_for(self._algorithm))))
            size = (key.curve.key_size + 7) // 8
            return _int_bytes(r, size) + _int_bytes(s, size)
        if isinstance(key, rsa.RSAPrivateKey):
            digest = _hash_for(self._algorithm)
            if self._algorithm.startswith("PS"):
                # RFC 7518 §3.5: MGF1 with the same hash, salt as long as the hash.
                return key.sign(data, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)
            return key.sign(data, padding.PKCS1v15(), digest)
        return key.sign(data)  # EdDSA hashes internally

    # -- immutability and redaction ----------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SigningKey is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("SigningKey is immutable")

    def __reduce__(self) -> Any:
        # Pickling would write the private key out in the clear; refuse.
        raise TypeError("a SigningKey cannot be pickled")

    def __repr__(self) -> str:
        kid = f", kid={self._key_id!r}" if self._key_id is not None else ""
        hidden = "<secret>" if isinstance(self._key, bytes) else "<private>"
        return f"SigningKey({self._algorithm}{kid}, {hidden})"


def jwk_thumbprint(jwk: Mapping[str, str]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a JWK, base64url-encoded: the hash
    of its required members only, in lexicographic order, compact JSON."""
    kty = jwk.get("kty")
    members = _THUMBPRINT_MEMBERS.get(kty) if isinstance(kty, str) else None
    if members is None:
        raise ValueError(f"cannot take the thumbprint of a JWK with kty={kty!r}")
    missing = [name for name in members if not isinstance(jwk.get(name), str)]
    if missing:
        raise ValueError(f"the {kty} JWK lacks {', '.join(missing)}")
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True,
                           ensure_ascii=False)
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def client_assertion(
    key: SigningKey, client_id: str, audience: str, *, lifetime: float = 60.0, now: float | None = None,
) -> str:
    """An RFC 7523 §2.2 client authentication JWT (`private_key_jwt`, or
    `client_secret_jwt` with an HMAC key).

    `iss` and `sub` are the client id, `aud` the authorization server (its
    issuer or token endpoint, as it asks), `exp` is `lifetime` seconds after
    `iat` (rounded up to whole seconds), and `jti` is random so the server
    can refuse a replay.

    Raises:
        TypeError: `client_id` or `audience` is not a string, or `lifetime`
            not a number (a bool or a string).
        ValueError: `client_id` or `audience` is empty, or `lifetime` is
            not positive, NaN or infinite.
    """
    for name, value in (("client_id", client_id), ("audience", audience)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, not {type(value).__name__}")
        if not value:
            raise ValueError(f"{name} must be a non-empty string")
    # Not a wait: no bound but finiteness (`exp` is a whole number of seconds).
    check_seconds("lifetime", lifetime, allow_none=False, longest=None)
    issued = int(time.time() if now is None else now)
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": issued,
        "exp": issued + math.ceil(lifetime),
        "jti": secrets.token_urlsafe(16),
    }
    return key.sign(claims)


def decode_unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a compact JWS, WITHOUT checking the signature.

    For reading one's own tokens (tests) or a token's `exp` before using it;
    never for trusting what a token says. Raises ValueError when the token
    is not three base64url parts whose first two are JSON objects. Messages
    never repeat the token.
    """
    if not isinstance(token, str):
        raise ValueError("a JWT must be a string")
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError(f"a compact JWS has 3 dot-separated parts, not {len(parts)}")
    decoded: list[dict[str, Any]] = []
    for name, part in (("header", parts[0]), ("claims", parts[1])):
        try:
            value = json.loads(b64url_decode(part).decode("utf-8"))
        except ValueError as exc:  # also UnicodeDecodeError and JSONDecodeError
            raise ValueError(f"the JWT {name} is not base64url-encoded JSON") from exc
        if not isinstance(value, dict):
            raise ValueError(f"the JWT {name} is not a JSON object")
        decoded.append(value)
    try:
        b64url_decode(parts[2])  # unread, but it must at least be base64url
    except ValueError as exc:
        raise ValueError("the JWT signature is not base64url") from exc
    return decoded[0], decoded[1]
