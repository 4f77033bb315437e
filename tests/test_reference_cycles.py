"""A call leaves no reference cycle, whether it succeeds or fails: its
frames, its result or error and what they hold are freed when the caller
lets them go, not at the cyclic collector's next pass. A long-running
process would otherwise pile them up between passes (and each pass costs
more with every object the process holds), on its hot path or while a
server keeps failing.

Each case makes the call a few times first (caches, specialised code),
then 20 times with the collector off, and counts what it finds."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, RpcError, Server, demo_server
from tests.helpers import cyclic_garbage, demo_command

ERAS = ["2026-07-28", "2025-11-25"]

# The shortcut (`call_tool` with no options) and the general path (any option).
CALLS = {
    "plain": lambda client, name, args: client.call_tool(name, args),
    "with_options": lambda client, name, args: client.call_tool(name, args, timeout=30),
}


@pytest.fixture(scope="module")
def demo_http() -> Iterator[HTTPServer]:
    with HTTPServer(demo_server()) as http:
        yield http


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
def test_a_call_that_succeeds_leaves_no_cycle(transport, era, demo_http):
    target = {"memory": demo_server(), "stdio": demo_command(), "http": demo_http.url}[transport]
    seen: list[Any] = []

    def progressed(result: Any) -> None:
        assert result.text == "liftoff" and len(seen) == 3
        seen.clear()

    with mcp_sync.connect(target, protocol=era) as client:
        requests: dict[str, Callable[[], Any]] = {
            "plain call_tool": lambda: client.call_tool("echo", {"text": "x"}).text,
            "call_tool with options": lambda: client.call_tool("echo", {"text": "x"}, timeout=30).text,
            "call_tool with progress": lambda: progressed(client.call_tool("countdown", {"steps": 3, "delay": 0},
                                                                           progress=seen.append)),
            "list_tools": client.list_tools,
            "read_resource": lambda: client.read_resource("demo://readme"),
            "get_prompt": lambda: client.get_prompt("greet", {"name": "Ada"}),
            "discover or ping": client.discover if era == "2026-07-28" else client.ping,
        }
        found = {name: cyclic_garbage(request) for name, request in requests.items()}
    assert found == dict.fromkeys(requests, 0)


def failing_server() -> Server:
    server = Server("fails", versions=ERAS)
    done = threading.Event()

    @server.tool()
    def refuse(args, ctx):
        raise RpcError(-32001, "refused on purpose")

    @server.tool()
    def slow(args, ctx):
        done.wait(0.2)
        return "late"

    @server.tool()
    def reports_failure(args, ctx):
        return {"content": [{"type": "text", "text": "it failed"}], "isError": True}

    @server.tool()
    def asks(args, ctx):
        return str(ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}))

    return server


@pytest.fixture
def server() -> Iterator[Server]:
    yield failing_server()


@pytest.mark.parametrize("path", CALLS)
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("case", ["error_answer", "unknown_tool", "timeout", "tool_error", "handler_fails"])
def test_a_failed_call_leaves_no_cycle(server, era, path, case):
    handlers = {"form": lambda params: 1 / 0} if case == "handler_fails" else None
    tool, args, expected = {
        "error_answer": ("refuse", {}, mcp_sync.ServerError),
        "unknown_tool": ("no_such_tool", {}, mcp_sync.McpError),
        "timeout": ("slow", {}, mcp_sync.RequestTimeout),
        "tool_error": ("reports_failure", {}, mcp_sync.ToolError),
        # (In the initialize era the in-memory server's question relates to
        # no call: a handler thread answers it, and the tool reports it.)
        "handler_fails": ("asks", {}, mcp_sync.InputHandlerError if era == "2026-07-28" else mcp_sync.ToolError),
    }[case]
    with mcp_sync.connect(server, protocol=era, input_handlers=handlers) as client:
        if case == "timeout":
            call = lambda: client.call_tool(tool, args, timeout=0.01)  # noqa: E731
        else:
            call = lambda: CALLS[path](client, tool, args).raise_for_error()  # noqa: E731
        assert cyclic_garbage(call, expected, times=5 if case == "timeout" else 20) == 0


@pytest.mark.parametrize("path", CALLS)
def test_a_missing_capability_explained_again_leaves_no_cycle(server, path):
    # `call_tool` looks at a MissingClientCapability (a tool that runs only
    # as a task says so) and raises it again.
    with mcp_sync.connect(server, protocol="2026-07-28") as client:
        call = lambda: CALLS[path](client, "asks", {})  # noqa: E731
        assert cyclic_garbage(call, mcp_sync.MissingClientCapability) == 0


@pytest.mark.parametrize("path", CALLS)
def test_a_server_that_cannot_be_reached_leaves_no_cycle(server, path):
    # The connect error is kept while the addresses are tried, and handed to
    # the caller through its inbox: neither may hold the frames that raised it.
    http = HTTPServer(server).start()
    with mcp_sync.connect(http.url) as client:
        http.close()
        call = lambda: CALLS[path](client, "refuse", {})  # noqa: E731
        assert cyclic_garbage(call, mcp_sync.ConnectError, times=5) == 0


@pytest.mark.parametrize("path", CALLS)
def test_a_call_shed_by_admission_leaves_no_cycle(path):
    server = Server("holds")
    holding, release = threading.Event(), threading.Event()

    @server.tool()
    def hold(args, ctx):
        holding.set()
        release.wait(30)
        return "released"

    with mcp_sync.connect(server, max_in_flight=1, max_queued=0) as client:
        holder = threading.Thread(target=client.call_tool, args=("hold", {}))
        holder.start()
        try:
            assert holding.wait(10)
            call = lambda: CALLS[path](client, "hold", {})  # noqa: E731
            assert cyclic_garbage(call, mcp_sync.Overloaded) == 0
        finally:
            release.set()
            holder.join(10)


@pytest.mark.parametrize("era", ERAS)
def test_a_closed_subscription_leaves_no_cycle(era):
    # Its reopen closure (and, in the initialize era, its notification
    # callback) hold it; `close()` lets them go. (Over stdio: the
    # in-process test server keeps cycles of its own.)
    with mcp_sync.connect(demo_command(), protocol=era) as client:
        def listen_and_close() -> None:
            client.listen(resources_list_changed=True, timeout=10).close()

        assert cyclic_garbage(listen_and_close) == 0


def test_a_listen_that_cannot_reach_the_server_leaves_no_cycle(server):
    # The subscription keeps the error its stream broke with; `listen()`
    # raises a copy of it.
    http = HTTPServer(server).start()
    with mcp_sync.connect(http.url, protocol="2026-07-28") as client:
        http.close()
        call = lambda: client.listen(tools_list_changed=True, timeout=10)  # noqa: E731
        assert cyclic_garbage(call, mcp_sync.ConnectError, times=5) == 0


@pytest.mark.parametrize("size", ["one_write", "in_pieces"])
def test_a_write_to_a_server_that_is_gone_leaves_no_cycle(size):
    # The writer to a stdio server's stdin: a message of at most PIPE_BUF
    # bytes goes in one write without the lock, a larger one in pieces.
    from mcp_sync.transports.stdio_writer import StdinWriter

    data = b"x" * (100 if size == "one_write" else 200_000)

    def write() -> None:
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        os.close(read_end)
        with open(write_end, "wb", buffering=0) as stdin:
            StdinWriter(stdin, explain=mcp_sync.ConnectionClosed, on_broken=lambda error: None).write(data, None)

    assert cyclic_garbage(write, mcp_sync.ConnectionClosed) == 0


def test_a_message_cut_off_by_a_server_that_went_away_leaves_no_cycle(monkeypatch):
    # The writer keeps the failure (every later write raises a copy of it):
    # what it keeps must not hold the frames that hold the writer.
    from mcp_sync.transports import stdio_writer

    broken: list[str] = []  # (the errors themselves would keep any cycle alive)
    ends: list[int] = []

    def server_goes_away(fd: int, seconds: float) -> None:  # the pipe is full: part of the message went out
        os.close(ends.pop())

    monkeypatch.setattr(stdio_writer, "_wait_writable", server_goes_away)

    def write() -> None:
        read_end, write_end = os.pipe()
        ends.append(read_end)
        os.set_blocking(write_end, False)
        with open(write_end, "wb", buffering=0) as stdin:
            writer = stdio_writer.StdinWriter(stdin, explain=mcp_sync.ConnectionClosed,
                                              on_broken=lambda error: broken.append(str(error)))
            try:
                writer.write(b"x" * 1_000_000, None)
            finally:
                assert not ends, "the message fitted in the pipe: nothing was cut off"
                with pytest.raises(mcp_sync.ConnectionClosed, match="cut off|cannot write"):
                    writer.write(b"next", None)  # a copy of the kept failure

    assert cyclic_garbage(write, mcp_sync.ConnectionClosed, times=5) == 0
    assert broken and all("cannot write to the server" in error for error in broken)


@pytest.mark.parametrize("era", ERAS)
def test_a_skill_file_that_fails_its_check_leaves_no_cycle(era):
    from tests.servers.skills import DIGEST_BAD, skills_server

    with mcp_sync.connect(skills_server(), protocol=era) as client:
        client.skills.list()
        call = lambda: client.skills.read(DIGEST_BAD, "SKILL.md")  # noqa: E731
        assert cyclic_garbage(call, mcp_sync.SkillVerificationError) == 0


@pytest.mark.parametrize("path", CALLS)
def test_a_version_the_server_stopped_speaking_leaves_no_cycle(path):
    # A -32022 on a ready connection: the version is settled again, and the
    # server's refusal raised when none of its versions is allowed.
    server = Server("upgraded")

    @server.tool()
    def gone(args, ctx):
        raise RpcError(-32022, "Unsupported protocol version", {"supported": ["2099-01-01"]})

    with mcp_sync.connect(server, protocol="2026-07-28") as client:
        call = lambda: CALLS[path](client, "gone", {})  # noqa: E731
        assert cyclic_garbage(call, mcp_sync.UnsupportedProtocolVersion) == 0
