"""Tests of `mcp_sync.auth.tokens`, `mcp_sync.auth.storage` and `mcp_sync.auth._http`."""

from __future__ import annotations

import http.server
import json
import os
import socket
import stat
import threading

import pytest

from mcp_sync.auth._http import Answer, AuthHTTP
from mcp_sync.auth.storage import FileStorage, MemoryStorage, TokenStorage
from mcp_sync.auth.tokens import EXPIRY_MARGIN, ClientInfo, Tokens, oauth_error, tokens_from_answer
from mcp_sync.errors import AuthorizationError, OAuthError

TOKEN_URL = "https://as.example.com/token"


def answer(body, status=200):
    return Answer(status, {}, body, TOKEN_URL)


def tokens(body, *, requested_scope="read", previous=None, now=1000.0):
    return tokens_from_answer(answer(body), requested_scope=requested_scope, issuer="https://as.example.com",
                              resource="https://mcp.example.com/mcp", previous_refresh_token=previous, now=now)


# -- tokens_from_answer ------------------------------------------------------------------------


def test_a_full_token_answer():
    got = tokens({"access_token": "at", "token_type": "bearer", "expires_in": 60, "refresh_token": "rt",
                  "scope": "read write"})
    assert got == Tokens(access_token="at", token_type="Bearer", expires_at=1060.0, refresh_token="rt",
                         scope="read write", issuer="https://as.example.com", resource="https://mcp.example.com/mcp",
                         issued_at=1000.0)
    assert got.scopes == {"read", "write"}


@pytest.mark.parametrize("token_type, normalized", [("Bearer", "Bearer"), ("BEARER", "Bearer"), ("DPoP", "DPoP"),
                                                    ("dpop", "DPoP")])
def test_token_types_are_normalized(token_type, normalized):
    assert tokens({"access_token": "at", "token_type": token_type}).token_type == normalized


@pytest.mark.parametrize("body", [
    {}, {"access_token": ""}, {"access_token": 5}, {"access_token": None}, {"access_token": ["at"]},
    {"access_token": "a b"}, {"access_token": "at\r\nX-Injected: 1"}, {"access_token": "a\0b"},
    # RFC 6749 A.12: visible ASCII only. Anything else cannot be sent in a
    # header (it failed every later request as a ConnectError) or signed
    # into a DPoP proof's `ath` (a ValueError).
    {"access_token": "at\u4e2d"}, {"access_token": "caf\u00e9"}, {"access_token": "a\tb"}, {"access_token": "a\x7fb"},
    {"access_token": "a\x01b"},
])
def test_a_missing_or_invalid_access_token_is_refused(body):
    with pytest.raises(AuthorizationError, match="no valid 'access_token'"):
        tokens(body)


def test_a_body_that_is_not_a_json_object_is_refused():
    with pytest.raises(AuthorizationError, match="not a JSON object") as caught:
        tokens(None)
    assert TOKEN_URL in str(caught.value)


@pytest.mark.parametrize("token_type", ["mac", "N_A", "", None, 5])
def test_an_unsupported_token_type_is_refused(token_type):
    with pytest.raises(AuthorizationError, match="unsupported token_type"):
        tokens({"access_token": "at", "token_type": token_type})


@pytest.mark.parametrize("expires_in", [-1, -0.5, "-1", "1.5", "abc", "", True, [60], {"s": 60},
                                        float("nan"), float("inf"), "²", "١٢"])
def test_an_invalid_expires_in_is_refused(expires_in):
    # NaN and infinity would make a token that never expires; "²" passes str.isdigit() but not int().
    with pytest.raises(AuthorizationError, match="invalid 'expires_in'"):
        tokens({"access_token": "at", "expires_in": expires_in})


def test_nan_expires_in_from_the_wire_is_refused():
    # Python's json module accepts NaN and overflows 1e999 to infinity.
    for raw in ('{"access_token": "at", "expires_in": NaN}', '{"access_token": "at", "expires_in": 1e999}'):
        with pytest.raises(AuthorizationError, match="expires_in"):
            tokens(json.loads(raw))


