"""Tests of servers that ask back (`ToolContext.elicit`, `elicit_url`, `sample`,
`list_roots`, `ping_client`, `ask_all`) in both eras:

* stateless (2026-07-28): multi round-trip requests, InputRequiredResult,
  sealed `requestState`, -32021 for a missing client capability;
* initialize era (2025-11-25, 2025-06-18): server-to-client JSON-RPC requests
  answered through `ServerSession.receive()`, over stdio, and over Streamable
  HTTP (the request on the POST's SSE stream, the answer POSTed back).

Every message is checked against the schema of the revision in use.
Synchronisation is by Condition/Event waits with timeouts, never by sleeping.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcp_sync.testing import (
    ClientError,
    HTTPServer,
    MissingClientCapability,
    RequestCancelled,
    Server,
    ToolContext,
    demo_server,
)
from tests.testing.schema_util import (
    LEGACY,
    META_CAPS,
    META_SERVER_INFO,
    MODERN,
    check_notification,
    check_response,
    validate,
)
from tests.testing.peers import WAIT, Conn, Proc, modern_meta
from tests.testing.raw_http import Client, SSEReader, check_error_body, modern_headers

ALL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {"listChanged": False},
}
FORM_ONLY: dict[str, Any] = {"elicitation": {}}

BOOKED = {"action": "accept", "content": {"guests": 4, "name": "Ada"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "A short summary."},
           "model": "test-model", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///home/ada/project", "name": "Project"}, {"uri": "file:///tmp"}]}
SERVER_REQUEST_RESULTS = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
    "ping": "EmptyResult",
}


# --------------------------------------------------------------------------
# Schema checks of the new shapes


def check_input_required(result: dict[str, Any], method: str = "tools/call") -> dict[str, Any]:
    """An InputRequiredResult as this server sends it; returns its inputRequests."""
    validate(MODERN, "InputRequiredResult", result)
    assert result["resultType"] == "input_required"
    assert set(result) == {"resultType", "inputRequests", "requestState", "_meta"}, result
    assert set(result["_meta"][META_SERVER_INFO]) >= {"name", "version"}
    assert isinstance(result["requestState"], str) and result["requestState"]
    requests: dict[str, Any] = result["inputRequests"]
    validate(MODERN, "InputRequests", requests)
    assert requests
    for key, request in requests.items():
        assert key.startswith("input-")
        definition = {"elicitation/create": "ElicitRequest", "sampling/createMessage": "CreateMessageRequest",
                      "roots/list": "ListRootsRequest"}[request["method"]]
        validate(MODERN, definition, request)
        assert "id" not in request and "jsonrpc" not in request
    return requests


def check_server_request(revision: str, message: dict[str, Any]) -> None:
    """A server-to-client JSON-RPC request of the initialize era."""
    assert isinstance(message["id"], str) and message["id"].startswith("s-")
    validate(revision, "JSONRPCRequest", message)
    validate(revision, "ServerRequest", message)


def check_missing_capability(message: dict[str, Any], required: dict[str, Any]) -> None:
    assert message["error"]["code"] == -32021, message
    assert message["error"]["data"] == {"requiredCapabilities": required}
    validate(MODERN, "MissingRequiredClientCapabilityError", message)


def check_messages(revision: str, messages: list[dict[str, Any]]) -> None:
    """Every server message: requests, notifications (responses are checked where they are awaited)."""
    for msg in messages:
        if "method" in msg and "id" in msg:
            check_server_request(revision, msg)
        elif "method" in msg:
            check_notification(revision, msg)


# --------------------------------------------------------------------------
# In-process peers


class Asker(Conn):
    """A Conn that can initialize with client capabilities and answer server requests."""

    def initialize_with(self, capabilities: dict[str, Any], version: str = LEGACY[0]) -> dict[str, Any]:
        self.stateless = False
        rid = next(self._ids)
        self.methods[rid] = "initialize"
        self.write({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "test-client", "version": "1"}}})
        msg = self.wait_for(lambda m: m.get("id") == rid and ("result" in m or "error" in m))
        self.legacy_version = msg["result"]["protocolVersion"]
        check_response(self.revision, "initialize", msg)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = msg["result"]
        return result

    def server_request(self, method: str | None = None, nth: int = 0) -> dict[str, Any]:
        """The nth server-to-client request (of `method`), waited for and schema-checked."""
        def matching() -> list[dict[str, Any]]:
            return [m for m in self.messages if "method" in m and "id" in m
                    and (method is None or m["method"] == method)]

        with self.cond:
            if not self.cond.wait_for(lambda: len(matching()) > nth, WAIT):
                pytest.fail(f"timed out waiting for a server request {method}; got {self.messages[-5:]}")
            msg = matching()[nth]
        check_server_request(self.revision, msg)
        return msg

    def answer(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        validate(self.revision, SERVER_REQUEST_RESULTS[request["method"]], result)
        self.write({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def raw_response(self, request_id: Any) -> dict[str, Any]:
        """The response to `request_id`, not schema-checked (an InputRequiredResult, say)."""
        with self.cond:
            if not self.cond.wait_for(lambda: request_id in self.by_id, WAIT):
                pytest.fail(f"timed out waiting for the response to {request_id!r}; got {self.messages[-5:]}")
            return self.by_id[request_id]

    def ask_round(self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None,
                  valid: bool = True, **extra: Any) -> dict[str, Any]:
        """One stateless request (with `extra` params: inputResponses, requestState); its raw
        response. The request is schema-checked unless it is deliberately invalid (`valid=False`)."""
        body = dict(params)
        body.update(extra)
        body["_meta"] = modern_meta(**{META_CAPS: ALL_CAPS if caps is None else caps})
        rid = next(self._ids)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}
        if valid:
            validate(MODERN, "ClientRequest", message)
        self.methods[rid] = method
        self.write(message)
        return self.raw_response(rid)

    def final(self, method: str, msg: dict[str, Any]) -> dict[str, Any]:
        check_response(MODERN, method, msg)
        result: dict[str, Any] = msg["result"]
        return result


@pytest.fixture
def askers() -> Iterator[Callable[..., Asker]]:
    opened: list[Asker] = []

    def open_asker(server: Server | None = None) -> Asker:
        asker = Asker(server if server is not None else demo_server())
        opened.append(asker)
        return asker

    yield open_asker
    for asker in opened:
        asker.close()
        check_messages(asker.revision if asker.legacy_version else MODERN, asker.messages)


def text_of(result: dict[str, Any]) -> str:
    text: str = result["content"][0]["text"]
    return text


def call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return params


# --------------------------------------------------------------------------
# Stateless era: multi round-trip requests


@pytest.mark.parametrize("tool,arguments,expected_method,expected_params", [
    ("book_table", {"date": "Friday"}, "elicitation/create",
     {"mode": "form", "message": "Booking a table for Friday: how many guests, and under which name?"}),
    ("login", {}, "elicitation/create",
     {"mode": "url", "message": "Please sign in to continue.", "url": "https://example.com/login"}),
    ("summarize", {"text": "Long text."}, "sampling/createMessage",
     {"maxTokens": 100, "systemPrompt": "You summarize text in one sentence."}),
    ("show_roots", {}, "roots/list", {}),
    ("defaults_form", {}, "elicitation/create", {"mode": "form"}),
])
def test_input_required_shape(askers: Any, tool: str, arguments: dict[str, Any], expected_method: str,
                              expected_params: dict[str, Any]) -> None:
    asker = askers()
    msg = asker.ask_round("tools/call", call(tool, arguments))
    validate(MODERN, "JSONRPCResultResponse", msg)
    requests = check_input_required(msg["result"])
    assert list(requests) == ["input-1"]
    request = requests["input-1"]
    assert request["method"] == expected_method
    params = request.get("params", {})
    assert {k: params[k] for k in expected_params} == expected_params
    if tool == "show_roots":
        assert request == {"method": "roots/list"}
    if tool == "login":
        assert "elicitationId" not in params  # not part of the stateless revision
    if tool == "defaults_form":
        fields = params["requestedSchema"]["properties"]
        assert {f.get("type") for f in fields.values()} == {"string", "integer", "number", "boolean"}
        assert any("enum" in f for f in fields.values())
        assert all("default" in f for f in fields.values())


@pytest.mark.parametrize("tool,arguments,answer,expected", [
    ("book_table", {"date": "Friday"}, BOOKED, "Booked for 4 under Ada"),
    ("book_table", {"date": "Friday"}, {"action": "accept", "content": {"name": "Bo"}}, "Booked for 2 under Bo"),
    ("book_table", {"date": "Friday"}, {"action": "decline"}, "Cancelled by user"),
    ("book_table", {"date": "Friday"}, {"action": "cancel"}, "Cancelled by user"),
    ("login", {}, {"action": "accept"}, "login: accept"),
    ("summarize", {"text": "Long text."}, SAMPLED, "A short summary."),
    ("show_roots", {}, ROOTS, "file:///home/ada/project\nfile:///tmp"),
    ("defaults_form", {}, {"action": "accept", "content": {"nickname": "Ada", "age": 36, "score": 7,
                                                            "color": "green", "subscribe": True}},
     '{"age": 36, "color": "green", "nickname": "Ada", "score": 7, "subscribe": true}'),
    ("nag", {"cancel_after": 0}, {"action": "accept", "content": {"answer": "yes"}}, "answered: accept"),
])
def test_stateless_round_trip(askers: Any, tool: str, arguments: dict[str, Any], answer: dict[str, Any],
                              expected: str) -> None:
    asker = askers()
    first = asker.ask_round("tools/call", call(tool, arguments))
    requests = check_input_required(first["result"])
    [(key, _request)] = requests.items()
    validate(MODERN, "InputResponse", answer)
    retry = asker.ask_round("tools/call", call(tool, arguments), inputResponses={key: answer},
                            requestState=first["result"]["requestState"])
    assert retry["id"] != first["id"]
    result = asker.final("tools/call", retry)
    assert text_of(result) == expected and not result.get("isError")


def test_two_rounds_carry_earlier_answers_in_the_state(askers: Any) -> None:
    asker = askers()
    first = asker.ask_round("tools/call", call("ask_twice"), caps=FORM_ONLY)
    assert list(check_input_required(first["result"])) == ["input-1"]
    state1 = first["result"]["requestState"]
    second = asker.ask_round("tools/call", call("ask_twice"), caps=FORM_ONLY, requestState=state1,
                             inputResponses={"input-1": {"action": "accept", "content": {"first": "red"}}})
    requests = check_input_required(second["result"])
    assert list(requests) == ["input-2"]
    assert requests["input-2"]["params"]["message"] == "Second question: an animal?"
    state2 = second["result"]["requestState"]
    assert state2 != state1
    # The client sends only the answers to the last round: the first is in the state.
    third = asker.ask_round("tools/call", call("ask_twice"), caps=FORM_ONLY, requestState=state2,
                            inputResponses={"input-2": {"action": "accept", "content": {"second": "cat"}}})
    assert text_of(asker.final("tools/call", third)) == "red and cat"
    # A decline in the second round ends it too.
    declined = asker.ask_round("tools/call", call("ask_twice"), caps=FORM_ONLY, requestState=state2,
                               inputResponses={"input-2": {"action": "decline"}})
    assert text_of(asker.final("tools/call", declined)) == "Cancelled by user"


def test_missing_responses_ask_again(askers: Any) -> None:
    asker = askers()
    first = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}))
    state = first["result"]["requestState"]
    asked = first["result"]["inputRequests"]
    for extra in ({"requestState": state},
                  {"requestState": state, "inputResponses": {}},
                  {"requestState": state, "inputResponses": {"unknown": {"action": "accept"}}},
                  # answers without a state answer no question of ours
                  {"inputResponses": {"input-1": BOOKED}}):
        again = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}), **extra)
        assert check_input_required(again["result"]) == asked, extra
    # Unexpected extra answers are ignored next to the expected one.
    done = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}), requestState=state,
                           inputResponses={"input-1": BOOKED, "input-9": {"action": "decline"}})
    assert text_of(asker.final("tools/call", done)) == "Booked for 4 under Ada"


def _flip(text: str, index: int) -> str:
    return text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1:]


def test_tampered_state_is_rejected(askers: Any) -> None:
    asker = askers()
    first = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}))
    state: str = first["result"]["requestState"]
    payload, mac = state.split(".")
    raw = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert raw["p"] == {"input-1": "elicitation/create"} and raw["a"] == {}
    forged_payload = dict(raw, a={"input-1": {"m": "elicitation/create", "r": BOOKED}})
    forged = base64.urlsafe_b64encode(json.dumps(forged_payload).encode()).rstrip(b"=").decode() + "." + mac
    for bad in (_flip(state, 5), _flip(state, len(state) - 3), payload, forged, "", "not.base64!", "x" * 40):
        msg = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}), requestState=bad,
                              inputResponses={"input-1": BOOKED})
        assert msg["error"]["code"] == -32602 and "requestState" in msg["error"]["message"], (bad, msg)
        check_error_body(MODERN, msg)
    msg = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}), valid=False, requestState=12)
    assert msg["error"]["code"] == -32602
    # Bound to its request: another tool, other arguments, another method.
    for method, params in (("tools/call", call("book_table", {"date": "Tuesday"})),
                           ("tools/call", call("defaults_form")),
                           ("prompts/get", {"name": "personal_greeting"})):
        msg = asker.ask_round(method, params, requestState=state, inputResponses={"input-1": BOOKED})
        assert msg["error"]["code"] == -32602 and "another request" in msg["error"]["message"]


def test_state_key_is_per_server_unless_shared(askers: Any) -> None:
    first_server, other_server = demo_server(), demo_server()
    first = askers(first_server).ask_round("tools/call", call("book_table", {"date": "Monday"}))
    state = first["result"]["requestState"]
    elsewhere = askers(other_server).ask_round("tools/call", call("book_table", {"date": "Monday"}),
                                               requestState=state, inputResponses={"input-1": BOOKED})
    assert elsewhere["error"]["code"] == -32602
    # Servers given the same key accept each other's state (a horizontally scaled deployment).
    key = b"k" * 32
    shared_a, shared_b = Server(request_state_key=key), Server(request_state_key=key)
    for server in (shared_a, shared_b):
        @server.tool(input_schema={"type": "object"})
        def confirm(args: dict[str, Any], ctx: ToolContext) -> str:
            return str(ctx.elicit("Sure?", {"type": "object", "properties": {}})["action"])
    first = askers(shared_a).ask_round("tools/call", call("confirm"))
    done = askers(shared_b).ask_round("tools/call", call("confirm"), requestState=first["result"]["requestState"],
                                      inputResponses={"input-1": {"action": "accept"}})
    assert text_of(askers().final("tools/call", done)) == "accept"
    with pytest.raises(ValueError):
        Server(request_state_key=b"short")
    with pytest.raises(ValueError):
        Server(request_state_ttl=-1)


def test_expired_state_is_rejected(askers: Any) -> None:
    server = demo_server()
    server._sealer.ttl = 0.0  # every state is expired as soon as it is issued
    asker = askers(server)
    first = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}))
    msg = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}),
                          requestState=first["result"]["requestState"], inputResponses={"input-1": BOOKED})
    assert msg["error"]["code"] == -32602 and "expired" in msg["error"]["message"]


@pytest.mark.parametrize("responses", [
    {"input-1": {"action": "maybe"}},
    {"input-1": {"action": "accept", "content": "Ada"}},
    {"input-1": "accept"},
    ["not", "an", "object"],
])
def test_invalid_input_responses(askers: Any, responses: Any) -> None:
    asker = askers()
    first = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}))
    body = dict(call("book_table", {"date": "Monday"}), requestState=first["result"]["requestState"],
                inputResponses=responses, _meta=modern_meta(**{META_CAPS: ALL_CAPS}))
    asker.write({"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": body})
    msg = asker.raw_response("bad")
    assert msg["error"]["code"] == -32602 and "inputResponses" in msg["error"]["message"]
    check_error_body(MODERN, msg)


@pytest.mark.parametrize("tool,caps,required", [
    ("book_table", {}, {"elicitation": {"form": {}}}),
    ("book_table", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
    ("login", {"elicitation": {}}, {"elicitation": {"url": {}}}),
    ("login", {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
    ("summarize", {"elicitation": {}, "roots": {}}, {"sampling": {}}),
    ("show_roots", {"sampling": {}}, {"roots": {}}),
])
def test_missing_capability(askers: Any, tool: str, caps: dict[str, Any], required: dict[str, Any]) -> None:
    asker = askers()
    arguments = {"book_table": {"date": "Monday"}, "summarize": {"text": "t"}}.get(tool, {})
    msg = asker.ask_round("tools/call", call(tool, arguments), caps=caps)
    check_missing_capability(msg, required)


def test_empty_elicitation_capability_means_form(askers: Any) -> None:
    asker = askers()
    msg = asker.ask_round("tools/call", call("book_table", {"date": "Monday"}), caps={"elicitation": {}})
    check_input_required(msg["result"])


def test_sampling_tools_need_the_tools_capability(askers: Any) -> None:
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def agent(args: dict[str, Any], ctx: ToolContext) -> str:
        tool = {"name": "lookup", "inputSchema": {"type": "object"}}
        result = ctx.sample([{"role": "user", "content": {"type": "text", "text": "hi"}}], 10,
                            tools=[tool], tool_choice={"mode": "auto"})
        return str(result["model"])

    asker = askers(server)
    check_missing_capability(asker.ask_round("tools/call", call("agent"), caps={"sampling": {}}),
                             {"sampling": {"tools": {}}})
    msg = asker.ask_round("tools/call", call("agent"), caps={"sampling": {"tools": {}}})
    params = check_input_required(msg["result"])["input-1"]["params"]
    assert params["toolChoice"] == {"mode": "auto"} and params["tools"][0]["name"] == "lookup"


def test_ask_all_asks_in_one_round(askers: Any) -> None:
    server = Server()
    runs: list[int] = []

    @server.tool(input_schema={"type": "object"})
    def survey(args: dict[str, Any], ctx: ToolContext) -> str:
        runs.append(1)
        form, sampled, roots = ctx.ask_all([
            {"method": "elicitation/create",
             "params": {"mode": "form", "message": "Name?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}},
            {"method": "sampling/createMessage",
             "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5}},
            {"method": "roots/list"},
        ])
        return f"{form['content']['name']} / {sampled['model']} / {len(roots['roots'])}"

    asker = askers(server)
    first = asker.ask_round("tools/call", call("survey"))
    requests = check_input_required(first["result"])
    assert [(k, r["method"]) for k, r in requests.items()] == [
        ("input-1", "elicitation/create"), ("input-2", "sampling/createMessage"), ("input-3", "roots/list")]
    answers = {"input-1": {"action": "accept", "content": {"name": "Ada"}}, "input-2": SAMPLED, "input-3": ROOTS}
    validate(MODERN, "InputResponses", answers)
    # Half the answers: only the missing one is asked again, the rest travel in the state.
    partial = asker.ask_round("tools/call", call("survey"), requestState=first["result"]["requestState"],
                              inputResponses={"input-1": answers["input-1"], "input-3": ROOTS})
    assert list(check_input_required(partial["result"])) == ["input-2"]
    done = asker.ask_round("tools/call", call("survey"), requestState=partial["result"]["requestState"],
                           inputResponses={"input-2": SAMPLED})
    assert text_of(asker.final("tools/call", done)) == "Ada / test-model / 2"
    assert len(runs) == 3  # the tool runs from the start on every round


def test_a_broad_except_does_not_swallow_the_round(askers: Any) -> None:
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def careless(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            return str(ctx.list_roots()["roots"])
        except Exception as exc:  # noqa: BLE001 - on purpose
            return f"swallowed {exc!r}"

    check_input_required(askers(server).ask_round("tools/call", call("careless"))["result"])


def test_prompt_and_resource_ask_statelessly(askers: Any) -> None:
    asker = askers()
    first = asker.ask_round("prompts/get", {"name": "personal_greeting"})
    assert check_input_required(first["result"], "prompts/get")["input-1"]["params"]["message"] == "What is your name?"
    done = asker.ask_round("prompts/get", {"name": "personal_greeting"}, requestState=first["result"]["requestState"],
                           inputResponses={"input-1": {"action": "accept", "content": {"name": "Grace"}}})
    result = asker.final("prompts/get", done)
    assert result["messages"][0]["content"]["text"] == "Please greet Grace warmly, by name."

    first = asker.ask_round("resources/read", {"uri": "demo://secret/7"})
    assert "ttlMs" not in first["result"] and "cacheScope" not in first["result"]  # nothing to cache
    check_input_required(first["result"], "resources/read")
    for answer, text in (({"action": "accept", "content": {"confirm": True}}, "secret 7: the answer is 42"),
                         ({"action": "decline"}, "secret 7: not revealed")):
        done = asker.ask_round("resources/read", {"uri": "demo://secret/7"},
                               requestState=first["result"]["requestState"], inputResponses={"input-1": answer})
        assert asker.final("resources/read", done)["contents"][0]["text"] == text
    # The state of secret/7 does not unlock secret/8.
    other = asker.ask_round("resources/read", {"uri": "demo://secret/8"}, requestState=first["result"]["requestState"],
                            inputResponses={"input-1": {"action": "accept", "content": {"confirm": True}}})
    assert other["error"]["code"] == -32602


def test_stateless_ping_client_and_unaskable_methods_are_tool_errors(askers: Any) -> None:
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def pinger(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(ctx.ping_client())

    @server.tool(input_schema={"type": "object"})
    def odd(args: dict[str, Any], ctx: ToolContext) -> str:
        return str(ctx.request("tools/list"))

    asker = askers(server)
    for name, text in (("pinger", "cannot send requests"), ("odd", "cannot be asked")):
        result = asker.final("tools/call", asker.ask_round("tools/call", call(name)))
        assert result["isError"] is True and text in text_of(result)


# --------------------------------------------------------------------------
# Initialize era: server-to-client requests (in-process)


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_server_request_and_answer(askers: Any, version: str) -> None:
    asker = askers()
    asker.initialize_with(ALL_CAPS, version)
    rid = asker.start("tools/call", call("book_table", {"date": "Friday"}))
    request = asker.server_request("elicitation/create")
    assert request["id"] == "s-1"
    params = request["params"]
    assert params["requestedSchema"]["properties"]["guests"]["default"] == 2
    assert ("mode" in params) == (version != "2025-06-18")  # 2025-06-18 has no mode field
    asker.answer(request, BOOKED)
    assert text_of(asker.response(rid)["result"]) == "Booked for 4 under Ada"
    rid = asker.start("tools/call", call("book_table", {"date": "Saturday"}))
    second = asker.server_request("elicitation/create", nth=1)
    assert second["id"] == "s-2"  # ids come from a per-session counter
    asker.answer(second, {"action": "decline"})
    assert text_of(asker.response(rid)["result"]) == "Cancelled by user"


@pytest.mark.parametrize("tool,arguments,method,answer,expected", [
    ("login", {}, "elicitation/create", {"action": "accept"}, "login: accept"),
    ("summarize", {"text": "Long text."}, "sampling/createMessage", SAMPLED, "A short summary."),
    ("show_roots", {}, "roots/list", ROOTS, "file:///home/ada/project\nfile:///tmp"),
    ("defaults_form", {}, "elicitation/create",
     {"action": "accept", "content": {"nickname": "N", "age": 1, "score": 2, "color": "red", "subscribe": False}},
     '{"age": 1, "color": "red", "nickname": "N", "score": 2, "subscribe": false}'),
])
def test_legacy_demo_tools(askers: Any, tool: str, arguments: dict[str, Any], method: str,
                           answer: dict[str, Any], expected: str) -> None:
    asker = askers()
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call(tool, arguments))
    request = asker.server_request(method)
    if tool == "login":
        assert request["params"]["mode"] == "url" and request["params"]["url"] == "https://example.com/login"
        assert isinstance(request["params"]["elicitationId"], str) and request["params"]["elicitationId"]
    if tool == "show_roots":
        assert "params" not in request
    asker.answer(request, answer)
    assert text_of(asker.response(rid)["result"]) == expected


def test_legacy_error_and_invalid_answers(askers: Any) -> None:
    asker = askers()
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call("book_table", {"date": "Friday"}))
    request = asker.server_request()
    asker.write({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "no UI available"}})
    result = asker.response(rid)["result"]
    assert result["isError"] is True and text_of(result) == "no UI available"
    rid = asker.start("tools/call", call("summarize", {"text": "x"}))
    request = asker.server_request("sampling/createMessage")
    asker.write({"jsonrpc": "2.0", "id": request["id"], "result": {"role": "assistant"}})
    result = asker.response(rid)["result"]
    assert result["isError"] is True and "not a valid CreateMessageResult" in text_of(result)


@pytest.mark.parametrize("version,caps,tool,text", [
    (LEGACY[0], {}, "book_table", "elicitation.form"),
    (LEGACY[0], {"elicitation": {"form": {}}}, "login", "elicitation.url"),
    (LEGACY[0], {"elicitation": {}}, "summarize", "sampling"),
    (LEGACY[0], {"sampling": {}}, "show_roots", "roots"),
    ("2025-06-18", ALL_CAPS, "login", "2025-11-25"),
])
def test_legacy_missing_capability_is_a_tool_error(askers: Any, version: str, caps: dict[str, Any], tool: str,
                                                   text: str) -> None:
    asker = askers()
    asker.initialize_with(caps, version)
    arguments = {"book_table": {"date": "Monday"}, "summarize": {"text": "t"}}.get(tool, {})
    result = asker.call_tool(tool, arguments)
    assert result["isError"] is True and text in text_of(result)
    assert [m for m in asker.messages if "method" in m and "id" in m] == []  # nothing was sent


def spy(server: Server, name: str) -> dict[str, Any]:
    """Wrap a registered tool: the dict gets `done` (an Event) and `error` (what it raised)."""
    record: dict[str, Any] = {"done": threading.Event(), "error": None}
    tool = server._tools[name]
    original = tool.fn

    def wrapper(args: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            return original(args, ctx)
        except BaseException as exc:
            record["error"] = exc
            raise
        finally:
            record["done"].set()

    tool.fn = wrapper
    return record


def test_legacy_cancellation_while_waiting(askers: Any) -> None:
    server = demo_server()
    record = spy(server, "book_table")
    asker = askers(server)
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call("book_table", {"date": "Friday"}))
    request = asker.server_request()
    asker.cancel(rid)
    assert record["done"].wait(WAIT) and isinstance(record["error"], RequestCancelled)
    # The server withdraws its own request ...
    withdrawn = asker.wait_for(lambda m: m.get("method") == "notifications/cancelled")
    assert withdrawn["params"]["requestId"] == request["id"]
    # ... and a late answer is ignored; the session goes on.
    asker.answer(request, BOOKED)
    assert asker.result("ping") == {}
    assert asker.responses_for(rid) == []


def test_session_close_while_waiting(askers: Any) -> None:
    server = demo_server()
    record = spy(server, "show_roots")
    asker = askers(server)
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call("show_roots"))
    asker.server_request("roots/list")
    asker.close()  # joins the tool's thread: it must stop waiting
    assert record["done"].is_set() and isinstance(record["error"], RequestCancelled)
    assert asker.responses_for(rid) == []


def test_nag_withdraws_its_request(askers: Any) -> None:
    asker = askers()
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call("nag", {"cancel_after": 0}))
    response = asker.response(rid)
    assert text_of(response["result"]) == "gave up"
    request = asker.server_request("elicitation/create")
    withdrawn = asker.wait_for(lambda m: m.get("method") == "notifications/cancelled")
    assert withdrawn["params"] == {"requestId": request["id"], "reason": "no answer within 0 seconds"}
    assert asker.index_of(request) < asker.index_of(withdrawn) < asker.index_of(response)
    asker.answer(request, {"action": "accept", "content": {"answer": "too late"}})  # ignored
    # Answered in time: no withdrawal.
    rid = asker.start("tools/call", call("nag", {"cancel_after": 600}))
    request = asker.server_request("elicitation/create", nth=1)
    asker.answer(request, {"action": "decline"})
    assert text_of(asker.response(rid)["result"]) == "answered: decline"
    assert len(asker.notifications("notifications/cancelled")) == 1


def test_ping_client_and_unknown_answers(askers: Any) -> None:
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def pinger(args: dict[str, Any], ctx: ToolContext) -> str:
        return f"pong {ctx.ping_client()}"

    asker = askers(server)
    asker.initialize_with({})  # ping needs no capability
    asker.write({"jsonrpc": "2.0", "id": "s-99", "result": {}})  # answers nothing: ignored
    asker.write({"jsonrpc": "2.0", "id": "s-98", "error": {"code": 1, "message": "x"}})
    rid = asker.start("tools/call", call("pinger"))
    request = asker.server_request("ping")
    assert "params" not in request
    asker.answer(request, {})
    assert text_of(asker.response(rid)["result"]) == "pong {}"


def test_legacy_ask_all_sends_every_request_first(askers: Any) -> None:
    server = Server()

    @server.tool(input_schema={"type": "object"})
    def survey(args: dict[str, Any], ctx: ToolContext) -> str:
        roots, form = ctx.ask_all([
            {"method": "roots/list"},
            {"method": "elicitation/create", "params": {
                "message": "Name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}}},
        ])
        return f"{len(roots['roots'])} {form['action']}"

    asker = askers(server)
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call("survey"))
    elicit = asker.server_request("elicitation/create")  # both are out before either is answered
    roots = asker.server_request("roots/list")
    asker.answer(elicit, {"action": "cancel"})
    asker.answer(roots, ROOTS)
    assert text_of(asker.response(rid)["result"]) == "2 cancel"


def test_legacy_cancelled_ask_all_withdraws_every_open_request(askers: Any) -> None:
    server = Server()
    stopped = threading.Event()

    @server.tool(input_schema={"type": "object"})
    def survey(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            ctx.ask_all([{"method": "roots/list"}, {"method": "roots/list"}, {"method": "roots/list"}])
        finally:
            stopped.set()
        return "unreachable"

    asker = askers(server)
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("tools/call", call("survey"))
    first = asker.server_request("roots/list")
    asker.server_request("roots/list", nth=2)
    asker.answer(first, ROOTS)  # one is answered: only the other two are withdrawn
    asker.cancel(rid)
    assert stopped.wait(WAIT)
    withdrawn = sorted(n["params"]["requestId"] for n in asker.notifications("notifications/cancelled"))
    assert withdrawn == ["s-2", "s-3"]
    assert asker.responses_for(rid) == []


def test_legacy_timeout_raises_in_the_tool(askers: Any) -> None:
    server = Server()
    seen: list[BaseException] = []

    @server.tool(input_schema={"type": "object"})
    def impatient(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            ctx.sample([{"role": "user", "content": {"type": "text", "text": "hi"}}], 5, timeout=0)
        except TimeoutError as exc:
            seen.append(exc)
            raise
        return "sampled"

    asker = askers(server)
    asker.initialize_with(ALL_CAPS)
    result = asker.call_tool("impatient")
    assert result["isError"] is True and "did not answer sampling/createMessage" in text_of(result)
    assert len(seen) == 1
    assert asker.notifications("notifications/cancelled")[0]["params"]["requestId"] == "s-1"


def test_legacy_prompt_and_resource_ask(askers: Any) -> None:
    asker = askers()
    asker.initialize_with(ALL_CAPS)
    rid = asker.start("prompts/get", {"name": "personal_greeting"})
    asker.answer(asker.server_request(), {"action": "accept", "content": {"name": "Grace"}})
    assert asker.response(rid)["result"]["messages"][0]["content"]["text"] == "Please greet Grace warmly, by name."
    rid = asker.start("resources/read", {"uri": "demo://secret/3"})
    asker.answer(asker.server_request(nth=1), {"action": "accept", "content": {"confirm": True}})
    assert asker.response(rid)["result"]["contents"][0]["text"] == "secret 3: the answer is 42"
    # A failed question is a JSON-RPC error for a prompt (prompts have no isError).
    rid = asker.start("prompts/get", {"name": "personal_greeting"})
    request = asker.server_request(nth=2)
    asker.write({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "nope"}})
    error = asker.response(rid)["error"]
    assert error["code"] == -32603 and "nope" in error["message"]


def test_exceptions_are_exported() -> None:
    assert issubclass(ClientError, Exception) and issubclass(MissingClientCapability, Exception)
    error = ClientError(-1, "m", {"d": 1})
    assert (error.code, error.message, error.data, str(error)) == (-1, "m", {"d": 1}, "m")


# --------------------------------------------------------------------------
# Over stdio


@pytest.fixture
def stdio() -> Iterator[Callable[[], Proc]]:
    started: list[Proc] = []

    def start() -> Proc:
        proc = Proc()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


def test_stdio_server_request_on_stdout(stdio: Callable[[], Proc]) -> None:
    proc = stdio()
    proc.stateless = False
    rid = 1
    proc.methods[rid] = "initialize"
    proc.write({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
        "protocolVersion": LEGACY[0], "capabilities": ALL_CAPS, "clientInfo": {"name": "t", "version": "1"}}})
    proc.legacy_version = proc.wait_for(lambda m: m.get("id") == rid)["result"]["protocolVersion"]
    proc.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call_id = proc.start("tools/call", call("book_table", {"date": "Sunday"}))
    request = proc.wait_for(lambda m: m.get("method") == "elicitation/create")
    check_server_request(LEGACY[0], request)
    proc.write({"jsonrpc": "2.0", "id": request["id"], "result": BOOKED})
    assert text_of(proc.response(call_id)["result"]) == "Booked for 4 under Ada"
    # A stateless request on the same pipe takes the MRTR path instead.
    proc.stateless = True
    rid = proc.start("tools/call", call("book_table", {"date": "Sunday"}), meta={META_CAPS: ALL_CAPS})
    check_input_required(proc.wait_for(lambda m: m.get("id") == rid)["result"])
    assert proc.finish() == 0
    check_messages(LEGACY[0], proc.messages)


# --------------------------------------------------------------------------
# Over Streamable HTTP


def http_initialize(client: Client, capabilities: dict[str, Any], version: str = LEGACY[0]) -> None:
    message = {"jsonrpc": "2.0", "id": next(client.ids), "method": "initialize",
               "params": {"protocolVersion": version, "capabilities": capabilities,
                          "clientInfo": {"name": "test-client", "version": "1"}}}
    reply = client.exchange("POST", json.dumps(message))
    assert reply.status == 200, reply.body
    client.version = reply.result["protocolVersion"]
    client.session_id = reply.headers.get("Mcp-Session-Id")
    assert client.legacy_notify("notifications/initialized").status == 202


def same_session(connect: Callable[[HTTPServer], Client], http_server: HTTPServer, client: Client) -> Client:
    other = connect(http_server)
    other.session_id, other.version = client.session_id, client.version
    return other


def start_call(client: Client, name: str, arguments: dict[str, Any], request_id: Any) -> http.client.HTTPResponse:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call(name, arguments)}
    return client.open("POST", json.dumps(message), client.legacy_headers())


def next_message(reader: SSEReader) -> dict[str, Any]:
    while True:
        event = reader.next()
        assert event is not None, "the stream ended early"
        if event.data:
            message: dict[str, Any] = json.loads(event.data)
            return message


def post_answer(client: Client, message: dict[str, Any]) -> None:
    reply = client.exchange("POST", json.dumps(message), client.legacy_headers())
    assert reply.status == 202 and reply.body == b""


@pytest.mark.parametrize("mode", ["auto", "json", "sse"])
def test_http_legacy_request_on_the_post_stream(serve: Any, connect: Any, mode: str) -> None:
    http_server = serve(response_mode=mode)
    client = connect(http_server)
    http_initialize(client, ALL_CAPS)
    response = start_call(client, "book_table", {"date": "Friday"}, "call-1")
    assert response.status == 200
    assert response.headers.get("Content-Type") == "text/event-stream"  # forced, even in json mode
    reader = SSEReader(response)
    request = next_message(reader)
    check_server_request(LEGACY[0], request)
    assert request["method"] == "elicitation/create" and request["id"] == "s-1"
    post_answer(same_session(connect, http_server, client), {"jsonrpc": "2.0", "id": "s-1", "result": BOOKED})
    final = next_message(reader)
    check_response(LEGACY[0], "tools/call", final)
    assert final["id"] == "call-1" and text_of(final["result"]) == "Booked for 4 under Ada"
    assert reader.rest() == []
    assert client.legacy("ping").status == 200  # the connection is reusable


def test_http_legacy_error_answer_and_ping(serve: Any, connect: Any) -> None:
    server = demo_server()

    @server.tool(input_schema={"type": "object"})
    def pinger(args: dict[str, Any], ctx: ToolContext) -> str:
        return f"pong {ctx.ping_client()}"

    http_server = serve(server)
    client = connect(http_server)
    answerer = same_session(connect, http_server, client)
    http_initialize(client, {"roots": {}})
    answerer.version = client.version
    answerer.session_id = client.session_id
    reader = SSEReader(start_call(client, "show_roots", {}, 7))
    request = next_message(reader)
    assert request["method"] == "roots/list"
    post_answer(answerer, {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no roots"}})
    final = next_message(reader)
    assert final["result"]["isError"] is True and text_of(final["result"]) == "no roots"
    reader.rest()
    reader = SSEReader(start_call(client, "pinger", {}, 8))
    request = next_message(reader)
    check_server_request(LEGACY[0], request)
    assert request["method"] == "ping"
    post_answer(answerer, {"jsonrpc": "2.0", "id": request["id"], "result": {}})
    assert text_of(next_message(reader)["result"]) == "pong {}"


def test_http_legacy_cancel_while_waiting(serve: Any, connect: Any) -> None:
    server = demo_server()
    record = spy(server, "book_table")
    http_server = serve(server)
    client = connect(http_server)
    http_initialize(client, ALL_CAPS)
    listener = same_session(connect, http_server, client)
    get_stream = listener.open_get()
    assert get_stream.status == 200
    reader = SSEReader(start_call(client, "book_table", {"date": "Friday"}, "slow"))
    request = next_message(reader)
    notifier = same_session(connect, http_server, client)
    assert notifier.legacy_notify("notifications/cancelled", {"requestId": "slow", "reason": "user"}).status == 202
    assert record["done"].wait(WAIT) and isinstance(record["error"], RequestCancelled)
    assert reader.rest() == []  # the POST stream ends without a response
    # The withdrawal of the server's own request belongs to no live request: the GET stream.
    withdrawn = next_message(SSEReader(get_stream))
    check_notification(LEGACY[0], withdrawn)
    assert withdrawn["method"] == "notifications/cancelled" and withdrawn["params"]["requestId"] == request["id"]
    post_answer(notifier, {"jsonrpc": "2.0", "id": request["id"], "result": BOOKED})  # late: ignored


def test_http_legacy_nag(serve: Any, connect: Any) -> None:
    http_server = serve(response_mode="json")
    client = connect(http_server)
    http_initialize(client, ALL_CAPS)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call("nag", {"cancel_after": 0})}
    reply = client.exchange("POST", json.dumps(message), client.legacy_headers())
    assert reply.content_type == "text/event-stream"
    request, withdrawn, final = reply.messages
    check_response(LEGACY[0], "tools/call", final)
    check_server_request(LEGACY[0], request)
    check_notification(LEGACY[0], withdrawn)
    assert withdrawn["params"]["requestId"] == request["id"]
    assert text_of(final["result"]) == "gave up"


def test_http_legacy_missing_capability_keeps_json(serve: Any, connect: Any) -> None:
    http_server = serve(response_mode="json")
    client = connect(http_server)
    http_initialize(client, {})
    reply = client.legacy("tools/call", call("book_table", {"date": "Friday"}))
    assert reply.content_type == "application/json"
    assert reply.result["isError"] is True


def test_http_stateless_rounds_and_missing_capability(serve: Any, connect: Any) -> None:
    http_server = serve()
    client = connect(http_server)
    caps = {META_CAPS: {"elicitation": {}}}

    def round_trip(name: str, extra: dict[str, Any], status: int = 200) -> dict[str, Any]:
        message = client.message("tools/call", dict(call(name), **extra), meta=caps)
        response = client.exchange("POST", json.dumps(message), modern_headers(message))
        assert response.status == status and response.content_type == "application/json"
        last: dict[str, Any] = response.messages[-1]
        return last

    first = round_trip("ask_twice", {})
    requests = check_input_required(first["result"])
    assert list(requests) == ["input-1"]

    def retry(state: str, responses: dict[str, Any]) -> Any:
        return round_trip("ask_twice", {"requestState": state, "inputResponses": responses})

    second = retry(first["result"]["requestState"], {"input-1": {"action": "accept", "content": {"first": "blue"}}})
    assert list(check_input_required(second["result"])) == ["input-2"]
    third = retry(second["result"]["requestState"], {"input-2": {"action": "accept", "content": {"second": "owl"}}})
    check_response(MODERN, "tools/call", third)
    assert text_of(third["result"]) == "blue and owl"
    tampered = retry(_flip(second["result"]["requestState"], 3), {"input-2": {"action": "accept"}})
    assert tampered["error"]["code"] == -32602
    check_missing_capability(round_trip("show_roots", {}, status=400), {"roots": {}})


@pytest.mark.parametrize("stateless", [True, False])
def test_a_question_that_cannot_be_encoded_fails_in_the_tool_that_asks_it(askers: Any, stateless: bool) -> None:
    # Sent, it would be dropped by the transport that fails to write it,
    # and the tool would wait for an answer that cannot come.
    from tests.testing.unencodable_server import When

    server = Server()

    @server.tool
    def ask(args: dict[str, Any], ctx: ToolContext) -> Any:
        schema = {"type": "object", "properties": {"when": {"type": "string", "default": When()}}}
        return ctx.elicit("when?", schema, timeout=WAIT)

    asker = askers(server)
    if stateless:
        result = asker.final("tools/call", asker.ask_round("tools/call", {"name": "ask"}))
    else:
        asker.initialize_with(ALL_CAPS)
        result = asker.call_tool("ask")
    assert result["isError"] is True
    assert "cannot be encoded as JSON" in text_of(result) and "<When 2026-01-01>" in text_of(result)
