"""The reference `everything` server's tools that need more of the protocol
than a call and its answer: a URL elicitation refused with -32042 and
retried, and roots that change during the session."""

from __future__ import annotations

import threading

import mcp_sync
from tests.helpers import wait_until
from tests.interop import old_peers


def stdio_command() -> list[str]:
    node, entry = old_peers.everything_server()
    return [node, entry, "stdio"]


def test_url_elicitation_required_is_answered_by_the_url_handler_and_the_call_retried_once():
    seen = []

    def url(params):
        seen.append((params["url"], threading.get_ident()))
        return {"action": "accept"}

    arguments = {"url": "https://example.com/consent", "errorPath": True}
    with mcp_sync.connect(stdio_command(), input_handlers={"url": url}) as client:
        result = client.call_tool("trigger-url-elicitation", arguments)
    assert not result.is_error, result.text
    assert "User completed the URL elicitation flow" in result.text
    # First the prerequisite the -32042 named (on the caller's thread), then
    # the retried call's own elicitation/create for the URL it was given.
    assert [u for u, _ in seen] == ["https://modelcontextprotocol.io", "https://example.com/consent"]
    assert seen[0][1] == threading.get_ident()


def test_without_a_url_handler_the_refusal_is_typed():
    # A form handler declares elicitation; the url mode is what the tool needs.
    with mcp_sync.connect(stdio_command(), input_handlers={"form": lambda params: {"action": "cancel"}},
                          client_capabilities={"elicitation": {"url": {}}}) as client:
        try:
            client.call_tool("trigger-url-elicitation", {"url": "https://example.com/x", "errorPath": True})
        except mcp_sync.UrlElicitationRequired as exc:
            assert exc.code == -32042
            assert [e["url"] for e in exc.elicitations] == ["https://modelcontextprotocol.io"]
            assert exc.elicitations[0]["elicitationId"]
        else:
            raise AssertionError("the -32042 did not raise UrlElicitationRequired")


def test_roots_that_change_are_fetched_again_by_the_server():
    folders = ["file:///srv/project"]
    handlers = {"roots": lambda params: {"roots": [{"uri": uri, "name": uri.rsplit("/", 1)[1]} for uri in folders]}}
    with mcp_sync.connect(stdio_command(), input_handlers=handlers,
                          client_capabilities={"roots": {"listChanged": True}}) as client:
        before = client.call_tool("get-roots-list").text
        assert "file:///srv/project" in before and "file:///srv/data" not in before
        folders.append("file:///srv/data")
        assert client.roots_changed() is True
        wait_until(lambda: "file:///srv/data" in client.call_tool("get-roots-list").text)
        assert "file:///srv/project" in client.call_tool("get-roots-list").text
