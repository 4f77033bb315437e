"""Tasks on the test server: the `io.modelcontextprotocol/tasks` extension, in both eras.

A tool registered with `task_tool()` runs as a task when the request
declares the extension (per request in `_meta`'s client capabilities in
2026-07-28; at `initialize` in the initialize era): `tools/call` answers at
once with a `CreateTaskResult` (`resultType: "task"`) and the tool runs on
a thread of its own. The client then uses:

* `tasks/get {taskId}`: the task's state (`DetailedTask`): `result` when
  `completed`, `error` when `failed`, `inputRequests` when
  `input_required`;
* `tasks/update {taskId, inputResponses}`: answers to input requests
  (partial sets allowed; unknown or answered keys ignored); an empty ack;
* `tasks/cancel {taskId}`: an empty ack, also for a finished task; a running
  task is `cancelled` at once and its tool sees `ctx.cancelled`.

Unknown task ids get -32602; a request that does not declare the
extension gets -32021 naming it; `tasks/result` and `tasks/list` (removed
by the extension) get -32601. Without the extension a `task_tool` runs as
a plain tool, unless registered `required=True` (then -32021).

A task tool is `fn(args, ctx)`, `ctx` a `TaskContext` (`cancelled`,
`elicit()`, `elicit_all()`, `set_message()`); when run as a plain tool its
`ctx` is a `ToolContext`-backed stand-in with the same methods.

Everything lives in one `TaskStore` per `Server` (so every session, every
stateless request, and every client of the same server sees the same
tasks), bounded by `max_tasks`; ids are unguessable. Task threads are
daemons that end when their tool returns; `close_tasks(server)` cancels
and joins them.

Notifications (2026-07-28): a `subscriptions/listen` whose filter has
`taskIds` (and which declares the extension) is acknowledged with the known
ones and gets `notifications/tasks` carrying the full task state, once at
once and then on every change.
"""

from __future__ import annotations

import datetime
import logging
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ._context import ToolContext
from ._features import ToolDef, failure_result, object_schema as _object
from ._protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    META_CLIENT_CAPABILITIES,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    JSONDict,
    RpcError,
)

if TYPE_CHECKING:
    from ._context import Call
    from ._registry import Server
    from ._session import ServerSession
    from ._subscriptions import Listen

_log = logging.getLogger("mcp_sync.testing")

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: The methods the extension defines; `tasks/result` and `tasks/list` are gone.
METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_REQUIRED: JSONDict = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
_store_lock = threading.Lock()


class TaskCancelled(Exception):
    """Raised in a task tool waiting for input when its task is cancelled."""


class TaskContext:
    """What a task tool gets: `cancelled` (an Event), `elicit()`,
    `elicit_all()` and `set_message()`.

    Example::

        def backup(args, ctx):
            ctx.set_message("copying")
            if ctx.cancelled.wait(2.0):      # cancellable sleep
                return "stopped"
            answer = ctx.elicit("Keep the old copy?", {"type": "object",
                                 "properties": {"keep": {"type": "boolean"}}})
            return "kept" if (answer.get("content") or {}).get("keep") else "replaced"
    """

    def __init__(self, task: ServerTask) -> None:
        self._task = task
        self.cancelled = task.cancel_event

    def set_message(self, message: str) -> None:
        """Set the task's `statusMessage`."""
        with self._task.cond:
            self._task.status_message = message
            self._task.touch()

    def elicit(self, message: str, requested_schema: Mapping[str, Any], *, timeout: float | None = None) -> JSONDict:
        """Ask the client (a form elicitation) and wait for its answer."""
        return self.elicit_all([(message, requested_schema)], timeout=timeout)[0]

    def elicit_all(self, questions: Sequence[tuple[str, Mapping[str, Any]]], *,
                   timeout: float | None = None) -> list[JSONDict]:
        """Ask several form elicitations at once (the task is `input_required`
        until every one is answered); the answers in order."""
        return self._task.ask([{"method": "elicitation/create",
                                "params": {"mode": "form", "message": m, "requestedSchema": dict(s)}}
                               for m, s in questions], timeout)


