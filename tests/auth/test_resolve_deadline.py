"""A DNS resolver that hangs cannot hold an authorization past its deadline.

`socket.getaddrinfo` takes no timeout. Here it is replaced by one that,
for names under `HANGING`, blocks until the test releases it (at most
`HANG` seconds, then fails as a resolver giving up would): no query
leaves the machine, and the servers are the test servers on 127.0.0.1.
Every other name goes to the real resolver.

Each operation runs on a thread of the test (`Bounded`), so a regression
fails at its bound instead of hanging the run; the bound is the
operation's own deadline plus `SLACK`, far below `HANG`.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time

import pytest

import mcp_sync
from mcp_sync.auth import ClientCredentials, HeadlessRedirect, OAuth
from mcp_sync.errors import AuthorizationError, McpError
from mcp_sync.testing.auth import AuthServer, ProtectedMCP
from tests.helpers import wait_until

#: Names the fake resolver never answers (`*.localhost`: plain HTTP is
#: allowed to them, and were one ever resolved, it would be loopback).
HANGING = ".hangs.localhost"
#: How long the fake resolver holds a hanging name before failing.
HANG = 60.0
#: What a bounded operation may take past its own deadline (threads, a
#: loaded machine): generous, and still far below HANG.
SLACK = 10.0


class HangingResolver:
    """`socket.getaddrinfo` for the test: names under `HANGING` block on
    `release`, counted in `calls`; the others resolve for real."""

    def __init__(self, real):
        self.real = real
        self.release = threading.Event()
        self.calls: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def __call__(self, host, port, *args, **kwargs):
        if isinstance(host, str) and host.endswith(HANGING):
            with self.lock:
                self.calls[host] += 1
            self.release.wait(HANG)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return self.real(host, port, *args, **kwargs)


def resolver_threads() -> list[threading.Thread]:
    """The lookup threads of hanging names (a lookup of a name that resolves
    ends by itself, and may still be finishing from an earlier test)."""
    return [t for t in threading.enumerate() if t.name.startswith("mcp-sync-resolve") and t.name.endswith(HANGING)]


@pytest.fixture
def hanging(monkeypatch):
    fake = HangingResolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    yield fake
    # No thread outlives the test: the abandoned lookups end once the
    # resolver answers, which releasing it makes happen now.
    fake.release.set()
    for thread in resolver_threads():
        thread.join(SLACK)
        assert not thread.is_alive(), f"{thread.name} still runs after the resolver answered"


class Bounded:
    """Run `fn` on a thread; `outcome(bound)` waits at most `bound` seconds
    and returns (its exception or None, the seconds it took)."""

    def __init__(self, fn):
        self.error: BaseException | None = None
        self.took: float | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self, fn):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - the test judges it
            self.error = exc
        self.took = time.monotonic() - self._started

    def outcome(self, bound: float) -> tuple[BaseException | None, float]:
        self._thread.join(bound)
        assert not self._thread.is_alive(), f"still running after {bound:g} s (it should have ended by then)"
        assert self.took is not None
        return self.error, self.took


def connect_and_call(url: str, auth) -> None:
    with mcp_sync.connect(url, auth=auth, timeout=2) as client:
        client.call_tool("echo", {"text": "hi"})


def names_hanging_token_endpoint(auth: AuthServer, label: str) -> str:
    """Make `auth`'s metadata name a token endpoint whose host never resolves."""
    host = f"{label}{HANGING}"
    auth.metadata_override = {**auth.metadata, "token_endpoint": f"http://{host}:{auth.url.rsplit(':', 1)[1]}/token"}
    return host


# -- the address check (NetworkPolicy) ---------------------------------------------------------------


def test_the_address_check_ends_by_the_providers_timeout(serve, hanging):
    # Before: the check waited for the resolver (HANG seconds here; tens of
    # seconds on a broken one), whatever the provider's timeout.
    auth = serve(AuthServer())
    mcp = serve(ProtectedMCP(auth))
    host = names_hanging_token_endpoint(auth, "check")
    timeout = 1.0
    run = Bounded(lambda: connect_and_call(mcp.url, OAuth(redirect=HeadlessRedirect(), timeout=timeout)))
    error, took = run.outcome(timeout + SLACK)
    assert isinstance(error, AuthorizationError) and isinstance(error, McpError), error
    message = str(error)
    assert "did not resolve within 1 s" in message and host in message and "DNS resolver" in message
    assert took < timeout + SLACK
    assert hanging.calls[host] == 1
    # Refused when the metadata was read: nothing was registered or requested.
    assert [r.path for r in auth.requests] == ["/.well-known/oauth-authorization-server"]


