"""TLS options of the HTTP target against real loopback HTTPS servers
(certificates from `trustme`): verification, custom CAs, `ssl.SSLContext`,
hostname mismatch, client certificates, and https:// to a plain server."""

import ssl
import time

import pytest
import trustme

import mcp_sync
from mcp_sync import HTTP



@pytest.fixture
def ca():
    return trustme.CA()


@pytest.fixture
def serve(serve):
    """serve(ssl_context): the demo server over HTTPS (the shared fixture)."""
    return lambda ssl_context=None: serve(ssl_context=ssl_context)


def server_context(ca, *names, client_ca=None):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        client_ca.configure_trust(context)
    return context


def ca_file(ca, tmp_path):
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def echo(client):
    return client.call_tool("echo", {"text": "secure"}).text


def test_an_untrusted_certificate_is_a_connect_error_naming_it(serve, ca):
    httpd = serve(server_context(ca, "127.0.0.1"))
    with pytest.raises(mcp_sync.ConnectError, match="TLS handshake.*certificate verify failed"):
        mcp_sync.connect(httpd.url, timeout=5)


def test_a_custom_ca_by_file_directory_and_environment(serve, ca, tmp_path, monkeypatch):
    httpd = serve(server_context(ca, "127.0.0.1"))
    bundle = ca_file(ca, tmp_path)
    with mcp_sync.connect(httpd.url, verify=bundle, timeout=5) as client:
        assert echo(client) == "secure"
    with mcp_sync.connect(httpd.url, verify=tmp_path / "ca.pem", timeout=5) as client:  # a PathLike too
        assert echo(client) == "secure"
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.setenv(name, bundle)
        with mcp_sync.connect(httpd.url, timeout=5) as client:
            assert echo(client) == "secure", name


def test_an_explicit_bundle_wins_over_the_environment(serve, ca, tmp_path, monkeypatch):
    httpd = serve(server_context(ca, "127.0.0.1"))
    other = trustme.CA()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_file(ca, tmp_path))
    other_file = tmp_path / "other.pem"
    other.cert_pem.write_to_path(str(other_file))
    with pytest.raises(mcp_sync.ConnectError, match="certificate verify failed"):
        mcp_sync.connect(httpd.url, verify=str(other_file), timeout=5)


def test_an_ssl_context_is_used_as_is(serve, ca):
    httpd = serve(server_context(ca, "127.0.0.1"))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    assert HTTP(httpd.url, verify=context).tls_context() is context
    with mcp_sync.connect(httpd.url, verify=context, timeout=5) as client:
        assert echo(client) == "secure"
    with pytest.raises(mcp_sync.ConnectError, match="certificate verify failed"):
        mcp_sync.connect(httpd.url, verify=ssl.create_default_context(), timeout=5)


def test_a_truststore_context_is_accepted(ca):
    import truststore  # in the test extra

    context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    assert HTTP("https://127.0.0.1/mcp", verify=context).tls_context() is context


def test_a_hostname_mismatch_is_refused(serve, ca, tmp_path):
    httpd = serve(server_context(ca, "other.example"))
    with pytest.raises(mcp_sync.ConnectError, match="(?i)hostname mismatch|doesn't match|not valid for"):
        mcp_sync.connect(httpd.url, verify=ca_file(ca, tmp_path), timeout=5)


def test_mutual_tls(serve, ca, tmp_path):
    client_ca = trustme.CA()
    httpd = serve(server_context(ca, "127.0.0.1", client_ca=client_ca))
    bundle = ca_file(ca, tmp_path)
    identity = client_ca.issue_cert("client@example")
    combined = tmp_path / "client.pem"
    identity.private_key_and_cert_chain_pem.write_to_path(str(combined))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    identity.cert_chain_pems[0].write_to_path(str(cert_file))
    identity.private_key_pem.write_to_path(str(key_file))
    with mcp_sync.connect(httpd.url, verify=bundle, cert=str(combined), timeout=5) as client:
        assert echo(client) == "secure"
    with mcp_sync.connect(httpd.url, verify=bundle, cert=(cert_file, str(key_file)), timeout=5) as client:
        assert echo(client) == "secure"
    # TLS 1.3 reports a missing client certificate after the handshake, on
    # the first read: as the server's alert ("certificate required"), or as
    # the connection closed or reset under the read when the alert is lost
    # (the server closes with our request unread, so its kernel may send RST).
    refused = "(?i)certificate|EOF occurred in violation of protocol|connection reset by peer"
    with pytest.raises(mcp_sync.ConnectError, match=refused):
        mcp_sync.connect(httpd.url, verify=bundle, timeout=5)


def test_verify_false_accepts_any_certificate(serve, ca):
    httpd = serve(server_context(ca, "other.example"))
    with mcp_sync.connect(httpd.url, verify=False, timeout=5) as client:
        assert echo(client) == "secure"


def test_https_to_a_plain_http_server_fails_at_once_naming_tls(serve):
    httpd = serve()
    url = httpd.url.replace("http://", "https://")
    started = time.monotonic()
    with pytest.raises(mcp_sync.ConnectError, match="TLS handshake.*not TLS.*http://"):
        mcp_sync.connect(url, timeout=10)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("verify, cert, error", [
    (42, None, TypeError),
    ("/nonexistent/ca.pem", None, ValueError),
    (True, 42, TypeError),
    (True, ("only-one",), TypeError),
    (True, "/nonexistent/client.pem", ValueError),
    (ssl.create_default_context(), __file__, ValueError),
])
def test_bad_tls_options_fail_at_construction(verify, cert, error):
    with pytest.raises(error):
        HTTP("https://127.0.0.1/mcp", verify=verify, cert=cert)
