"""Result caching by the server's hints, and coalescing of identical fetches."""

import threading
import time

import pytest

import mcp_sync
from mcp_sync.cache import ResultCache, cache_key, ttl_seconds
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import wait_until

V = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {}}}


def test_keys():
    assert cache_key("tools/call", {}) is None
    assert cache_key("tools/list", {**V, "cursor": "a"}) != cache_key("tools/list", {**V, "cursor": "b"})
    assert cache_key("tools/list", V) == cache_key("tools/list", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/logLevel": "debug"}})
    assert cache_key("tools/list", V) != cache_key("tools/list", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2025-11-25"}})
    assert cache_key("resources/read", {"uri": "a", "requestState": "s"}) is None
    assert cache_key("resources/read", {"uri": "a", "inputResponses": {}}) is None


@pytest.mark.parametrize("hint,seconds", [(None, 0), (-5, 0), (0, 0), (1500, 1.5), ("10", 0), (True, 0)])
def test_ttl(hint, seconds):
    result = {} if hint is None else {"ttlMs": hint}
    assert ttl_seconds(result) == seconds


def loader(results, calls):
    def load():
        calls.append(1)
        return dict(results.pop(0))
    return load


def test_fresh_then_stale():
    cache = ResultCache()
    calls = []
    key = cache_key("tools/list", V)
    first = cache.fetch("s", key, "-", loader([{"tools": [1], "ttlMs": 200}, {"tools": [2], "ttlMs": 0}], calls))
    assert cache.fetch("s", key, "-", loader([], calls)) == first and len(calls) == 1
    time.sleep(0.25)  # let the 200 ms freshness run out
    assert cache.fetch("s", key, "-", loader([{"tools": [2], "ttlMs": 0}], calls))["tools"] == [2]
    assert cache.fetch("s", key, "-", loader([{"tools": [3], "ttlMs": 0}], calls))["tools"] == [3]  # ttl 0: never fresh
    assert len(calls) == 3


def test_hits_are_copies():
    cache = ResultCache()
    key = cache_key("tools/list", V)
    cache.fetch("s", key, "-", loader([{"tools": [{"name": "a"}], "ttlMs": 60000}], []))
    hit = cache.fetch("s", key, "-", loader([], []))
    hit["tools"].append("mutated")
    assert cache.fetch("s", key, "-", loader([], []))["tools"] == [{"name": "a"}]


def test_private_results_stay_with_their_context_and_servers_never_mix():
    cache = ResultCache()
    key = cache_key("resources/read", {**V, "uri": "x"})
    calls = []
    cache.fetch("s", key, "alice", loader([{"contents": ["alice's"], "ttlMs": 60000, "cacheScope": "private"}], calls))
    assert cache.fetch("s", key, "alice", loader([], calls))["contents"] == ["alice's"]
    bob = cache.fetch("s", key, "bob", loader([{"contents": ["bob's"], "ttlMs": 60000, "cacheScope": "private"}], calls))
    assert bob["contents"] == ["bob's"] and len(calls) == 2
    public_key = cache_key("tools/list", V)
    cache.fetch("s", public_key, "alice", loader([{"tools": [], "ttlMs": 60000, "cacheScope": "public"}], calls))
    cache.fetch("s", public_key, "bob", loader([], calls))
    assert len(calls) == 3
    cache.fetch("other-server", public_key, "bob", loader([{"tools": [9], "ttlMs": 60000}], calls))
    assert len(calls) == 4


def test_bounded_by_entries_and_bytes():
    cache = ResultCache(max_entries=3, max_bytes=10_000)
    for i in range(10):
        cache.fetch("s", cache_key("resources/read", {**V, "uri": str(i)}), "-",
                    loader([{"contents": [i], "ttlMs": 60000}], []))
    assert len(cache) == 3
    cache.fetch("s", cache_key("resources/read", {**V, "uri": "big"}), "-",
                loader([{"contents": ["x" * 20_000], "ttlMs": 60000}], []))
    assert cache.size_bytes <= 10_000
    with pytest.raises(ValueError):
        ResultCache(max_entries=0)


def test_notifications_invalidate_at_once():
    cache = ResultCache()
    tools, read_a, read_b = (cache_key("tools/list", V), cache_key("resources/read", {**V, "uri": "a"}),
                             cache_key("resources/read", {**V, "uri": "b"}))
    for key in (tools, read_a, read_b):
        cache.fetch("s", key, "-", loader([{"x": 1, "ttlMs": 60000}], []))
    assert cache.invalidate("s", {"method": "notifications/resources/updated", "params": {"uri": "a"}}) == 1
    assert cache.invalidate("other", {"method": "notifications/tools/list_changed"}) == 0
    assert cache.invalidate("s", {"method": "notifications/tools/list_changed"}) == 1
    assert cache.invalidate("s", {"method": "notifications/message"}) == 0
    assert len(cache) == 1


def test_input_required_results_are_not_stored():
    cache = ResultCache()
    key = cache_key("resources/read", {**V, "uri": "a"})
    cache.fetch("s", key, "-", loader([{"resultType": "input_required", "requestState": "x", "ttlMs": 60000}], []))
    assert len(cache) == 0


def test_a_failed_fetch_fails_its_followers_and_is_not_stored():
    cache = ResultCache()
    key = cache_key("tools/list", V)
    started, release = threading.Event(), threading.Event()

    def failing():
        started.set()
        release.wait(5)
        raise mcp_sync.ConnectError("down")

    errors = []

    def follower():
        try:
            cache.fetch("s", key, "-", loader([{"x": 1}], []))
        except mcp_sync.ConnectError as exc:
            errors.append(exc)

    leader = threading.Thread(target=lambda: pytest.raises(mcp_sync.ConnectError, cache.fetch, "s", key, "-", failing))
    leader.start()
    started.wait(5)
    others = [threading.Thread(target=follower) for _ in range(3)]
    for t in others:
        t.start()
    assert wait_until(lambda: cache.misses == 4)  # every follower is waiting on the leader
    release.set()
    for t in [leader, *others]:
        t.join(5)
    assert len(errors) == 3 and len(cache) == 0


# -- through the client ---------------------------------------------------------------


def wire(httpd, method):
    return len([r for r in httpd.requests if r.json and r.json.get("method") == method])


def test_32_threads_asking_for_list_tools_at_once_make_one_request():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, cache=True) as client:
            barrier = threading.Barrier(32)
            results = []

            def ask():
                barrier.wait()
                results.append([t.name for t in client.list_tools()])

            pool = [threading.Thread(target=ask) for _ in range(32)]
            for t in pool:
                t.start()
            for t in pool:
                t.join(60)
            assert len(results) == 32 and all(r == results[0] for r in results)
            assert wire(httpd, "tools/list") == 1
            client.list_tools()
            assert wire(httpd, "tools/list") == 1  # fresh: served from the cache
            client.list_tools(bypass_cache=True)
            assert wire(httpd, "tools/list") == 2


def test_reads_are_cached_per_uri_and_calls_never():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, cache=True) as client:
            for _ in range(3):
                client.read_resource("demo://readme")
                client.read_resource("demo://items/1")
                client.call_tool("echo", {"text": "x"})
            assert wire(httpd, "resources/read") == 2
            assert wire(httpd, "tools/call") == 3


