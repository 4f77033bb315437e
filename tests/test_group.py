"""`ClientGroup`: several servers as one.

Three live servers of three kinds (a stdio program, an HTTP server, an
in-process server) and a dead one (a stdio command that exits at once); a
hanging one (a socket that accepts and never answers) where timing matters.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, RpcError, Server, demo_server
from tests.helpers import SLACK, reap, wait_until

LOCAL = [sys.executable, "-m", "mcp_sync.testing", "--name", "local"]
DEAD = [sys.executable, "-c", "raise SystemExit(0)"]


def named_server(name: str) -> Server:
    """A server whose `echo` says who answered, plus a tool, a prompt and a
    resource only it has."""
    server = Server(name=name)

    @server.tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
    def echo(args, ctx):
        return f"{name}:{args.get('text', '')}"

    @server.tool(name=f"{name}_only")
    def only(args, ctx):
        return f"only {name}"

    @server.prompt(f"{name}_prompt")
    def prompt(args):
        return f"prompt of {name}"

    @server.resource(f"{name}://note", "note", mime_type="text/plain")
    def note():
        return f"note of {name}"

    @server.resource("shared://same", "same", mime_type="text/plain")
    def same():
        return f"same from {name}"

    return server


@pytest.fixture
def web():
    with HTTPServer(named_server("web")) as http:
        yield http


@pytest.fixture
def targets(web):
    return {"local": LOCAL, "web": web.url, "mem": named_server("mem"), "dead": DEAD}


def client_threads(before: set[int]) -> list[threading.Thread]:
    """Threads of the client side started since `before` and still running,
    at once: close() must have joined them. The test servers' own threads
    (named mcp-testing-*) end on their own schedule and are not counted."""
    return [t for t in threading.enumerate()
            if t.ident not in before and t.is_alive() and not t.name.startswith("mcp-testing")]


def test_lists_across_servers_and_reports_the_dead_one(targets):
    with mcp_sync.ClientGroup(targets, timeout=20) as group:
        tools = group.list_tools()
        assert set(tools.errors) == {"dead"}
        assert isinstance(tools.errors["dead"], mcp_sync.TransportError)
        names = tools.names
        assert {"local.echo", "local.add", "web.echo", "web.web_only", "mem.echo", "mem.mem_only"} <= set(names)
        assert not any(name.startswith("dead.") for name in names)
        entry = next(e for e in tools if e.name == "web.web_only")
        assert (entry.server, entry.item.name) == ("web", "web_only")
        assert isinstance(entry.item, mcp_sync.Tool)

        prompts = group.list_prompts()
        assert {"local.greet", "web.web_prompt", "mem.mem_prompt"} <= set(prompts.names)
        assert set(prompts.errors) == {"dead"}
        resources = group.list_resources()
        assert {("local", "demo://readme"), ("web", "web://note"), ("mem", "mem://note")} <= {
            (e.server, e.name) for e in resources}
        templates = group.list_resource_templates()
        assert ("local", "demo://items/{id}") in {(e.server, e.name) for e in templates}


def test_routes_qualified_unqualified_and_refuses_ambiguous(targets):
    with mcp_sync.ClientGroup(targets, timeout=20) as group:
        assert group.call_tool("local.echo", {"text": "a"}).text == "a"
        assert group.call_tool("web.echo", {"text": "b"}).text == "web:b"
        assert group.call_tool("mem.echo", {"text": "c"}).text == "mem:c"
        # Unqualified: the group lists the servers once to learn who offers what.
        assert group.call_tool("web_only").text == "only web"
        assert group.call_tool("mem_only").text == "only mem"
        assert group.call_tool("add", {"a": 2, "b": 3}).structured_content == {"sum": 5}
        assert group.resolve("mem_only") == ("mem", "mem_only")
        with pytest.raises(mcp_sync.RoutingError) as caught:
            group.call_tool("echo", {"text": "?"})
        assert sorted(caught.value.candidates) == ["local.echo", "mem.echo", "web.echo"]
        assert "ambiguous" in str(caught.value) and "web.echo" in str(caught.value)
        with pytest.raises(mcp_sync.RoutingError, match="no server of the group offers a tool named 'nope'") as caught:
            group.call_tool("nope")
        assert "dead" in str(caught.value)  # it says which server could not be asked
        assert caught.value.candidates == []
        # A listed item routes itself.
        item = next(e for e in group.list_tools() if e.name == "mem.echo")
        assert group.call_tool(item, {"text": "d"}).text == "mem:d"
        # Prompts and resources.
        assert "Ada" in group.get_prompt("local.greet", {"name": "Ada"}).messages[0].content.text
        assert group.get_prompt("web_prompt").messages[0].content.text == "prompt of web"
        assert group.read_resource("mem://note").text == "note of mem"
        assert group.read_resource("demo://readme").text.startswith("# mcp_sync demo server")
        assert group.read_resource("demo://items/42").text == "item 42"  # by the template it matches
        with pytest.raises(mcp_sync.RoutingError, match="several servers") as caught:
            group.read_resource("shared://same")
        assert sorted(caught.value.candidates) == ["mem", "web"]
        assert group.read_resource("shared://same", server="web").text == "same from web"
        # A dead server's tool fails with its own error.
        with pytest.raises(mcp_sync.TransportError):
            group.call_tool("dead.echo", {"text": "x"})
        with pytest.raises(mcp_sync.RoutingError, match=r"no server named 'nope' .*local, web, mem, dead"):
            group.client("nope")


def test_separator_is_configurable_and_server_names_may_overlap(web):
    with mcp_sync.ClientGroup({"a": named_server("a"), "a__b": named_server("ab"), "web": web.url},
                              separator="__") as group:
        # "a__b__echo" starts with both "a__" and "a__b__": what the servers list decides.
        assert group.resolve("a__b__echo") == ("a__b", "echo")
        names = group.list_tools().names
        assert "a__echo" in names and "a__b__echo" in names and "web__web_only" in names
        assert group.call_tool("web__echo", {"text": "x"}).text == "web:x"
        assert group.call_tool("a__b__echo", {"text": "y"}).text == "ab:y"
        assert group.call_tool("ab_only").text == "only ab"


def test_sixteen_threads_each_get_their_own_answer(targets):
    servers = ["local", "web", "mem"]
    expected = {"local": "{}", "web": "web:{}", "mem": "mem:{}"}
    failures: list[str] = []
    start = threading.Barrier(16)
    with mcp_sync.ClientGroup(targets, timeout=20) as group:

        def work(index: int) -> None:
            server = servers[index % 3]
            try:
                start.wait(timeout=10)
                for round_ in range(5):
                    text = f"t{index}-r{round_}"
                    got = group.call_tool(f"{server}.echo", {"text": text}).text
                    if got != expected[server].format(text):
                        failures.append(f"thread {index} asked {server} for {text!r}, got {got!r}")
            except Exception as exc:  # reported, so the test fails with the reason
                failures.append(f"thread {index}: {exc!r}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
    assert failures == []


def test_a_server_is_connected_once_however_many_threads_need_it(web):
    start = threading.Barrier(16)
    clients: list[mcp_sync.Client] = []
    with mcp_sync.ClientGroup({"web": web.url}) as group:

        def get() -> None:
            start.wait(timeout=10)
            clients.append(group.client("web"))

        threads = [threading.Thread(target=get) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(clients) == 16 and len({id(c) for c in clients}) == 1
        handshakes = [r for r in web.requests
                      if isinstance(r.json, dict) and r.json.get("method") in ("server/discover", "initialize")]
        assert len(handshakes) == 1


def hanging_socket() -> tuple[socket.socket, str]:
    """A listening socket that never answers, and its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(10)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