class _PlainContext:
    """A task tool's context when it runs as a plain tool (no extension)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.cancelled = ctx.cancelled

    def set_message(self, message: str) -> None:
        pass

    def elicit(self, message: str, requested_schema: Mapping[str, Any], *, timeout: float | None = None) -> JSONDict:
        result: JSONDict = self._ctx.elicit(message, requested_schema, timeout=timeout)
        return result

    def elicit_all(self, questions: Sequence[tuple[str, Mapping[str, Any]]], *,
                   timeout: float | None = None) -> list[JSONDict]:
        return [self.elicit(m, s, timeout=timeout) for m, s in questions]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ServerTask:
    """One task: its state under `cond`, and the thread running its tool."""

    def __init__(self, task_id: str, ttl_ms: int | None, poll_ms: int) -> None:
        self.id = task_id
        self.cond = threading.Condition()
        self.cancel_event = threading.Event()
        self.status = "working"
        self.status_message: str | None = None
        self.created_at = self.updated_at = _now()
        self.created = time.monotonic()
        self.ttl_ms = ttl_ms
        self.poll_ms = poll_ms
        self.result: JSONDict | None = None
        self.error: JSONDict | None = None
        self.pending: dict[str, JSONDict] = {}   # key -> input request, unanswered
        self.answers: dict[str, JSONDict] = {}   # key -> answer, not yet taken by the tool
        self.next_key = 0
        self.thread: threading.Thread | None = None
        #: Told of every change, under `cond` (the store's `notifications/tasks`).
        self.on_change: Callable[[ServerTask], None] | None = None

    def touch(self) -> None:
        self.updated_at = _now()
        if self.on_change is not None:
            self.on_change(self)

    def state(self) -> JSONDict:
        with self.cond:
            out: JSONDict = {"taskId": self.id, "status": self.status, "createdAt": self.created_at,
                             "lastUpdatedAt": self.updated_at, "ttlMs": self.ttl_ms, "pollIntervalMs": self.poll_ms}
            if self.status_message is not None:
                out["statusMessage"] = self.status_message
            if self.status == "completed":
                out["result"] = self.result
            elif self.status == "failed":
                out["error"] = self.error
            elif self.status == "input_required":
                out["inputRequests"] = dict(self.pending)
            return out

    def ask(self, requests: list[JSONDict], timeout: float | None) -> list[JSONDict]:
        """Park the task in `input_required` until every request is answered."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            keys = []
            for request in requests:
                self.next_key += 1
                key = f"{self.id[:8]}-in-{self.next_key}"  # unique over the task's life
                self.pending[key] = request
                keys.append(key)
            if self.status == "working":
                self.status = "input_required"
                self.touch()
            while not all(key in self.answers for key in keys):
                if self.cancel_event.is_set() or self.status in TERMINAL:
                    raise TaskCancelled()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("no answer from the client in time")
                self.cond.wait(left)
            return [self.answers.pop(key) for key in keys]

    def update(self, responses: Mapping[str, Any]) -> None:
        with self.cond:
            for key, answer in responses.items():
                if key in self.pending and isinstance(answer, dict):  # others are ignored, as the spec says
                    del self.pending[key]
                    self.answers[key] = answer
            if self.status == "input_required" and not self.pending:
                self.status = "working"
            self.touch()
            self.cond.notify_all()

    def cancel(self) -> None:
        with self.cond:
            self.cancel_event.set()
            if self.status not in TERMINAL:
                self.status = "cancelled"
                self.status_message = "cancelled by the client"
                self.pending.clear()
                self.touch()
            self.cond.notify_all()

    def settle(self, status: str, *, result: JSONDict | None = None, error: JSONDict | None = None) -> None:
        with self.cond:
            if self.status in TERMINAL:
                return  # cancelled first: the late outcome is dropped
            self.status, self.result, self.error = status, result, error
            self.pending.clear()
            self.touch()
            self.cond.notify_all()


