"""Tests of `mcp_sync.auth.redirect`: the loopback listener facing what else
reaches its port (idle connections, trickled heads, junk, stale callbacks)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests

from mcp_sync.auth import LoopbackRedirect
from mcp_sync.errors import AuthorizationError
from tests.helpers import wait_until

AUTHORIZATION_URL = "https://as.example.com/authorize?client_id=c&state=the-state&response_type=code"


class Waiting:
    """`LoopbackRedirect.authorize()` running on a thread: its result (or
    error) and how long it took; `ready` once the listener is up."""

    def __init__(self, redirect: LoopbackRedirect, url: str = AUTHORIZATION_URL) -> None:
        self.ready = threading.Event()
        self.result: str | None = None
        self.error: BaseException | None = None
        self.took = 0.0
        # `show` is called once the listener is bound, before the wait.
        redirect.show = lambda shown: self.ready.set()
        self._redirect = redirect
        self._url = url
        self.thread = threading.Thread(target=self._run, name="test-authorize")
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self.result = self._redirect.authorize(self._url)
        except BaseException as exc:  # reported by the test
            self.error = exc
        self.took = time.monotonic() - started


def idle_connection(port: int) -> socket.socket:
    """A connection that sends nothing, as a browser's preconnect does."""
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def test_an_idle_connection_does_not_hold_the_callback_behind_it():
    redirect = LoopbackRedirect(open_browser=False, timeout=10)
    waiting = Waiting(redirect)
    with idle_connection(redirect.port), idle_connection(redirect.port):
        answer = requests.get(redirect.redirect_uri + "?code=c1&state=the-state", timeout=5)
        waiting.thread.join(5)
    assert answer.status_code == 200 and "close this tab" in answer.text
    assert not waiting.thread.is_alive() and waiting.error is None
    assert waiting.result == redirect.redirect_uri + "?code=c1&state=the-state"


def test_the_timeout_holds_with_an_idle_or_trickling_connection_open():
    redirect = LoopbackRedirect(open_browser=False, timeout=1)
    waiting = Waiting(redirect)
    with idle_connection(redirect.port), idle_connection(redirect.port) as trickle:
        trickle.sendall(b"GET /callback?code=")
        deadline = time.monotonic() + 10
        while waiting.thread.is_alive() and time.monotonic() < deadline:
            trickle.sendall(b"x")  # one byte at a time, never a whole head
            waiting.thread.join(0.1)
    assert not waiting.thread.is_alive()
    assert isinstance(waiting.error, AuthorizationError) and "no redirect reached" in str(waiting.error)
    assert waiting.took < 5  # 1 s asked for; before, it waited until the idle connection closed


@pytest.mark.parametrize("stray", ["?code=old&state=a-stale-state", "", "?code=c-without-state",
                                   "?state=the-state&state=other"])
def test_a_callback_of_another_authorization_does_not_end_this_one(stray):
    # A tab left from an earlier authorization, or any local program, reaches
    # the port first: that answer is not this authorization's, and the
    # person's real callback must still be taken.
    redirect = LoopbackRedirect(open_browser=False, timeout=10)
    waiting = Waiting(redirect)
    refused = requests.get(redirect.redirect_uri + stray, timeout=5)
    assert refused.status_code == 400 and waiting.thread.is_alive()
    answer = requests.get(redirect.redirect_uri + "?code=c1&state=the-state&iss=x", timeout=5)
    waiting.thread.join(5)
    assert answer.status_code == 200 and waiting.error is None
    assert waiting.result == redirect.redirect_uri + "?code=c1&state=the-state&iss=x"


