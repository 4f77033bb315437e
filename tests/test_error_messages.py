"""Errors a newcomer meets in the first five minutes say what to do next."""

import sys

import pytest

import mcp_sync
from mcp_sync.testing import demo_server


@pytest.fixture
def client():
    with mcp_sync.connect(demo_server()) as c:
        yield c


def test_tool_arguments_given_as_keywords_are_told_to_go_in_a_dict(client):
    with pytest.raises(TypeError) as info:
        client.call_tool("add", a=2, b=3)
    assert "tool arguments go in a dict: call_tool('add', {'a': ..., 'b': ...})" in str(info.value)


@pytest.mark.parametrize("call, meant", [
    (lambda c: c.call_tool("add", {"a": 1, "b": 2}, timout=3), "'timout' (did you mean 'timeout'?)"),
    (lambda c: c.list_tools(progres=print), "'progres' (did you mean 'progress'?)"),
])
def test_a_misspelt_request_option_names_the_one_meant(client, call, meant):
    with pytest.raises(TypeError) as info:
        call(client)
    assert str(info.value) == f"unknown request option(s): {meant}"  # a near miss is not a tool argument


def test_a_misspelt_connect_option_names_the_one_meant():
    with pytest.raises(TypeError, match=r"got unexpected keyword argument\(s\): 'timout' \(did you mean 'timeout'\?\)"):
        mcp_sync.connect(demo_server(), timout=3)
    with pytest.raises(TypeError, match=r"'verfy' \(did you mean 'verify'\?\)"):
        mcp_sync.connect("http://127.0.0.1:9/mcp", verfy=False)
    with pytest.raises(TypeError, match=r"ClientGroup\(\) got unexpected .*'timout' \(did you mean 'timeout'\?\)"):
        mcp_sync.ClientGroup({"demo": demo_server()}, timout=3)


@pytest.mark.parametrize("target", ["127.0.0.1:8799/mcp", "localhost:8000/mcp", "example.com/mcp", "[::1]:8000"])
def test_an_address_without_a_scheme_is_told_to_add_one(target):
    with pytest.raises(TypeError) as info:
        mcp_sync.connect(target)
    assert f"connect('http://{target}')" in str(info.value)


@pytest.mark.parametrize("target", ["python server.py", "./server.py", "server.py"])
def test_a_command_line_string_is_still_told_to_be_a_list(target):
    with pytest.raises(TypeError, match="pass a stdio command as a list of strings"):
        mcp_sync.connect(target)


def test_a_call_after_close_says_the_client_was_closed_and_how_to_get_another():
    client = mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"])
    client.close()
    for call in (lambda: client.call_tool("echo", {"text": "x"}), client.list_tools):
        with pytest.raises(mcp_sync.ConnectionClosed) as info:
            call()
        assert "this client is closed" in str(info.value) and "mcp_sync.connect()" in str(info.value)


def test_a_timeout_names_the_tool_and_how_to_allow_more_time(client):
    with pytest.raises(mcp_sync.RequestTimeout) as info:
        client.call_tool("countdown", {"steps": 50, "delay": 0.1}, timeout=0.2)
    said = str(info.value)
    assert said.startswith("tools/call 'countdown' timed out after 0.2 s")
    assert "timeout=" in said and "connect(timeout=...)" in said
    assert info.value.method == "tools/call" and info.value.timeout == 0.2


def test_repr_shows_transport_server_status_and_revision():
    with mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"], protocol="2025-11-25") as client:
        assert repr(client) == "<mcp_sync.Client stdio 'mcp-sync-demo' ready 2025-11-25>"
    assert repr(client) == "<mcp_sync.Client stdio 'mcp-sync-demo' closed 2025-11-25>"