@pytest.mark.parametrize("expires_in, expires_at", [(0, 1000.0), (60, 1060.0), (1.5, 1001.5), ("3600", 4600.0),
                                                    ("0", 1000.0), (None, None)])
def test_valid_expires_in(expires_in, expires_at):
    assert tokens({"access_token": "at", "expires_in": expires_in}).expires_at == expires_at


def test_the_refresh_token_is_kept_when_the_answer_has_none():
    assert tokens({"access_token": "at"}, previous="old").refresh_token == "old"
    assert tokens({"access_token": "at", "refresh_token": None}, previous="old").refresh_token == "old"
    assert tokens({"access_token": "at", "refresh_token": "new"}, previous="old").refresh_token == "new"
    assert tokens({"access_token": "at"}).refresh_token is None
    for bad in ("", 5, ["rt"]):
        with pytest.raises(AuthorizationError, match="invalid 'refresh_token'"):
            tokens({"access_token": "at", "refresh_token": bad}, previous="old")


def test_scope_defaults_to_the_requested_one():
    assert tokens({"access_token": "at"}, requested_scope="a b").scope == "a b"
    assert tokens({"access_token": "at", "scope": None}, requested_scope="a b").scope == "a b"
    assert tokens({"access_token": "at", "scope": "a"}, requested_scope="a b").scope == "a"
    assert tokens({"access_token": "at"}, requested_scope=None).scope is None
    assert tokens({"access_token": "at", "scope": ""}, requested_scope="a").scopes == set()
    with pytest.raises(AuthorizationError, match="invalid 'scope'"):
        tokens({"access_token": "at", "scope": ["a"]})


def test_tokens_from_answer_uses_the_clock_without_now():
    import time

    before = time.time()
    got = tokens_from_answer(answer({"access_token": "at", "expires_in": 100}), requested_scope=None, issuer=None,
                             resource=None)
    assert before + 100 <= got.expires_at <= time.time() + 100


# -- Tokens / ClientInfo -------------------------------------------------------------------------


def test_expired_with_the_margin():
    t = Tokens("at", expires_at=1000.0)
    assert EXPIRY_MARGIN == 30.0
    assert not t.expired(now=969.9) and t.expired(now=970.0) and t.expired(now=2000.0)
    assert not t.expired(now=999.9, margin=0) and t.expired(now=1000.0, margin=0)
    assert t.expired(now=899.0, margin=101) and not t.expired(now=899.0, margin=100)
    assert not Tokens("at").expired(now=1e18)  # the server did not say: never by the clock


def test_a_short_lived_token_is_renewed_at_half_its_lifetime():
    # With the full 30 s margin a 10 s token would be expired from the start, and every
    # request would fetch a new one.
    short = tokens({"access_token": "at", "expires_in": 10}, now=1000.0)
    assert not short.expired(now=1000.0) and not short.expired(now=1004.9) and short.expired(now=1005.0)
    long = tokens({"access_token": "at", "expires_in": 3600}, now=1000.0)
    assert not long.expired(now=4569.9) and long.expired(now=4570.0)  # the usual margin
    assert tokens({"access_token": "at", "expires_in": 0}, now=1000.0).expired(now=1000.0)


def test_tokens_and_client_info_round_trip_through_dicts():
    t = Tokens("at", "DPoP", 5.0, "rt", "a b", "https://as", "https://rs/mcp", 1.0)
    data = t.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert Tokens.from_dict({**data, "unknown": 1}) == t
    c = ClientInfo("cid", "https://as", client_secret="s", auth_method="client_secret_post",
                   redirect_uris=["http://127.0.0.1/cb"], secret_expires_at=0, kind="registered")
    assert ClientInfo.from_dict({**c.to_dict(), "extra": True}) == c
    assert not c.secret_expired(now=1e18)  # RFC 7591: 0 means never
    assert ClientInfo("c", "i", secret_expires_at=100.0).secret_expired(now=100.0)
    assert not ClientInfo("c", "i", secret_expires_at=100.0).secret_expired(now=99.0)