def test_hanging_servers_do_not_hold_up_the_others(web):
    (hang1, url1), (hang2, url2) = hanging_socket(), hanging_socket()
    accepted: list[socket.socket] = []
    result: dict[str, mcp_sync.group.Listing[mcp_sync.Tool]] = {}
    try:
        with mcp_sync.ClientGroup({"hang1": url1, "hang2": url2, "web": web.url, "mem": named_server("mem")},
                                  timeout=2, probe_timeout=1) as group:
            group.client("web"), group.client("mem")  # connected: what is measured below is the listing
            lister = threading.Thread(target=lambda: result.update(tools=group.list_tools()))
            started = time.monotonic()
            lister.start()
            # Both hanging servers are asked at once: the second well before the
            # first could have timed out (a listing one server after the other
            # would reach it only after the first's probe_timeout + timeout).
            accepted.append(hang1.accept()[0])
            first = time.monotonic()
            accepted.append(hang2.accept()[0])
            assert time.monotonic() - first < SLACK
            # ... and the other servers answer meanwhile.
            assert group.call_tool("mem.echo", {"text": "x"}).text == "mem:x"
            assert group.call_tool("web.echo", {"text": "y"}).text == "web:y"
            assert lister.is_alive()
            lister.join(timeout=30)
            elapsed = time.monotonic() - started
        tools = result["tools"]
        assert set(tools.errors) == {"hang1", "hang2"}
        assert all(isinstance(e, (mcp_sync.RequestTimeout, mcp_sync.TransportError)) for e in tools.errors.values())
        assert {"web.echo", "mem.echo"} <= set(tools.names)
        # Bounded by one hanging server's own timeouts (probe 1 s + initialize 2 s), not two.
        assert elapsed < 5.0
    finally:
        for sock in [*accepted, hang1, hang2]:
            sock.close()
        mcp_sync.forget_eras(url1)
        mcp_sync.forget_eras(url2)


