"""Tests of `mcp_sync.auth.jwt`: compact JWS signing.

Signatures are checked with `cryptography` (and `hmac`) directly, from the
public JWK the key publishes, with a base64url decoder of the tests' own, so
a bug in the module's encoding cannot hide a bug in its signing.
"""

import base64
import hashlib
import hmac
import json
import pickle
import sys
import time

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa, x25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from mcp_sync.auth.jwt import (
    SigningKey,
    b64url,
    b64url_decode,
    client_assertion,
    decode_unverified,
    jwk_thumbprint,
)
from mcp_sync.errors import AuthorizationError

# RFC 7638 §3.1
RFC7638_JWK = {
    "kty": "RSA",
    "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n"
         "3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdA"
         "ZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-"
         "kEgU8awapJzKnqDKgw",
    "e": "AQAB",
    "alg": "RS256",
    "kid": "2011-04-29",
}
RFC7638_THUMBPRINT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"

# RFC 8037 Appendix A.1-A.3: an Ed25519 key, its public x and its thumbprint.
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

SECRET = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
INSTALL_HINT = "pip install 'mcp-sync-client[jwt]'"


# -- an independent verifier --------------------------------------------------


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_key_from_jwk(jwk):
    if jwk["kty"] == "EC":
        curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}[jwk["crv"]]
        x, y = (int.from_bytes(unb64(jwk[name]), "big") for name in ("x", "y"))
        return ec.EllipticCurvePublicNumbers(x, y, curve).public_key()
    if jwk["kty"] == "RSA":
        e, n = (int.from_bytes(unb64(jwk[name]), "big") for name in ("e", "n"))
        return rsa.RSAPublicNumbers(e, n).public_key()
    if jwk["kty"] == "OKP":
        cls = {"Ed25519": ed25519.Ed25519PublicKey, "Ed448": ed448.Ed448PublicKey}[jwk["crv"]]
        return cls.from_public_bytes(unb64(jwk["x"]))
    raise AssertionError(f"unexpected kty {jwk['kty']}")


def verify(token, jwk):
    """Raise InvalidSignature unless `token` is signed by the key of `jwk`."""
    header_part, claims_part, signature_part = token.split(".")
    data = f"{header_part}.{claims_part}".encode("ascii")
    signature = unb64(signature_part)
    alg = json.loads(unb64(header_part))["alg"]
    public = public_key_from_jwk(jwk)
    if alg == "EdDSA":
        public.verify(signature, data)
        return
    digest = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}[alg[2:]]
    if alg.startswith("ES"):
        size = len(signature) // 2
        assert len(signature) == 2 * size
        der = encode_dss_signature(int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big"))
        public.verify(der, data, ec.ECDSA(digest))
    elif alg.startswith("PS"):
        public.verify(signature, data, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)
    else:
        public.verify(signature, data, padding.PKCS1v15(), digest)


def tamper(token):
    header, claims, signature = token.split(".")
    forged = b64url(json.dumps({**json.loads(unb64(claims)), "sub": "mallory"}).encode())
    return f"{header}.{forged}.{signature}"


@pytest.fixture(scope="module")
def rsa_private():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem_of(private, password=None):
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    return private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption).decode()


# -- base64url ------------------------------------------------------------------


def test_b64url_is_unpadded_urlsafe_and_round_trips():
    assert b64url(b"\xfb\xff\xbf") == "-_-_"
    assert b64url(b"\xfb\xff") == "-_8"
    for size in range(8):
        data = bytes(range(250, 250 + size)) if size < 6 else b"\x00" * size
        text = b64url(data)
        assert "=" not in text and "+" not in text and "/" not in text
        assert b64url_decode(text) == data


@pytest.mark.parametrize("bad", ["ab=c", "a+b/", "abcde", "ab cd", "é", "QQ=="])
def test_b64url_decode_rejects_what_is_not_unpadded_base64url(bad):
    with pytest.raises(ValueError):
        b64url_decode(bad)