@pytest.mark.parametrize("fields", [
    {"access_token": 5}, {"access_token": ""}, {"access_token": "a b"}, {"access_token": "caf\u00e9"},
    {"token_type": 1}, {"token_type": "MAC"}, {"expires_at": "soon"}, {"expires_at": True}, {"expires_at": float("nan")},
    {"issued_at": "x"}, {"refresh_token": 7}, {"refresh_token": ""}, {"scope": 5}, {"issuer": ["x"]},
    {"resource": 1},
])
def test_stored_tokens_of_the_wrong_types_are_refused(fields):
    # A store written by hand, by another program or damaged: such tokens
    # raised TypeError from expired() on every request (the transport
    # reported it as an answer it "could not read"), or were sent as
    # "Bearer 5". from_dict refuses them; the flow then ignores the entry.
    data = {**Tokens("at", expires_at=5.0, refresh_token="rt", issued_at=1.0).to_dict(), **fields}
    with pytest.raises((TypeError, ValueError)):
        Tokens.from_dict(data)


def test_stored_tokens_of_the_right_types_are_taken():
    assert Tokens.from_dict({"access_token": "at", "expires_at": 5, "issued_at": None}).expires_at == 5
    assert Tokens.from_dict({"access_token": "at", "token_type": "DPoP"}).token_type == "DPoP"


@pytest.mark.parametrize("fields", [
    {"client_id": 5}, {"client_id": ""}, {"issuer": None}, {"client_secret": 1}, {"auth_method": 2},
    {"redirect_uris": "http://x"}, {"redirect_uris": [1]}, {"secret_expires_at": "soon"},
    {"secret_expires_at": True}, {"kind": None},
])
def test_stored_client_registrations_of_the_wrong_types_are_refused(fields):
    data = {**ClientInfo("cid", "https://as", client_secret="s", secret_expires_at=10.0).to_dict(), **fields}
    with pytest.raises((TypeError, ValueError)):
        ClientInfo.from_dict(data)


def test_repr_redacts_secrets():
    t = Tokens("ACCESS-SECRET", refresh_token="REFRESH-SECRET", scope="read")
    for text in (repr(t), str(t), f"{t}", repr([t])):
        assert "ACCESS-SECRET" not in text and "REFRESH-SECRET" not in text
    assert "<redacted>" in repr(t) and "scope='read'" in repr(t) and "refresh_token=yes" in repr(t)
    c = ClientInfo("my-client", "https://as", client_secret="CLIENT-SECRET")
    assert "CLIENT-SECRET" not in repr(c) and "CLIENT-SECRET" not in str(c) and "my-client" in repr(c)
    assert "client_secret=None" in repr(ClientInfo("my-client", "https://as"))


# -- oauth_error -----------------------------------------------------------------------------------


def test_oauth_error_carries_error_description_and_status():
    err = oauth_error(answer({"error": "invalid_grant", "error_description": "code expired"}, 400), "the token request")
    assert type(err) is OAuthError and isinstance(err, AuthorizationError)
    assert (err.error, err.description, err.status) == ("invalid_grant", "code expired", 400)
    assert str(err) == "the token request failed with 'invalid_grant' (HTTP 400): code expired"


def test_oauth_error_cuts_a_long_description():
    err = oauth_error(answer({"error": "invalid_client", "error_description": "x" * 299 + "yz" + "w" * 1000}, 401),
                      "the token request")
    assert err.description == "x" * 299 + "y" and "z" not in str(err) and len(str(err)) < 400


def test_oauth_error_without_a_description():
    err = oauth_error(answer({"error": "invalid_client", "error_description": 5}, 401), "the token request")
    assert isinstance(err, OAuthError) and err.description is None and str(err).endswith("(HTTP 401)")


@pytest.mark.parametrize("body", [None, {}, {"error": ""}, {"error": 5}, {"message": "nope"}])
def test_a_non_oauth_error_body_is_a_plain_authorization_error(body):
    err = oauth_error(answer(body, 502), "the registration")
    assert type(err) is AuthorizationError
    assert str(err) == "the registration failed with HTTP 502 and no OAuth error in the answer"


# -- MemoryStorage ---------------------------------------------------------------------------------


