"""The schema checker itself must be able to fail, or it proves nothing."""

from pathlib import Path

from tests.schema_check import SchemaChecker

CHECKER = SchemaChecker(Path(__file__).parent / "schemas")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class T:
    pass


def test_accepts_a_valid_stateless_request():
    assert CHECKER.check(T(), {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "x", "arguments": {}, "_meta": META}}) is None


def test_rejects_a_stateless_request_without_capabilities():
    bad = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
           "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
    assert CHECKER.check(T(), bad)


def test_rejects_a_call_without_name():
    assert CHECKER.check(T(), {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": META}})


def test_legacy_revisions_follow_initialize():
    transport = T()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    assert CHECKER.check(transport, init) is None
    assert CHECKER.check(transport, {"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert CHECKER.check(transport, {"jsonrpc": "2.0", "id": 2, "method": "ping"}) is None
    assert CHECKER.check(transport, {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "loud"}})
    bad_init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    assert CHECKER.check(T(), bad_init)
