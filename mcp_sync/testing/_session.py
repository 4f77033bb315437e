"""One client connection to a `Server`: `ServerSession`, its state and its dispatch.

`Server.open_session(send)` returns a `ServerSession`, one client connection
with its own protocol state (the legacy era's negotiated version, client
capabilities, log level and subscriptions; the requests in flight; the
server-to-client requests awaiting answers). Nothing here does IO: a
transport feeds decoded JSON-RPC messages to `ServerSession.receive()` and
gets the server's messages through `send`. What a server offers lives in
`_registry` (`Server`), the feature handlers in `_handlers`, asking the
client in `_asking`, `subscriptions/listen` in `_subscriptions`.

How a session works:

* `receive()` classifies the message on the caller's thread and returns at
  once. Notifications (`notifications/cancelled`, `notifications/initialized`)
  are applied there. A request is registered as in flight, session state
  changes (`initialize`, `logging/setLevel`) are applied there too, so later
  requests see them, and the handler is queued on the session's worker pool.
* Every call of `send` happens on a worker thread, never inside `receive()`,
  and calls are serialised: `send` is never entered by two threads at once.
  A request's progress and log notifications go out before its response.
* Eras: a request whose `_meta` carries `io.modelcontextprotocol/protocolVersion`
  is served statelessly (revision 2026-07-28) when the server speaks a
  stateless version; otherwise the session follows the `initialize`
  handshake of the legacy revisions (2025-11-25, 2025-06-18; 2025-03-26 and
  2024-11-05 when the server was asked to speak them, with their result
  shapes: `_shapes`). Each session has its own legacy state.
* `notifications/cancelled` sets the request's `ToolContext.cancelled`; a
  cancelled request gets no response and no further notification.
* Change notifications (`Server.notify_changed`/`notify_updated`, sent on
  every registration or removal too) go, in the initialize era, to sessions
  whose `initialize` response went out, as messages related to no request
  (resources/updated only for `resources/subscribe`d URIs), in order, from
  one worker job at a time. Stateless era: `subscriptions/listen` {notifications:
  filter} is answered at once with `notifications/subscriptions/acknowledged`
  {_meta: {io.modelcontextprotocol/subscriptionId: <listen id>}, notifications:
  <accepted filter>} (true flags and resourceSubscriptions; unknown keys
  dropped), then every matching notification, tagged with the same
  `_meta` subscriptionId, all related to the listen request; the listen
  occupies one worker thread until the client cancels it (no response) or
  `end_subscriptions()` ends it: graceful, the response
  {resultType: "complete", _meta: {subscriptionId, serverInfo}}; otherwise
  `notifications/cancelled` {requestId: <listen id>} and no response.
* Every request is answered, whatever its handler does: an exception that
  is not a tool's (a tool's is an `isError` result, see `_handlers`) is a
  -32603 error, BaseExceptions included (SystemExit, KeyboardInterrupt,
  pytest's `Failed`: on a worker thread none of them is the process
  exiting or a user's Ctrl-C, and one dropped would leave the client
  waiting out its timeout); an answer JSON cannot encode is replaced, in
  `_finish`, by a -32603 error naming the value, before it reaches `send`
  (whose transport could only drop it).
* `close()` stops accepting messages, cancels everything in flight, and joins
  every thread the session started; after it returns `send` is not called.
* `open_session(send, related=True)` calls `send(message, related_id)` instead,
  with the id of the request each message belongs to (None when it belongs to
  none), so a transport can route messages per request (Streamable HTTP).
* Servers that ask back (`ToolContext.elicit` and friends; prompt and
  resource handlers get the same context when they take one more argument):
  in the legacy era the question is a server-to-client request ("s-1",
  "s-2", ... per session) sent with `related_id` = the id of the request
  being served, and the client's JSON-RPC response, fed to `receive()` like
  any message, wakes the waiting worker. In the stateless era the request is
  answered with an InputRequiredResult (input keys "input-1", "input-2", ...
  in asking order; a sealed `requestState`, see `_asking`), and the retried
  request runs the handler again from the start with the answers.
"""