def test_storages_are_token_storages(tmp_path):
    assert isinstance(MemoryStorage(), TokenStorage) and isinstance(FileStorage(tmp_path / "t.json"), TokenStorage)


def test_memory_storage_copies_in_and_out():
    storage = MemoryStorage()
    value = {"access_token": "at", "nested": {"scopes": ["a"]}}
    storage.save("k", value)
    value["nested"]["scopes"].append("changed-after-save")
    loaded = storage.load("k")
    assert loaded == {"access_token": "at", "nested": {"scopes": ["a"]}}
    loaded["nested"]["scopes"].append("changed-after-load")
    loaded["access_token"] = "x"
    assert storage.load("k") == {"access_token": "at", "nested": {"scopes": ["a"]}}
    assert storage.load("missing") is None
    storage.delete("k")
    storage.delete("k")  # deleting a missing key is fine
    assert storage.load("k") is None


def test_memory_storage_repr_shows_no_values():
    storage = MemoryStorage()
    storage.save("tokens x", {"access_token": "SECRET"})
    assert "SECRET" not in repr(storage) and "1 entries" in repr(storage)


def run_threads(count, target):
    """Start `count` threads on target(i) at once; re-raise the first failure."""
    barrier = threading.Barrier(count)
    errors = []

    def run(i):
        try:
            barrier.wait(timeout=10)
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]


def test_memory_storage_with_32_threads():
    storage = MemoryStorage()

    def work(i):
        for n in range(200):
            storage.save(f"own {i}", {"i": i, "n": n, "list": [i] * 5})
            assert storage.load(f"own {i}") == {"i": i, "n": n, "list": [i] * 5}
            storage.save("shared", {"writer": i, "same": [i, i]})
            shared = storage.load("shared")
            assert shared["same"] == [shared["writer"]] * 2  # never half of one write and half of another
            if n % 2:
                storage.delete(f"gone {i}")
            else:
                storage.save(f"gone {i}", {"n": n})

    run_threads(32, work)
    assert all(storage.load(f"own {i}") == {"i": i, "n": 199, "list": [i] * 5} for i in range(32))
    assert all(storage.load(f"gone {i}") is None for i in range(32))


# -- FileStorage -------------------------------------------------------------------------------------