# -- signing with every algorithm --------------------------------------------------

CLAIMS = {"iss": "client", "n": 1, "text": "grüße"}


@pytest.mark.parametrize("algorithm,signature_size", [
    ("ES256", 64), ("ES384", 96), ("ES512", 132), ("RS256", 256), ("RS512", 256), ("PS256", 256), ("PS384", 256),
    ("EdDSA", 64),
])
def test_generated_keys_sign_verifiable_tokens(algorithm, signature_size):
    key = SigningKey.generate(algorithm)
    assert key.algorithm == algorithm and key.key_id is None
    token = key.sign(CLAIMS)
    header, claims = decode_unverified(token)
    assert header == {"alg": algorithm, "typ": "JWT"}
    assert claims == CLAIMS
    # ES: raw R || S of twice the field size, not DER (RFC 7518 §3.4).
    assert len(unb64(token.split(".")[2])) == signature_size
    verify(token, key.public_jwk())
    with pytest.raises(InvalidSignature):
        verify(tamper(token), key.public_jwk())


def test_rsa_pss_and_pkcs1_are_not_interchangeable(rsa_private):
    pss = SigningKey(rsa_private, "PS256").sign({"a": 1})
    jwk = SigningKey(rsa_private).public_jwk()
    header_part, claims_part, signature_part = pss.split(".")
    as_rs256 = f"{b64url(json.dumps({'alg': 'RS256', 'typ': 'JWT'}).encode())}.{claims_part}.{signature_part}"
    with pytest.raises(InvalidSignature):
        verify(as_rs256, jwk)
    verify(pss, jwk)


@pytest.mark.parametrize("algorithm,digest", [("HS256", hashlib.sha256), ("HS384", hashlib.sha384),
                                               ("HS512", hashlib.sha512)])
def test_hmac_tokens_verify_with_hmac(algorithm, digest):
    key = SigningKey.from_secret(SECRET, algorithm)
    token = key.sign(CLAIMS)
    header_part, claims_part, signature_part = token.split(".")
    expected = hmac.new(SECRET, f"{header_part}.{claims_part}".encode(), digest).digest()
    assert hmac.compare_digest(unb64(signature_part), expected)
    assert decode_unverified(token) == ({"alg": algorithm, "typ": "JWT"}, CLAIMS)


def test_str_secret_is_utf8():
    text = "ß" * 16  # 32 bytes in UTF-8
    token = SigningKey.from_secret(text).sign({})
    header_part, claims_part, signature_part = token.split(".")
    expected = hmac.new(text.encode("utf-8"), f"{header_part}.{claims_part}".encode(), hashlib.sha256).digest()
    assert unb64(signature_part) == expected


def test_serialization_is_compact_json():
    token = SigningKey.from_secret(SECRET, key_id="k1").sign({"b": [1, 2], "a": {"c": None}})
    header_part, claims_part, _ = token.split(".")
    assert unb64(header_part) == b'{"alg":"HS256","typ":"JWT","kid":"k1"}'
    assert unb64(claims_part) == b'{"b":[1,2],"a":{"c":null}}'


def test_header_members_merge_and_none_removes_one():
    key = SigningKey.from_secret(SECRET, key_id="k1")
    header, _ = decode_unverified(key.sign({}, {"typ": "at+jwt", "x5u": "https://x"}))
    assert header == {"alg": "HS256", "typ": "at+jwt", "kid": "k1", "x5u": "https://x"}
    header, _ = decode_unverified(key.sign({}, {"typ": None, "kid": None}))
    assert header == {"alg": "HS256"}
    header, _ = decode_unverified(key.sign({}, {"alg": "HS256"}))
    assert header["alg"] == "HS256"


def test_header_cannot_change_the_algorithm():
    with pytest.raises(ValueError, match="HS256"):
        SigningKey.from_secret(SECRET).sign({}, {"alg": "none"})


