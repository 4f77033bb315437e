"""Tests of `mcp_sync.auth.discovery`: challenges, well-known URLs and the identity checks (no network)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sync.auth.discovery import (
    Challenge,
    authorization_server_metadata_urls,
    canonical_resource,
    check_endpoint_url,
    check_issuer,
    check_resource,
    find_challenge,
    is_loopback,
    parse_challenges,
    resource_metadata_urls,
)
from mcp_sync.errors import AuthorizationError

PRM = "/.well-known/oauth-protected-resource"

# -- parse_challenges ------------------------------------------------------------------------


def test_a_bearer_challenge_with_quoted_parameters():
    [challenge] = parse_challenges('Bearer resource_metadata="https://mcp.example.com/prm", scope="files:read files:write"')
    assert challenge == Challenge("bearer", {"resource_metadata": "https://mcp.example.com/prm",
                                             "scope": "files:read files:write"})
    assert challenge.scopes == ["files:read", "files:write"] and challenge.error is None


def test_quoted_strings_keep_commas_and_unescape_backslashes():
    [challenge] = parse_challenges(r'Bearer realm="a \"b\", c, d", error_description="x\\y", scope=read')
    assert challenge.params == {"realm": 'a "b", c, d', "error_description": "x\\y", "scope": "read"}


def test_several_challenges_dpop_and_bearer():
    header = ('DPoP algs="ES256 PS256", error="use_dpop_nonce", error_description="nonce, please", '
              'Bearer realm="mcp", scope="a b", error="invalid_token"')
    dpop, bearer = parse_challenges(header)
    assert dpop == Challenge("dpop", {"algs": "ES256 PS256", "error": "use_dpop_nonce",
                                      "error_description": "nonce, please"})
    assert bearer == Challenge("bearer", {"realm": "mcp", "scope": "a b", "error": "invalid_token"})
    assert bearer.error == "invalid_token"


def test_token68_credentials_are_skipped_and_the_next_challenge_read():
    assert parse_challenges('Basic dXNlcjpwYXNz==, Bearer realm="a"') == [
        Challenge("basic", {}), Challenge("bearer", {"realm": "a"})]
    assert parse_challenges("Negotiate abc/+_-.~") == [Challenge("negotiate", {})]
    # "x=1" is a parameter, not a token68 ("x" then "=1" would not end at a comma).
    assert parse_challenges("Custom x=1") == [Challenge("custom", {"x": "1"})]


def test_unknown_schemes_are_kept_and_names_are_case_insensitive():
    parsed = parse_challenges('NewAuth Realm="apps", TYPE=1, BEARER Scope="Read", dpop ALGS="ES256"')
    assert parsed == [Challenge("newauth", {"realm": "apps", "type": "1"}),
                      Challenge("bearer", {"scope": "Read"}),  # values keep their case
                      Challenge("dpop", {"algs": "ES256"})]


def test_schemes_without_parameters_and_empty_list_elements():
    assert parse_challenges("Bearer, DPoP") == [Challenge("bearer", {}), Challenge("dpop", {})]
    # RFC 9110 §5.6.1: empty list elements are ignored, between parameters too.
    assert parse_challenges('Bearer realm="a",, ,scope="b" , , DPoP') == [
        Challenge("bearer", {"realm": "a", "scope": "b"}), Challenge("dpop", {})]
    assert parse_challenges(" ,, ") == []
    assert parse_challenges("") == [] and parse_challenges(None) == []


def test_a_repeated_parameter_keeps_its_first_value():
    assert parse_challenges('Bearer scope="a", scope="b"') == [Challenge("bearer", {"scope": "a"})]


@pytest.mark.parametrize("header, expected", [
    ('Bearer realm="x", @@@', [Challenge("bearer", {"realm": "x"})]),
    # An unterminated quote: the parameter's name must not become a scheme.
    ('Bearer scope="a", realm="unterminated', [Challenge("bearer", {"scope": "a"})]),
    ('Bearer realm="x" junk, DPoP error="use_dpop_nonce"', [Challenge("bearer", {"realm": "x"})]),
    ('Basic abc Bearer realm="x"', [Challenge("basic", {})]),
    ("Bearer =", [Challenge("bearer", {})]),
    ('DPoP error="use_dpop_nonce", "', [Challenge("dpop", {"error": "use_dpop_nonce"})]),
])
def test_a_malformed_tail_ends_parsing_and_keeps_what_was_read(header, expected):
    assert parse_challenges(header) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('Bb DPoPearr=",\\\t ;/+=abc-_.~\x00é')), max_size=60) | st.text(max_size=80))
def test_parse_challenges_never_raises(header):
    challenges = parse_challenges(header)
    for challenge in challenges:
        assert challenge.scheme == challenge.scheme.lower() and challenge.scheme
        assert all(name == name.lower() for name in challenge.params)
    assert find_challenge(header) in [*challenges, None]


def test_find_challenge_picks_the_first_bearer_or_dpop():
    header = 'Basic realm="x", DPoP algs="ES256", Bearer scope="s"'
    assert find_challenge(header) == Challenge("dpop", {"algs": "ES256"})
    assert find_challenge(header, ("bearer",)) == Challenge("bearer", {"scope": "s"})
    assert find_challenge('Basic realm="x"') is None
    assert find_challenge(None) is None
    assert find_challenge("BEARER") == Challenge("bearer", {})


# -- well-known URLs -------------------------------------------------------------------------


def test_resource_metadata_urls_challenge_first_then_path_then_root():
    assert resource_metadata_urls("https://example.com/public/mcp", "https://meta.example.com/prm.json") == [
        "https://meta.example.com/prm.json",
        "https://example.com" + PRM + "/public/mcp",
        "https://example.com" + PRM,
    ]
    assert resource_metadata_urls("https://example.com/public/mcp") == [
        "https://example.com" + PRM + "/public/mcp", "https://example.com" + PRM]
    # A trailing slash does not make another path-based URL; the origin is canonical.
    assert resource_metadata_urls("HTTPS://Example.COM:443/mcp/") == [
        "https://example.com" + PRM + "/mcp", "https://example.com" + PRM]


def test_resource_metadata_urls_for_a_server_at_the_root():
    for url in ("https://example.com", "https://example.com/"):
        assert resource_metadata_urls(url) == ["https://example.com" + PRM]
    # The challenge naming a well-known URL is not listed twice.
    assert resource_metadata_urls("http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080" + PRM + "/mcp") == [
        "http://127.0.0.1:8080" + PRM + "/mcp", "http://127.0.0.1:8080" + PRM]


@pytest.mark.parametrize("issuer", ["https://auth.example.com/tenant1", "https://auth.example.com/tenant1/"])
def test_authorization_server_metadata_urls_with_a_path(issuer):
    assert authorization_server_metadata_urls(issuer) == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize("issuer", ["https://auth.example.com", "https://auth.example.com/"])
def test_authorization_server_metadata_urls_without_a_path(issuer):
    assert authorization_server_metadata_urls(issuer) == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_authorization_server_metadata_urls_keep_a_port():
    assert authorization_server_metadata_urls("http://127.0.0.1:9000/a/b")[0] == \
        "http://127.0.0.1:9000/.well-known/oauth-authorization-server/a/b"


# -- canonical_resource ------------------------------------------------------------------------


@pytest.mark.parametrize("url, canonical", [
    ("HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/MCP", "https://mcp.example.com/MCP"),  # the path keeps its case
    ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
    ("http://mcp.example.com:80/mcp", "http://mcp.example.com/mcp"),
    ("https://mcp.example.com:8443/mcp", "https://mcp.example.com:8443/mcp"),
    ("http://mcp.example.com:443/mcp", "http://mcp.example.com:443/mcp"),  # not http's default
    ("https://mcp.example.com/mcp#section", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/", "https://mcp.example.com"),
    ("https://mcp.example.com", "https://mcp.example.com"),
    ("https://mcp.example.com/server/mcp/", "https://mcp.example.com/server/mcp/"),
    ("https://mcp.example.com/mcp?tenant=a", "https://mcp.example.com/mcp?tenant=a"),
    ("http://[::1]:8080/mcp", "http://[::1]:8080/mcp"),
    ("HTTP://[::1]:80/", "http://[::1]"),
])
def test_canonical_resource(url, canonical):
    assert canonical_resource(url) == canonical


# -- check_resource / check_issuer -------------------------------------------------------------


@pytest.mark.parametrize("resource, server", [
    ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/"),
    ("HTTPS://MCP.EXAMPLE.COM:443/mcp", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com", "https://mcp.example.com/mcp"),  # the origin covers every path
    ("https://mcp.example.com/", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/a", "https://mcp.example.com/a/b/mcp"),
])
def test_check_resource_accepts_the_server_or_a_parent_and_returns_the_metadatas_string(resource, server):
    assert check_resource({"resource": resource}, server) == resource


@pytest.mark.parametrize("resource, server", [
    ("https://mcp.example.com/mcpx", "https://mcp.example.com/mcp"),  # not a segment boundary
    ("https://mcp.example.com/mcp", "https://mcp.example.com/mcpx"),
    ("https://mcp.example.com/a/b/mcp/extra", "https://mcp.example.com/a/b/mcp"),  # a child, not a parent
    ("https://mcp.example.com/MCP", "https://mcp.example.com/mcp"),
    ("https://evil.example.com/mcp", "https://mcp.example.com/mcp"),
    ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/mcp?x=1", "https://mcp.example.com/mcp"),
    ("/mcp", "https://mcp.example.com/mcp"),
])
def test_check_resource_refuses_another_server(resource, server):
    with pytest.raises(AuthorizationError, match="not for this server"):
        check_resource({"resource": resource}, server)


@pytest.mark.parametrize("resource", ["", 5, ["https://mcp.example.com/mcp"], "https://mcp.example.com/mcp#frag",
                                      "https://mcp.example.com:99999/mcp", "http://[::1/mcp"])
def test_check_resource_refuses_an_invalid_value(resource):
    # A fragment is refused (RFC 8707 §2) even though canonical_resource would drop it: the
    # metadata's own string is what the token request carries. Bad ports are no ValueError.
    with pytest.raises(AuthorizationError, match="invalid 'resource'"):
        check_resource({"resource": resource}, "https://mcp.example.com/mcp")


def test_check_resource_without_a_resource_uses_the_canonical_server_url():
    assert check_resource({}, "HTTPS://MCP.example.com:443/mcp#x") == "https://mcp.example.com/mcp"


def test_check_issuer_is_an_exact_string_comparison():
    check_issuer({"issuer": "https://auth.example.com/t1"}, "https://auth.example.com/t1")
    for found in ("https://auth.example.com/t1/", "https://AUTH.example.com/t1", "https://auth.example.com:443/t1",
                  "https://honest.example", None, 5):
        with pytest.raises(AuthorizationError, match="names issuer"):
            check_issuer({"issuer": found}, "https://auth.example.com/t1")
    with pytest.raises(AuthorizationError):
        check_issuer({"issuer": "https://a.example"}, "https://a.example/")
    with pytest.raises(AuthorizationError):
        check_issuer({}, "https://a.example")


# -- check_endpoint_url / is_loopback ----------------------------------------------------------


@pytest.mark.parametrize("url", [
    "https://auth.example.com/token", "https://auth.example.com:8443/t?x=1",
    "http://127.0.0.1:9000/token", "http://127.0.0.2/token", "http://[::1]:8080/token",
    "http://localhost/token", "http://LOCALHOST:3000/token", "http://tenant.localhost/token",
])
def test_check_endpoint_url_accepts_https_and_loopback_http(url):
    assert check_endpoint_url(url, "the token_endpoint") is url


@pytest.mark.parametrize("url, problem", [
    ("http://auth.example.com/token", "must use HTTPS"),
    ("http://127.0.0.1.nip.io/token", "must use HTTPS"),
    ("http://localhost.evil.com/token", "must use HTTPS"),
    ("http://10.0.0.1/token", "must use HTTPS"),
    ("http://0.0.0.0/token", "must use HTTPS"),
    ("https://auth.example.com/token#frag", "fragment"),
    ("https://auth.example.com/token#", "fragment"),
    ("ftp://auth.example.com/token", "not an absolute http"),
    ("/token", "not an absolute http"),
    ("https:///token", "not an absolute http"),
    ("http://[::1/token", "not a valid URL"),
    ("https://auth.example.com:99999/token", "not a valid URL"),
])
def test_check_endpoint_url_refuses(url, problem):
    with pytest.raises(AuthorizationError, match=problem) as caught:
        check_endpoint_url(url, "the token_endpoint")
    assert str(caught.value).startswith("the token_endpoint")


@pytest.mark.parametrize("value", [None, "", 5, b"https://a.example/t", ["https://a.example/t"]])
def test_check_endpoint_url_refuses_what_is_not_a_string(value):
    with pytest.raises(AuthorizationError, match="missing or not a string"):
        check_endpoint_url(value, "the token_endpoint")


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("127.255.255.254", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LocalHost", True), ("a.localhost", True),
    ("128.0.0.1", False), ("10.0.0.1", False), ("0.0.0.0", False), ("::", False), ("example.com", False),
    ("localhostx", False), ("localhost.evil.com", False), ("127.0.0.1.nip.io", False), ("", False), (None, False),
])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback
