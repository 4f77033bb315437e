"""Tests of `mcp_sync.auth.dpop`: DPoP proofs and server nonces (RFC 9449)."""

import base64
import hashlib
import json
import sys
import threading
import time

import pytest
import requests.structures
import urllib3
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from mcp_sync.auth.dpop import DPoP, is_use_dpop_nonce
from mcp_sync.auth.jwt import SigningKey, decode_unverified, jwk_thumbprint
from mcp_sync.errors import AuthorizationError

# RFC 9449 §7.1: this access token's `ath`.
RFC9449_TOKEN = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
RFC9449_ATH = "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"

TOKEN_URL = "https://as.example.com/token"


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_with_embedded_jwk(proof):
    """Check a proof the way a server does: with the public key in its own header."""
    header_part, claims_part, signature_part = proof.split(".")
    header = json.loads(unb64(header_part))
    jwk, data, signature = header["jwk"], f"{header_part}.{claims_part}".encode(), unb64(signature_part)
    if jwk["kty"] == "OKP":
        ed25519.Ed25519PublicKey.from_public_bytes(unb64(jwk["x"])).verify(signature, data)
        return
    assert (jwk["kty"], jwk["crv"], header["alg"]) == ("EC", "P-256", "ES256")
    x, y = (int.from_bytes(unb64(jwk[name]), "big") for name in ("x", "y"))
    public = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    public.verify(der, data, ec.ECDSA(hashes.SHA256()))


def claims_of(proof):
    return decode_unverified(proof)[1]


# -- the proof ------------------------------------------------------------------


def test_proof_header_is_exact():
    key = SigningKey.generate("ES256")
    dpop = DPoP(key)
    header, _ = decode_unverified(dpop.proof("GET", "https://rs.example.com/mcp"))
    assert header == {"alg": "ES256", "typ": "dpop+jwt", "jwk": key.public_jwk()}
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}  # public members only, no "d"


def test_proof_claims_are_exact():
    dpop = DPoP()
    proof = dpop.proof("post", "https://Server.Example.com:8443/oauth/token?grant=x&y=1#frag", now=1_700_000_000.9)
    claims = claims_of(proof)
    assert set(claims) == {"jti", "htm", "htu", "iat"}  # no nonce, no ath
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://Server.Example.com:8443/oauth/token"
    assert claims["iat"] == 1_700_000_000 and isinstance(claims["iat"], int)
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16


def test_ath_is_the_sha256_of_the_access_token():
    dpop = DPoP()
    claims = claims_of(dpop.proof("GET", "https://rs.example.com/mcp", access_token=RFC9449_TOKEN))
    expected = base64.urlsafe_b64encode(hashlib.sha256(RFC9449_TOKEN.encode("ascii")).digest()).rstrip(b"=").decode()
    assert claims["ath"] == expected == RFC9449_ATH
    other = claims_of(dpop.proof("GET", "https://rs.example.com/mcp", access_token="another"))
    assert other["ath"] != RFC9449_ATH


def test_non_ascii_access_token_is_refused_without_echoing_it():
    with pytest.raises(ValueError) as info:
        DPoP().proof("GET", "https://rs.example.com/", access_token="tökenvalue")
    assert "tökenvalue" not in str(info.value)


def test_iat_defaults_to_now():
    before = int(time.time())
    iat = claims_of(DPoP().proof("GET", "https://rs.example.com/"))["iat"]
    assert before <= iat <= time.time()


def test_proof_verifies_against_its_embedded_jwk():
    proof = DPoP().proof("GET", "https://rs.example.com/mcp", access_token="t")
    verify_with_embedded_jwk(proof)
    header_part, claims_part, signature_part = proof.split(".")
    claims = json.loads(unb64(claims_part))
    claims["htm"] = "DELETE"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidSignature):
        verify_with_embedded_jwk(f"{header_part}.{forged}.{signature_part}")


def test_eddsa_key_and_key_id_stay_out_of_the_header():
    key = SigningKey.generate("EdDSA", key_id="k1")
    proof = DPoP(key).proof("GET", "https://rs.example.com/")
    header = decode_unverified(proof)[0]
    assert header["alg"] == "EdDSA" and "kid" not in header and "kid" not in header["jwk"]
    verify_with_embedded_jwk(proof)


def test_every_proof_has_a_new_jti():
    dpop = DPoP()
    assert len({claims_of(dpop.proof("GET", "https://rs.example.com/"))["jti"] for _ in range(200)}) == 200