def test_close_leaves_no_threads_and_refuses_further_use(targets):
    before = {t.ident for t in threading.enumerate()}
    group = mcp_sync.ClientGroup(targets, timeout=20)
    listing = group.list_tools()
    assert len(listing.errors) == 1
    assert group.call_tool("web.echo", {"text": "x"}).text == "web:x"
    group.close()
    assert client_threads(before) == []
    with pytest.raises(mcp_sync.ConnectionClosed):
        group.list_tools()
    with pytest.raises(mcp_sync.ConnectionClosed):
        group.call_tool("web.echo", {"text": "x"})
    group.close()  # twice is fine


def test_close_during_a_listing_ends_it(web):
    hang, url = hanging_socket()
    before = {t.ident for t in threading.enumerate()}
    result: dict[str, mcp_sync.group.Listing[mcp_sync.Tool]] = {}
    conn = None
    try:
        group = mcp_sync.ClientGroup({"hang": url, "web": web.url}, timeout=2, probe_timeout=1)
        lister = threading.Thread(target=lambda: result.update(tools=group.list_tools()))
        lister.start()
        conn = hang.accept()[0]
        group.close()  # waits for the connect in progress (bounded by its timeout), then closes it
        lister.join(timeout=30)
        assert not lister.is_alive()
        assert "hang" in result["tools"].errors
        assert client_threads(before) == []
    finally:
        if conn is not None:
            conn.close()
        hang.close()
        mcp_sync.forget_eras(url)


def test_from_a_config_file(tmp_path, web, monkeypatch):
    monkeypatch.setenv("WEB_URL", web.url)
    path = tmp_path / ".mcp.json"
    path.write_text(
        '{"mcpServers": {"web": {"type": "http", "url": "${WEB_URL}"}, '
        f'"local": {{"command": {sys.executable!r}, "args": ["-m", "mcp_sync.testing"]}}}}}}'.replace("'", '"'),
        encoding="utf-8")
    with mcp_sync.ClientGroup(mcp_sync.load_config(path), timeout=20) as group:
        assert group.servers == ["web", "local"]
        assert group.call_tool("web_only").text == "only web"
        assert group.call_tool("local.echo", {"text": "z"}).text == "z"


def test_bad_arguments():
    with pytest.raises(TypeError, match="unexpected keyword"):
        mcp_sync.ClientGroup({"a": named_server("a")}, tiemout=3)
    with pytest.raises(TypeError, match="only apply to URL targets"):
        mcp_sync.ClientGroup({"a": named_server("a")}, headers={"X": "y"})
    with pytest.raises(ValueError, match="separator"):
        mcp_sync.ClientGroup({}, separator="")
    with pytest.raises(TypeError):
        mcp_sync.ClientGroup({"a": 42})
    with pytest.raises(mcp_sync.ConfigError, match="MISSING_VAR_X"):
        mcp_sync.ClientGroup(mcp_sync.load_config({"mcpServers": {"a": {"command": "${MISSING_VAR_X}"}}}))


