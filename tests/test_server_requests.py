"""Answering the server's requests (`mcp_sync.server_requests`): what the
server is told, on plain data and over a stdio pipe."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import mcp_sync
from mcp_sync.protocol import codes
from mcp_sync.protocol.jsonrpc import Refusal
from mcp_sync.protocol.schemas import SchemaCache
from mcp_sync.server_requests import ServerRequests

FORM = {"mode": "form", "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
URL = {"mode": "url", "message": "Log in", "url": "https://example.com/login", "elicitationId": "e1"}


def form(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


def url(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept"}


def answering(handlers: dict[str, Any], declared: dict[str, Any]) -> ServerRequests:
    requests = ServerRequests(handlers, SchemaCache())
    requests.declared = declared
    return requests


def refusal(requests: ServerRequests, method: str, params: Any) -> Refusal:
    with pytest.raises(Refusal) as info:
        requests.result({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, requests.handlers)
    return info.value


@pytest.mark.parametrize("declared, params", [
    ({"elicitation": {"form": {}}}, URL),                    # url not declared
    ({"elicitation": {}}, URL),                              # 2025-06-18's shape: form only
    ({"elicitation": {"url": {}}}, FORM),                    # form not declared
    ({"elicitation": {"form": {}, "url": {}}}, {**FORM, "mode": "voice"}),  # a mode no revision has
])
def test_an_elicitation_in_a_mode_not_declared_is_invalid_params(declared, params):
    # 2025-11-25 client/elicitation "Error Handling": a mode not declared in
    # the client's capabilities MUST be answered -32602; the client does
    # handle elicitation/create, so -32601 would tell the server otherwise.
    requests = answering({"form": form, "url": url}, declared)
    error = refusal(requests, "elicitation/create", params).error()
    assert error["code"] == codes.INVALID_PARAMS
    assert repr(params["mode"]) in error["message"]


def test_elicitation_not_declared_at_all_is_method_not_found():
    requests = answering({"sampling": form}, {"sampling": {}})
    assert refusal(requests, "elicitation/create", FORM).code == codes.METHOD_NOT_FOUND
    assert refusal(requests, "roots/list", {}).code == codes.METHOD_NOT_FOUND


def test_a_declared_mode_is_answered_by_its_handler():
    requests = answering({"form": form, "url": url}, {"elicitation": {"form": {}, "url": {}}})
    message = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": URL}
    assert requests.result(message, requests.handlers) == {"action": "accept"}


# An initialize-era server over stdio that sends, on `tools/call`, the raw
# messages in `arguments["send"]`, and answers the call with the responses
# it got to them once it has `len(send)` of them. It settles on the
# revision the client asks for, or on the one in argv[1] whatever is asked.
ASKER = r'''
import json, sys
version = sys.argv[1] if len(sys.argv) > 1 else None
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
call, want, got = None, 0, []
for line in sys.stdin:
    m = json.loads(line)
    if "method" not in m:
        got.append(m)
        if call is not None and len(got) >= want:
            send({"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text", "text": json.dumps(got)}]}})
            call, got = None, []
        continue
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": version or m["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "asker", "version": "1"}}})
    elif m["method"] == "tools/call":
        call, want = m["id"], len(m["params"]["arguments"]["send"])
        for message in m["params"]["arguments"]["send"]:
            send(message)
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}})
'''


def test_over_stdio_the_server_is_told_invalid_params_for_an_undeclared_mode(tmp_path):
    script = tmp_path / "asker.py"
    script.write_text(ASKER)
    with mcp_sync.connect([sys.executable, str(script)], protocol="2025-11-25", input_handlers={"form": form}) as client:
        asked = [{"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": URL}]
        answers = json.loads(client.call_tool("probe", {"send": asked}, timeout=10).text)
    assert [a["id"] for a in answers] == ["q1"]
    assert answers[0]["error"]["code"] == codes.INVALID_PARAMS


def test_a_revision_without_elicitation_has_it_refused_as_never_declared(tmp_path):
    # Pinned to 2025-03-26, which has no elicitation: the form handler is
    # not declared at initialize, so the server's elicitation/create is a
    # method the client does not handle (-32601), never run by the handler.
    script = tmp_path / "asker.py"
    script.write_text(ASKER)
    asked_the_handler = []

    def handler(params):
        asked_the_handler.append(params)
        return form(params)

    with mcp_sync.connect([sys.executable, str(script)], protocol="2025-03-26",
                          input_handlers={"form": handler}) as client:
        asked = [{"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": FORM}]
        answers = json.loads(client.call_tool("probe", {"send": asked}, timeout=10).text)
    assert answers[0]["error"]["code"] == codes.METHOD_NOT_FOUND and asked_the_handler == []


# -- a flood of server requests: each gets exactly one answer ------------------------------

REQUEST_FLOOD = str(Path(__file__).parent / "servers" / "request_flood.py")
FLOOD = 3000
ROOTS = {"roots": [{"uri": "file:///srv", "name": "srv"}]}


def test_over_stdio_every_request_of_a_flood_gets_exactly_one_answer():
    # 3,000 roots/list at once while no call waits: the handler pool takes
    # `max_server_requests`, the rest are refused ("too many server
    # requests"); every one of them must reach the server, once, or it
    # waits for ever. (Before the fix: 1,263-1,907 answers, the rest of
    # the refusals dropped by the sender's queue.)
    with mcp_sync.connect([sys.executable, REQUEST_FLOOD], protocol="2025-11-25",
                          input_handlers={"roots": lambda params: ROOTS}) as client:
        assert client.call_tool("flood", {"count": FLOOD}, timeout=30).text == "started"
        # The server answers as soon as it has every answer; `seconds` only
        # bounds a client that lost some (the report then says how many).
        got = json.loads(client.call_tool("answers", {"seconds": 20}, timeout=60).text)
        assert client.call_tool("answers", {"seconds": 20}, timeout=30).text  # still usable
    assert got["sent"] == FLOOD
    assert got["answered"] == FLOOD, got
    assert got["duplicates"] == 0 and got["strangers"] == 0
    assert got["results"] + got["errors"] == FLOOD and got["results"] >= 1
    assert set(got["messages"]) <= {"too many server requests in progress"}


def test_over_stdio_a_flood_of_pings_gets_a_result_each():
    # A ping is answered at once, without the handler pool, and its answer
    # is as small as a refusal: in a flood, each gets its `{}`, none is
    # refused or lost. (Before: 3,000 pings got 1,547-1,589 answers.)
    with mcp_sync.connect([sys.executable, REQUEST_FLOOD], protocol="2025-11-25") as client:
        assert client.call_tool("flood", {"count": FLOOD, "method": "ping"}, timeout=30).text == "started"
        got = json.loads(client.call_tool("answers", {"seconds": 20}, timeout=60).text)
    assert got["answered"] == FLOOD and got["results"] == FLOOD, got
    assert got["duplicates"] == 0 and got["strangers"] == 0


def test_in_process_every_request_of_a_flood_gets_exactly_one_answer():
    # The same flood from an in-process server (`mcp_sync.testing`), whose
    # own thread delivers each request to the client as it sends it.
    from mcp_sync.testing import ClientError, Server

    server = Server(name="asker")
    outcome: dict[str, Any] = {}

    @server.tool()
    def ask(args, ctx):
        # `ask_all` sends them all, then waits for every answer (in
        # order): a TimeoutError means some never came.
        try:
            ctx.ask_all([{"method": "roots/list"}] * FLOOD, timeout=20)
        except ClientError as exc:  # every one answered, some refused
            outcome["refused"] = str(exc)
        except TimeoutError as exc:
            outcome["timeout"] = str(exc)
        return "done"

    with mcp_sync.connect(server, protocol="2025-11-25", input_handlers={"roots": lambda params: ROOTS}) as client:
        assert client.call_tool("ask", {}, timeout=60).text == "done"
    assert "timeout" not in outcome, outcome