def test_junk_on_the_port_is_answered_and_the_wait_goes_on():
    redirect = LoopbackRedirect(open_browser=False, timeout=10)
    waiting = Waiting(redirect)
    with socket.create_connection(("127.0.0.1", redirect.port), timeout=5) as junk:
        junk.sendall(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\0" * 64 + b"\r\n\r\n")  # a TLS hello
        assert junk.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", redirect.port), timeout=5) as huge:
        try:
            huge.sendall(b"GET /callback?" + b"a" * 200_000)  # a head that never ends, past any sane size
            assert huge.recv(100).startswith(b"HTTP/1.1 431")
        except ConnectionError:
            pass  # closed while we still sent: refused all the same
    assert requests.post(redirect.redirect_uri + "?code=c&state=the-state", timeout=5).status_code == 405
    assert requests.get(f"http://127.0.0.1:{redirect.port}/favicon.ico", timeout=5).status_code == 404
    assert waiting.thread.is_alive()
    answer = requests.get(redirect.redirect_uri + "?code=c1&state=the-state", timeout=5)
    waiting.thread.join(5)
    assert answer.status_code == 200 and waiting.result == redirect.redirect_uri + "?code=c1&state=the-state"


def test_an_authorization_url_without_state_takes_the_first_callback():
    redirect = LoopbackRedirect(open_browser=False, timeout=10)
    waiting = Waiting(redirect, "https://as.example.com/authorize?client_id=c")
    answer = requests.get(redirect.redirect_uri + "?code=c1", timeout=5)
    waiting.thread.join(5)
    assert answer.status_code == 200 and waiting.result == redirect.redirect_uri + "?code=c1"


def test_no_socket_or_thread_outlives_the_wait():
    redirect = LoopbackRedirect(open_browser=False, timeout=10)
    before = set(threading.enumerate())
    waiting = Waiting(redirect)
    with idle_connection(redirect.port) as idle:
        requests.get(redirect.redirect_uri + "?code=c1&state=the-state", timeout=5)
        waiting.thread.join(5)
        idle.settimeout(5)
        assert idle.recv(1) == b""  # the listener closed the idle connection as it ended
    assert [t for t in threading.enumerate() if t not in before] == []
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", redirect.port)) != 0


def test_a_connection_dropped_for_a_new_one_in_the_same_batch_is_not_read(monkeypatch):
    # The 33rd connection closes the oldest: when that one's bytes came in
    # the same `select()` as the new connection, the loop read the closed
    # socket and `ValueError` (an fd of -1) escaped the wait, closing the
    # port on the person's real redirect. Each `select()` here waits for
    # the test's go, so the batch is the one the test arranged.
    import selectors

    from mcp_sync.auth import redirect

    go, gated = threading.Semaphore(0), [0]  # (gated: the selects begun, each waiting for its go)

    class Gated(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
        def select(self, timeout=None):
            gated[0] += 1
            go.acquire()
            return super().select(timeout)

    def step():
        """Let the listener take one batch, and wait until it waits again."""
        begun = gated[0]
        go.release()
        assert wait_until(lambda: gated[0] > begun or outcome, 10)
        assert not outcome, outcome  # (the wait ended: with what escaped it)

    monkeypatch.setattr(redirect.selectors, "DefaultSelector", Gated)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    listener = redirect._CallbackListener(server, "/callback", f"http://127.0.0.1:{port}/callback", "good")
    outcome: list[object] = []  # what the wait returned or raised
    thread = threading.Thread(target=lambda: outcome.append(_outcome(listener.wait, time.monotonic() + 30)))
    thread.start()
    clients = []
    try:
        assert wait_until(lambda: gated[0] == 1, 10)
        while len(listener._heads) < redirect._MAX_CONNECTIONS:
            clients.append(socket.create_connection(("127.0.0.1", port)))
            step()  # accepted
        oldest = next(iter(listener._heads))
        clients[0].sendall(b"GET /x")  # the oldest's bytes, and a 33rd connection: one batch
        clients.append(socket.create_connection(("127.0.0.1", port)))
        assert wait_until(lambda: len(select_readable([server, oldest])) == 2, 10)
        step()
        real = socket.create_connection(("127.0.0.1", port))
        clients.append(real)
        step()  # accepted
        real.sendall(b"GET /callback?code=c&state=good HTTP/1.1\r\n\r\n")
        go.release()
        thread.join(10)
        assert outcome == [f"http://127.0.0.1:{port}/callback?code=c&state=good"], outcome
    finally:
        for _ in range(100):
            go.release()
        thread.join(10)
        for sock in clients:
            sock.close()
        server.close()


def _outcome(wait, deadline):
    try:
        return wait(deadline)
    except Exception as exc:  # noqa: BLE001 - what escaped the wait is the finding
        return exc


def select_readable(socks):
    import select

    return select.select(socks, [], [], 0)[0]
