"""`Client.roots_changed()`: `notifications/roots/list_changed` in the
initialize era, when the client declared it; nothing to send in 2026-07-28."""

from __future__ import annotations

import pytest

import mcp_sync
from mcp_sync.testing import demo_server
from tests.helpers import recorded_messages, scripted, wait_until

ROOTS = {"roots": lambda params: {"roots": [{"uri": "file:///srv/project"}]}}
LIST_CHANGED = {"roots": {"listChanged": True}}


def methods(record):
    return [message.get("method") for message in recorded_messages(record)]


def test_a_declared_change_reaches_the_server(tmp_path):
    record = tmp_path / "record"
    command = scripted("--versions", "2025-11-25", "--record", str(record))
    with mcp_sync.connect(command, input_handlers=ROOTS, client_capabilities=LIST_CHANGED) as client:
        assert client.roots_changed() is True
        wait_until(lambda: "notifications/roots/list_changed" in methods(record))
    initialize = next(message for message in recorded_messages(record) if message.get("method") == "initialize")
    assert initialize["params"]["capabilities"]["roots"] == {"listChanged": True}
    notification = next(message for message in recorded_messages(record)
                        if message.get("method") == "notifications/roots/list_changed")
    assert "id" not in notification


def test_without_the_declaration_it_is_refused_before_anything_is_sent(tmp_path):
    record = tmp_path / "record"
    command = scripted("--versions", "2025-11-25", "--record", str(record))
    with mcp_sync.connect(command, input_handlers=ROOTS) as client:
        with pytest.raises(ValueError, match="listChanged"):
            client.roots_changed()
        client.list_tools()  # a request after it: everything before it has been read
    assert "notifications/roots/list_changed" not in methods(record)


def test_without_a_roots_handler_it_is_refused():
    with mcp_sync.connect(demo_server(), protocol="2025-11-25", client_capabilities=LIST_CHANGED) as client:
        with pytest.raises(ValueError, match="roots"):
            client.roots_changed()


def test_the_stateless_era_has_nothing_to_send_and_asks_the_handler_each_time():
    folders = ["file:///srv/one"]
    handlers = {"roots": lambda params: {"roots": [{"uri": uri} for uri in folders]}}
    with mcp_sync.connect(demo_server(), input_handlers=handlers, client_capabilities=LIST_CHANGED) as client:
        assert client.stateless
        before = client.call_tool("show_roots").text
        folders.append("file:///srv/two")
        assert client.roots_changed() is False
        after = client.call_tool("show_roots").text
    assert "file:///srv/two" not in before and "file:///srv/two" in after


def test_a_closed_client_raises_connection_closed():
    client = mcp_sync.connect(demo_server(), protocol="2025-11-25", input_handlers=ROOTS,
                              client_capabilities=LIST_CHANGED)
    client.close()
    with pytest.raises(mcp_sync.ConnectionClosed):
        client.roots_changed()