def test_jkt_is_the_thumbprint_of_the_embedded_key():
    key = SigningKey.generate("ES256", key_id="k")
    dpop = DPoP(key)
    header, _ = decode_unverified(dpop.proof("GET", "https://rs.example.com/"))
    assert dpop.jkt == key.thumbprint() == jwk_thumbprint(header["jwk"])
    assert dpop.key is key
    assert DPoP().jkt != dpop.jkt


@pytest.mark.parametrize("url", ["/relative/path", "rs.example.com/mcp", "", "https://host:99999/"])
def test_urls_must_be_absolute(url):
    with pytest.raises(ValueError):
        DPoP().proof("GET", url)


def test_method_must_be_given():
    with pytest.raises(ValueError):
        DPoP().proof("", "https://rs.example.com/")


def test_hmac_keys_and_non_keys_are_refused():
    with pytest.raises(ValueError, match="asymmetric"):
        DPoP(SigningKey.from_secret(b"s" * 32))
    with pytest.raises(TypeError):
        DPoP("not a key")


def test_repr_shows_no_key_material():
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    dpop = DPoP(SigningKey.from_pem(pem))
    text = repr(dpop)
    assert text == f"DPoP(ES256, jkt={dpop.jkt!r})"
    d = base64.urlsafe_b64encode(private.private_numbers().private_value.to_bytes(32, "big")).rstrip(b"=").decode()
    assert d not in text and pem.splitlines()[1] not in text


# -- nonces ---------------------------------------------------------------------------


def test_nonce_is_remembered_per_origin():
    dpop = DPoP()
    dpop.remember_nonce(TOKEN_URL, "n-1")
    same_origin = ["https://as.example.com/token", "https://AS.EXAMPLE.COM:443/other?q=1", "HTTPS://as.example.com"]
    for url in same_origin:
        assert claims_of(dpop.proof("POST", url))["nonce"] == "n-1"
    other_origins = ["https://as.example.com:8443/token", "http://as.example.com/token", "https://rs.example.com/mcp",
                     "https://sub.as.example.com/token"]
    for url in other_origins:
        assert "nonce" not in claims_of(dpop.proof("POST", url))
    dpop.remember_nonce("https://as.example.com:443/elsewhere", "n-2")
    assert claims_of(dpop.proof("POST", TOKEN_URL))["nonce"] == "n-2"


def test_default_ports_and_ipv6_origins():
    dpop = DPoP()
    dpop.remember_nonce("http://[::1]:80/a", "six")
    assert claims_of(dpop.proof("GET", "http://[::1]/b"))["nonce"] == "six"
    assert "nonce" not in claims_of(dpop.proof("GET", "http://[::1]:8080/b"))
    assert claims_of(dpop.proof("GET", "http://[::1]/b"))["htu"] == "http://[::1]/b"


@pytest.mark.parametrize("bad", ["", " ", "has space", 'quo"te', "back\\slash", "é", "line\r\nbreak", "tab\there",
                                 "\x7f", None, 42])
def test_invalid_nonces_are_ignored(bad):
    dpop = DPoP()
    dpop.remember_nonce(TOKEN_URL, "good!#[]~")
    dpop.remember_nonce(TOKEN_URL, bad)
    assert claims_of(dpop.proof("POST", TOKEN_URL))["nonce"] == "good!#[]~"
    fresh = DPoP()
    fresh.remember_nonce(TOKEN_URL, bad)
    assert "nonce" not in claims_of(fresh.proof("POST", TOKEN_URL))


def test_nonce_from_is_true_only_for_a_new_nonce():
    dpop = DPoP()
    assert dpop.nonce_from(TOKEN_URL, {"DPoP-Nonce": "n-1"}) is True
    assert claims_of(dpop.proof("POST", TOKEN_URL))["nonce"] == "n-1"
    assert dpop.nonce_from(TOKEN_URL, {"dpop-nonce": "n-1"}) is False  # already in use: a retry would not help
    assert dpop.nonce_from(TOKEN_URL, {"content-type": "application/json"}) is False
    assert dpop.nonce_from(TOKEN_URL, {"DPOP-NONCE": "bad nonce"}) is False
    assert claims_of(dpop.proof("POST", TOKEN_URL))["nonce"] == "n-1"
    assert dpop.nonce_from(TOKEN_URL, {"DPOP-NONCE": "  n-2 "}) is True  # surrounding whitespace is not the nonce
    assert claims_of(dpop.proof("POST", TOKEN_URL))["nonce"] == "n-2"
    # The same nonce from another origin is new there.
    assert dpop.nonce_from("https://rs.example.com/mcp", {"DPoP-Nonce": "n-2"}) is True


