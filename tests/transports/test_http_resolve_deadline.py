"""A DNS resolver that hangs cannot hold the MCP HTTP transport past a deadline.

The pool dials a new connection when it has no idle one, and a dial starts
by resolving the host's name (a proxy's, when one carries the requests).
`socket.getaddrinfo` takes no timeout; here it is replaced by the fake of
`tests.auth.test_resolve_deadline` (names under `HANGING` block until the
test releases them, so no query leaves the machine), which also answers
the names of `answers` with their address, until the test takes one out:
a server whose name stops resolving while a client uses it.

Each operation runs on a thread of the test (`Bounded`), so a regression
fails at its bound instead of hanging the run; the bound is the
operation's own deadline plus `SLACK`, far below `HANG`.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

import pytest

import mcp_sync
from mcp_sync.errors import ConnectError, ConnectionClosed, McpError
from mcp_sync.testing import HTTPServer, demo_server
from mcp_sync.transports import pool
from tests.auth.test_resolve_deadline import HANG, HANGING, SLACK, Bounded, HangingResolver, resolver_threads
from tests.helpers import wait_until
from tests.servers.forward_proxy import ForwardProxy

ERAS = ["2026-07-28", "2025-11-25"]


class Resolver(HangingResolver):
    """`HangingResolver`, answering the names of `answers` (name -> address
    literal) as that address, counted in `answered`, while they are there."""

    def __init__(self, real):
        super().__init__(real)
        self.answers: dict[str, str] = {}
        self.answered: list[str] = []

    def __call__(self, host, port, *args, **kwargs):
        address = self.answers.get(host)
        if address is None:
            return super().__call__(host, port, *args, **kwargs)
        with self.lock:
            self.answered.append(host)
        return self.real(address, port, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch):
    fake = Resolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    try:
        yield fake
    finally:
        # No thread outlives the test: an abandoned lookup ends once the
        # resolver answers, which releasing it makes happen now.
        fake.release.set()
        for thread in resolver_threads():
            thread.join(SLACK)
        assert not resolver_threads(), "a lookup thread still runs after the resolver answered"


@pytest.fixture
def httpd():
    with HTTPServer(demo_server()) as server:
        yield server


@pytest.fixture
def every_dial(monkeypatch):
    """Every exchange dials: an idle connection counts as idle too long."""
    monkeypatch.setattr(pool, "MAX_IDLE_SECONDS", -1.0)


def on_name(url: str, host: str) -> str:
    """`url` with its host replaced by `host`."""
    parts = urlsplit(url)
    return parts._replace(netloc=f"{host}:{parts.port}").geturl()


def assert_not_resolved_in_time(error: BaseException | None, host: str) -> None:
    # The transport's error for a connection it could not open: a
    # ConnectError, naming the name and where to look.
    assert isinstance(error, ConnectError) and isinstance(error, McpError), repr(error)
    message = str(error)
    assert host in message and "did not resolve within" in message and "DNS resolver" in message, message


# -- connect() ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("options, bound", [
    ({"protocol": "2025-11-25", "timeout": 1.0}, 1.0),
    ({"probe_timeout": 1.0, "timeout": 1.0}, 1.0),
    ({"protocol": "2025-11-25", "timeout": HANG, "connect_timeout": 0.5}, 0.5),
], ids=["initialize-era", "negotiated", "connect_timeout"])
def test_connect_to_a_name_that_never_resolves_ends_by_its_timeout(resolver, options, bound):
    # Before: the dial waited for the resolver (HANG seconds here, tens of
    # seconds on a broken one), whatever the timeout. (The negotiated case
    # passes probe_timeout too: the probe is bounded by it, 10 s unless
    # told, not by timeout.)
    host = f"connect{HANGING}"
    run = Bounded(lambda: mcp_sync.connect(f"http://{host}:1/mcp", **options).close())
    error, took = run.outcome(bound + SLACK)
    assert_not_resolved_in_time(error, host)
    assert took < bound + SLACK
    if "connect_timeout" in options:  # the setting that ended it is named
        assert "did not resolve within connect_timeout=0.5 s" in str(error)
    # One lookup, however many attempts waited for it.
    assert resolver.calls[host] == 1 and len(resolver_threads()) == 1


# -- a call on a client whose pool must dial ------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
def test_a_call_that_must_dial_ends_by_its_timeout(resolver, httpd, every_dial, protocol):
    host = f"call{HANGING}"
    resolver.answers[host] = "127.0.0.1"
    with mcp_sync.connect(on_name(httpd.url, host), protocol=protocol, timeout=5) as client:
        assert client.call_tool("echo", {"text": "a"}).text == "a"
        del resolver.answers[host]  # the resolver stops answering
        timeout = 1.0
        run = Bounded(lambda: client.call_tool("echo", {"text": "b"}, timeout=timeout))
        error, took = run.outcome(timeout + SLACK)
        assert_not_resolved_in_time(error, host)
        assert took < timeout + SLACK
        assert resolver.calls[host] == 1
        # Once the resolver answers again, so does the client.
        resolver.answers[host] = "127.0.0.1"
        resolver.release.set()  # the abandoned lookup ends (refused), and with it its entry
        assert wait_until(lambda: not resolver_threads())
        assert client.call_tool("echo", {"text": "c"}).text == "c"


def test_close_stops_a_dial_waiting_for_the_resolver(resolver, httpd, every_dial):
    # A dial waiting for the resolver ends at once when the exchange is
    # aborted (here by close() from another thread), not at its deadline.
    host = f"close{HANGING}"
    resolver.answers[host] = "127.0.0.1"
    client = mcp_sync.connect(on_name(httpd.url, host), protocol="2026-07-28", connect_timeout=HANG)
    try:
        assert client.call_tool("echo", {"text": "a"}).text == "a"
        del resolver.answers[host]
        run = Bounded(lambda: client.call_tool("echo", {"text": "b"}, timeout=HANG))
        assert wait_until(lambda: resolver.calls[host] == 1)
    finally:
        closing = time.monotonic()
        client.close()
    error, _ = run.outcome(SLACK)
    assert isinstance(error, ConnectionClosed), repr(error)
    assert time.monotonic() - closing < SLACK


# -- what is looked up on a thread -------------------------------------------------------------------


def test_only_names_are_looked_up_on_a_thread(resolver, httpd, every_dial, monkeypatch):
    # The hot path costs no thread for an address literal (the pool dials
    # only when it has no idle connection; here every exchange dials). A
    # name, `localhost` included, is looked up on a thread at each dial.
    from mcp_sync.transports import resolve

    keys: list[object] = []
    within = resolve.within

    def counted(key, *args, **kwargs):
        keys.append(key)
        return within(key, *args, **kwargs)

    monkeypatch.setattr(resolve, "within", counted)
    started = threading.Thread.start
    named: list[str] = []

    def start(self):
        named.append(self.name)
        started(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    for protocol in ERAS:
        with mcp_sync.connect(httpd.url, protocol=protocol) as client:
            for text in "abc":
                assert client.call_tool("echo", {"text": text}).text == text
    assert keys == [] and not [name for name in named if name.startswith("mcp-sync-resolve")]
    port = urlsplit(httpd.url).port
    with mcp_sync.connect(on_name(httpd.url, "localhost"), protocol="2026-07-28") as client:
        assert client.call_tool("echo", {"text": "d"}).text == "d"
    assert keys and set(keys) == {("mcp", "localhost", port)}
    assert not resolver.calls


# -- proxies ---------------------------------------------------------------------------------------


@pytest.fixture
def no_proxy_environment(monkeypatch):
    for name in ["http_proxy", "https_proxy", "all_proxy", "no_proxy"]:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_through_a_proxy_the_client_resolves_only_the_proxys_name(resolver, httpd, no_proxy_environment):
    # The origin's name is the proxy's to resolve: the client never asks
    # its resolver for it, so a name that hangs here costs nothing.
    host = f"origin{HANGING}"
    with ForwardProxy(hosts={host: "127.0.0.1"}) as proxy:
        with mcp_sync.connect(on_name(httpd.url, host), proxy=proxy.url(), timeout=5) as client:
            assert client.call_tool("echo", {"text": "via"}).text == "via"
    assert not resolver.calls


def test_a_proxy_whose_name_never_resolves_ends_by_the_timeout(resolver, httpd, no_proxy_environment):
    host = f"proxy{HANGING}"
    with ForwardProxy() as proxy:
        timeout = 1.0
        run = Bounded(lambda: mcp_sync.connect(httpd.url, proxy=f"http://{host}:{proxy.port}", timeout=timeout,
                                               protocol="2025-11-25").close())
        error, took = run.outcome(timeout + SLACK)
    assert_not_resolved_in_time(error, host)
    assert "the proxy" in str(error) and took < timeout + SLACK
    assert resolver.calls[host] == 1


# -- the bound on lookups ------------------------------------------------------------------------------


def test_past_the_cap_a_dial_fails_at_once_without_a_thread(resolver, monkeypatch):
    # The cap is shared with the authorization's lookups: a resolver that
    # holds that many names is not answering, and more time would not help.
    from mcp_sync.transports import resolve

    monkeypatch.setattr(resolve, "MAX_PENDING", 1)
    first = f"first{HANGING}"
    error, _ = Bounded(lambda: mcp_sync.connect(f"http://{first}:1/mcp", timeout=0.5, protocol="2025-11-25")
                       ).outcome(0.5 + SLACK)
    assert_not_resolved_in_time(error, first)
    assert resolve.pending() == 1
    second = f"second{HANGING}"
    error, took = Bounded(lambda: mcp_sync.connect(f"http://{second}:1/mcp", timeout=HANG, protocol="2025-11-25")
                          ).outcome(SLACK)
    assert isinstance(error, ConnectError), repr(error)
    assert second in str(error) and "was not looked up" in str(error) and "more time would not help" in str(error)
    assert took < SLACK and second not in resolver.calls and len(resolver_threads()) == 1