def test_file_storage_writes_a_private_file_and_survives_reopening(tmp_path):
    path = tmp_path / "tokens.json"
    storage = FileStorage(path)
    storage.save("tokens https://mcp.example.com/mcp", {"access_token": "at", "scope": "a"})
    storage.save("client https://as", {"client_id": "c"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    reopened = FileStorage(str(path))
    assert reopened.load("tokens https://mcp.example.com/mcp") == {"access_token": "at", "scope": "a"}
    assert reopened.load("client https://as") == {"client_id": "c"}
    assert json.loads(path.read_text()) == {"client https://as": {"client_id": "c"},
                                            "tokens https://mcp.example.com/mcp": {"access_token": "at", "scope": "a"}}
    reopened.delete("client https://as")
    assert FileStorage(path).load("client https://as") is None
    assert "tokens.json" in repr(storage)


def test_file_storage_tightens_a_file_someone_made_readable(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    FileStorage(path).save("k", {"v": 1})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_file_storage_replaces_atomically_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "tokens.json"
    storage = FileStorage(path)
    for n in range(5):
        storage.save(f"k{n}", {"n": n})
    assert os.listdir(tmp_path) == ["tokens.json"]
    before = path.read_bytes()
    with pytest.raises(TypeError):
        storage.save("bad", {"not json": object()})  # fails half way through writing
    assert os.listdir(tmp_path) == ["tokens.json"] and path.read_bytes() == before
    assert storage.load("k4") == {"n": 4} and storage.load("bad") is None


def test_file_storage_creates_its_folder_private(tmp_path):
    path = tmp_path / "config" / "myapp" / "tokens.json"
    FileStorage(path).save("k", {"v": 1})
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert FileStorage(path).load("k") == {"v": 1}


def test_file_storage_expands_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    storage = FileStorage("~/tokens.json")
    assert storage.path == str(tmp_path / "tokens.json")
    storage.save("k", {"v": 1})
    assert (tmp_path / "tokens.json").exists()


def test_file_storage_missing_file_and_missing_keys(tmp_path):
    path = tmp_path / "tokens.json"
    storage = FileStorage(path)
    assert storage.load("k") is None
    storage.delete("k")  # no file, no key: fine, and nothing is written
    assert not path.exists()
    storage.save("k", {"v": 1})
    storage.delete("other")
    assert storage.load("k") == {"v": 1}


@pytest.mark.parametrize("content, problem", [("{not json", "cannot be read"), ("[1, 2]", "does not hold a JSON object"),
                                              ('"text"', "does not hold a JSON object"), ("\xff\xfe", "cannot be read"),
                                              # Deeper than the parser goes: it was a RecursionError.
                                              ("[" * 200_000, "cannot be read")])
def test_file_storage_refuses_a_corrupt_file_naming_it(tmp_path, content, problem):
    path = tmp_path / "tokens.json"
    path.write_bytes(content.encode("latin-1"))
    storage = FileStorage(path)
    for action in (lambda: storage.load("k"), lambda: storage.save("k", {"v": 1}), lambda: storage.delete("k")):
        with pytest.raises(AuthorizationError, match=problem) as caught:
            action()
        assert str(path) in str(caught.value)
    assert path.read_bytes() == content.encode("latin-1")  # never overwritten


def test_file_storage_refuses_a_named_pipe_without_waiting_for_a_writer(tmp_path):
    # Opening a FIFO for reading waits for a writer: a pipe at the path held
    # every load (and so every request needing a token) for ever.
    path = tmp_path / "tokens.json"
    os.mkfifo(path, 0o600)
    storage = FileStorage(path)
    errors: list[BaseException] = []

    def load() -> None:
        try:
            storage.load("k")
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=load)
    thread.start()
    thread.join(5)
    if thread.is_alive():
        os.close(os.open(path, os.O_WRONLY))  # release it, then fail
        thread.join(5)
        pytest.fail("load() waited for a writer of the named pipe")
    [error] = errors
    assert isinstance(error, AuthorizationError) and "not a regular file" in str(error)
    with pytest.raises(AuthorizationError, match="not a regular file"):
        storage.save("k", {"v": 1})
    assert stat.S_ISFIFO(os.lstat(path).st_mode)  # never replaced


def test_a_corrupt_file_error_says_what_to_do(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("{not json")
    with pytest.raises(AuthorizationError, match="remove it") as caught:
        FileStorage(path).load("k")
    assert str(path) in str(caught.value)


def test_file_storage_ignores_a_value_that_is_not_an_object(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"k": 5, "j": {"ok": True}}))
    storage = FileStorage(path)
    assert storage.load("k") is None and storage.load("j") == {"ok": True}


def test_file_storage_with_16_threads_loses_no_write(tmp_path):
    storage = FileStorage(tmp_path / "tokens.json")

    def work(i):
        for n in range(5):
            storage.save(f"k{i}-{n}", {"i": i, "n": n})

    run_threads(16, work)
    data = json.loads((tmp_path / "tokens.json").read_text())
    assert data == {f"k{i}-{n}": {"i": i, "n": n} for i in range(16) for n in range(5)}
    assert os.listdir(tmp_path) == ["tokens.json"]


# -- AuthHTTP --------------------------------------------------------------------------------------


class TinyServer:
    """A stdlib HTTP/1.1 server answering each path with a canned raw answer; records request lines."""

    def __init__(self, routes):
        self.routes = routes
        self.seen = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                owner.seen.append((self.command, self.path, dict(self.headers), body))
                self.close_connection = True
                owner.routes[self.path](self)

            do_GET = do_POST = handle_any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def send(status, headers, body):
    def reply(h):
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name, value)
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(body)
    return reply


