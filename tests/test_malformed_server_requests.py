"""A server request that is JSON-RPC but malformed (params not an object,
method not a string) is answered with a JSON-RPC error, or dropped with a
warning when nobody can be answered; the connection, and every call in
flight on it, goes on. Over a real stdio pipe and the in-process transport.

What still fails the connection: a message that is not JSON-RPC 2.0 at all,
or that is neither a request, a notification nor a response.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync.protocol import codes

# An initialize-era server over stdio. `tools/call` of "probe" sends the raw
# messages in `arguments["send"]`, waits for `arguments["want"]` answers
# (messages without a method) and returns them as its result's text, in the
# order they came; then it answers the held call, if any. "hold" is held
# until a probe has been answered, after one progress notification (when
# asked for one) that tells the test it is in flight. `ping` is answered.
SERVER = r'''
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def text(request_id, value):
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": value}]}})
probe, want, got, held = None, 0, [], None
def finish():
    global probe, got, held
    text(probe, json.dumps(got))
    probe, got = None, []
    if held is not None:
        text(held, "released")
        held = None
for line in sys.stdin:
    m = json.loads(line)
    if "method" not in m:
        got.append(m)
        if probe is not None and len(got) >= want:
            finish()
        continue
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "malformed", "version": "1"}}})
    elif m["method"] == "ping":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
    elif m["method"] == "tools/call" and m["params"]["name"] == "hold":
        held = m["id"]
        token = m["params"].get("_meta", {}).get("progressToken")
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": 1}})
    elif m["method"] == "tools/call":
        arguments = m["params"]["arguments"]
        probe, want = m["id"], arguments["want"]
        for message in arguments["send"]:
            send(message)
        if len(got) >= want:
            finish()
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}})
'''

# A valid server request sent after the malformed one: its answer proves the
# client went on reading. Answers go out through one sender queue in the
# order their requests were routed, so an answer to the malformed request,
# had one been sent, would come before this one.
AFTER = {"jsonrpc": "2.0", "id": "after", "method": "ping"}
PONG = {"jsonrpc": "2.0", "id": "after", "result": {}}


@pytest.fixture
def server(tmp_path):
    script = tmp_path / "malformed_server.py"
    script.write_text(SERVER)
    return [sys.executable, str(script)]


def probe(client: mcp_sync.Client, send: list[Any], want: int) -> list[dict[str, Any]]:
    """What the server got back for `send`: the first `want` answers."""
    answers: list[dict[str, Any]] = json.loads(client.call_tool("probe", {"send": send, "want": want}, timeout=10).text)
    return answers


def probe_while_a_call_is_held(client: mcp_sync.Client, send: list[Any], want: int) -> list[dict[str, Any]]:
    """`probe`, while another call (`hold`) is in flight on the same
    connection; asserts that call was answered, not failed."""
    in_flight = threading.Event()
    outcome: list[Any] = []

    def hold() -> None:
        try:
            outcome.append(client.call_tool("hold", {}, progress=lambda _: in_flight.set(), timeout=20).text)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)
            in_flight.set()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert in_flight.wait(10), "the held call never reached the server"
        assert not outcome, f"the held call ended before the probe: {outcome}"
        answers = probe(client, send, want)
    finally:
        thread.join(20)
    assert outcome == ["released"]
    return answers


# -- answered with an error -----------------------------------------------------------------

ANSWERED = [
    pytest.param({"jsonrpc": "2.0", "id": 7, "method": "roots/list", "params": [1, 2]},
                 codes.INVALID_PARAMS, "Invalid params: params must be an object, not an array", id="params-array"),
    pytest.param({"jsonrpc": "2.0", "id": "s-1", "method": "ping", "params": "x"},
                 codes.INVALID_PARAMS, "Invalid params: params must be an object, not a string", id="params-string"),
    pytest.param({"jsonrpc": "2.0", "id": 8, "method": 5},
                 codes.INVALID_REQUEST, "Invalid Request: method must be a string, not a number", id="method-number"),
    # Both wrong: the method is checked first (without one there is no
    # request whose params could be judged).
    pytest.param({"jsonrpc": "2.0", "id": 9, "method": ["roots/list"], "params": 3},
                 codes.INVALID_REQUEST, "Invalid Request: method must be a string, not an array", id="both"),
]


@pytest.mark.parametrize("bad, code, text", ANSWERED)
def test_a_malformed_request_is_answered_with_an_error_and_the_connection_goes_on(server, caplog, bad, code, text):
    with mcp_sync.connect(server, reconnect=False) as client, \
            caplog.at_level(logging.WARNING, logger="mcp_sync"):
        answers = probe_while_a_call_is_held(client, [bad, AFTER], want=2)
        assert answers == [{"jsonrpc": "2.0", "id": bad["id"], "error": {"code": code, "message": text}}, PONG]
        # The same connection serves what follows.
        client.ping(timeout=10)
        assert probe(client, [AFTER], want=1) == [PONG]
    assert "malformed" in caplog.text and repr(bad["id"]) in caplog.text


def test_each_of_several_malformed_requests_gets_its_own_answer(server):
    bad = [{"jsonrpc": "2.0", "id": n, "method": "roots/list", "params": [n]} for n in range(1, 6)]
    with mcp_sync.connect(server, reconnect=False) as client:
        answers = probe(client, [*bad, AFTER], want=6)
    assert [(answer["id"], answer["error"]["code"]) for answer in answers[:5]] == [
        (n, codes.INVALID_PARAMS) for n in range(1, 6)]
    assert answers[5] == PONG


def test_a_malformed_request_in_a_batch_is_answered_and_the_rest_of_the_batch_routed(server):
    batch = [{"jsonrpc": "2.0", "id": 7, "method": "roots/list", "params": [1]}, AFTER]
    with mcp_sync.connect(server, reconnect=False) as client:
        answers = probe(client, [batch], want=2)
        client.ping(timeout=10)
    assert [answer["id"] for answer in answers] == [7, "after"]
    assert answers[0]["error"]["code"] == codes.INVALID_PARAMS and answers[1] == PONG


# -- dropped with a warning: nobody to answer -------------------------------------------------

DROPPED = [
    pytest.param({"jsonrpc": "2.0", "method": "notifications/message", "params": [1, 2]}, id="notification-params-array"),
    pytest.param({"jsonrpc": "2.0", "method": "notifications/progress", "params": "x"}, id="notification-params-string"),
    pytest.param({"jsonrpc": "2.0", "method": 5}, id="notification-method-number"),
    pytest.param({"jsonrpc": "2.0", "id": None, "method": "roots/list", "params": [1]}, id="id-null"),
    pytest.param({"jsonrpc": "2.0", "id": 1.5, "method": "roots/list", "params": "x"}, id="id-float"),
    pytest.param({"jsonrpc": "2.0", "id": True, "method": 5}, id="id-bool"),
    pytest.param({"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping", "params": [1]}, id="id-object"),
]


@pytest.mark.parametrize("bad", DROPPED)
def test_a_malformed_message_nobody_can_be_answered_about_is_dropped_with_a_warning(server, caplog, bad):
    with mcp_sync.connect(server, reconnect=False) as client, \
            caplog.at_level(logging.WARNING, logger="mcp_sync"):
        # Only the valid request after it is answered: nothing went out for
        # the malformed one (it would have come first, see AFTER).
        assert probe_while_a_call_is_held(client, [bad, AFTER], want=1) == [PONG]
        client.ping(timeout=10)
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert any("malformed" in record.getMessage() for record in warnings), caplog.text


# -- still fails the connection: not JSON-RPC -------------------------------------------------

FATAL = [
    # An id and no method, result or error. JSON-RPC 2.0 makes a request
    # by its `method`; without one this is as much a response that lacks
    # both members, and a response's id names a request of the client's
    # own. An error sent back under that id would be taken by the server as
    # the answer to a request of its own; and if it was a broken response,
    # the client's call with that id would never be answered. Failing the
    # connection ends that call with the reason instead.
    pytest.param({"jsonrpc": "2.0", "id": 7, "params": {}}, id="no-method"),
    # A `result` besides a method that is not a string: it may be a response
    # (to a client call of that id), so the same holds.
    pytest.param({"jsonrpc": "2.0", "id": 7, "method": 5, "result": {}}, id="method-number-and-result"),
    pytest.param({"jsonrpc": "1.0", "id": 7, "method": "ping", "params": [1]}, id="not-2.0"),
    pytest.param({"id": 7, "method": "ping", "params": [1]}, id="no-jsonrpc"),
]


@pytest.mark.parametrize("bad", FATAL)
def test_a_message_that_is_not_json_rpc_still_fails_the_connection(server, bad):
    with mcp_sync.connect(server, reconnect=False) as client:
        with pytest.raises(mcp_sync.InvalidMessage):
            probe(client, [bad], want=1)


# -- the in-process transport -------------------------------------------------------------------


class RawServer:
    """An in-process server (`MemoryTransport`'s `open_session` protocol)
    that may send anything: on `tools/call` it sends `arguments["send"]`
    and answers with the first `arguments["want"]` answers it gets back.
    Its own thread sends, as the memory transport expects of a server."""

    def open_session(self, send):
        return RawSession(send)


class RawSession:
    def __init__(self, send) -> None:
        self._send = send
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def receive(self, message: dict[str, Any]) -> None:
        self._inbox.put(message)

    def close(self) -> None:
        self._inbox.put(None)

    def _run(self) -> None:
        probe_id, want, got = None, 0, []
        while (m := self._inbox.get()) is not None:
            if "method" not in m:
                got.append(m)
            elif "id" not in m:
                continue
            elif m["method"] == "initialize":
                self._send({"jsonrpc": "2.0", "id": m["id"], "result": {
                    "protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"}}})
            elif m["method"] == "ping":
                self._send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
            elif m["method"] == "tools/call":
                probe_id, want = m["id"], m["params"]["arguments"]["want"]
                for message in m["params"]["arguments"]["send"]:
                    self._send(message)
            else:
                self._send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": codes.METHOD_NOT_FOUND,
                                                                       "message": "Method not found"}})
            if probe_id is not None and len(got) >= want:
                self._send({"jsonrpc": "2.0", "id": probe_id,
                            "result": {"content": [{"type": "text", "text": json.dumps(got)}]}})
                probe_id, got = None, []


def test_in_process_a_malformed_request_is_answered_and_a_malformed_notification_dropped(caplog):
    sent = [{"jsonrpc": "2.0", "method": "notifications/message", "params": [1]},
            {"jsonrpc": "2.0", "id": 7, "method": "roots/list", "params": [1, 2]},
            {"jsonrpc": "2.0", "id": 8, "method": 5}, AFTER]
    with mcp_sync.connect(RawServer(), reconnect=False) as client, \
            caplog.at_level(logging.WARNING, logger="mcp_sync"):
        answers = probe(client, sent, want=3)
        client.ping(timeout=10)
    assert answers == [
        {"jsonrpc": "2.0", "id": 7, "error": {"code": codes.INVALID_PARAMS,
                                              "message": "Invalid params: params must be an object, not an array"}},
        {"jsonrpc": "2.0", "id": 8, "error": {"code": codes.INVALID_REQUEST,
                                              "message": "Invalid Request: method must be a string, not a number"}},
        PONG]
    assert "notifications/message" in caplog.text


def test_a_flood_of_malformed_messages_is_answered_but_warned_of_once_a_second(server, caplog):
    # 500 malformed requests in one write: each still gets its error, but
    # the log gets one warning (or two, if a second passed), the rest at
    # debug, so a broken server cannot flood the log from the reader.
    bad = [{"jsonrpc": "2.0", "id": n, "method": "roots/list", "params": [n]} for n in range(500)]
    with mcp_sync.connect(server, reconnect=False) as client, \
            caplog.at_level(logging.DEBUG, logger="mcp_sync"):
        answers = probe(client, [*bad, AFTER], want=501)
    assert [answer["id"] for answer in answers[:500]] == list(range(500)) and answers[500] == PONG
    records = [record for record in caplog.records if "malformed" in record.getMessage()]
    warned = [record for record in records if record.levelno == logging.WARNING]
    assert len(records) == 500 and 1 <= len(warned) <= 1 + 500 // 100  # (never one per message)
