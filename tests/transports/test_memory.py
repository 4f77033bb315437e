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
                pass

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