from __future__ import annotations

import collections
import itertools
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable

from . import _asking, _tasks
from ._asking import (
    MRTR_METHODS,
    RESULT_NAMES,
    ClientError,
    InputRequired,
    MissingClientCapability,
    Mrtr,
    Outgoing,
    RequestCancelled,
    check_answer,
    request_digest,
)
from ._context import Call
from ._handlers import HANDLERS
from ._pool import WorkerPool
from ._protocol import (
    CACHEABLE,
    CHANGE_KINDS,
    FEATURE_METHODS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_METHODS,
    LEVEL_RANK,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    METHOD_NOT_FOUND,
    STATELESS_METHODS,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONDict,
    RequestId,
    RpcError,
    is_number,
    is_request_id,
    json_problem,
)
from ._shapes import shape
from ._subscriptions import Listen, accept_filter, serve_listen

if TYPE_CHECKING:
    from ._registry import Server

_log = logging.getLogger("mcp_sync.testing")

Handler = Callable[[Call], JSONDict]


class ServerSession:
    """One client connection to a `Server` (see the module docstring)."""

    def __init__(self, server: Server, send: Callable[..., None], *, related: bool = False) -> None:
        self._server = server
        self._send = send
        self._related = related
        self._lock = threading.Lock()
        self._inflight: dict[RequestId, Call] = {}
        self._legacy_version: str | None = None
        self._client_capabilities: JSONDict = {}
        self._log_level: str | None = None
        self._closed = False
        #: Server-to-client requests awaiting the client's response, by id.
        self._outgoing: dict[RequestId, Outgoing] = {}
        self._server_ids = itertools.count(1)
        self._send_cond = threading.Condition()
        self._sending = False
        self._sender: int | None = None
        self._pool = WorkerPool(server.max_workers)
        #: Initialize era: set once the initialize response went out (change
        #: notifications flow from then on); resources/subscribe'd URIs.
        self._legacy_ready = False
        self._subscribed: set[str] = set()
        #: Stateless era: open subscriptions/listen subscriptions, by request id.
        self._listens: dict[RequestId, Listen] = {}
        #: Messages related to no request, delivered in order by one worker job.
        self._outbox: collections.deque[JSONDict] = collections.deque()
        self._draining = False
        with server._lock:
            server._sessions.add(self)

    # -- public interface -------------------------------------------------

    def receive(self, message: dict[str, Any]) -> None:
        """Take one client->server JSON-RPC message; returns without waiting for the work."""
        if self._closed:
            return
        try:
            self._receive(message)
        except Exception as exc:  # never let a bad message break the transport's reader
            _log.exception("failed to handle a client message")
            request_id = message.get("id") if isinstance(message, dict) and "method" in message else None
            if request_id is not None:  # a request is answered all the same: its client would wait for ever
                self._post_error(request_id, INTERNAL_ERROR, f"Internal error: {exc}")

    def close(self) -> None:
        """Stop, cancel in-flight work and join every session thread. Idempotent."""
        with self._lock:
            self._closed = True
            calls = list(self._inflight.values())
            self._inflight.clear()
        with self._send_cond:
            self._send_cond.notify_all()
        with self._server._lock:
            self._server._sessions.discard(self)
        for call in calls:
            call.cancel()
        self._pool.close()
        # A thread the session did not start (a tool's helper reporting
        # progress) may still be inside `send`: wait for it, unless that
        # thread is the one closing.
        me = threading.get_ident()
        with self._send_cond:
            while self._sending and self._sender != me:
                self._send_cond.wait()

    @property
    def protocol_version(self) -> str | None:
        """The legacy revision negotiated by `initialize`, if any."""
        return self._legacy_version

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def listening(self) -> int:
        """How many `subscriptions/listen` subscriptions are open on this session."""
        with self._lock:
            return len(self._listens)

    def end_subscriptions(self, graceful: bool = True, *, wait: bool = True) -> int:
        """End this session's open listens (see `Server.end_subscriptions`); returns how many."""
        with self._lock:
            listens = list(self._listens.values())
        for listen in listens:
            listen.stop("complete" if graceful else "cancel")
        if wait:
            for listen in listens:
                listen.finished.wait()
        return len(listens)

    # -- change notifications -------------------------------------------------

    def _changed(self, kind: str) -> None:
        if not self._server.change_notifications:
            return
        method, key = CHANGE_KINDS[kind]
        with self._lock:
            listens = list(self._listens.values())
            legacy = self._legacy_ready and not self._closed
        for listen in listens:
            if listen.accepted.get(key) is True:
                listen.push(listen.tag(method))
        if legacy:
            self._post_unrelated({"jsonrpc": "2.0", "method": method})

    def _updated(self, uri: str) -> None:
        if not self._server.change_notifications:
            return
        method = "notifications/resources/updated"
        with self._lock:
            listens = list(self._listens.values())
            legacy = self._legacy_ready and not self._closed and uri in self._subscribed
        for listen in listens:
            if uri in listen.accepted.get("resourceSubscriptions", ()):
                listen.push(listen.tag(method, {"uri": uri}))
        if legacy:
            self._post_unrelated({"jsonrpc": "2.0", "method": method, "params": {"uri": uri}})

    def _post_unrelated(self, message: JSONDict) -> None:
        """Send a message related to no request, after those posted before it."""
        with self._lock:
            if self._closed:
                return
            self._outbox.append(message)
            if self._draining:
                return
            self._draining = True
        if not self._pool.submit(self._drain):
            with self._lock:
                self._draining = False
                self._outbox.clear()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self._outbox:
                    self._outbox.clear()
                    self._draining = False
                    return
                message = self._outbox.popleft()
            self._deliver(message, None)

    # -- incoming messages ------------------------------------------------

    def _receive(self, message: Any) -> None:
        if not isinstance(message, dict):
            self._post_error(None, INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
            return
        method = message.get("method")
        has_id = "id" in message
        request_id = message.get("id")
        readable_id = request_id if is_request_id(request_id) else None
        if method is None:
            if "result" in message or "error" in message:
                self._client_response(readable_id, message)
            else:
                self._post_error(readable_id, INVALID_REQUEST, "Invalid Request: no method")
            return
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if has_id:
                self._post_error(readable_id, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a string method')
            return
        params = message.get("params", {})
        if not has_id:
            self._notification(method, params if isinstance(params, dict) else {})
            return
        if readable_id is None:
            self._post_error(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
            return
        self._server._count(method)
        meta = params.get("_meta") if isinstance(params, dict) else None
        call = Call(readable_id, method, params if isinstance(params, dict) else {}, meta if isinstance(meta, dict) else {})
        with self._lock:
            if self._closed:
                return
            if readable_id in self._inflight:
                duplicate = True
            else:
                duplicate = False
                self._inflight[readable_id] = call
        if duplicate:
            self._post_error(readable_id, INVALID_REQUEST, f"Invalid Request: request id {readable_id!r} is already in flight")
            return
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
            if "_meta" in params and not isinstance(meta, dict):
                raise RpcError(INVALID_PARAMS, "Invalid params: _meta must be an object")
            handler = self._route(call)
        except RpcError as exc:
            error = exc
            handler = lambda _call: _raise(error)  # noqa: E731
        if not self._pool.submit(lambda: self._run(call, handler)):
            with self._lock:
                self._inflight.pop(call.id, None)

    def _client_response(self, request_id: RequestId | None, message: JSONDict) -> None:
        """The client's answer to a server-to-client request: wake its waiter."""
        with self._lock:
            outgoing = self._outgoing.pop(request_id, None) if request_id is not None else None
        if outgoing is None:
            _log.debug("ignoring a response from the client to no pending request: %r", request_id)
            return
        outgoing.response = message
        outgoing.done.set()

    def _notification(self, method: str, params: JSONDict) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if not is_request_id(request_id):
                return
            with self._lock:
                call = self._inflight.pop(request_id, None)
            if call is not None:
                _log.debug("request %r cancelled: %s", request_id, params.get("reason"))
                call.cancel()
        elif method == "notifications/initialized":
            _log.debug("client sent notifications/initialized")
        else:
            _log.debug("ignoring notification %s", method)

    def _route(self, call: Call) -> Handler:
        """Pick the era and the handler for a request; apply session state
        changes now. Raises RpcError for requests answered with an error."""
        server = self._server
        method = call.method
        if META_PROTOCOL_VERSION in call.meta and server.stateless_versions:
            return self._route_stateless(call)
        if self._legacy_version is not None:
            call.version = self._legacy_version
            return self._route_legacy(call)
        if method == "initialize":
            return self._initialize(call)
        if method == "ping" and server.legacy_versions:
            return lambda _call: {}
        if server.stateless_versions:
            raise RpcError(INVALID_PARAMS, f"Invalid params: missing required _meta field {META_PROTOCOL_VERSION!r}")
        if method in LEGACY_METHODS:
            raise RpcError(INVALID_REQUEST, "Server not initialized")
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _route_stateless(self, call: Call) -> Handler:
        server = self._server
        version = call.meta[META_PROTOCOL_VERSION]
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, f"Invalid params: _meta {META_PROTOCOL_VERSION!r} must be a string")
        if version not in server.stateless_versions:
            raise RpcError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(server.stateless_versions), "requested": version},
            )
        if not isinstance(call.meta.get(META_CLIENT_CAPABILITIES), dict):
            raise RpcError(INVALID_PARAMS, f"Invalid params: missing required _meta field {META_CLIENT_CAPABILITIES!r}")
        level = call.meta.get(META_LOG_LEVEL)
        if level is not None and level not in LEVEL_RANK:
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        call.version = version
        call.stateless = True
        call.log_level = level
        if call.method.startswith("tasks/"):
            return _tasks.route(self, call)
        if call.method not in STATELESS_METHODS:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
        if call.method == "subscriptions/listen":
            if not server.change_notifications:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
            call.listen = Listen(call, accept_filter(call.params))
            _tasks.listen_for_tasks(self, call)  # the tasks extension's `taskIds`
            return lambda call: serve_listen(self, call)
        if call.method in MRTR_METHODS:
            call.mrtr = self._mrtr(call)
        return self._feature_handler(call.method)

    def _mrtr(self, call: Call) -> Mrtr:
        """The answers a (retried) stateless request brings: those sealed in
        its `requestState` plus its `inputResponses` to the questions of the
        last round. RpcError -32602 for a malformed or rejected state or answer."""
        params = call.params
        digest = request_digest(call.method, params)
        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
        token = params.get("requestState")
        if token is None:
            # Nothing was asked as far as this request tells: answers without
            # a state answer no question of ours and are ignored.
            return Mrtr(digest, {})
        if not isinstance(token, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: requestState must be a string")
        try:
            answers, pending = self._server._sealer.open(token, call.method, digest)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: requestState rejected ({exc})") from None
        for key, method in pending.items():
            if responses is None or key not in responses:
                continue
            answer = responses[key]
            why = check_answer(method, answer)
            if why is not None:
                raise RpcError(INVALID_PARAMS, f"Invalid params: inputResponses[{key!r}] is not a valid "
                               f"{RESULT_NAMES.get(method, 'result')}: {why}")
            answers[key] = (method, answer)
        return Mrtr(digest, answers)

    def _route_legacy(self, call: Call) -> Handler:
        method = call.method
        if method == "initialize":
            raise RpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
        if method == "ping":
            return lambda _call: {}
        if method == "logging/setLevel":
            level = call.params.get("level")
            if level not in LEVEL_RANK:
                raise RpcError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
            with self._lock:
                self._log_level = level
            return lambda _call: {}
        if method in ("resources/subscribe", "resources/unsubscribe"):
            if not self._server.change_notifications:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            uri = call.params.get("uri")
            if not isinstance(uri, str):
                raise RpcError(INVALID_PARAMS, f"Invalid params: {method} needs a string uri")
            with self._lock:
                if method == "resources/subscribe":
                    self._subscribed.add(uri)
                else:
                    self._subscribed.discard(uri)
            return lambda _call: {}
        if method.startswith("tasks/"):
            return _tasks.route(self, call)
        if method not in FEATURE_METHODS:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return self._feature_handler(method)

    def _initialize(self, call: Call) -> Handler:
        server = self._server
        requested = call.params.get("protocolVersion")
        if not server.legacy_versions:
            raise RpcError(
                INVALID_PARAMS,
                f"Unsupported protocol version: this server speaks only {', '.join(server.stateless_versions)} "
                "(per-request _meta, no initialize)",
                {"supported": list(server.stateless_versions), "requested": requested},
            )
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion")
        negotiated = requested if requested in server.legacy_versions else server.legacy_versions[0]
        capabilities = call.params.get("capabilities")
        with self._lock:
            if self._legacy_version is not None:
                raise RpcError(INVALID_REQUEST, "Invalid Request: the session is already initialized")
            self._legacy_version = negotiated
            self._client_capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        call.version = negotiated
        result: JSONDict = {
            "protocolVersion": negotiated,
            "capabilities": server.capabilities(),
            "serverInfo": server.server_info(),
        }
        if server.instructions is not None:
            result["instructions"] = server.instructions
        return lambda _call: result

    def _feature_handler(self, method: str) -> Handler:
        handler = HANDLERS[method]
        return lambda call: handler(self, call)

    # -- running a request --------------------------------------------------

    def _run(self, call: Call, handler: Handler) -> None:
        try:
            self._run_call(call, handler)
        finally:
            if call.listen is not None:
                call.listen.finished.set()

    def _run_call(self, call: Call, handler: Handler) -> None:
        if call.cancelled.is_set():
            self._finish(call, None)
            return
        try:
            try:
                result = handler(call)
            except InputRequired as asked:
                result = _asking.input_required(self._server._sealer, call, asked)
            response: JSONDict = {"jsonrpc": "2.0", "id": call.id, "result": self._decorate(call, result)}
        except RpcError as exc:
            response = {"jsonrpc": "2.0", "id": call.id, "error": exc.to_json()}
        except RequestCancelled:
            self._finish(call, None)
            return
        except (ClientError, MissingClientCapability, TimeoutError) as exc:
            # A prompt or resource handler whose question to the client failed.
            response = {"jsonrpc": "2.0", "id": call.id,
                        "error": {"code": INTERNAL_ERROR, "message": f"Internal error: {exc}"}}
        except BaseException as exc:  # see the module docstring: every request is answered
            _log.exception("internal error handling %s", call.method)
            reason = str(exc) or type(exc).__name__  # KeyboardInterrupt() has no message
            response = {"jsonrpc": "2.0", "id": call.id,
                        "error": {"code": INTERNAL_ERROR, "message": f"Internal error: {reason}"}}
        self._finish(call, response)
        if call.method == "initialize" and not call.stateless and "result" in response:
            with self._lock:
                self._legacy_ready = self._legacy_version is not None

    def _decorate(self, call: Call, result: JSONDict) -> JSONDict:
        if not call.stateless:
            return shape(call.version, call.method, result)  # an older revision's shapes
        out: JSONDict = {"resultType": "complete"}
        out.update(result)
        meta = dict(result.get("_meta") or {})
        meta.setdefault(META_SERVER_INFO, self._server.server_info())
        out["_meta"] = meta
        if call.method in CACHEABLE and out["resultType"] == "complete":
            uri = call.params.get("uri") if call.method == "resources/read" else None
            ttl, scope = self._server._cache_hint(call.method, uri if isinstance(uri, str) else None)
            out.setdefault("ttlMs", ttl)
            out.setdefault("cacheScope", scope)
        return out

    def _finish(self, call: Call, response: JSONDict | None) -> None:
        if response is not None:
            response = self._encodable(call, response)
        with self._lock:
            if self._inflight.get(call.id) is call:
                del self._inflight[call.id]
        with call.lock:
            call.done = True
            if response is None or call.cancelled.is_set():
                return
            self._deliver(response, call.id)

    def _encodable(self, call: Call, response: JSONDict) -> JSONDict:
        """`response`, or a -32603 error naming what in it JSON cannot encode.

        Checked here, once, for every transport: stdio and HTTP encode in
        `send`, where a failure could only be logged and the answer dropped
        (the client would wait out its timeout, or see a closed connection)."""
        if "result" in response:
            problem = json_problem(response["result"])
        else:
            problem = json_problem(response.get("error"), "error")
        if problem is None:
            return response
        message = f"Internal error: the answer to {call.method} cannot be encoded as JSON: {problem}"
        _log.warning("%s (request %r)", message, call.id)
        return {"jsonrpc": "2.0", "id": call.id, "error": {"code": INTERNAL_ERROR, "message": message}}

    def _post_error(self, request_id: RequestId | None, code: int, message: str) -> None:
        response: JSONDict = {"jsonrpc": "2.0"}
        if request_id is not None:
            response["id"] = request_id
        response["error"] = {"code": code, "message": message}
        self._pool.submit(lambda: self._deliver(response, request_id))

    def _deliver(self, message: JSONDict, related: RequestId | None) -> None:
        """Call `send`, one thread at a time, never after close(); `related`
        is the id of the request `message` belongs to (passed on to `send`
        only when the session was opened with `related=True`)."""
        with self._send_cond:
            while self._sending and not self._closed:
                self._send_cond.wait()
            if self._closed:
                return
            self._sending = True
            self._sender = threading.get_ident()
        try:
            if self._related:
                self._send(message, related)
            else:
                self._send(message)
        except Exception:
            _log.exception("the send callback failed")
        finally:
            with self._send_cond:
                self._sending = False
                self._sender = None
                self._send_cond.notify_all()

    # -- notifications from tools -----------------------------------------

    def _progress(self, call: Call, progress: float, total: float | None, message: str | None) -> None:
        if not is_number(progress) or (total is not None and not is_number(total)):
            raise ValueError("progress and total must be numbers")
        if message is not None and not isinstance(message, str):
            raise ValueError("message must be a string")
        if call.progress_token is None:
            return
        params: JSONDict = {"progressToken": call.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        with call.lock:
            if call.last_progress is not None and progress <= call.last_progress:
                raise ValueError(f"progress must increase: {progress} after {call.last_progress}")
            call.last_progress = progress
            if call.done or call.cancelled.is_set():
                return
            self._deliver({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}, call.id)

    def _log(self, call: Call, level: str, data: Any, logger: str | None) -> None:
        if level not in LEVEL_RANK:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        # Checked whatever the level lets out, so the mistake shows in every
        # run, in the handler that made it (not as a notification dropped).
        problem = json_problem(data)
        if problem is not None:
            raise TypeError(f"the log data cannot be encoded as JSON: {problem}")
        threshold = call.log_level if call.stateless else self._log_level
        if threshold is None or LEVEL_RANK[level] < LEVEL_RANK[threshold]:
            return
        params: JSONDict = {"level": level}
        if logger is not None:
            params["logger"] = logger
        params["data"] = data
        with call.lock:
            if call.done or call.cancelled.is_set():
                return
            self._deliver({"jsonrpc": "2.0", "method": "notifications/message", "params": params}, call.id)

    # -- asking the client ---------------------------------------------------

    def _ask(self, call: Call, keys: list[str], questions: list[JSONDict], timeout: float | None) -> list[JSONDict]:
        # A question JSON cannot carry fails in the handler that asked it:
        # sent, it would be dropped, and the handler would wait for an answer.
        problem = json_problem(questions)
        if problem is not None:
            raise TypeError(f"the question to the client cannot be encoded as JSON: {problem}")
        return _asking.ask(self, call, keys, questions, timeout)



def _raise(error: RpcError) -> JSONDict:
    raise error