class TaskStore:
    """A server's tasks, by id (thread-safe, at most `max_tasks`)."""

    def __init__(self, *, poll_interval_ms: int = 50, ttl_ms: int | None = 300_000, max_tasks: int = 1000) -> None:
        self.poll_interval_ms = poll_interval_ms
        self.ttl_ms = ttl_ms
        self.max_tasks = max_tasks
        self._lock = threading.Lock()
        self._tasks: dict[str, ServerTask] = {}
        #: task id -> the `subscriptions/listen` streams that asked for it.
        self._watchers: dict[str, list[Listen]] = {}

    def start(self, tool: ToolDef, fn: Callable[[JSONDict, Any], Any], args: JSONDict) -> ServerTask:
        with self._lock:
            self._expire()
            if len(self._tasks) >= self.max_tasks:
                raise RpcError(INTERNAL_ERROR, "Internal error: too many tasks")
            task = ServerTask(secrets.token_urlsafe(16), self.ttl_ms, self.poll_interval_ms)
            task.on_change = self._changed
            # Stored before the answer goes out: a tasks/get right after it finds the task.
            self._tasks[task.id] = task
        task.thread = threading.Thread(target=_run, args=(task, tool, fn, args), daemon=True,
                                       name=f"mcp-task-{task.id[:8]}")
        task.thread.start()
        return task

    def watch(self, task: ServerTask, listen: Listen) -> None:
        """Send `listen` the task's state now and on every change."""
        with self._lock:
            watchers = [w for w in self._watchers.get(task.id, []) if w.end is None]
            if len(watchers) >= 100:  # bounded: the oldest stream stops hearing of it
                watchers.pop(0)
            watchers.append(listen)
            self._watchers[task.id] = watchers
        listen.push(listen.tag("notifications/tasks", task.state()))

    def _changed(self, task: ServerTask) -> None:
        with self._lock:
            watchers = [w for w in self._watchers.get(task.id, []) if w.end is None and not w.finished.is_set()]
            if watchers:
                self._watchers[task.id] = watchers
            else:
                self._watchers.pop(task.id, None)
        if watchers:
            state = task.state()
            for listen in watchers:
                listen.push(listen.tag("notifications/tasks", state))

    def _expire(self) -> None:
        now = time.monotonic()
        for task_id, task in list(self._tasks.items()):
            if task.ttl_ms is not None and task.status in TERMINAL and now - task.created > task.ttl_ms / 1000:
                del self._tasks[task_id]
                self._watchers.pop(task_id, None)

    def find(self, task_id: Any) -> ServerTask | None:
        with self._lock:
            return self._tasks.get(task_id) if isinstance(task_id, str) else None

    def get(self, task_id: Any) -> ServerTask:
        task = self.find(task_id)
        if task is None:
            raise RpcError(INVALID_PARAMS, f"Failed to retrieve task: Task not found ({task_id!r})")
        return task

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            if task.thread is not None:
                task.thread.join(timeout)


def _run(task: ServerTask, tool: ToolDef, fn: Callable[[JSONDict, Any], Any], args: JSONDict) -> None:
    try:
        value = fn(args, TaskContext(task))
    except TaskCancelled:
        task.cancel()
    except RpcError as exc:  # a protocol-level failure: the task fails with it
        task.settle("failed", error=exc.to_json())
    except BaseException as exc:  # the tool failed (SystemExit, pytest's Failed too): a completed task
        # with an error result; a task left "working" would be waited on for ever.
        _log.debug("task tool %s failed: %r", tool.name, exc)
        task.settle("completed", result=failure_result(exc))
    else:
        task.settle("completed", result=tool.answer(value))


def store_of(server: Server) -> TaskStore | None:
    store: TaskStore | None = getattr(server, "_task_store", None)
    return store


def _ensure_store(server: Server) -> TaskStore:
    with _store_lock:
        store = store_of(server)
        if store is None:
            store = TaskStore()
            server._task_store = store  # type: ignore[attr-defined]
        return store