@pytest.mark.parametrize("claims", [[1, 2], "text", None])
def test_claims_must_be_a_mapping(claims):
    with pytest.raises(TypeError):
        SigningKey.from_secret(SECRET).sign(claims)


def test_nan_is_not_json():
    with pytest.raises(ValueError):
        SigningKey.from_secret(SECRET).sign({"x": float("nan")})


# -- JWKs and thumbprints ------------------------------------------------------------


def test_rfc7638_example_thumbprint():
    assert jwk_thumbprint(RFC7638_JWK) == RFC7638_THUMBPRINT
    # Only the required members count: dropping the optional ones changes nothing.
    required = {name: RFC7638_JWK[name] for name in ("kty", "n", "e")}
    assert jwk_thumbprint(required) == RFC7638_THUMBPRINT


def test_rfc8037_ed25519_key_gives_the_published_jwk_and_thumbprint():
    private = ed25519.Ed25519PrivateKey.from_private_bytes(unb64(RFC8037_D))
    key = SigningKey(private, key_id="ed")
    assert key.algorithm == "EdDSA"
    assert key.public_jwk() == {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X, "kid": "ed"}
    assert key.thumbprint() == RFC8037_THUMBPRINT
    verify(key.sign({"a": 1}), {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X})


def test_ec_jwk_matches_the_key_and_pads_coordinates():
    # Find a key whose x has a leading zero byte (1 in 256): its JWK must still say 32 bytes.
    for _ in range(5000):
        private = ec.generate_private_key(ec.SECP256R1())
        numbers = private.public_key().public_numbers()
        if numbers.x < 1 << 248:
            break
    else:
        pytest.fail("no short coordinate found")
    jwk = SigningKey(private).public_jwk()
    assert set(jwk) == {"kty", "crv", "x", "y"} and (jwk["kty"], jwk["crv"]) == ("EC", "P-256")
    assert len(unb64(jwk["x"])) == len(unb64(jwk["y"])) == 32
    assert int.from_bytes(unb64(jwk["x"]), "big") == numbers.x
    assert int.from_bytes(unb64(jwk["y"]), "big") == numbers.y


def test_es256_signatures_are_always_64_bytes():
    # About 1 signature in 128 has an R or S with a leading zero byte; each must be padded.
    key = SigningKey.generate("ES256")
    jwk = key.public_jwk()
    for n in range(400):
        token = key.sign({"n": n})
        assert len(unb64(token.split(".")[2])) == 64
        verify(token, jwk)


def test_rsa_jwk_has_only_public_members(rsa_private):
    jwk = SigningKey(rsa_private, key_id="r1").public_jwk()
    assert set(jwk) == {"kty", "n", "e", "kid"}
    assert jwk["e"] == "AQAB"
    assert int.from_bytes(unb64(jwk["n"]), "big") == rsa_private.public_key().public_numbers().n


def test_thumbprint_ignores_kid_and_uses_the_required_members_in_order():
    private = ec.generate_private_key(ec.SECP256R1())
    with_kid, without = SigningKey(private, key_id="k"), SigningKey(private)
    assert with_kid.thumbprint() == without.thumbprint()
    jwk = without.public_jwk()
    canonical = f'{{"crv":"P-256","kty":"EC","x":"{jwk["x"]}","y":"{jwk["y"]}"}}'
    assert without.thumbprint() == b64url(hashlib.sha256(canonical.encode()).digest())
    assert without.thumbprint() != SigningKey.generate().thumbprint()


@pytest.mark.parametrize("jwk", [{"kty": "XYZ", "x": "a"}, {"kty": "EC", "crv": "P-256", "x": "a"}, {"x": "a"},
                                 {"kty": "RSA", "n": "a", "e": 3}])
def test_thumbprint_of_an_incomplete_or_unknown_jwk_fails(jwk):
    with pytest.raises(ValueError):
        jwk_thumbprint(jwk)


def test_hmac_keys_have_no_public_jwk():
    key = SigningKey.from_secret(SECRET)
    with pytest.raises(ValueError):
        key.public_jwk()
    with pytest.raises(ValueError):
        key.thumbprint()