def test_the_address_check_ends_by_the_authorization_timeout(serve, hanging):
    auth = serve(AuthServer(clients={"svc": "s3cret"}))
    mcp = serve(ProtectedMCP(auth))
    host = names_hanging_token_endpoint(auth, "budget")
    budget = 1.5
    grant = ClientCredentials("svc", "s3cret", authorization_server=auth.issuer, timeout=30,
                              authorization_timeout=budget)
    error, took = Bounded(lambda: connect_and_call(mcp.url, grant)).outcome(budget + SLACK)
    assert isinstance(error, AuthorizationError), error
    assert "authorization_timeout" in str(error) and host in str(error)
    assert took < budget + SLACK


def test_a_hanging_name_holds_one_thread_however_often_it_is_checked(hanging):
    from mcp_sync.transports import resolve as _resolve
    from mcp_sync.auth.network import NetworkPolicy

    policy = NetworkPolicy(time_left=lambda what: (0.5, None), proxy_for=lambda url: None)
    url = f"https://same{HANGING}/token"

    def check():
        policy.check(url, named_by="https://mcp.example.com/mcp", what="the token_endpoint")

    runs = [Bounded(check) for _ in range(4)]
    for run in runs:
        error, _ = run.outcome(0.5 + SLACK)
        assert isinstance(error, AuthorizationError) and "did not resolve within 0.5 s" in str(error)
    # Abandoned, not stopped: the one lookup still waits for the resolver.
    assert hanging.calls[f"same{HANGING}"] == 1
    assert len(resolver_threads()) == 1 and _resolve.pending() == 1
    assert all(thread.daemon for thread in resolver_threads())
    # A check after the resolver answered asks it anew (no answer is kept).
    hanging.release.set()
    for thread in resolver_threads():
        thread.join(SLACK)
    assert _resolve.pending() == 0
    with pytest.raises(AuthorizationError, match="cannot resolve"):
        check()
    assert hanging.calls[f"same{HANGING}"] == 2