def close_tasks(server: Server) -> None:
    """Cancel the server's running tasks and join their threads.

    Example::

        server = demo_server(tasks=True)
        ...
        close_tasks(server)
    """
    store = store_of(server)
    if store is not None:
        store.close()


def task_tool(server: Server, name: str, fn: Callable[[JSONDict, Any], Any], *, description: str | None = None,
              input_schema: Mapping[str, Any] | None = None, required: bool = False,
              prepare: Callable[[JSONDict, ToolContext], JSONDict] | None = None) -> None:
    """Register `fn(args, ctx)` as a tool that runs as a task when the
    client declares the extension (see the module). `prepare(args, ctx)`,
    if given, runs first within the `tools/call` itself (so it may ask the
    client, with multi round-trip requests in 2026-07-28) and returns the
    arguments the task gets: the task is created on the call's last round.

    Example::

        server = Server(name="jobs")
        task_tool(server, "backup", backup, input_schema={"type": "object"})
    """
    _ensure_store(server)

    def plain(args: JSONDict, ctx: Any) -> Any:
        return fn(prepare(args, ctx) if prepare is not None else args, _PlainContext(ctx))

    plain._mcp_task = (fn, required, prepare)  # type: ignore[attr-defined]
    server.tool(name, description, input_schema)(plain)


def declared(session: ServerSession, call: Call) -> bool:
    """Whether the request declares the extension (per request, or at initialize)."""
    if call.stateless:
        capabilities = call.meta.get(META_CLIENT_CAPABILITIES)
    else:
        capabilities = session._client_capabilities
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def call_task_tool(session: ServerSession, call: Call, tool: ToolDef, args: JSONDict) -> JSONDict | None:
    """`tools/call` of a task tool: a `CreateTaskResult` when the extension
    is declared; None to run it as a plain tool."""
    spec = getattr(tool.fn, "_mcp_task", None)
    if spec is None:
        return None
    fn, required, prepare = spec
    store = store_of(session._server)
    if store is None or not declared(session, call):
        if required:
            raise RpcError(MISSING_REQUIRED_CLIENT_CAPABILITY,
                           f"Missing required client capability: tool {tool.name} only runs as a task", _REQUIRED)
        return None
    if prepare is not None:
        args = prepare(args, ToolContext(session, call))
    task = store.start(tool, fn, args)
    out: JSONDict = {"resultType": "task"}
    out.update(task.state())
    return out


def listen_for_tasks(session: ServerSession, call: Call) -> None:
    """A `subscriptions/listen` filter's `taskIds`: the known ones are
    accepted, and each gets `notifications/tasks` (its full state) now and on
    every change. -32021 unless the request declares the extension."""
    requested = (call.params.get("notifications") or {}).get("taskIds")
    store = store_of(session._server)
    if requested is None or store is None or call.listen is None:
        return  # an unknown key, as for a server without tasks
    if not isinstance(requested, list) or not all(isinstance(i, str) for i in requested):
        raise RpcError(INVALID_PARAMS, "Invalid params: notifications.taskIds must be an array of strings")
    if not declared(session, call):
        raise RpcError(MISSING_REQUIRED_CLIENT_CAPABILITY,
                       f"Missing required client capability: taskIds needs the {EXTENSION} extension", _REQUIRED)
    tasks = [task for task in map(store.find, dict.fromkeys(requested)) if task is not None]
    call.listen.accepted["taskIds"] = [task.id for task in tasks]
    for task in tasks:
        store.watch(task, call.listen)


def route(session: ServerSession, call: Call) -> Callable[[Call], JSONDict]:
    """The handler of a `tasks/*` request, or RpcError."""
    store = store_of(session._server)
    if store is None or call.method not in METHODS:
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
    if not declared(session, call):
        raise RpcError(MISSING_REQUIRED_CLIENT_CAPABILITY,
                       f"Missing required client capability: {call.method} needs the {EXTENSION} extension",
                       _REQUIRED)
    task = store.get(call.params.get("taskId"))
    if call.method == "tasks/get":
        return lambda _call: task.state()
    if call.method == "tasks/update":
        responses = call.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: tasks/update needs an inputResponses object")
        task.update(responses)
        return lambda _call: {}
    task.cancel()
    return lambda _call: {}