# -- loading PEM --------------------------------------------------------------------------


@pytest.mark.parametrize("make,algorithm", [
    (lambda: ec.generate_private_key(ec.SECP256R1()), "ES256"),
    (lambda: ec.generate_private_key(ec.SECP384R1()), "ES384"),
    (lambda: ec.generate_private_key(ec.SECP521R1()), "ES512"),
    (lambda: ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
    (lambda: ed448.Ed448PrivateKey.generate(), "EdDSA"),
])
def test_from_pem_picks_the_algorithm_of_the_key(make, algorithm):
    private = make()
    key = SigningKey.from_pem(pem_of(private), key_id="pem-1")
    assert (key.algorithm, key.key_id) == (algorithm, "pem-1")
    assert key.public_jwk()["kid"] == "pem-1"
    token = key.sign({"x": 1})
    assert decode_unverified(token)[0] == {"alg": algorithm, "typ": "JWT", "kid": "pem-1"}
    verify(token, key.public_jwk())


def test_from_pem_pkcs8_p256_bytes_and_traditional_form():
    private = ec.generate_private_key(ec.SECP256R1())
    pkcs8 = pem_of(private)
    assert pkcs8.startswith("-----BEGIN PRIVATE KEY-----")
    traditional = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                        serialization.NoEncryption())
    assert traditional.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    expected = SigningKey(private).public_jwk()
    for pem in (pkcs8, pkcs8.encode(), traditional):
        key = SigningKey.from_pem(pem)
        assert key.algorithm == "ES256" and key.public_jwk() == expected


def test_from_pem_rsa_defaults_to_rs256_and_takes_another_rsa_algorithm(rsa_private):
    pem = pem_of(rsa_private)
    assert SigningKey.from_pem(pem).algorithm == "RS256"
    for algorithm in ("RS384", "RS512", "PS256", "PS384", "PS512"):
        key = SigningKey.from_pem(pem, algorithm)
        assert key.algorithm == algorithm
        verify(key.sign({"a": 1}), key.public_jwk())


def test_from_pem_with_password(rsa_private):
    pem = pem_of(rsa_private, password=b"hunter2")
    assert SigningKey.from_pem(pem, password="hunter2").algorithm == "RS256"
    with pytest.raises(ValueError, match="password"):
        SigningKey.from_pem(pem)
    with pytest.raises(ValueError):
        SigningKey.from_pem(pem, password=b"wrong")


@pytest.mark.parametrize("make,algorithm,says", [
    (lambda: ec.generate_private_key(ec.SECP256R1()), "ES384", "ES256"),
    (lambda: ec.generate_private_key(ec.SECP384R1()), "ES256", "ES384"),
    (lambda: ec.generate_private_key(ec.SECP256R1()), "RS256", "ES256"),
    (lambda: ec.generate_private_key(ec.SECP256R1()), "HS256", "ES256"),
    (lambda: ed25519.Ed25519PrivateKey.generate(), "ES256", "EdDSA"),
    (lambda: ec.generate_private_key(ec.SECP256R1()), "XS256", "unsupported"),
])
def test_from_pem_rejects_an_algorithm_the_key_cannot_sign_with(make, algorithm, says):
    pem = pem_of(make())
    with pytest.raises(ValueError, match=says) as info:
        SigningKey.from_pem(pem, algorithm)
    assert pem.splitlines()[1] not in str(info.value)


def test_rsa_key_rejects_ec_algorithm(rsa_private):
    with pytest.raises(ValueError, match="RSA"):
        SigningKey.from_pem(pem_of(rsa_private), "ES256")


@pytest.mark.parametrize("pem", [
    "not a key",
    "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    b"\x00\x01garbage",
])
def test_garbage_pem_raises_a_clear_error(pem):
    with pytest.raises(ValueError, match="could not load a private key from the PEM data"):
        SigningKey.from_pem(pem)