@pytest.mark.parametrize("use, exc, said", [
    (lambda g: g.list_tools(timeout=-1), ValueError, "timeout must be a positive number of seconds"),
    (lambda g: g.list_prompts(timout=5), TypeError, "did you mean 'timeout'"),
    (lambda g: g.list_resources(timeout=0), ValueError, "timeout must be"),
    (lambda g: g.list_resource_templates(timout=1), TypeError, "unknown request option"),
    (lambda g: g.call_tool("a.echo", ["x"]), TypeError, "arguments must be a mapping"),
    (lambda g: g.call_tool("echo", "hi"), TypeError, "arguments must be a mapping"),
    (lambda g: g.get_prompt("a.greet", {"name": 1}), TypeError, "mapping of strings to strings"),
    (lambda g: g.read_resource("demo://readme", timeout=-1), ValueError, "timeout must be"),
])
def test_a_bad_argument_connects_no_server(use, exc, said):
    # They were found after every server was connected (and listed).
    servers = {"a": demo_server(), "b": demo_server()}
    with mcp_sync.ClientGroup(servers) as group:
        with pytest.raises(exc, match=said):
            use(group)
    assert [server.served() for server in servers.values()] == [0, 0]


@pytest.mark.parametrize("options,exc", [
    ({"timeout": -1}, ValueError), ({"stale_if_error": "no"}, TypeError), ({"log_level": "loud"}, ValueError),
    ({"max_in_flight": 0}, ValueError),
])
def test_bad_client_options_are_refused_when_the_group_is_made(options, exc):
    """They were kept as given and refused at the first use of each server
    (a listing raised them from its pool's threads)."""
    with pytest.raises(exc):
        mcp_sync.ClientGroup({"a": named_server("a")}, **options)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
def test_a_listing_in_a_forked_child_does_not_hang():
    """ClientGroup's thread pool is not fork-aware: after a listing in the
    parent, the child's executor believes its (uncopied) idle workers exist,
    so a listing in the child queues work no thread runs and waits forever."""
    http = HTTPServer(demo_server()).start()
    group = mcp_sync.ClientGroup({"a": http.url}, timeout=5)
    try:
        assert "a.add" in group.list_tools().names  # the pool's worker now exists, idle
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                done = threading.Event()

                def child_listing() -> None:
                    try:
                        if "a.add" in group.list_tools().names:
                            done.set()
                    except BaseException:  # noqa: BLE001
                        pass

                threading.Thread(target=child_listing, daemon=True).start()
                code = 0 if done.wait(5.0) else 2
            finally:
                os._exit(code)
        assert reap([pid], 15) == [0], "the child's group.list_tools() did not finish within 5 s (exit 2: hung)"
    finally:
        group.close()
        http.close()


def test_close_stops_a_connect_in_progress():
    # A server that never answers: with timeout=None only close() can end the connect.
    silent = mcp_sync.Stdio(sys.executable, ["-c", "import time; time.sleep(30)"], shutdown_timeout=0.5)
    group = mcp_sync.ClientGroup({"s": silent}, timeout=None, probe_timeout=30, reconnect=False)
    failed: list[BaseException] = []

    def use() -> None:
        try:
            group.client("s")
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            failed.append(exc)

    user = threading.Thread(target=use, daemon=True)
    user.start()
    assert wait_until(lambda: group._slots["s"].connecting is not None, 10)
    started = time.monotonic()
    group.close()
    took = time.monotonic() - started
    user.join(10)
    # Bounded by the server's shutdown (0.5 s grace, then a signal), not by the 30 s it would sleep.
    assert took < 5, f"close() waited {took:.1f} s for a connect in progress"
    assert failed and isinstance(failed[0], mcp_sync.ConnectionClosed)