def test_a_list_changed_notification_invalidates():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, cache=True) as client:
            client.list_tools()
            client.list_tools()
            assert wire(httpd, "tools/list") == 1
            with client.notifications() as stream:
                # The notification arrives as a transport delivers it (in this
                # era it would come on a subscriptions/listen stream).
                client._conn.deliver({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                stream.next(timeout=10)
            client.list_tools()
            assert wire(httpd, "tools/list") == 2


def test_initialize_era_results_carry_no_ttl_and_are_never_served_from_the_cache():
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25", cache=True) as client:
            client.list_tools()
            client.list_tools()
        assert wire(httpd, "tools/list") == 2


def test_a_shared_cache_serves_public_results_to_every_client_of_the_server():
    shared = ResultCache()
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, cache=shared, auth="alice") as a, \
                mcp_sync.connect(httpd.url, cache=shared, auth="bob") as b:
            a.list_prompts()
            b.list_prompts()
        assert wire(httpd, "prompts/list") == 1
    with pytest.raises(TypeError):
        mcp_sync.connect(demo_server(), cache="yes")


@pytest.mark.parametrize("stale_if_error", [True, False])
def test_stale_if_error(stale_if_error, caplog):
    server = demo_server()
    server.set_cache_hint("resources/read", ttl_ms=100)
    httpd = HTTPServer(server).start()
    with mcp_sync.connect(httpd.url, cache=True, stale_if_error=stale_if_error, timeout=5) as client:
        fresh = client.read_resource("demo://readme")
        assert not fresh.stale
        time.sleep(0.15)  # let the 100 ms freshness run out
        httpd.close()     # the refetch cannot reach the server
        if stale_if_error:
            stale = client.read_resource("demo://readme")
            assert stale.stale and stale.text == fresh.text
            assert "stale cached result" in caplog.text
            with pytest.raises(mcp_sync.ConnectError):
                client.read_resource("demo://items/1")  # nothing cached to fall back on
        else:
            with pytest.raises(mcp_sync.ConnectError):
                client.read_resource("demo://readme")


def test_a_private_result_is_kept_apart_per_identity_of_one_client():
    # One client shared by a web app's threads, its token per request (a
    # callable: the user of the request at hand): a private result fetched
    # as one user is never served to the next.
    server = demo_server()
    server.set_cache_hint("resources/read", ttl_ms=60_000, cache_scope="private")
    current = {"token": "alice"}
    with HTTPServer(server) as httpd, \
            mcp_sync.connect(httpd.url, cache=True, auth=lambda: current["token"]) as client:
        client.read_resource("demo://readme")
        client.read_resource("demo://readme")
        assert wire(httpd, "resources/read") == 1
        current["token"] = "bob"
        client.read_resource("demo://readme")
        assert wire(httpd, "resources/read") == 2
        current["token"] = "alice"
        client.read_resource("demo://readme")
        assert wire(httpd, "resources/read") == 3  # bob's answer took the slot: never served to alice


class CountingProvider:
    """A provider that says who it is without network (`credential_scope`)
    and counts its `token()` calls, which a refreshing provider would turn
    into a token request."""

    def __init__(self) -> None:
        self.tokens = 0
        self.scopes = 0

    def token(self) -> str:
        self.tokens += 1
        return "the-token"

    def credential_scope(self) -> str:
        self.scopes += 1
        return "the-identity"


def test_a_cached_answer_asks_the_provider_who_it_is_never_for_a_token():
    server = demo_server()
    server.set_cache_hint("resources/read", ttl_ms=60_000, cache_scope="private")
    provider = CountingProvider()
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, cache=True, auth=provider) as client:
        client.read_resource("demo://readme")
        sent = provider.tokens  # the connect's and the first read's requests
        for _ in range(5):
            client.read_resource("demo://readme")
        assert wire(httpd, "resources/read") == 1
        assert provider.tokens == sent  # no token fetched for a cached answer
        assert provider.scopes >= 6


