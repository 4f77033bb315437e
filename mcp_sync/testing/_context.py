"""One request in flight on a session: its state, and the context its handler gets.

It owns `Call` (a request being served: its id, params, era, log level,
cancellation, the server-to-client requests its handler waits for) and
`ToolContext`, the handler's view of its call: progress, logging,
cancellation and asking the client. It must not know how a session routes
or delivers messages: `ToolContext` checks its arguments and forwards to
its `ServerSession`.

Locks: `Call.lock` serialises what is sent for the call (its progress, log
and response), so nothing goes out after its response; `Call.pending_lock`
guards `pending` and the cancelled flag together, so a cancel always wakes
every waiting question.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ._protocol import JSONDict, RequestId, is_request_id

if TYPE_CHECKING:
    from ._asking import Mrtr, Outgoing
    from ._session import ServerSession
    from ._subscriptions import Listen


class Call:
    """One request in flight on a session."""

    __slots__ = (
        "id", "method", "params", "meta", "version", "stateless", "log_level",
        "progress_token", "last_progress", "cancelled", "lock", "done",
        "pending", "pending_lock", "mrtr", "listen",
    )

    def __init__(self, request_id: RequestId, method: str, params: JSONDict, meta: JSONDict) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.meta = meta
        self.version: str | None = None
        self.stateless = False
        self.log_level: str | None = None
        token = meta.get("progressToken")
        self.progress_token: RequestId | None = token if is_request_id(token) else None
        self.last_progress: float | None = None
        self.cancelled = threading.Event()
        self.lock = threading.Lock()
        self.done = False
        #: Server-to-client requests this request's handler waits for, by id.
        self.pending: dict[str, Outgoing] = {}
        self.pending_lock = threading.Lock()
        self.mrtr: Mrtr | None = None
        #: A `subscriptions/listen` request's subscription.
        self.listen: Listen | None = None

    def cancel(self) -> None:
        """Set `cancelled` and wake the handler if it waits for the client."""
        with self.pending_lock:
            self.cancelled.set()
            waiting = list(self.pending.values())
        for outgoing in waiting:
            outgoing.done.set()
        if self.listen is not None:
            self.listen.wake()



class ToolContext:
    """What a tool (or a prompt or resource handler that takes a second
    argument) gets besides its arguments.

    * `cancelled`: a `threading.Event`, set when the client cancels the
      request or the session closes; long tools should wait on it
      (`ctx.cancelled.wait(delay)`) instead of sleeping.
    * `protocol_version`: the revision serving this request; `stateless`:
      True for a 2026-07-28 request (per-request `_meta`).
    * `meta`: the request's `_meta` (an empty dict when absent).
    * `request_id`, `progress_token`: from the request.

    Asking the client (`elicit`, `elicit_url`, `sample`, `list_roots`,
    `request`, `ask_all`) works in both eras with one implementation:

    * initialize era: a server-to-client JSON-RPC request (ids "s-1",
      "s-2", ... per session) goes out with the request's other messages, and
      the call blocks until the client's response arrives through
      `ServerSession.receive()`. It returns the result; an error response
      raises `ClientError`; a capability the client did not declare in
      `initialize` raises `MissingClientCapability` (both become an
      `isError` result when a tool lets them escape). `timeout` (seconds):
      when it passes without an answer, the server sends
      `notifications/cancelled` for its request and raises `TimeoutError`.
      If the client's request is cancelled (or the session closes) while
      waiting, the server cancels its request the same way and raises
      `RequestCancelled`.
    * stateless era (multi round-trip requests): the n-th question of a run
      has the input key "input-n". A question whose answer the retried
      request carries (`inputResponses` plus the sealed `requestState`)
      returns it at once; otherwise the run ends (a private BaseException
      unwinds the handler) and the request is answered with an
      InputRequiredResult asking it. The handler runs again from the start
      on every retry, so it must ask the same questions in the same order
      given the same answers; `ask_all` asks several in one round. A
      capability missing from the request's `_meta` clientCapabilities
      answers the request with -32021. `timeout` does not apply.
    """

    def __init__(self, session: ServerSession, call: Call) -> None:
        self._session = session
        self._call = call
        self._asked = 0
        self._ask_lock = threading.Lock()
        self.cancelled: threading.Event = call.cancelled
        self.protocol_version: str = call.version or ""
        self.stateless: bool = call.stateless
        self.meta: JSONDict = call.meta
        self.request_id: RequestId = call.id
        self.progress_token: RequestId | None = call.progress_token

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` if the request asked for progress.

        `progress` must increase from one call to the next (ValueError
        otherwise). Does nothing without a progress token, or once the
        request is finished or cancelled."""
        self._session._progress(self._call, progress, total, message)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` if the client asked for this level.

        Stateless requests: only when the request's `_meta` has
        `io.modelcontextprotocol/logLevel` at or below `level`; legacy: at or
        above the session's `logging/setLevel` level (nothing before it).
        ValueError for an unknown level."""
        self._session._log(self._call, level, data, logger)

    # -- asking the client ------------------------------------------------

    def elicit(self, message: str, requested_schema: Mapping[str, Any], *,
               timeout: float | None = None) -> JSONDict:
        """Form-mode `elicitation/create`; returns the ElicitResult
        (`{"action": "accept" | "decline" | "cancel", "content": {...}}`).
        Needs the client's `elicitation` capability (`form`, or an empty object)."""
        if not isinstance(message, str):
            raise TypeError("message must be a string")
        if not isinstance(requested_schema, Mapping) or requested_schema.get("type") != "object":
            raise ValueError('requested_schema must be an object schema ({"type": "object", "properties": ...})')
        params = {"mode": "form", "message": message, "requestedSchema": dict(requested_schema)}
        return self.request("elicitation/create", params, timeout=timeout)

    def elicit_url(self, message: str, url: str, *, timeout: float | None = None) -> JSONDict:
        """URL-mode `elicitation/create` (`mode: "url"`); returns the
        ElicitResult (no content). Needs `elicitation.url`; revision
        2025-06-18 has no URL mode (MissingClientCapability). 2025-11-25
        requests get a fresh `elicitationId`."""
        if not isinstance(message, str) or not isinstance(url, str):
            raise TypeError("message and url must be strings")
        return self.request("elicitation/create", {"mode": "url", "message": message, "url": url}, timeout=timeout)

    def sample(self, messages: list[dict[str, Any]], max_tokens: int, *, timeout: float | None = None,
               **extra: Any) -> JSONDict:
        """`sampling/createMessage`; returns the CreateMessageResult. `extra`
        adds request params (snake_case names become camelCase:
        `system_prompt` -> `systemPrompt`). Needs `sampling` (and
        `sampling.tools` with `tools`/`tool_choice`, `sampling.context` with
        an `include_context` other than "none")."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError("max_tokens must be an integer")
        params: JSONDict = {"messages": list(messages), "maxTokens": max_tokens}
        for key, value in extra.items():
            head, *rest = key.split("_")
            params[head + "".join(part[:1].upper() + part[1:] for part in rest)] = value
        return self.request("sampling/createMessage", params, timeout=timeout)

    def list_roots(self, *, timeout: float | None = None) -> JSONDict:
        """`roots/list`; returns the ListRootsResult (`{"roots": [...]}`). Needs `roots`."""
        return self.request("roots/list", None, timeout=timeout)

    def ping_client(self, *, timeout: float | None = None) -> JSONDict:
        """Initialize era: send a `ping` request to the client and wait for
        its (empty) result. RuntimeError for a stateless request, which
        cannot reach the client."""
        if self._call.stateless:
            raise RuntimeError("ping_client: a stateless request cannot send requests to the client")
        return self.request("ping", None, timeout=timeout)

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                timeout: float | None = None) -> JSONDict:
        """Ask one question (`method` is elicitation/create,
        sampling/createMessage or roots/list; `ping` in the initialize era)
        and return the client's result. See the class docstring."""
        question: JSONDict = {"method": method}
        if params is not None:
            question["params"] = dict(params)
        return self.ask_all([question], timeout=timeout)[0]

    def ask_all(self, requests: Iterable[Mapping[str, Any]], *, timeout: float | None = None) -> list[JSONDict]:
        """Ask several questions at once (`{"method": ..., "params": {...}}`
        each) and return their results in order. Stateless: every
        unanswered one goes into the same InputRequiredResult (one round);
        initialize era: all requests are sent, then all answers awaited."""
        questions: list[JSONDict] = []
        for request in requests:
            method = request.get("method")
            params = request.get("params")
            if not isinstance(method, str):
                raise ValueError("every request needs a string method")
            if params is not None and not isinstance(params, Mapping):
                raise ValueError("request params must be an object")
            question: JSONDict = {"method": method}
            if params is not None:
                question["params"] = dict(params)
            questions.append(question)
        if not questions:
            return []
        with self._ask_lock:
            first = self._asked + 1
            self._asked += len(questions)
        keys = [f"input-{n}" for n in range(first, first + len(questions))]
        return self._session._ask(self._call, keys, questions, timeout)


#: The same context is given to prompt and resource handlers.
RequestContext = ToolContext
