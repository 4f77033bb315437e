"""JWTs, JWKs and DPoP proofs for the test authorization servers, written from the RFCs.

It owns signing and verifying compact JWS (RFC 7515/7519: HS256, ES256/384/
512, RS256/384/512, PS256/384/512, EdDSA), JWK conversion and thumbprints
(RFC 7517/7638), and DPoP proofs (RFC 9449): `make_dpop_proof` for tests
and `check_dpop_proof`, the check both the authorization server and the
protected resource run. It is its own code, not `mcp_sync.auth.jwt`: the
other side of the wire, so it can check the client rather than agree with
it. Standard library only at import time: `cryptography` is imported inside
the functions that need an asymmetric key, so the package loads without it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from ._oauth import JSONDict, OAuthError

#: The asymmetric algorithms accepted for DPoP proofs and client/grant assertions.
SIGNING_ALGS = ("ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA")
#: How far a DPoP proof's `iat` may be from now (seconds).
DPOP_IAT_WINDOW = 60

_B64URL = re.compile(r"[A-Za-z0-9_-]*")

#: alg -> (key family, hash name in cryptography.hazmat.primitives.hashes).
_ALGS: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", "SHA256"), "RS384": ("RSA", "SHA384"), "RS512": ("RSA", "SHA512"),
    "PS256": ("PSS", "SHA256"), "PS384": ("PSS", "SHA384"), "PS512": ("PSS", "SHA512"),
    "ES256": ("EC", "SHA256"), "ES384": ("EC", "SHA384"), "ES512": ("EC", "SHA512"),
    "EdDSA": ("OKP", None), "HS256": ("HMAC", "SHA256"),
}
#: An ES* alg only goes with its own curve (RFC 7518 §3.4).
_EC_ALG_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode unpadded base64url; ValueError on anything else."""
    if not isinstance(text, str) or _B64URL.fullmatch(text) is None:
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json_part(text: str) -> JSONDict:
    try:
        value = json.loads(b64url_decode(text))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"a JWT part is not base64url JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("a JWT part is not a JSON object")
    return value


def unverified(token: str) -> tuple[JSONDict, JSONDict]:
    """The header and claims of a compact JWS, NOT verified (to pick the key)."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    return _json_part(parts[0]), _json_part(parts[1])


def jwk_public_key(jwk: Mapping[str, Any]) -> Any:
    """The `cryptography` public key of an EC (P-256/384/521), RSA or OKP (Ed25519) JWK."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    def number(name: str) -> int:
        return int.from_bytes(b64url_decode(jwk[name]), "big")

    try:
        kty = jwk.get("kty")
        if kty == "EC":
            curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
            curve = curves[jwk["crv"]]
            return ec.EllipticCurvePublicNumbers(number("x"), number("y"), curve).public_key()
        if kty == "RSA":
            return rsa.RSAPublicNumbers(number("e"), number("n")).public_key()
        if kty == "OKP" and jwk.get("crv") == "Ed25519":
            return ed25519.Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"unusable JWK: {exc!r}") from None
    raise ValueError(f"unsupported JWK kty {jwk.get('kty')!r}")


def public_jwk(key: Any) -> JSONDict:
    """The public JWK of a `cryptography` EC, RSA or Ed25519 key (private or public)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey, ed25519.Ed25519PrivateKey)):
        key = key.public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        size = (key.curve.key_size + 7) // 8
        numbers = key.public_numbers()
        return {"kty": "EC", "crv": _CURVE_NAMES[key.curve.name],
                "x": b64url(numbers.x.to_bytes(size, "big")), "y": b64url(numbers.y.to_bytes(size, "big"))}
    if isinstance(key, rsa.RSAPublicKey):
        n, e = key.public_numbers().n, key.public_numbers().e
        return {"kty": "RSA", "n": b64url(n.to_bytes((n.bit_length() + 7) // 8, "big")),
                "e": b64url(e.to_bytes((e.bit_length() + 7) // 8, "big"))}
    if isinstance(key, ed25519.Ed25519PublicKey):
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
    raise TypeError(f"unsupported key {type(key).__name__}")


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638: base64url(SHA-256) of the JWK's required members, sorted, without whitespace."""
    required = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}
    members = required.get(str(jwk.get("kty")))
    if members is None or any(not isinstance(jwk.get(name), str) for name in members):
        raise ValueError("a JWK thumbprint needs an EC, RSA or OKP key with its required members")
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def _key_alg(key: Any) -> str:
    """The natural JWS alg for a signing key."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, (bytes, bytearray)):
        return "HS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[_CURVE_NAMES[key.curve.name]]
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    raise TypeError(f"cannot sign with {type(key).__name__}")


def sign_jwt(claims: Mapping[str, Any], key: Any, *, header: Mapping[str, Any] | None = None) -> str:
    """A compact JWS of `claims` signed with `key`: bytes (HS256) or a `cryptography`
    EC/RSA/Ed25519 private key (ES*/RS256/EdDSA; `header={"alg": "PS256"}` picks another)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, utils

    head = {"alg": _key_alg(key), **(header or {})}
    signing_input = (b64url(json.dumps(head).encode()) + "." + b64url(json.dumps(dict(claims)).encode())).encode("ascii")
    family, hash_name = _ALGS[head["alg"]]
    digest: Any = getattr(hashes, hash_name)() if hash_name else None
    if family == "HMAC":
        signature = hmac.new(bytes(key), signing_input, hashlib.sha256).digest()
    elif family == "EC":
        r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(digest)))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    elif family == "RSA":
        signature = key.sign(signing_input, padding.PKCS1v15(), digest)
    elif family == "PSS":
        signature = key.sign(signing_input, padding.PSS(padding.MGF1(digest), padding.PSS.DIGEST_LENGTH), digest)
    else:
        signature = key.sign(signing_input)
    return signing_input.decode("ascii") + "." + b64url(signature)