def test_a_shared_cache_keeps_one_program_run_with_two_environments_apart():
    # One command line, one server per environment (a tenant each): the
    # key left `env` out, and bob was served alice's discovery.
    import sys

    from mcp_sync import Stdio

    shared = ResultCache()
    command = [sys.executable, "-c", "import os, sys; from mcp_sync.testing.server import main; "
               "sys.exit(main(['--name', os.environ['TENANT']]))"]
    with mcp_sync.connect(Stdio(command[0], command[1:], env={"TENANT": "alice"}), cache=shared,
                          protocol="2026-07-28", timeout=30) as alice, \
            mcp_sync.connect(Stdio(command[0], command[1:], env={"TENANT": "bob"}), cache=shared,
                             protocol="2026-07-28", timeout=30) as bob:
        assert alice.discover().server_info.name == "alice"
        assert bob.discover().server_info.name == "bob"
        assert shared.hits == 0


def test_a_shared_cache_never_takes_a_new_in_process_server_for_a_collected_one():
    # In-process servers were told apart by id(), which a new server may
    # get once the old one is collected: 7 of 30 got another's discovery.
    import gc

    shared = ResultCache()
    for i in range(30):
        server = demo_server()
        server.name = f"server-{i}"
        with mcp_sync.connect(server, cache=shared, protocol="2026-07-28") as client:
            assert client.discover().server_info.name == f"server-{i}"
        del server, client
        gc.collect()
    assert shared.hits == 0