def chunked(chunks):
    def reply(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.send_header("Connection", "close")
        h.end_headers()
        for chunk in chunks:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        h.wfile.write(b"0\r\n\r\n")
    return reply


@pytest.fixture
def tiny():
    servers = []

    def make(routes):
        server = TinyServer(routes)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def test_auth_http_reads_a_json_object_and_lowercases_headers(tiny):
    server = tiny({"/meta": send(200, {"Content-Type": "application/json", "X-Thing": "1"}, b'{"issuer": "x"}'),
                   "/token": send(400, {"Content-Type": "application/json"}, b'{"error": "invalid_grant"}')})
    http_ = AuthHTTP(timeout=5)
    got = http_.get(server.url("/meta"))
    assert (got.status, got.ok, got.json, got.headers["x-thing"], got.url) == (200, True, {"issuer": "x"}, "1",
                                                                               server.url("/meta"))
    bad = http_.post(server.url("/token"), form={"grant_type": "client_credentials", "scope": "a b"})
    assert (bad.status, bad.ok, bad.json) == (400, False, {"error": "invalid_grant"})
    method, _, headers, body = server.seen[1]
    assert method == "POST" and headers["Accept"] == "application/json"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded" and body == b"grant_type=client_credentials&scope=a+b"
    http_.close()


@pytest.mark.parametrize("body", [b"<html>oops</html>", b"[1, 2]", b'"text"', b"", b"\xff\xfe\x00", b"[" * 100_000])
def test_auth_http_a_body_that_is_not_a_json_object_gives_json_none(tiny, body):
    # The last one nests deeper than the JSON parser's stack, well within the size limit.
    server = tiny({"/x": send(200, {"Content-Type": "application/json", "Content-Length": str(len(body))}, body)})
    got = AuthHTTP(timeout=5).get(server.url("/x"))
    assert got.status == 200 and got.json is None


def test_auth_http_refuses_a_declared_length_over_the_limit(tiny):
    body = b'{"a": "' + b"x" * 2000 + b'"}'
    server = tiny({"/big": send(200, {"Content-Type": "application/json", "Content-Length": str(len(body))}, body),
                   "/fits": send(200, {"Content-Type": "application/json", "Content-Length": "9"}, b'{"a": 12}')})
    http_ = AuthHTTP(timeout=5, max_bytes=1000)
    with pytest.raises(AuthorizationError, match="larger than 1000 bytes") as caught:
        http_.get(server.url("/big"))
    assert server.url("/big") in str(caught.value)
    assert http_.get(server.url("/fits")).json == {"a": 12}


def test_auth_http_refuses_a_chunked_body_over_the_limit(tiny):
    server = tiny({"/endless": chunked([b'{"a": "'] + [b"x" * 300] * 10 + [b'"}']),
                   "/small": chunked([b'{"a":', b' 1}'])})
    http_ = AuthHTTP(timeout=5, max_bytes=1000)
    with pytest.raises(AuthorizationError, match="larger than 1000 bytes"):
        http_.get(server.url("/endless"))
    assert http_.get(server.url("/small")).json == {"a": 1}


def test_auth_http_ignores_a_content_length_that_is_not_ascii_digits(tiny):
    # "²".isdigit() is True but int("²") fails: the header must not crash the read.
    server = tiny({"/odd": send(200, {"Content-Type": "application/json", "Content-Length": "\xb2"}, b'{"a": 1}')})
    assert AuthHTTP(timeout=5).get(server.url("/odd")).json == {"a": 1}


def test_auth_http_never_follows_redirects(tiny):
    server = tiny({"/moved": send(302, {"Location": "/elsewhere", "Content-Length": "0"}, b""),
                   "/elsewhere": send(200, {"Content-Type": "application/json", "Content-Length": "2"}, b"{}")})
    got = AuthHTTP(timeout=5).post(server.url("/moved"), form={"a": "b"})
    assert got.status == 302 and got.headers["location"] == "/elsewhere" and got.json is None
    assert [(method, path) for method, path, _, _ in server.seen] == [("POST", "/moved")]


def test_auth_http_connection_refused_names_no_form_value():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/token"
    with pytest.raises(AuthorizationError) as caught:
        AuthHTTP(timeout=5).post(url, form={"client_secret": "TOP-SECRET-VALUE", "code": "CODE-VALUE"})
    message = str(caught.value)
    assert message == f"POST {url} failed: ConnectionError"
    assert "TOP-SECRET" not in message and "CODE-VALUE" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
