"""Identical fetches in flight share one request, but not their options.

A follower (a caller that found the same fetch in flight) waits only up to
its own timeout; it never inherits what concerned the leader alone (its
timeout, its interrupt, its callback's exception), and an error about the
server reaches each follower as its own copy.
"""

import threading
import time

import pytest

import mcp_sync
from mcp_sync.cache import ResultCache, cache_key
from mcp_sync.testing import Server
from tests.helpers import SLACK, wait_until

URI = "slow://doc"


def slow_server():
    """A server whose one resource answers when the test opens `gate`;
    `reads` counts the reads that reached it."""
    server = Server(name="slow")
    server.gate = threading.Event()
    server.reads = 0

    @server.resource(URI, "doc")
    def doc():
        server.reads += 1
        server.gate.wait(20)
        return "the text"

    return server


def run(fn):
    """Run `fn` on a thread; returns (thread, outcome list, elapsed list)."""
    outcome, elapsed = [], []

    def target():
        started = time.monotonic()
        try:
            outcome.append(fn())
        except BaseException as exc:  # the outcome under test
            outcome.append(exc)
        elapsed.append(time.monotonic() - started)

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome, elapsed


def test_a_follower_waits_only_up_to_its_own_timeout():
    server = slow_server()
    with mcp_sync.connect(server, cache=True) as client:
        try:
            leader, _, _ = run(lambda: client.read_resource(URI, timeout=20))
            assert wait_until(lambda: server.reads == 1, 10)
            follower, outcome, elapsed = run(lambda: client.read_resource(URI, timeout=0.3))
            follower.join(5)
            assert not follower.is_alive(), "the follower waited for the leader beyond its own timeout"
            assert isinstance(outcome[0], mcp_sync.RequestTimeout)
            assert outcome[0].timeout == 0.3 and outcome[0].method == "resources/read"
            assert elapsed[0] < 0.3 + SLACK
        finally:
            server.gate.set()
        leader.join(10)


def test_a_follower_does_not_inherit_the_leaders_timeout():
    server = slow_server()
    with mcp_sync.connect(server, cache=True) as client:
        try:
            leader, led, _ = run(lambda: client.read_resource(URI, timeout=0.25))
            assert wait_until(lambda: server.reads == 1, 10)
            follower, outcome, _ = run(lambda: client.read_resource(URI, timeout=20))
            leader.join(10)
            assert isinstance(led[0], mcp_sync.RequestTimeout)  # the leader's own limit
            # The follower asks for itself now, within its own 20 s.
            assert wait_until(lambda: server.reads == 2, 10), "the follower gave up with the leader"
        finally:
            server.gate.set()
        follower.join(10)
        assert not isinstance(outcome[0], BaseException), outcome[0]
        assert outcome[0].contents[0].text == "the text"


def test_a_leaders_interrupt_stays_in_the_leaders_thread():
    cache = ResultCache()
    key = cache_key("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    interrupt = KeyboardInterrupt()

    def interrupted():
        assert wait_until(lambda: cache.misses == 2, 10)  # the follower waits on this fetch
        raise interrupt

    leader, led, _ = run(lambda: cache.fetch("s", key, "-", interrupted))
    assert wait_until(lambda: cache.misses == 1, 10)
    follower, outcome, _ = run(lambda: cache.fetch("s", key, "-", lambda: {"tools": [], "ttlMs": 60000}))
    for t in (leader, follower):
        t.join(10)
    assert led == [interrupt]
    assert outcome == [{"tools": [], "ttlMs": 60000}], f"the follower got {outcome[0]!r}"


def test_a_leaders_callback_exception_is_not_raised_in_a_follower():
    cache = ResultCache()
    key = cache_key("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})

    def leader_fails():
        assert wait_until(lambda: cache.misses == 2, 10)
        raise ValueError("the leader's own progress callback")

    leader, led, _ = run(lambda: cache.fetch("s", key, "-", leader_fails))
    assert wait_until(lambda: cache.misses == 1, 10)
    follower, outcome, _ = run(lambda: cache.fetch("s", key, "-", lambda: {"tools": [1]}))
    for t in (leader, follower):
        t.join(10)
    assert isinstance(led[0], ValueError)
    assert outcome == [{"tools": [1]}]


@pytest.mark.parametrize("error", [mcp_sync.ConnectError("down"), mcp_sync.MethodNotFound(-32601, "nope")])
def test_an_error_about_the_server_reaches_each_follower_as_its_own_copy(error):
    cache = ResultCache()
    key = cache_key("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    loads = []

    def failing():
        loads.append(1)
        assert wait_until(lambda: cache.misses == 4, 10)  # three followers wait
        raise error

    leader, led, _ = run(lambda: cache.fetch("s", key, "-", failing))
    assert wait_until(lambda: cache.misses == 1, 10)
    followers = [run(lambda: cache.fetch("s", key, "-", failing)) for _ in range(3)]
    for t, _, _ in [(leader, None, None), *followers]:
        t.join(10)
    got = [outcome[0] for _, outcome, _ in followers]
    assert led == [error] and len(loads) == 1  # one request for all four
    assert all(type(e) is type(error) and str(e) == str(error) for e in got)
    assert len({id(e) for e in [error, *got]}) == 4, "one exception object raised in several threads"