def test_past_the_cap_a_lookup_fails_at_once_without_a_thread(hanging, monkeypatch):
    from mcp_sync.transports import resolve as _resolve
    from mcp_sync.auth.network import NetworkPolicy

    monkeypatch.setattr(_resolve, "MAX_PENDING", 2)
    policy = NetworkPolicy(time_left=lambda what: (0.2, None), proxy_for=lambda url: None)
    for n in range(2):
        with pytest.raises(AuthorizationError, match="did not resolve within"):
            policy.check(f"https://n{n}{HANGING}/token", named_by="https://mcp.example.com/mcp", what="x")
    assert _resolve.pending() == 2
    with pytest.raises(AuthorizationError, match="2 name lookups are still waiting for the system.s resolver") as info:
        policy.check(f"https://third{HANGING}/token", named_by="https://mcp.example.com/mcp", what="x")
    # Refused at once, and says so: not "did not resolve within 0.2 s", and
    # not "give the token provider more time", which would not help.
    assert "was not looked up" in str(info.value) and "more time would not help" in str(info.value)
    assert "did not resolve within" not in str(info.value)
    assert f"third{HANGING}" not in hanging.calls and len(resolver_threads()) == 2
    # A request's own lookup is refused at once too, not after its timeout.
    from mcp_sync.auth._http import AuthHTTP

    error, took = Bounded(lambda: AuthHTTP(timeout=HANG).get(f"http://fourth{HANGING}:1/x")).outcome(SLACK)
    assert isinstance(error, AuthorizationError) and "was not sent" in str(error), error
    assert "2 name lookups are still waiting" in str(error)
    assert f"fourth{HANGING}" not in hanging.calls and len(resolver_threads()) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_child_forgets_the_parents_lookups(hanging):
    from mcp_sync.transports import resolve as _resolve
    from mcp_sync.auth.network import NetworkPolicy

    policy = NetworkPolicy(time_left=lambda what: (0.2, None), proxy_for=lambda url: None)
    with pytest.raises(AuthorizationError):
        policy.check(f"https://parent{HANGING}/token", named_by="https://mcp.example.com/mcp", what="x")
    assert _resolve.pending() == 1
    child = os.fork()
    if child == 0:  # the child: its parent's lookup has no thread here
        os._exit(0 if _resolve.pending() == 0 else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# -- the requests themselves (no address check: allow_private_network) ----------------------------


def test_a_request_whose_host_never_resolves_ends_by_its_timeout(serve, hanging):
    # Before: the watchdog bounded a request's sockets only, and urllib3
    # resolved the name before there was one: the request waited HANG
    # seconds although its timeout was 1 s.
    auth = serve(AuthServer(clients={"svc": "s3cret"}))
    mcp = serve(ProtectedMCP(auth))
    host = names_hanging_token_endpoint(auth, "request")
    timeout = 1.0
    grant = ClientCredentials("svc", "s3cret", authorization_server=auth.issuer, timeout=timeout,
                              allow_private_network=True)
    error, took = Bounded(lambda: connect_and_call(mcp.url, grant)).outcome(timeout + SLACK)
    assert isinstance(error, AuthorizationError), error
    message = str(error)
    assert "did not complete within 1 s" in message and host in message and "DNS resolver" in message
    assert took < timeout + SLACK
    assert hanging.calls[host] == 1
    assert auth.token_requests == 0


def test_requests_to_names_that_resolve_still_work(serve, hanging):
    # The resolution on a thread changes nothing for a name that resolves:
    # `localhost` goes through it (an address literal does not).
    auth = serve(AuthServer(clients={"svc": "s3cret"}))
    mcp = serve(ProtectedMCP(auth))
    auth.metadata_override = {**auth.metadata, "token_endpoint": auth.token_endpoint.replace("127.0.0.1", "localhost")}
    grant = ClientCredentials("svc", "s3cret", authorization_server=auth.issuer)
    with mcp_sync.connect(mcp.url, auth=grant) as client:
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"
    assert auth.token_requests == 1
    assert not hanging.calls


def test_an_interrupt_as_a_lookup_thread_starts_is_for_its_caller_only(hanging, monkeypatch):
    # A Ctrl-C inside `Thread.start()` once the thread runs: the caller gets
    # it; the lookup goes on under its one entry, and a second caller for
    # the name shares it (it gets the lookup's own outcome, not the
    # interrupt), so the name still holds one thread.
    from mcp_sync.transports import resolve as _resolve

    start = threading.Thread.start

    def start_then_interrupt(self):
        start(self)
        if self.name.startswith("mcp-sync-resolve"):
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_interrupt)
    name = f"ki{HANGING}"
    with pytest.raises(KeyboardInterrupt):
        _resolve.within("k", lambda: socket.getaddrinfo(name, 443), time.monotonic() + HANG, name)
    monkeypatch.setattr(threading.Thread, "start", start)
    assert _resolve.pending() == 1 and len(resolver_threads()) == 1
    second = Bounded(lambda: _resolve.within("k", lambda: socket.getaddrinfo(name, 443), time.monotonic() + HANG,
                                             name))
    assert wait_until(lambda: hanging.calls[name] == 1)
    hanging.release.set()
    error, took = second.outcome(SLACK)
    assert isinstance(error, socket.gaierror), error  # the resolver's answer, not a KeyboardInterrupt
    assert hanging.calls[name] == 1 and wait_until(lambda: _resolve.pending() == 0)


def test_a_lookup_whose_thread_cannot_start_is_a_resolution_failure(hanging, monkeypatch):
    from mcp_sync.transports import resolve as _resolve
    from mcp_sync.auth.network import NetworkPolicy

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    policy = NetworkPolicy(time_left=lambda what: (5.0, None), proxy_for=lambda url: None)
    with pytest.raises(AuthorizationError, match="no thread could be started"):
        policy.check(f"https://nothread{HANGING}/token", named_by="https://mcp.example.com/mcp", what="x")
    assert _resolve.pending() == 0
