"""Answering the server's requests (initialize era), and its log messages.

What it owns: the answer to a server request (`ping`, and the input kinds:
elicitation, sampling, roots) from the input handlers, each checked before
and after the handler runs; the refusals (-32601 for what the client did
not declare, -32602 for malformed params); and where the server's log
messages go (the `mcp_sync.server` logger).

What it must not know: which thread it runs on (the engine decides: the
caller's thread for a request that relates to its call, the handler pool
otherwise) or how an answer is sent (the connection's `respond`).

`declared` (the capabilities sent with `initialize`) is replaced whole by
the request pipeline once a connection is set up; readers need no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable

from . import multiround
from .connection import Connection
from .errors import InputHandlerError
from .protocol import codes, inputs
from .protocol.jsonrpc import Refusal
from .protocol.schemas import SchemaCache

server_log = logging.getLogger("mcp_sync.server")

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}


def log_server_message(params: Mapping[str, Any]) -> None:
    """A `notifications/message` from the server, on the `mcp_sync.server` logger."""
    level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
    if not server_log.isEnabledFor(level):
        return
    logger = params.get("logger")
    data = params.get("data")
    if logger:
        server_log.log(level, "[%s] %s", logger, data)
    else:
        server_log.log(level, "%s", data)


class ServerRequests:
    """The client's answers to server requests, from its input handlers."""

    def __init__(self, handlers: Mapping[str, Any], schemas: SchemaCache) -> None:
        self.handlers = handlers
        self.schemas = schemas
        self.declared: Mapping[str, Any] = {}

    def result(self, message: dict[str, Any], handlers: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to a server request. Raises `Refusal` to refuse it,
        `InputHandlerError` when a handler fails."""
        method = message.get("method")
        params = message.get("params")
        if method == "ping":
            return {}
        kind = inputs.kind_of(method, params)
        if kind is None or kind not in handlers or not inputs.declared(kind, self.declared):
            raise Refusal(codes.METHOD_NOT_FOUND, f"Method not found: {method} (this client does not handle it)")
        try:
            inputs.check_request(kind, params)
        except inputs.BadInput as exc:
            raise Refusal(codes.INVALID_PARAMS, f"Invalid params: {exc}") from None
        return multiround.run_handler(kind, handlers[kind], dict(params or {}), self.schemas, {})

    def unrelated(self, message: dict[str, Any]) -> dict[str, Any]:
        """The engine's handler for a server request that belongs to no call."""
        return self.result(message, self.handlers)

    def on_call(self, handlers: Mapping[str, Any], conn: Connection) -> Callable[[dict[str, Any]], None]:
        """The answerer of the server requests that relate to one call."""
        return lambda message: self.answer(message, handlers, conn)

    def answerer(self, conn: Connection) -> Callable[[dict[str, Any]], None]:
        """The answerer during `initialize` on `conn`, with the client's handlers."""
        return self.on_call(self.handlers, conn)

    def answer(self, message: dict[str, Any], handlers: Mapping[str, Any], conn: Connection) -> None:
        """Answer a server request on the calling thread, on the connection
        it came from. A handler that fails fails the call too (after the
        server is told), so nothing half-valid is ever sent."""
        try:
            result = self.result(message, handlers)
        except Refusal as refusal:
            conn.respond(message["id"], error=refusal.error())
        except InputHandlerError as exc:
            conn.respond(message["id"], error={"code": codes.INTERNAL_ERROR, "message": f"client handler failed: {exc.problem}"})
            raise
        else:
            conn.respond(message["id"], result=result)