CHANGED = {"method": "notifications/tools/list_changed"}
UPDATED = {"method": "notifications/resources/updated", "params": {"uri": "demo://a"}}


def test_a_result_fetched_across_an_invalidation_is_not_stored():
    # The reader dropped the list when list_changed arrived, then the
    # caller stored the answer it had fetched before the change: the old
    # list was served for its whole ttlMs.
    cache, calls = ResultCache(), []
    key = cache_key("tools/list", V)

    def load():
        calls.append(1)
        if len(calls) == 1:
            cache.invalidate("s", CHANGED)  # arrives right behind the answer
        return {"tools": [], "ttlMs": 60_000}

    cache.fetch("s", key, "", load)
    cache.fetch("s", key, "", load)
    assert len(calls) == 2  # the second asked the server: nothing old was kept
    cache.fetch("s", key, "", load)
    assert len(calls) == 2  # the second's answer, fetched after the change, was kept


@pytest.mark.parametrize("change, kept", [
    ({"method": "notifications/prompts/list_changed"}, True),   # another list
    (UPDATED, True),                                             # a resource: not tools/list
    (CHANGED, False),
])
def test_only_a_change_to_what_was_fetched_spoils_it(change, kept):
    cache = ResultCache()
    key = cache_key("tools/list", V)

    def load():
        cache.invalidate("s", change)
        cache.invalidate("other server", CHANGED)
        return {"tools": [], "ttlMs": 60_000}

    cache.fetch("s", key, "", load)
    assert (len(cache) == 1) is kept


def test_a_result_fetched_bypassing_the_cache_across_an_invalidation_is_not_stored():
    cache = ResultCache()
    key = cache_key("resources/read", {**V, "uri": "demo://a"})
    since = cache.mark()
    cache.invalidate("s", UPDATED)  # while the request was out
    cache.put("s", key, "", {"contents": [], "ttlMs": 60_000}, since=since)
    assert len(cache) == 0
    cache.put("s", key, "", {"contents": [], "ttlMs": 60_000}, since=cache.mark())
    assert len(cache) == 1


def test_a_mark_older_than_the_changes_kept_stores_nothing():
    # The changes are kept bounded: past them, the cache cannot tell, and
    # does not store.
    cache = ResultCache()
    key = cache_key("tools/list", V)
    since = cache.mark()
    for _ in range(10_000):
        cache.invalidate("other server", CHANGED)
    cache.put("s", key, "", {"tools": [], "ttlMs": 60_000}, since=since)
    assert len(cache) == 0


def test_a_cached_kind_of_request_that_times_out_names_the_calls_own_timeout():
    # Through the cache, the request was given what was left of the call's
    # time (a few microseconds less), and its error said "timed out after
    # 0.999961 s".
    from mcp_sync.testing import Server

    release = threading.Event()
    server = Server(name="slow")
    server.resource("mem://slow", "slow")(lambda: release.wait(10) and "x")
    with mcp_sync.connect(server, cache=True, timeout=10) as client:
        try:
            with pytest.raises(mcp_sync.RequestTimeout) as caught:
                client.read_resource("mem://slow", timeout=1)
        finally:
            release.set()  # (before close(), which waits for the handler)
    assert caught.value.timeout == 1 and "after 1 s" in str(caught.value), caught.value


def test_a_caller_asking_after_a_change_does_not_join_a_fetch_begun_before_it():
    # It was handed the answer of before the change (which was rightly
    # not stored, but still served to whoever joined the fetch).
    cache, key = ResultCache(), cache_key("tools/list", V)
    started, release, outcome = threading.Event(), threading.Event(), {}

    def old():
        started.set()
        release.wait(10)
        return {"tools": [{"name": "old"}], "ttlMs": 60_000}

    leader = threading.Thread(target=lambda: outcome.update(leader=cache.fetch("s", key, "", old, timeout=10)))
    leader.start()
    assert started.wait(10)
    cache.invalidate("s", CHANGED)
    after = cache.fetch("s", key, "", lambda: {"tools": [{"name": "new"}], "ttlMs": 60_000}, timeout=10)
    release.set()
    leader.join(10)
    assert after["tools"] == [{"name": "new"}] and outcome["leader"]["tools"] == [{"name": "old"}]
    assert cache.fetch("s", key, "", old)["tools"] == [{"name": "new"}]  # the new answer was kept