def verify_jwt(token: str, key: Any, *, algs: Collection[str] = SIGNING_ALGS) -> tuple[JSONDict, JSONDict]:
    """Check a compact JWS's signature; its (header, claims). `key` is a JWK
    dict, a `cryptography` public key, or bytes for HS256 (which `algs` must
    then allow). Claims are not checked here. ValueError on any failure."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

    header, claims = unverified(token)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in _ALGS or alg not in algs:
        raise ValueError(f"alg {alg!r} is not accepted")
    head, payload, sig = token.split(".")
    signing_input = f"{head}.{payload}".encode("ascii")
    signature = b64url_decode(sig)
    family, hash_name = _ALGS[alg]
    if family == "HMAC":
        # Only a shared secret may verify an HMAC: a public key must never be used as one.
        if not isinstance(key, (bytes, bytearray)):
            raise ValueError("HS256 needs a shared secret")
        if not hmac.compare_digest(hmac.new(bytes(key), signing_input, hashlib.sha256).digest(), signature):
            raise ValueError("bad signature")
        return header, claims
    if isinstance(key, Mapping):
        key = jwk_public_key(key)
    digest: Any = getattr(hashes, hash_name)() if hash_name else None
    try:
        if family in ("RSA", "PSS"):
            if not isinstance(key, rsa.RSAPublicKey):
                raise ValueError(f"{alg} needs an RSA key")
            pad = padding.PKCS1v15() if family == "RSA" else padding.PSS(padding.MGF1(digest), padding.PSS.DIGEST_LENGTH)
            key.verify(signature, signing_input, pad, digest)
        elif family == "EC":
            if not isinstance(key, ec.EllipticCurvePublicKey) or _CURVE_NAMES.get(key.curve.name) != _EC_ALG_CURVE[alg]:
                raise ValueError(f"{alg} needs an EC key on {_EC_ALG_CURVE[alg]}")
            size = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                raise ValueError("an ECDSA JWS signature is r || s of the curve's size")
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            key.verify(utils.encode_dss_signature(r, s), signing_input, ec.ECDSA(digest))
        else:
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise ValueError("EdDSA needs an Ed25519 key")
            key.verify(signature, signing_input)
    except InvalidSignature:
        raise ValueError("bad signature") from None
    return header, claims


def ath(access_token: str) -> str:
    """RFC 9449 §4.2: the access token hash a proof carries at a resource server."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())


def make_dpop_proof(key: Any, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None,
                    iat: float | None = None, jti: str | None = None) -> str:
    """A DPoP proof JWT (RFC 9449 §4.2) signed by the `cryptography` private `key`."""
    claims: JSONDict = {"jti": jti or secrets.token_urlsafe(16), "htm": method, "htu": url,
                        "iat": int(time.time() if iat is None else iat)}
    if access_token is not None:
        claims["ath"] = ath(access_token)
    if nonce is not None:
        claims["nonce"] = nonce
    return sign_jwt(claims, key, header={"typ": "dpop+jwt", "jwk": public_jwk(key)})



def check_dpop_proof(proof: str | None, *, method: str, url: str, seen: set[str], nonce: str | None = None,
                     access_token: str | None = None) -> str:
    """Validate a DPoP proof per RFC 9449 §4.3; the JWK thumbprint of its key.

    Raises OAuthError "invalid_dpop_proof", or "use_dpop_nonce" when the proof
    is fine but lacks `nonce`. A proof's `jti` goes into `seen` (replays fail)."""
    if not proof:
        raise OAuthError("invalid_dpop_proof", "a DPoP proof is required")
    try:
        header, _ = unverified(proof)
        jwk = header.get("jwk")
        if header.get("typ") != "dpop+jwt":
            raise ValueError("typ must be dpop+jwt")
        if not isinstance(jwk, dict) or any(name in jwk for name in ("d", "p", "q", "dp", "dq", "qi", "k")):
            raise ValueError("jwk must be a public key")
        _, claims = verify_jwt(proof, jwk, algs=SIGNING_ALGS)
    except ValueError as exc:
        raise OAuthError("invalid_dpop_proof", str(exc)) from None
    htu = claims.get("htu")
    if claims.get("htm") != method:
        raise OAuthError("invalid_dpop_proof", f"htm {claims.get('htm')!r} is not {method!r}")
    if not isinstance(htu, str) or urlsplit(htu)._replace(query="", fragment="").geturl() != url:
        raise OAuthError("invalid_dpop_proof", f"htu {htu!r} is not {url!r}")
    iat = claims.get("iat")
    if not isinstance(iat, (int, float)) or isinstance(iat, bool) or abs(time.time() - iat) > DPOP_IAT_WINDOW:
        raise OAuthError("invalid_dpop_proof", "iat is missing or too far from now")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise OAuthError("invalid_dpop_proof", "jti is missing")
    if access_token is not None and claims.get("ath") != ath(access_token):
        raise OAuthError("invalid_dpop_proof", "ath does not match the access token")
    if nonce is not None and claims.get("nonce") != nonce:
        raise OAuthError("use_dpop_nonce", "use the DPoP nonce the server sent")
    if jti in seen:
        raise OAuthError("invalid_dpop_proof", "jti replayed")
    seen.add(jti)
    return jwk_thumbprint(jwk)


