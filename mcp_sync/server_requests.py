"""Answering the server's requests (initialize era), and its log messages.

What it owns: the answer to a server request (`ping`, and the input kinds:
elicitation, sampling, roots) from the input handlers, each checked before
and after the handler runs; the refusals (-32601 for what the client did
not declare, -32602 for malformed params); where the server's log
messages go (the `mcp_sync.server` logger); and, in 2025-11-25, running an
elicitation or sampling request that carries `params.task` as a client
task: answered at once with the task, its handler run on a handler thread
(`Later`), and the server's `tasks/*` requests answered from the
connection's `client_tasks.ClientTasks` (which owns the tasks).

What it must not know: which thread it runs on (the engine decides: the
caller's thread for a request that relates to its call, the handler pool
otherwise) or how an answer is sent (the connection's `respond`).

`declared` (the capabilities sent with `initialize`) is replaced whole by
the request pipeline once a connection is set up (`settle()`), with the
revision the server settled on (`dialect`) and `tasks`, the new session's
(empty) table of client tasks; readers need no lock.

Answers follow the settled revision: a handler writes the newest shape
(a sampling answer's `content` as a list, say), and `Dialect.input_answer`
shapes it for an older server where nothing is lost, or fails it
(`InputHandlerError`, the server told -32603 saying what) where the
revision cannot carry it. A request for input the revision does not have
(elicitation from a 2025-03-26 server that was offered a newer one) is
refused as a method the client does not handle.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any, Callable

from . import client_tasks, multiround
from .client_tasks import ClientTasks
from .connection import Connection
from .engine_threads import Answer, Later
from .errors import InputHandlerError
from .protocol import codes, inputs
from .protocol.jsonrpc import Refusal
from .protocol.schemas import SchemaCache
from .protocol.versions import Dialect, NotInRevision, dialect_for

server_log = logging.getLogger("mcp_sync.server")
log = logging.getLogger("mcp_sync.connection")

_LOG_LEVELS = {
    "debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
    "alert": logging.CRITICAL, "emergency": logging.CRITICAL,
}


#: The most servers given a logger of their own in one process: logging
#: keeps every logger for good, and a server chooses its own name.
MAX_SERVER_LOGGERS = 64

_server_loggers: dict[str, logging.Logger] = {}
_server_loggers_lock = threading.Lock()


def server_logger(name: str | None) -> logging.Logger:
    """The logger of the server called `name` (its `serverInfo.name`):
    ``mcp_sync.server.<name>``, one level below `mcp_sync.server` (dots
    become ``_``; "stderr" is taken by the stdio servers' stderr lines).
    `mcp_sync.server` itself for a server that has given no name, and for
    new names once MAX_SERVER_LOGGERS are in use."""
    if not isinstance(name, str) or not name.strip():
        return server_log
    key = name.strip()[:64].replace(".", "_")
    key = "stderr_" if key == "stderr" else key
    found = _server_loggers.get(key)
    if found is not None:
        return found
    with _server_loggers_lock:
        if key not in _server_loggers:
            if len(_server_loggers) >= MAX_SERVER_LOGGERS:
                return server_log
            _server_loggers[key] = logging.getLogger(f"mcp_sync.server.{key}")
        return _server_loggers[key]


# `json.dumps(data, ensure_ascii=False, default=str)`, made once: dumps
# builds an encoder per call for any argument other than its defaults.
_DATA_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


class ServerLog:
    """What the client does with a server's `notifications/message`: log it
    on the server's logger (see `server_logger`) at the matching level, its
    own logger name in brackets, structured data as JSON. `name` is set
    once the server has said it; any thread may call."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name: str | None = None

    def __call__(self, params: Mapping[str, Any]) -> None:
        logger = server_logger(self.name)
        level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
        if not logger.isEnabledFor(level):
            return
        data = params.get("data")
        if not isinstance(data, str):
            try:
                data = _DATA_ENCODER.encode(data)
            except (TypeError, ValueError, RecursionError):
                data = repr(data)
        source = params.get("logger")
        if source:
            logger.log(level, "[%s] %s", source, data)
        else:
            logger.log(level, "%s", data)


class ServerRequests:
    """The client's answers to server requests, from its input handlers."""

    def __init__(self, handlers: Mapping[str, Any], schemas: SchemaCache) -> None:
        self.handlers = handlers
        self.schemas = schemas
        self.declared = {}  # and `tasks`, an empty table

    @property
    def declared(self) -> Mapping[str, Any]:
        """The capabilities sent with the session's `initialize`."""
        return self._declared

    @declared.setter
    def declared(self, capabilities: Mapping[str, Any]) -> None:
        self.settle(capabilities, None)

    def settle(self, capabilities: Mapping[str, Any], version: str | None) -> None:
        """A new session: the capabilities its `initialize` declared, and
        the revision the server settled on, whose schema every answer then
        follows (None: not known, answers go as the handlers wrote them).
        Told before `notifications/initialized`: the server may ask at once."""
        # The last session's client tasks went with its connection. Told
        # before `notifications/initialized`, so every request of the new
        # session sees both; the dialect first, so a thread that sees the
        # new `declared` sees its revision too (each attribute is one store).
        self.tasks = ClientTasks()
        self.dialect: Dialect | None = dialect_for(version) if version is not None else None
        self._declared = capabilities

    def reset(self) -> None:
        """Drop the client tasks (at close(), and in a child after a fork,
        where the old table's lock may be held by a thread that is gone)."""
        self.tasks = ClientTasks()

    def answers_at_once(self, message: dict[str, Any]) -> bool:
        """Whether the engine may answer `message` on the thread it arrives
        on, without a handler-pool slot: the requests that never block and
        run no user code (ping, the server's `tasks/*` about the client's
        tasks, and a request run as a client task, whose handler goes to a
        task thread)."""
        method = message.get("method")
        if method == "ping" or method in client_tasks.METHODS:
            return True
        params = message.get("params")
        if not isinstance(params, Mapping) or params.get("task") is None:
            return False
        kind = inputs.kind_of(method, params)
        return kind is not None and kind in self.handlers and client_tasks.runs_as_task(kind, self.declared)

    def result(self, message: dict[str, Any], handlers: Mapping[str, Any]) -> dict[str, Any] | Later:
        """The answer to a server request, or `Later` for one answered later
        (a request run as a client task, a `tasks/result`). Raises `Refusal`
        to refuse it, `InputHandlerError` when a handler fails."""
        method = message.get("method")
        params = message.get("params")
        if method == "ping":
            return {}
        if method in client_tasks.METHODS:
            return self._about_tasks(method, params)
        kind = inputs.kind_of(method, params)
        if method == "elicitation/create" and isinstance(self.declared.get("elicitation"), Mapping) \
                and (kind is None or not inputs.declared(kind, self.declared)):
            # The client does handle the method, in other modes: a mode it
            # did not declare (or one no revision defines) is -32602, which
            # the elicitation page's error handling requires, not -32601.
            mode = params.get("mode", "form") if isinstance(params, Mapping) else "form"
            raise Refusal(codes.INVALID_PARAMS, f"Invalid params: elicitation mode {mode!r} was not declared in "
                                                f"the client's capabilities")
        if kind is None or kind not in handlers or not inputs.declared(kind, self.declared):
            raise Refusal(codes.METHOD_NOT_FOUND, f"Method not found: {method} (this client does not handle it)")
        dialect = self.dialect
        if dialect is not None and not dialect.has_input(kind):
            # Declared for the newer revision asked for, but the server
            # settled on one without it (elicitation on 2025-03-26, url mode
            # on 2025-06-18): its schema has no answer the client could send.
            if method == "elicitation/create" and dialect.has_input("form"):
                raise Refusal(codes.INVALID_PARAMS, f"Invalid params: protocol {dialect.version} has no "
                                                    f"elicitation mode {kind!r}")
            raise Refusal(codes.METHOD_NOT_FOUND, f"Method not found: {method} (protocol {dialect.version} "
                                                  f"does not have it)")
        try:
            inputs.check_request(kind, params)
        except inputs.BadInput as exc:
            raise Refusal(codes.INVALID_PARAMS, f"Invalid params: {exc}") from None
        as_task = isinstance(params, Mapping) and params.get("task") is not None
        if as_task and client_tasks.runs_as_task(kind, self.declared):
            assert isinstance(params, Mapping)
            return self._as_task(kind, handlers[kind], params)
        return self._run(kind, handlers[kind], dict(params or {}), dialect)

    def _run(self, kind: str, handler: Any, params: dict[str, Any], dialect: Dialect | None) -> dict[str, Any]:
        """Run the handler and check its answer (`multiround.run_handler`),
        then shape the answer for the settled revision; `InputHandlerError`
        when the handler failed, or answered what the revision cannot carry
        (then nothing of it is sent: the server is told -32603 with why)."""
        answer = multiround.run_handler(kind, handler, params, self.schemas, {})
        if dialect is None:
            return answer
        try:
            return dialect.input_answer(kind, answer)
        except NotInRevision as exc:
            raise InputHandlerError(f"the {kind} handler answered something the server's protocol cannot carry: "
                                    f"{exc}", result={}, handler=kind, problem=str(exc)) from None

    def _about_tasks(self, method: str, params: Any) -> dict[str, Any] | Later:
        """The server's `tasks/*` requests about the client's own tasks."""
        if not client_tasks.offers(method, self.declared):
            raise Refusal(codes.METHOD_NOT_FOUND, f"Method not found: {method} (this client does not handle it)")
        tasks = self.tasks
        if method == "tasks/get":
            return tasks.get(params)
        if method == "tasks/list":
            return tasks.list(params)
        if method == "tasks/cancel":
            return tasks.cancel(params)
        return Later(lambda answer: tasks.result(params, answer, owed=answer.owed))

    def _as_task(self, kind: str, handler: Any, params: Mapping[str, Any]) -> Later:
        """Run a request as a client task: answered at once with the task,
        its handler run on a handler thread (never the caller's: the caller
        must stay free to answer the server's polls), with the params a
        plain request would have (without `task`)."""
        tasks, dialect = self.tasks, self.dialect  # the session's, whenever the handler runs
        question = {key: value for key, value in params.items() if key != "task"}

        def start(answer: Answer) -> None:
            try:
                task_id, created = tasks.create(params["task"])
            except Refusal as refusal:
                answer(error=refusal.error())
                return
            expiry = ("client task", task_id)
            # The handler runs only once the CreateTaskResult went out: a
            # request withdrawn, timed out or closed meanwhile creates no
            # task and asks nobody. `gate` is set within this call (the
            # answer never blocks), so a job that starts early waits a moment.
            gate, sent = threading.Event(), [False]

            def run() -> None:
                gate.wait()
                if not sent[0]:
                    return
                try:
                    outcome = self._run(kind, handler, question, dialect)
                except InputHandlerError as exc:
                    log.warning("the %s handler of client task %s failed: %s", kind, task_id, exc)
                    # The error a plain request gets from a handler thread.
                    tasks.finish(task_id, error={"code": codes.INTERNAL_ERROR,
                                                 "message": f"client handler failed: {exc}"})
                except BaseException:
                    tasks.finish(task_id, error={"code": codes.INTERNAL_ERROR,
                                                 "message": "client handler failed: it was interrupted"})
                    raise
                else:
                    tasks.finish(task_id, result=outcome)
                finally:
                    answer.cancel_expiry(expiry)

            try:
                if not answer.background(run):
                    tasks.forget(task_id)
                    answer(error={"code": codes.INTERNAL_ERROR, "message": "too many server requests in progress"})
                    return
                if not answer(result=created):
                    tasks.forget(task_id)
                    return
                # `handler_timeout` bounds the task as it bounds a plain
                # request: it fails then (its thread runs on: it cannot be
                # interrupted, and holds its task thread until it returns).
                def expire(limit: float) -> None:
                    tasks.finish(task_id, error={"code": codes.INTERNAL_ERROR,
                                                 "message": f"the client's handler did not answer within {limit:g} s"})

                answer.expire(expiry, expire)
                sent[0] = True
            finally:
                gate.set()

        return Later(start)

    def unrelated(self, message: dict[str, Any]) -> dict[str, Any] | Later:
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
        request_id = message["id"]
        try:
            result = self.result(message, handlers)
            if isinstance(result, Later):
                # Bounded as on a handler thread: `handler_timeout` from now.
                conn.arm_handler_timeout(request_id)
                result.start(conn.later(request_id))
        except Refusal as refusal:
            conn.respond(request_id, error=refusal.error())
        except InputHandlerError as exc:
            conn.respond(request_id, error={"code": codes.INTERNAL_ERROR, "message": f"client handler failed: {exc.problem}"})
            raise
        else:
            if not isinstance(result, Later):
                conn.respond(request_id, result=result)