def test_nonce_from_reads_the_header_types_of_requests_and_urllib3():
    dpop = DPoP()
    assert dpop.nonce_from(TOKEN_URL, requests.structures.CaseInsensitiveDict({"Dpop-Nonce": "r-1"})) is True
    assert dpop.nonce_from(TOKEN_URL, urllib3.HTTPHeaderDict({"DPoP-Nonce": "u-1"})) is True
    assert claims_of(dpop.proof("POST", TOKEN_URL))["nonce"] == "u-1"


def test_many_threads_make_proofs_at_once():
    dpop = DPoP()
    threads_n, per_thread = 32, 25
    barrier = threading.Barrier(threads_n)
    proofs, errors = [], []
    lock = threading.Lock()

    def work(i):
        try:
            barrier.wait()
            mine = []
            for n in range(per_thread):
                dpop.nonce_from(TOKEN_URL, {"DPoP-Nonce": f"t{i}-{n}"})
                mine.append(dpop.proof("POST", TOKEN_URL, access_token=f"token-{i}"))
            with lock:
                proofs.extend(mine)
        except BaseException as exc:  # reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert len(proofs) == threads_n * per_thread
    claims = [claims_of(proof) for proof in proofs]
    assert len({c["jti"] for c in claims}) == len(proofs)
    assert all(c["nonce"].startswith("t") for c in claims)  # always some thread's nonce, never torn
    for proof in proofs[::50]:
        verify_with_embedded_jwk(proof)


# -- is_use_dpop_nonce ------------------------------------------------------------------------


@pytest.mark.parametrize("status,headers,body", [
    (400, {"DPoP-Nonce": "n"}, {"error": "use_dpop_nonce", "error_description": "Authorization server requires nonce"}),
    (400, {}, {"error": "use_dpop_nonce"}),
    (401, {"WWW-Authenticate": 'DPoP error="use_dpop_nonce", error_description="Resource server requires nonce"'},
     None),
    (401, {"www-authenticate": 'DPoP algs="ES256 PS256", error="use_dpop_nonce"'}, None),
    (401, {"WWW-AUTHENTICATE": 'Bearer realm="mcp", DPoP algs="ES256", ERROR="use_dpop_nonce"'}, None),
    (401, {"WWW-Authenticate": "dpop error=use_dpop_nonce"}, None),
    (401, {"WWW-Authenticate": 'Basic dXNlcjpwYXNz==, DPoP error="use_dpop_nonce'}, None),
    (401, {"WWW-Authenticate": 'DPoP error_description="say \\"hi\\", then", error="use_dpop_nonce"'}, None),
    (401, {"WWW-Authenticate": 'Bearer', "www-authenticate": 'DPoP error="use_dpop_nonce"'}, None),
])
def test_use_dpop_nonce_is_recognised(status, headers, body):
    assert is_use_dpop_nonce(status, headers, body) is True


@pytest.mark.parametrize("status,headers,body", [
    (400, {}, {"error": "invalid_dpop_proof"}),
    (400, {}, None),
    (400, {"WWW-Authenticate": 'DPoP error="use_dpop_nonce"'}, None),
    (401, {}, {"error": "use_dpop_nonce"}),
    (401, {"WWW-Authenticate": 'Bearer error="use_dpop_nonce"'}, None),
    (401, {"WWW-Authenticate": 'DPoP error="invalid_token"'}, None),
    (401, {"WWW-Authenticate": 'DPoP error_description="use_dpop_nonce"'}, None),
    (401, {"WWW-Authenticate": 'DPoP error="invalid_token", Bearer error="use_dpop_nonce"'}, None),
    (401, {"WWW-Authenticate": 'DPoP error="USE_DPOP_NONCE_X"'}, None),
    (401, {"WWW-Authenticate": ""}, None),
    (401, {"WWW-Authenticate": ',,,="'}, None),
    (403, {"WWW-Authenticate": 'DPoP error="use_dpop_nonce"'}, {"error": "use_dpop_nonce"}),
    (200, {}, {"error": "use_dpop_nonce"}),
])
def test_other_answers_are_not_use_dpop_nonce(status, headers, body):
    assert is_use_dpop_nonce(status, headers, body) is False


# -- without cryptography --------------------------------------------------------------------------


def test_missing_cryptography_raises_authorization_error(monkeypatch):
    for name in [name for name in sys.modules if name == "cryptography" or name.startswith("cryptography.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(AuthorizationError, match=r"needs the 'cryptography' package: pip install 'mcp-sync-client\[jwt\]'"):
        DPoP()