def test_public_key_pem_is_not_a_signing_key():
    public = ec.generate_private_key(ec.SECP256R1()).public_key()
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(ValueError, match="private key"):
        SigningKey.from_pem(pem)


def test_unsupported_key_types_are_refused():
    with pytest.raises(ValueError, match="unsupported key type"):
        SigningKey.from_pem(pem_of(x25519.X25519PrivateKey.generate()))
    with pytest.raises(ValueError, match="unsupported EC curve"):
        SigningKey(ec.generate_private_key(ec.SECP256K1()))


def test_short_rsa_keys_are_refused():
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ValueError, match="2048"):
        SigningKey(small)


# -- secrets and generation -------------------------------------------------------------


@pytest.mark.parametrize("algorithm,size", [("HS256", 32), ("HS384", 48), ("HS512", 64)])
def test_hmac_secret_must_be_as_long_as_the_hash(algorithm, size):
    SigningKey.from_secret(b"x" * size, algorithm)
    with pytest.raises(ValueError, match=str(size)):
        SigningKey.from_secret(b"x" * (size - 1), algorithm)


def test_secret_rejects_asymmetric_algorithms_and_bad_types():
    with pytest.raises(ValueError, match="HS256"):
        SigningKey.from_secret(SECRET, "ES256")
    with pytest.raises(TypeError):
        SigningKey.from_secret(1234)
    with pytest.raises(TypeError):
        SigningKey("a string is not a key")


@pytest.mark.parametrize("algorithm", ["HS256", "none", "RS1", ""])
def test_generate_refuses_what_it_cannot_make(algorithm):
    with pytest.raises(ValueError):
        SigningKey.generate(algorithm)


def test_generate_makes_distinct_keys():
    assert SigningKey.generate().public_jwk() != SigningKey.generate().public_jwk()


def test_key_id_must_be_a_non_empty_string():
    with pytest.raises(ValueError):
        SigningKey.from_secret(SECRET, key_id="")


# -- immutability and redaction ----------------------------------------------------------


def test_repr_and_str_never_show_key_material():
    private = ec.generate_private_key(ec.SECP256R1())
    pem = pem_of(private)
    key = SigningKey.from_pem(pem)
    assert repr(key) == str(key) == "SigningKey(ES256, <private>)"
    d = b64url(private.private_numbers().private_value.to_bytes(32, "big"))
    body = "".join(pem.splitlines()[1:-1])
    for text in (repr(key), str(key), repr([key]), f"{key}"):
        assert d not in text
        assert not any(body[i:i + 12] in text for i in range(0, len(body) - 12, 4))
    assert repr(SigningKey.from_pem(pem, key_id="k1")) == "SigningKey(ES256, kid='k1', <private>)"

    secret = "correct horse battery staple 1234567890"
    hs = SigningKey.from_secret(secret)
    assert repr(hs) == "SigningKey(HS256, <secret>)"
    assert "horse" not in repr(hs) and "horse" not in str(hs)


def test_keys_are_immutable_and_not_picklable():
    key = SigningKey.from_secret(SECRET)
    with pytest.raises(AttributeError):
        key._algorithm = "HS512"
    with pytest.raises(AttributeError):
        key.algorithm = "HS512"
    with pytest.raises(AttributeError):
        del key._key_id
    with pytest.raises(AttributeError):
        key.extra = 1
    assert key.algorithm == "HS256"
    with pytest.raises(TypeError):
        pickle.dumps(key)


# -- client assertions -----------------------------------------------------------------------


def test_client_assertion_claims():
    key = SigningKey.generate("ES256", key_id="c1")
    token = client_assertion(key, "client-123", "https://as.example.com/token", lifetime=120, now=1_700_000_000.7)
    header, claims = decode_unverified(token)
    assert header == {"alg": "ES256", "typ": "JWT", "kid": "c1"}
    assert set(claims) == {"iss", "sub", "aud", "iat", "exp", "jti"}
    assert claims["iss"] == claims["sub"] == "client-123"
    assert claims["aud"] == "https://as.example.com/token"
    assert claims["iat"] == 1_700_000_000
    assert claims["exp"] - claims["iat"] == 120
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16
    verify(token, key.public_jwk())


