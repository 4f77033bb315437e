"""Serving the two protocol eras over Streamable HTTP: the POST, GET and DELETE of `HTTPServer`.

It owns what happens to a request once `HTTPServer` has routed it to an era:
a stateless request gets a fresh `ServerSession` for its exchange; an
`initialize` creates a `LegacySession`, and later requests, GET streams and
DELETEs are served in their session. Functions of the `HTTPServer` they
serve (its configuration, its session table and live streams, under its
lock); writing a stream as the response is `_responses.pump`.

Stateless era (2026-07-28, a request whose `params._meta` carries
`io.modelcontextprotocol/protocolVersion`): every POST is served by a fresh
`ServerSession`, closed when the exchange ends. The request is validated like
a real server, in this order (first failure wins):

1. `Accept` lists `application/json` and `text/event-stream` (else 400),
   `Content-Type` is `application/json` (else 415), the body parses (else 400,
   -32700) and is one JSON-RPC request or notification (else 400, -32600).
2. `params._meta` carries the protocol version and the client capabilities
   (else 400, -32602).
3. Routing headers (else 400, -32020 HeaderMismatch): `MCP-Protocol-Version`,
   `Mcp-Method` and, for `tools/call`/`prompts/get`/`resources/read`,
   `Mcp-Name` are present once each, hold header-safe characters and equal the
   body's version, `method` and `params.name`/`params.uri` (`Mcp-Name` after
   decoding the `=?base64?...?=` sentinel).
4. The version is one the server speaks (else 400, -32022 with
   `data.supported`/`data.requested`).
5. `tools/call`: every `x-mcp-header` annotated property of the tool's
   inputSchema (reached through `properties` keys only) whose argument is
   present and not null arrives as `Mcp-Param-{Name}` (string as-is, integer
   compared numerically, boolean `true`/`false`, sentinel decoded); one whose
   argument is absent or null must not (else 400, -32020).

A JSON answer's status follows its error code: -32601 -> 404;
-32700/-32600/-32020/-32021/-32022 -> 400; anything else (results, tool
errors, unknown tools, bad arguments) -> 200. An SSE answer is always 200. A
notification POST gets 202 and is dropped. A client that closes the
connection before the response cancels the request (`notifications/cancelled`
is delivered to its session, so the tool's `ctx.cancelled` is set). GET and
DELETE get 405 from a server without legacy versions; `Mcp-Session-Id` and
`Last-Event-ID` are ignored there.

`subscriptions/listen` is answered with a long-lived SSE stream (in every
response mode; an error answer is JSON): the acknowledgement, then the
subscription's notifications. The client closing it cancels the
subscription; `Server.end_subscriptions()` writes the completion result (or,
`graceful=False`, `notifications/cancelled`) and ends the stream; `close()`
ends every open subscription gracefully first (waiting at most 5 s for the
results to be written).

Legacy era (2025-11-25, 2025-06-18): POST `initialize` creates a session and
its response carries `Mcp-Session-Id` (uuid4 hex); a failed `initialize`
(400 when answered in JSON) creates none. Later requests must carry the id
(missing: 400; unknown or ended: 404, JSON-RPC -32001) and
`MCP-Protocol-Version` equal to the negotiated version (missing or different:
400). A posted notification or response gets 202; `notifications/cancelled`
also ends the cancelled request's POST stream without a response (an empty
SSE stream when nothing was sent yet). A request id already in flight gets
400 (-32600). JSON-RPC errors of legacy requests are answered with 200. A
request's progress and log notifications travel on its own POST stream;
messages related to no request go to the session's standalone GET stream
(`Accept: text/event-stream` required, else 400; `get_stream=False`: 405; a
second concurrent GET stream: 409). DELETE ends the session (200) and its
streams (a request still waiting for its JSON answer gets 404).
Disconnecting does not cancel a legacy request. With `sse_ids=True` every
SSE event has an id `"<stream>-<seq>"`, each SSE stream starts with a priming
event (that id and empty data, plus `retry` when `retry_ms` is set), events
are kept per stream, and GET with `Last-Event-ID` replays the rest of that
stream and continues it live, ending after the response (an id of no
resumable stream: 400; a stream being read: 409); `drop_after_first_event()`
cuts POST streams right after the priming event to make clients do that.

Servers that ask back, legacy era: a tool's `elicitation/create`,
`sampling/createMessage`, `roots/list` or `ping` request to the client goes
out on the SSE stream of the POST that started the tool (it forces SSE for
that POST, in every response mode); the client answers by POSTing the
JSON-RPC response with its `Mcp-Session-Id` (202), which is routed to the
session. A `notifications/cancelled` the server sends for its own request
travels on the same POST stream, or on the GET stream when the POST's request
was itself cancelled. Stateless era: such questions are answered with an
`InputRequiredResult` (200, JSON unless notifications came first); a client
lacking the capability gets -32021 (400). Connections are kept alive between requests. An `Origin`
header that is not a loopback origin gets 403 (DNS rebinding protection);
other paths get 404, other HTTP methods 405 (with `Allow`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._framing import RequestHandler, media_types
from ._protocol import INVALID_REQUEST, OLD_VERSIONS, JSONDict, RequestId
from ._responses import pump
from ._streams import DONE, DISCONNECTED, LegacySession, Stream
from ._validation import (
    LEGACY_TRANSPORT_ERROR,
    SESSION_NOT_FOUND,
    HTTPError,
    rpc_error,
    stateless_status,
    validate_stateless,
)

if TYPE_CHECKING:
    from ._streamable import HTTPServer


# -- stateless era


def serve_stateless(owner: HTTPServer, h: RequestHandler, message: JSONDict, request_id: RequestId) -> None:
    validate_stateless(owner.server, h.headers, message, request_id)
    stream = Stream(0, request_id, resumable=False)

    def send(msg: JSONDict, related: RequestId | None) -> None:
        if related == request_id:
            stream.push(msg)
            params = msg.get("params")
            if msg.get("method") == "notifications/cancelled" and isinstance(params, dict) \
                    and params.get("requestId") == request_id:
                stream.end("cancelled")  # the server tore its subscription down: close the stream

    if not owner._register(stream):
        raise rpc_error(503, INVALID_REQUEST, "Service Unavailable: the server is closing", request_id)
    session = owner.server.open_session(send, related=True)
    listen = message.get("method") == "subscriptions/listen"
    if listen:
        with owner._lock:
            owner._listen_sessions.add(session)
    try:
        session.receive(message)
        # A subscription is a long-lived SSE stream opened by its acknowledgement
        # whatever the response mode (a listen answered with an error gets JSON).
        mode = ("auto" if owner.response_mode == "json" else owner.response_mode) if listen else owner.response_mode
        outcome = pump(owner, h, stream, mode=mode,
                       reply=lambda m: (stateless_status(m), {}))
        if outcome == DISCONNECTED:
            session.receive({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": request_id, "reason": "client disconnected"}})
    finally:
        if listen:
            with owner._lock:
                owner._listen_sessions.discard(session)
                owner._changed.notify_all()
        session.close()
        owner._unregister(stream)


def serve_initialize(owner: HTTPServer, h: RequestHandler, message: JSONDict, request_id: RequestId) -> None:
    if not owner.server.legacy_versions:
        # A stateless-only server: answer with its error naming its versions.
        stream = Stream(0, request_id, resumable=False)

        def send(msg: JSONDict, related: RequestId | None) -> None:
            if related == request_id:
                stream.push(msg)

        session = owner.server.open_session(send, related=True)
        if not owner._register(stream):
            session.close()
            raise rpc_error(503, INVALID_REQUEST, "Service Unavailable: the server is closing", request_id)
        try:
            session.receive(message)
            pump(owner, h, stream, mode="json", reply=lambda m: (400 if "error" in m else 200, {}))
        finally:
            session.close()
            owner._unregister(stream)
        return
    legacy = LegacySession(owner, owner.server)
    with owner._lock:
        if owner._closing:
            closing = True
        else:
            closing = False
            owner._sessions[legacy.id] = legacy
            owner._changed.notify_all()
    if closing:
        legacy.terminate()
        raise rpc_error(503, INVALID_REQUEST, "Service Unavailable: the server is closing", request_id)
    opened = legacy.open_request_stream(request_id)
    assert opened is not None
    stream = opened
    legacy.initialize_id = request_id
    legacy.session.receive(message)
    # A failed initialize creates no session: its JSON answer is a 400
    # without Mcp-Session-Id (an SSE answer has sent the header already).
    outcome = pump(owner, h, stream, mode=owner.response_mode,
                   reply=lambda m: (400, {}) if "error" in m else (200, {"Mcp-Session-Id": legacy.id}),
                   headers={"Mcp-Session-Id": legacy.id} if owner.response_mode == "sse" else None)
    legacy.release(stream, outcome)
    response = next((m for m in stream.events if "method" not in m), None)
    if outcome != DONE or response is None or "error" in response:
        end_session(owner, legacy)


def end_session(owner: HTTPServer, legacy: LegacySession) -> None:
    owner._forget(legacy)
    legacy.terminate()


def _session_for(owner: HTTPServer, h: RequestHandler) -> LegacySession:
    """The live session a legacy request names, after checking its headers."""
    session_id = h.headers.get("Mcp-Session-Id")
    if session_id is None:
        raise rpc_error(400, LEGACY_TRANSPORT_ERROR, "Bad Request: Mcp-Session-Id header is required")
    with owner._lock:
        legacy = owner._sessions.get(session_id)
    if legacy is None:
        raise rpc_error(404, SESSION_NOT_FOUND, "Session not found")
    version = h.headers.get("MCP-Protocol-Version")
    if version is None and legacy.version in OLD_VERSIONS:
        version = legacy.version  # the header came with 2025-06-18: older clients never send it
    if version is None or version != legacy.version:
        raise rpc_error(
            400, LEGACY_TRANSPORT_ERROR,
            f"Bad Request: MCP-Protocol-Version {version!r} is not the session's version {legacy.version!r}",
        )
    return legacy


def serve_legacy_message(owner: HTTPServer, h: RequestHandler, message: JSONDict) -> None:
    legacy = _session_for(owner, h)
    headers = {"Mcp-Session-Id": legacy.id}
    if "id" not in message or "method" not in message:  # a notification or a response
        legacy.session.receive(message)
        if message.get("method") == "notifications/cancelled":
            params = message.get("params")
            legacy.cancel(params.get("requestId") if isinstance(params, dict) else None)
        h.send_body(202, b"", None, headers)
        return
    request_id = message["id"]
    stream = legacy.open_request_stream(request_id)
    if stream is None:
        if legacy.ended:
            raise rpc_error(404, SESSION_NOT_FOUND, "Session not found")
        raise rpc_error(400, INVALID_REQUEST, f"Invalid Request: request id {request_id!r} is already in flight",
                        request_id)
    legacy.session.receive(message)
    outcome = pump(owner, h, stream, mode=owner.response_mode, reply=lambda m: (200, headers),
                   headers=headers, may_drop=True)
    legacy.release(stream, outcome)


def serve_get(owner: HTTPServer, h: RequestHandler) -> None:
    if not owner.server.legacy_versions or not owner.get_stream:
        raise HTTPError(405, headers={"Allow": owner._allowed()})
    if "text/event-stream" not in media_types(h.headers.get("Accept")):
        raise rpc_error(400, INVALID_REQUEST, "Bad Request: Accept must list text/event-stream")
    legacy = _session_for(owner, h)
    headers = {"Mcp-Session-Id": legacy.id}
    last_event_id = h.headers.get("Last-Event-ID")
    if last_event_id is not None:
        found = legacy.find(last_event_id.strip())
        if found is None:
            raise rpc_error(400, INVALID_REQUEST, f"Bad Request: unknown Last-Event-ID {last_event_id!r}")
        stream, after = found
        outcome = pump(owner, h, stream, mode="sse", reply=lambda m: (200, headers), headers=headers,
                       resume_after=after)
        if outcome == "busy":
            raise rpc_error(409, INVALID_REQUEST, "Conflict: that stream is already being read")
        legacy.release(stream, outcome)
        return
    standalone = legacy.open_standalone()
    if standalone is None:
        if legacy.ended:
            raise rpc_error(404, SESSION_NOT_FOUND, "Session not found")
        raise rpc_error(409, INVALID_REQUEST, "Conflict: only one GET stream per session is allowed")
    outcome = pump(owner, h, standalone, mode="sse", reply=lambda m: (200, headers), headers=headers)
    legacy.release(standalone, outcome)


def serve_delete(owner: HTTPServer, h: RequestHandler) -> None:
    if not owner.server.legacy_versions:
        raise HTTPError(405, headers={"Allow": owner._allowed()})
    legacy = _session_for(owner, h)
    end_session(owner, legacy)
    h.send_body(200, b"", None)