def _report_server(name: str, has_report: bool) -> Server:
    server = Server(name=name)
    if has_report:
        server.tool(name="report")(lambda args, ctx: f"report of {name}")
    return server


def test_a_tool_that_moved_to_another_server_is_called_there():
    # The group routes an unqualified name by its last listing; a server
    # that no longer offers the name makes it list again and call the one
    # server that offers it now, within the call's timeout.
    a, b = _report_server("a", True), _report_server("b", False)
    with mcp_sync.ClientGroup({"a": a, "b": b}, timeout=20) as group:
        assert group.call_tool("report").text == "report of a"
        a.remove_tool("report")
        b.tool(name="report")(lambda args, ctx: "report of b")
        assert group.call_tool("report", timeout=20).text == "report of b"
        assert group.resolve("report") == ("b", "report")
        assert b.served("tools/call") == 1


def test_a_server_error_for_a_tool_still_there_is_raised_once():
    a, b = _report_server("a", False), _report_server("b", False)

    @a.tool(name="report")
    def failing(args, ctx):
        raise RpcError(-32602 if args.get("refuse") else -32603, "the report failed")

    with mcp_sync.ClientGroup({"a": a, "b": b}, timeout=20) as group:
        with pytest.raises(mcp_sync.InvalidParams, match="the report failed"):
            group.call_tool("report", {"refuse": True})
        assert a.served("tools/call") == 1  # not tried again: still a's when listed again
        assert a.served("tools/list") == 2
        with pytest.raises(mcp_sync.ServerError, match="the report failed"):
            group.call_tool("report")
        assert a.served("tools/call") == 2 and a.served("tools/list") == 2  # the tool's own error: no listing
        # A qualified name is the caller's choice: never routed elsewhere.
        a.remove_tool("report")
        b.tool(name="report")(lambda args, ctx: "report of b")
        with pytest.raises(mcp_sync.ServerError):
            group.call_tool("a.report")
        assert b.served("tools/call") == 0


def test_a_prompt_that_moved_is_rendered_where_it_is_now():
    a, b = Server(name="a"), Server(name="b")
    a.prompt("brief")(lambda args: "brief of a")
    with mcp_sync.ClientGroup({"a": a, "b": b}, timeout=20) as group:
        assert group.get_prompt("brief").messages[0].content.text == "brief of a"
        a.remove_prompt("brief")
        b.prompt("brief")(lambda args: "brief of b")
        assert group.get_prompt("brief").messages[0].content.text == "brief of b"


def test_listing_again_for_a_moved_name_stays_within_the_calls_timeout():
    # The listing again also reaches a server that takes 4 s to fail: the
    # call ends by its own timeout with the first server's error, and by
    # the clients' request timeout when it gives none.
    a = Server(name="a")

    @a.tool(name="report")
    def gone(args, ctx):
        raise RpcError(-32602, "Unknown tool: report")

    slow = [sys.executable, "-c", "import time; time.sleep(4)"]
    with mcp_sync.ClientGroup({"a": a, "slow": slow}, timeout=1) as group:
        assert list(group.list_tools().errors) == ["slow"]  # "report" is a's, as far as the group knows
        for options in ({"timeout": 1}, {}):
            started = time.monotonic()
            with pytest.raises(mcp_sync.InvalidParams, match="Unknown tool"):
                group.call_tool("report", **options)
            assert time.monotonic() - started < 1 + SLACK


def test_a_member_slow_to_list_neither_hides_a_moved_name_nor_holds_the_threads():
    # A member whose listing hangs was waited for until the call's deadline,
    # leaving no time to call where the name had moved; and each call left
    # one more thread of the group's pool on it, until the listings of the
    # healthy members no longer started in time. Now the listing again gets
    # half of what is left, and a member's unfinished one is shared.
    a, b = Server(name="a"), Server(name="b")
    names = ["r1", "r2", "r3", "r4"]
    for name in names:
        a.tool(name=name)(lambda args, ctx: "of a")
    slow = [sys.executable, "-c", "import time; time.sleep(4)"]  # a listing (its connect) takes 4 s
    with mcp_sync.ClientGroup({"a": a, "b": b, "slow": slow}, timeout=2) as group:
        assert list(group.list_tools().errors) == ["slow"]
        for name in names:
            a.remove_tool(name)
            b.tool(name=name)(lambda args, ctx: "of b")
            assert group.call_tool(name, timeout=1).text == "of b"