def test_client_assertion_defaults_and_unique_jti():
    key = SigningKey.from_secret(SECRET)
    before = time.time()
    tokens = [client_assertion(key, "c", "https://as") for _ in range(50)]
    claims = [decode_unverified(token)[1] for token in tokens]
    assert len({c["jti"] for c in claims}) == 50
    for c in claims:
        assert int(before) <= c["iat"] <= time.time()
        assert c["exp"] - c["iat"] == 60
    assert decode_unverified(client_assertion(key, "c", "https://as", lifetime=30.5, now=0))[1]["exp"] == 31


@pytest.mark.parametrize("client_id,audience,lifetime", [
    ("", "https://as", 60), ("c", "", 60), ("c", "https://as", 0), ("c", "https://as", -5),
    ("c", "https://as", float("nan")), ("c", "https://as", float("inf")),
])
def test_client_assertion_rejects_bad_arguments(client_id, audience, lifetime):
    with pytest.raises(ValueError):
        client_assertion(SigningKey.from_secret(SECRET), client_id, audience, lifetime=lifetime)


# -- decode_unverified --------------------------------------------------------------------------


def part(value):
    return b64url(json.dumps(value).encode())


NOT_UTF8 = b64url(b"\xff\xfe")


@pytest.mark.parametrize("token", [
    "",
    "abc",
    "a.b",
    "a.b.c.d.e",
    f"{part({'alg': 'HS256'})}.{part({'a': 1})}.sig+nature",
    f"{b64url(b'not json')}.{part({'a': 1})}.",
    f"{part([1, 2])}.{part({'a': 1})}.",
    f"{part({'alg': 'HS256'})}.{part('text')}.",
    f"{part({'alg': 'HS256'})}.{NOT_UTF8}.",
    f"{part({'alg': 'HS256'})}=.{part({'a': 1})}.",
    None,
])
def test_decode_unverified_rejects_malformed_tokens(token):
    with pytest.raises(ValueError) as info:
        decode_unverified(token)
    if token:
        assert token not in str(info.value)


def test_decode_unverified_accepts_an_empty_signature():
    assert decode_unverified(f"{part({'alg': 'none'})}.{part({'a': 1})}.") == ({"alg": "none"}, {"a": 1})


# -- without cryptography ------------------------------------------------------------------------


def hide_cryptography(monkeypatch, everything):
    if everything:  # as if it were not installed at all
        for name in [name for name in sys.modules if name == "cryptography" or name.startswith("cryptography.")]:
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "cryptography", None)


@pytest.mark.parametrize("everything", [True, False])
def test_missing_cryptography_raises_authorization_error_with_the_install_hint(monkeypatch, everything):
    made_before = SigningKey.generate("ES256")
    pem = pem_of(ec.generate_private_key(ec.SECP256R1()))
    hide_cryptography(monkeypatch, everything)
    calls = [
        lambda: SigningKey.generate("ES256"),
        lambda: SigningKey.generate("EdDSA"),
        lambda: SigningKey.from_pem(pem),
        lambda: made_before.sign({"a": 1}),
        lambda: made_before.public_jwk(),
    ]
    for call in calls:
        with pytest.raises(AuthorizationError, match="needs the 'cryptography' package") as info:
            call()
        assert INSTALL_HINT in str(info.value)


def test_hmac_needs_no_cryptography(monkeypatch):
    hide_cryptography(monkeypatch, True)
    key = SigningKey.from_secret(SECRET)
    token = client_assertion(key, "c", "https://as", now=10)
    header_part, claims_part, signature_part = token.split(".")
    expected = hmac.new(SECRET, f"{header_part}.{claims_part}".encode(), hashlib.sha256).digest()
    assert unb64(signature_part) == expected
    assert decode_unverified(token)[1]["iss"] == "c"
