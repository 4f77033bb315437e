import threading

import pytest

import mcp_sync
from mcp_sync.transports.memory import Memory, MemoryTransport
from mcp_sync.testing import Server, demo_server


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class Sink:
    def __init__(self):
        self.messages = []
        self.failures = []
        self.arrived = threading.Event()

    def deliver(self, message):
        self.messages.append(message)
        self.arrived.set()

    def transport_failed(self, error):
        self.failures.append(error)
        self.arrived.set()


class EchoServer:
    """A hand-made in-process server: echoes requests back, or sends junk."""

    def __init__(self, reply=None):
        self.reply = reply
        self.received = []

    def open_session(self, send):
        server = self

        class Session:
            def receive(self, message):
                server.received.append(message)
                send(server.reply if server.reply is not None else
                     {"jsonrpc": "2.0", "id": message["id"], "result": {"params": message.get("params")}})

            def close(self):
                inner.close()  # (its workers end with the test)

        return Session()


def test_messages_are_copied_through_json_both_ways():
    server = EchoServer()
    transport = MemoryTransport(server)
    sink = Sink()
    transport.start(sink)
    params = {"name": "t", "arguments": {"list": [1, 2]}, "_meta": META}
    transport.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    params["arguments"]["list"].append(3)
    assert server.received[0]["params"]["arguments"] == {"list": [1, 2]}
    assert sink.messages[0]["result"]["params"]["arguments"] == {"list": [1, 2]}
    assert sink.messages[0]["result"]["params"] is not server.received[0]["params"]
    transport.close()
    transport.close()
    with pytest.raises(mcp_sync.ConnectionClosed):
        transport.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})


def test_an_unencodable_server_message_is_a_transport_failure():
    transport = MemoryTransport(EchoServer(reply={"jsonrpc": "2.0", "id": 1, "result": {"x": object()}}))
    sink = Sink()
    transport.start(sink)
    transport.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
    assert isinstance(sink.failures[0], mcp_sync.InvalidMessage)
    transport.close()


def test_unencodable_arguments_fail_before_sending():
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(TypeError):
            client.call_tool("echo", {"text": object()})
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"


def test_memory_needs_an_in_process_server():
    with pytest.raises(TypeError):
        Memory(object())
    assert isinstance(Memory(Server()).open(), MemoryTransport)


def test_each_connection_gets_its_own_session():
    server = demo_server()
    with mcp_sync.connect(server, protocol="2025-06-18") as legacy, mcp_sync.connect(server) as modern:
        assert legacy.protocol_version == "2025-06-18"
        assert modern.protocol_version == "2026-07-28"
        assert legacy.call_tool("echo", {"text": "a"}).text == "a"
        assert modern.call_tool("echo", {"text": "b"}).text == "b"


# -- an in-process server that raises ----------------------------------------------------------


class Failing:
    """An in-process server whose `open_session()` raises `on_open`, or whose
    session's `receive()` raises `on_receive` for a tools/call (and passes
    the rest to `inner`, an `EchoServer` by default)."""

    def __init__(self, on_open=None, on_receive=None, inner=None):
        self.on_open = on_open
        self.on_receive = on_receive
        self.inner = inner if inner is not None else EchoServer()

    def open_session(self, send):
        if self.on_open is not None:
            raise self.on_open
        inner = self.inner.open_session(send)
        failing = self

        class Session:
            def receive(self, message):
                if message.get("method") == "tools/call" and failing.on_receive is not None:
                    raise failing.on_receive
                inner.receive(message)

            def close(self):
                pass

        return Session()


CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {}, "_meta": META}}


def test_a_server_that_cannot_open_a_session_is_a_connect_error():
    bug = RuntimeError("cannot open")
    transport = MemoryTransport(Failing(on_open=bug))
    with pytest.raises(mcp_sync.ConnectError, match="open_session") as caught:
        transport.start(Sink())
    assert caught.value.__cause__ is bug
    transport.close()
    with pytest.raises(mcp_sync.ConnectError):
        mcp_sync.connect(Failing(on_open=RuntimeError("cannot open")), timeout=5)


def test_a_server_session_that_raises_on_a_message_is_a_transport_error_and_the_connection_goes_on():
    bug = KeyError("server bug")
    transport = MemoryTransport(Failing(on_receive=bug))
    sink = Sink()
    transport.start(sink)
    with pytest.raises(mcp_sync.TransportError, match="receive") as caught:
        transport.send(CALL)
    assert caught.value.__cause__ is bug
    assert sink.failures == []  # one message failed, not the channel
    transport.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
    assert [m["id"] for m in sink.messages] == [2]
    transport.close()
    with mcp_sync.connect(Failing(on_receive=KeyError("server bug"), inner=demo_server()), timeout=5) as client:
        with pytest.raises(mcp_sync.TransportError, match="KeyError"):
            client.call_tool("echo", {"text": "x"})
        assert "echo" in [tool.name for tool in client.list_tools()]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_or_exit_inside_the_server_is_not_wrapped(stop):
    with pytest.raises(stop):
        MemoryTransport(Failing(on_open=stop())).start(Sink())
    transport = MemoryTransport(Failing(on_receive=stop()))
    transport.start(Sink())
    with pytest.raises(stop):
        transport.send(CALL)
    transport.close()


def test_a_transport_error_the_server_raises_is_passed_on_as_it_is():
    closed = mcp_sync.ConnectionClosed("the server is shutting down")
    transport = MemoryTransport(Failing(on_receive=closed))
    transport.start(Sink())
    with pytest.raises(mcp_sync.ConnectionClosed) as caught:
        transport.send(CALL)
    assert caught.value is closed
    transport.close()
