"""-32042 (URL elicitation required, 2025-11-25): the typed error, and the
one retry after the "url" handler accepted every elicitation it lists."""

from __future__ import annotations

import threading

import pytest

import mcp_sync
from mcp_sync.testing import RpcError, Server
from tests.helpers import cyclic_garbage

PREREQUISITES = [
    {"mode": "url", "elicitationId": "e-1", "url": "https://auth.example/one", "message": "Sign in"},
    {"mode": "url", "elicitationId": "e-2", "url": "https://auth.example/two", "message": "Consent"},
]


class Gatekeeper:
    """A server whose `open` tool refuses with -32042 until `satisfied` is set
    (by the test's url handler, standing in for the person's browser), and
    whose `always` tool always refuses."""

    def __init__(self) -> None:
        self.satisfied = threading.Event()
        self.calls: list[str] = []
        self.server = Server("gatekeeper")

        @self.server.tool()
        def open(args, ctx):
            door = args["door"]
            self.calls.append(door)
            if not self.satisfied.is_set():
                raise RpcError(-32042, "This request requires more information.", {"elicitations": PREREQUISITES})
            return f"opened {door}"

        @self.server.tool()
        def always(args, ctx):
            self.calls.append("always")
            raise RpcError(-32042, "Still required.", {"elicitations": PREREQUISITES[:1]})


def connect(gate: Gatekeeper, **handlers):
    return mcp_sync.connect(gate.server, protocol="2025-11-25", input_handlers=handlers or None)


# The shortcut (`call_tool` with no options) and the general path (any option) both retry.
CALLS = {
    "plain": lambda client, name, args: client.call_tool(name, args),
    "with_options": lambda client, name, args: client.call_tool(name, args, timeout=30),
}


@pytest.mark.parametrize("path", CALLS)
def test_without_a_url_handler_the_typed_error_carries_the_elicitations(path):
    gate = Gatekeeper()
    with connect(gate) as client:
        with pytest.raises(mcp_sync.UrlElicitationRequired) as info:
            CALLS[path](client, "open", {"door": "front"})
    assert info.value.code == -32042 and isinstance(info.value, mcp_sync.ServerError)
    assert info.value.elicitations == PREREQUISITES
    assert gate.calls == ["front"]


@pytest.mark.parametrize("path", CALLS)
def test_a_url_handler_that_accepts_each_elicitation_gets_the_call_retried_once(path):
    gate = Gatekeeper()
    seen = []

    def url(params):
        seen.append((params, threading.get_ident()))
        if len(seen) == len(PREREQUISITES):
            gate.satisfied.set()
        return {"action": "accept"}

    with connect(gate, url=url) as client:
        result = CALLS[path](client, "open", {"door": "front"})
    assert result.content[0].text == "opened front"
    assert [params for params, _ in seen] == PREREQUISITES
    assert {thread for _, thread in seen} == {threading.get_ident()}  # on the caller's thread
    assert gate.calls == ["front", "front"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_elicitation_raises_the_servers_error_and_sends_nothing_more(action):
    gate = Gatekeeper()
    answers = iter([{"action": "accept"}, {"action": action}])
    with connect(gate, url=lambda params: next(answers)) as client:
        with pytest.raises(mcp_sync.UrlElicitationRequired) as info:
            client.call_tool("open", {"door": "front"})
    assert info.value.elicitations == PREREQUISITES
    assert gate.calls == ["front"]


@pytest.mark.parametrize("path", CALLS)
def test_a_server_that_refuses_again_gets_exactly_one_retry(path):
    gate = Gatekeeper()
    handled = []
    with connect(gate, url=lambda params: handled.append(params) or {"action": "accept"}) as client:
        with pytest.raises(mcp_sync.UrlElicitationRequired) as info:
            CALLS[path](client, "always", {})
    assert info.value.message == "Still required."
    assert gate.calls == ["always", "always"] and len(handled) == 1


def test_answer_input_false_runs_no_handler():
    gate = Gatekeeper()
    handled = []
    with connect(gate, url=lambda params: handled.append(params) or {"action": "accept"}) as client:
        with pytest.raises(mcp_sync.UrlElicitationRequired):
            client.call_tool("open", {"door": "front"}, answer_input=False)
    assert handled == [] and gate.calls == ["front"]


def test_a_failing_url_handler_is_an_input_handler_error_and_nothing_is_resent():
    gate = Gatekeeper()

    def url(params):
        raise RuntimeError("no browser here")

    with connect(gate, url=url) as client:
        with pytest.raises(mcp_sync.InputHandlerError) as info:
            client.call_tool("open", {"door": "front"})
    assert "no browser here" in str(info.value)
    assert gate.calls == ["front"]


def test_malformed_elicitations_are_left_out():
    exc = mcp_sync.errors.server_error_from_wire({"code": -32042, "message": "m", "data": {"elicitations": [
        PREREQUISITES[0], "text", {"mode": "form", "elicitationId": "f", "url": "u", "message": "m"},
        {"mode": "url", "url": "u", "message": "no id"}]}}, method="tools/call")
    assert type(exc) is mcp_sync.UrlElicitationRequired and exc.elicitations == [PREREQUISITES[0]]
    assert mcp_sync.errors.server_error_from_wire({"code": -32042, "message": "m"}).elicitations == []


def test_a_probe_answered_with_32042_is_not_taken_for_a_stateless_server():
    from mcp_sync.protocol import versions

    verdict = versions.read_probe_answer({"jsonrpc": "2.0", "id": 1, "error": {"code": -32042, "message": "x"}},
                                         ["2026-07-28", "2025-11-25"])
    assert isinstance(verdict, versions.FallBack)


def test_the_retry_is_not_sent_once_the_calls_total_time_is_spent():
    gate = Gatekeeper()

    def slow_person(params):
        gate.satisfied.set()
        threading.Event().wait(0.3)  # the person takes longer than max_total_timeout (a lower bound, not a race)
        return {"action": "accept"}

    with connect(gate, url=slow_person) as client:
        with pytest.raises(mcp_sync.RequestTimeout, match="maximum total timeout"):
            client.call_tool("open", {"door": "front"}, max_total_timeout=0.2)
    assert gate.calls == ["front"]


@pytest.mark.parametrize("path", CALLS)
@pytest.mark.parametrize("handler", ["none", "declines", "accepts"])
def test_a_refusal_raised_again_leaves_no_reference_cycle(path, handler):
    # The refusal is kept while the handlers run and raised again (or the
    # second one raised): the frames in its traceback must not hold it in
    # turn, or every refused call leaves its frames for the cyclic collector.
    gate = Gatekeeper()
    handlers = {"url": lambda params: {"action": handler[:-1]}} if handler != "none" else {}
    tool, args = ("always", {}) if handler == "accepts" else ("open", {"door": "front"})
    with connect(gate, **handlers) as client:
        call = lambda: CALLS[path](client, tool, args)  # noqa: E731
        assert cyclic_garbage(call, mcp_sync.UrlElicitationRequired) == 0