def test_a_moved_name_called_with_progress_resets_keeps_its_window():
    # With `reset_timeout_on_progress` and no `timeout=`, the second call got
    # what was left of one request timeout as its whole window (it timed out
    # although its progress came twice as often). The call's bound is then
    # `max_total_timeout`, and the second call keeps its progress window.
    a, b = Server(name="a"), Server(name="b")
    a.tool(name="report")(lambda args, ctx: "of a")

    def steady(args, ctx):
        for step in range(1, 5):  # progress every 0.5 s: never 1 s without one
            time.sleep(0.5)
            ctx.progress(step, 4)
        return "of b"

    slow = [sys.executable, "-c", "import time; time.sleep(2)"]  # a listing (its connect) takes 2 s
    with mcp_sync.ClientGroup({"a": a, "b": b, "slow": slow}, timeout=1) as group:
        group.list_tools()
        a.remove_tool("report")
        b.tool(name="report")(steady)
        assert group.call_tool("report", progress=lambda p: None, reset_timeout_on_progress=True).text == "of b"


def test_a_listing_that_ends_late_does_not_undo_a_newer_one():
    # Two listings of one server overlap: the one asked first answers last.
    # Its older names overwrote what the newer listing had found, so the
    # group routed a tool that had moved to the server it had left.
    a, b = _report_server("a", True), _report_server("b", False)
    # (Two threads a server: its listings may overlap, one of each at a time.)
    with mcp_sync.ClientGroup({"a": a, "b": b}, timeout=20, max_workers=4) as group:
        assert group.resolve("report") == ("a", "report")
        client = group.client("a")
        real, answered, release = client.list_tools, threading.Event(), threading.Event()

        def held_back(**options):
            found = real(**options)  # a still offers "report"
            client.list_tools = real
            answered.set()
            release.wait(20)
            return found

        client.list_tools = held_back
        first = threading.Thread(target=group.list_tools)
        first.start()
        assert answered.wait(20)
        a.remove_tool("report")
        b.tool(name="report")(lambda args, ctx: "report of b")
        group.list_tools()
        assert group.resolve("report") == ("b", "report")
        release.set()
        first.join(20)
        assert group.resolve("report") == ("b", "report")
        assert group.call_tool("report").text == "report of b"


#: A stdio member that never answers: its connect lasts as long as the
#: group's timeouts allow (well over the calls' timeouts below).
NEVER_ANSWERS = [sys.executable, "-c", "import sys; sys.stdin.read()"]


def test_a_member_hanging_on_connect_holds_no_call_past_its_timeout():
    # Routing an unqualified name the group had not listed yet asked every
    # member with no bound of the call's, so one member hanging on connect
    # held `call_tool(..., timeout=1)` for its whole connect (18 s here);
    # so did `list_tools(timeout=1)`, and `read_resource(uri, timeout=1)`.
    notes = Server(name="notes")
    notes.tool(name="add_note")(lambda args, ctx: "noted")
    notes.resource("notes://today", "today", mime_type="text/plain")(lambda: "milk")
    with mcp_sync.ClientGroup({"notes": notes, "slow": NEVER_ANSWERS}, timeout=8) as group:
        started = time.monotonic()
        assert group.read_resource("notes://today", timeout=1).text == "milk"
        assert time.monotonic() - started < 1 + SLACK

        started = time.monotonic()
        assert group.call_tool("add_note", {"text": "x"}, timeout=1).text == "noted"
        assert time.monotonic() - started < 1 + SLACK

        started = time.monotonic()
        tools = group.list_tools(timeout=1)
        assert time.monotonic() - started < 1 + SLACK
        assert tools.names == ["notes.add_note"]
        assert isinstance(tools.errors["slow"], mcp_sync.RequestTimeout)

        started = time.monotonic()
        with pytest.raises(mcp_sync.RoutingError, match="slow"):  # says which member could not be asked
            group.call_tool("nobody_has_it", timeout=1)
        assert time.monotonic() - started < 1 + SLACK