# -- the demo's task tools -----------------------------------------------------


def add_task_tools(server: Server) -> None:
    """The demo's task tools: `slow_compute`, `confirm_delete`,
    `multi_input`, `failing_job` (task only), `protocol_error_job`,
    `test_tool_with_task` (asks within the call, then a task; task only),
    and `greet`, a plain tool."""

    def slow_compute(args: JSONDict, ctx: Any) -> Any:
        seconds = float(args.get("seconds", 1))
        ctx.set_message(f"computing for {seconds:g} s")
        if ctx.cancelled.wait(seconds):
            raise TaskCancelled()
        value = args.get("value")
        return value if isinstance(value, str) else f"computed after {seconds:g} s"

    def greet(args: JSONDict, ctx: ToolContext) -> str:
        return f"Hello, {args['name']}!"

    def confirm_delete(args: JSONDict, ctx: Any) -> Any:
        path = args["filename"]
        answer = ctx.elicit(f"Delete {path}?", _object({"confirm": {"type": "boolean"}}, ["confirm"]))
        content = answer.get("content") or {}
        if answer.get("action") == "accept" and content.get("confirm"):
            return f"deleted {path}"
        return f"kept {path}"

    def multi_input(args: JSONDict, ctx: Any) -> Any:
        first, second = ctx.elicit_all([
            ("First name?", _object({"name": {"type": "string"}}, ["name"])),
            ("Last name?", _object({"name": {"type": "string"}}, ["name"])),
        ])
        return f"{(first.get('content') or {}).get('name')} {(second.get('content') or {}).get('name')}"

    def failing_job(args: JSONDict, ctx: Any) -> Any:
        if ctx.cancelled.wait(float(args.get("seconds", 0.05))):
            raise TaskCancelled()
        raise RuntimeError("the job failed")

    def protocol_error_job(args: JSONDict, ctx: Any) -> Any:
        raise RpcError(INTERNAL_ERROR, "Internal error: the job crashed", {"job": "protocol_error_job"})

    def ask_name(args: JSONDict, ctx: ToolContext) -> JSONDict:
        answer = ctx.elicit("What is your name?", _object({"name": {"type": "string"}}, ["name"]))
        return {**args, "user_name": (answer.get("content") or {}).get("name")}

    def hello_later(args: JSONDict, ctx: Any) -> Any:
        if ctx.cancelled.wait(float(args.get("seconds", 0.05))):
            raise TaskCancelled()
        return f"Hello, {args['user_name']}!"

    # The tool names and arguments are those the official conformance suite's
    # server scenarios expect, so the suite can check this server's wire.
    server.tool("greet", "Say hello (never a task).", _object({"name": {"type": "string"}}, ["name"]))(greet)
    task_tool(server, "slow_compute", slow_compute,
              description="Sleep `seconds`, then return `value` (or a message); runs as a task.",
              input_schema=_object({"seconds": {"type": "number"}, "value": {"type": "string"}}))
    task_tool(server, "confirm_delete", confirm_delete,
              description="Ask the client to confirm deleting `filename` (mid-task input).",
              input_schema=_object({"filename": {"type": "string"}}, ["filename"]))
    task_tool(server, "multi_input", multi_input,
              description="Ask two questions at once (mid-task input).")
    task_tool(server, "failing_job", failing_job, required=True,
              description="Fail (a tool error) after `seconds`; only runs as a task.",
              input_schema=_object({"seconds": {"type": "number"}}))
    task_tool(server, "protocol_error_job", protocol_error_job,
              description="Fail with a JSON-RPC error: the task ends failed.")
    task_tool(server, "test_tool_with_task", hello_later, required=True, prepare=ask_name,
              description="Ask the user's name within the call, then greet them from a task.")