def test_a_member_slow_to_list_holds_no_thread_the_others_need():
    # Two listings stuck on one member took both of the group's threads
    # (one per server): every other member's listing then waited for them,
    # and a listing with a timeout reported a healthy member as timed out.
    # Now a member's tasks use its share of the threads, the rest wait
    # their turn.
    notes, slow = Server(name="notes"), Server(name="slow")
    notes.prompt("greet")(lambda args: "hello")
    release, entered = threading.Event(), []
    with mcp_sync.ClientGroup({"notes": notes, "slow": slow}, timeout=20) as group:
        client = group.client("slow")
        real = client.list_tools

        def stuck(**options):
            entered.append(1)
            release.wait(20)
            return real(**options)

        client.list_tools = stuck
        listers = [threading.Thread(target=group.list_tools) for _ in range(2)]
        try:
            for lister in listers:
                lister.start()
            # Both listings of the slow member taken by a thread, or one
            # waiting its turn behind the other.
            lanes = getattr(group, "_lanes", None)
            assert wait_until(lambda: len(entered) + len(lanes._queued.get("slow", ()) if lanes else ()) == 2, 10)
            result: dict[str, mcp_sync.group.Listing[mcp_sync.Prompt]] = {}
            asker = threading.Thread(target=lambda: result.update(prompts=group.list_prompts(timeout=2)))
            started = time.monotonic()
            asker.start()
            asker.join(2 + SLACK)
            assert not asker.is_alive(), f"list_prompts(timeout=2) still waits after {time.monotonic() - started:.1f} s"
            assert result["prompts"].names == ["notes.greet"]  # the healthy member answered in time
            assert list(result["prompts"].errors) == ["slow"]
        finally:
            release.set()
            for lister in listers:
                lister.join(20)
        asker.join(20)


def test_a_call_to_a_member_hanging_on_connect_ends_by_its_timeout():
    # The first use of a member connects it: a call with timeout=0.5 to a
    # member whose connect hangs waited for the whole connect (13 s here).
    # Now it waits for it until its deadline; the connect goes on (bounded
    # by the group's timeouts), shared by the next callers, and close()
    # ends it.
    before = {t.ident for t in threading.enumerate()}
    group = mcp_sync.ClientGroup({"mem": named_server("mem"), "slow": NEVER_ANSWERS}, timeout=8)
    for call in (lambda: group.call_tool("slow.echo", {"text": "x"}, timeout=0.5),
                 lambda: group.call_tool("slow.echo", {"text": "x"}, timeout=0.5)):  # the same connect, going on
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout, match="slow"):
            call()
        assert time.monotonic() - started < 0.5 + SLACK
    assert group.call_tool("mem.echo", {"text": "y"}, timeout=5).text == "mem:y"
    started = time.monotonic()
    group.close()
    assert time.monotonic() - started < 5
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.ident not in before], 5), \
        [t.name for t in threading.enumerate() if t.ident not in before]


def test_a_ctrl_c_as_a_listing_is_handed_to_a_thread_leaves_that_server_listed_again():
    # The lane was counted running before the pool took it: interrupted
    # there, no thread ran it, and that server's listings never ran again
    # (each timed out; without a timeout, waited until close()).
    import concurrent.futures

    with mcp_sync.ClientGroup({"a": demo_server(), "b": demo_server()}) as group:
        class Interrupted(concurrent.futures.ThreadPoolExecutor):
            armed = True

            def submit(self, *args, **kwargs):
                if Interrupted.armed:
                    Interrupted.armed = False
                    raise KeyboardInterrupt  # as a Ctrl-C landing here
                return super().submit(*args, **kwargs)

        group._lanes._pool = Interrupted(group.max_workers, "mcp-sync-group")
        with pytest.raises(KeyboardInterrupt):
            group.list_tools(timeout=5)
        listing = group.list_tools(timeout=5)
        assert listing.errors == {} and {item.server for item in listing.items} == {"a", "b"}
