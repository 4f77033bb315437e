"""The client's own tasks: server requests run as tasks (2025-11-25 core
tasks, with the client as the receiver).

What it owns: one connection's table of client tasks, each a server's
`elicitation/create` or `sampling/createMessage` that came with
`params.task`: its state (`working`, then `completed`, `failed` or
`cancelled`; never `input_required`: the handler *is* the input), its
outcome (the handler's result, or the JSON-RPC error the plain request
would have been answered with), and the answers to the server's
`tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` about them;
and the `tasks` capability a client declares for its input handlers
(`capability()`). What it must not know: threads, IO, or handlers. It
neither runs a handler nor sends anything: `server_requests` runs the
handler on a handler thread and calls `finish()`, and every answer goes
out through the `Reply` of the request it answers.

How it works. `create()` adds a `working` task and returns its
`CreateTaskResult`. `finish()` records the outcome of a task still working
(a cancelled or forgotten task's late outcome is dropped) and answers the
`tasks/result` requests waiting for it. `result()` answers at once for a
task that ended and otherwise keeps the reply until the task ends: no
thread waits, so a `tasks/result` holds no handler thread and can never
starve the handler its task needs, however small the pool.

Bounds. At most `max_tasks` (`MAX_TASKS`, 64) tasks are kept. A task is
kept while its handler runs and for its `ttl` from its creation: what the
server asked, at most `MAX_TTL_MS` (one hour), and one hour when it asked
none. Ended tasks past their ttl are purged whenever the table is used. A
new task that finds the table full takes the place of the oldest ended
task (the oldest whose result was fetched, if any); when every kept task
is still running it is refused with -32603 (a running task holds a
handler-pool slot, so there are rarely that many), which tells the server
at once, where running it as a plain request would answer a result of a
shape it did not ask for. At most `MAX_WAITERS` (8) `tasks/result`
requests wait for one task; more are refused with -32603.

Lock discipline: `_lock` guards the table and every task's fields, and is
held only to read or change them: no reply is called, no handler runs and
nothing is logged while it is held. Replies go out after it is released,
on the thread that ended the task or asked.

Task ids are `secrets.token_urlsafe(16)` (128 random bits). Tasks are bound
to their connection: only the server on it can ask about them, and a new
session (a reconnect) starts with an empty table.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, Protocol

from .protocol import codes
from .protocol.jsonrpc import Refusal
from .protocol.meta import META_RELATED_TASK as RELATED_TASK  # the `_meta` key that ties a message to its task

#: The server's requests about the client's tasks.
METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
#: The most tasks kept at once.
MAX_TASKS = 64
#: The longest a task is kept from its creation (and the ttl when the server asks none), in ms.
MAX_TTL_MS = 3_600_000
#: The polling interval suggested to the server, in ms.
POLL_INTERVAL_MS = 1000
#: The most `tasks/result` requests waiting for one task.
MAX_WAITERS = 8
#: The least an ended task is kept after it ended, in seconds (past its ttl
#: too), so the server's next poll still finds a handler that overran the ttl.
END_GRACE = 60.0
TERMINAL = frozenset({"completed", "failed", "cancelled"})

#: The request a handler kind answers, as the `tasks.requests` capability names it.
_REQUESTS = {"form": ("elicitation", "create"), "url": ("elicitation", "create"),
             "sampling": ("sampling", "createMessage")}
_CANCELLED = {"code": codes.INTERNAL_ERROR, "message": "the task was cancelled: its request has no result"}


class Reply(Protocol):
    """Answers one server request (with `result`, or with `error`); False
    when nothing was sent (the request was withdrawn or timed out)."""

    def __call__(self, result: Mapping[str, Any] | None = None,
                 error: Mapping[str, Any] | None = None) -> bool | None: ...


def _always() -> bool:
    return True


def capability(capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `tasks` capability of a 2025-11-25 client that declares
    `capabilities`: `tasks/list`, `tasks/cancel`, and task-augmented
    `elicitation/create` and `sampling/createMessage` for those of the two
    it declares (which it does for its input handlers). None for neither.

    Example::

        >>> capability({"elicitation": {"form": {}}, "roots": {}})
        {'list': {}, 'cancel': {}, 'requests': {'elicitation': {'create': {}}}}
        >>> capability({"roots": {}}) is None
        True
    """
    requests: dict[str, Any] = {}
    if isinstance(capabilities.get("elicitation"), Mapping):
        requests["elicitation"] = {"create": {}}
    if isinstance(capabilities.get("sampling"), Mapping):
        requests["sampling"] = {"createMessage": {}}
    return {"list": {}, "cancel": {}, "requests": requests} if requests else None


def runs_as_task(kind: str, declared: Mapping[str, Any]) -> bool:
    """Whether a request for handler `kind` may run as a task: `declared`
    (the capabilities sent with `initialize`) names it in `tasks.requests`."""
    group, name = _REQUESTS.get(kind, ("", ""))
    entry = _path(declared, "tasks", "requests", group)
    return entry is not None and isinstance(entry.get(name), Mapping)


def offers(method: str, declared: Mapping[str, Any]) -> bool:
    """Whether `declared` offers the server `method` (one of `METHODS`):
    `tasks/list` and `tasks/cancel` need their own capability."""
    tasks = _path(declared, "tasks")
    if tasks is None:
        return False
    if method in ("tasks/list", "tasks/cancel"):
        return isinstance(tasks.get(method.removeprefix("tasks/")), Mapping)
    return True


def _path(value: Mapping[str, Any], *keys: str) -> Mapping[str, Any] | None:
    for key in keys:
        found = value.get(key)
        if not isinstance(found, Mapping):
            return None
        value = found
    return value


def _stamp() -> str:
    """Now, in ISO 8601 (UTC, milliseconds); `time` only, as `import
    mcp_sync` does not load `datetime` (tests/test_import_cost.py)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


def _new_id() -> str:
    """128 random bits from the OS (what `secrets` uses; `secrets` itself
    would load `random` with `import mcp_sync`)."""
    return os.urandom(16).hex()


def _ttl(task: Any) -> int:
    if not isinstance(task, Mapping):
        raise Refusal(codes.INVALID_PARAMS, "Invalid params: task must be an object")
    ttl = task.get("ttl")
    if ttl is None:
        return MAX_TTL_MS
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
        raise Refusal(codes.INVALID_PARAMS, "Invalid params: task.ttl must be a non-negative integer (milliseconds)")
    return min(ttl, MAX_TTL_MS)


class _Task:
    __slots__ = ("task_id", "status", "status_message", "ttl_ms", "created", "ended", "created_at", "updated_at",
                 "result", "error", "waiters", "fetched")

    def __init__(self, task_id: str, ttl_ms: int, created: float, stamp: str) -> None:
        self.task_id = task_id
        self.status = "working"
        self.status_message: str | None = None
        self.ttl_ms = ttl_ms
        self.created = created  # on the monotonic clock
        self.ended = created  # when it ended (set then), on the monotonic clock
        self.created_at = self.updated_at = stamp
        self.result: dict[str, Any] | None = None
        self.error: Mapping[str, Any] | None = None
        self.waiters: list[tuple[Reply, Callable[[], bool]]] = []  # (reply, still owed?)
        self.fetched = False  # a `tasks/result` was answered with the outcome (it went out)

    def wire(self) -> dict[str, Any]:
        """The `Task` object."""
        task: dict[str, Any] = {"taskId": self.task_id, "status": self.status, "createdAt": self.created_at,
                                "lastUpdatedAt": self.updated_at, "ttl": self.ttl_ms,
                                "pollInterval": POLL_INTERVAL_MS}
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        return task

    def outcome(self) -> tuple[dict[str, Any] | None, Mapping[str, Any] | None]:
        """The answer to `tasks/result` for an ended task: (result, None) or (None, error)."""
        if self.result is None:
            return None, self.error or _CANCELLED
        meta = self.result.get("_meta")
        meta = {**meta, RELATED_TASK: {"taskId": self.task_id}} if isinstance(meta, Mapping) else \
            {RELATED_TASK: {"taskId": self.task_id}}
        return {**self.result, "_meta": meta}, None


class ClientTasks:
    """One connection's client tasks (see the module docstring). Thread-safe.

    Example::

        tasks = ClientTasks()
        task_id, created = tasks.create({"ttl": 60000})   # answers the server's request
        tasks.finish(task_id, result={"action": "decline"})  # from the handler's thread
        tasks.result({"taskId": task_id}, reply)           # reply(result={..., "_meta": {...}})
    """

    def __init__(self, *, max_tasks: int = MAX_TASKS, clock: Callable[[], float] = time.monotonic) -> None:
        if max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self._lock = threading.Lock()
        self._tasks: dict[str, _Task] = {}  # in order of creation
        self._max_tasks = max_tasks
        self._clock = clock

    def __len__(self) -> int:
        with self._lock:
            return len(self._tasks)

    def create(self, task: Any) -> tuple[str, dict[str, Any]]:
        """A new `working` task for a request whose `params.task` is `task`:
        its id and the `CreateTaskResult` that answers the request. Raises
        `Refusal` (-32602 for a malformed `task`, -32603 when the table is
        full of running tasks)."""
        ttl = _ttl(task)
        stamp = _stamp()
        with self._lock:
            self._purge()
            if len(self._tasks) >= self._max_tasks and not self._evict():
                raise Refusal(codes.INTERNAL_ERROR,
                              f"too many client tasks: {self._max_tasks} are running already")
            task_id = _new_id()
            made = self._tasks[task_id] = _Task(task_id, ttl, self._clock(), stamp)
            return task_id, {"task": made.wire()}

    def forget(self, task_id: str) -> None:
        """Drop a task whose request was refused after all (no thread to run it)."""
        with self._lock:
            self._tasks.pop(task_id, None)

    def finish(self, task_id: str, *, result: Mapping[str, Any] | None = None,
               error: Mapping[str, Any] | None = None) -> bool:
        """The handler of `task_id` ended with `result` (the task is
        `completed`) or `error` (a JSON-RPC error object: `failed`); the
        `tasks/result` requests waiting for it are answered. False (and
        nothing changes) when the task was cancelled, ended or is gone."""
        stamp = _stamp()
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or task.status != "working":
                return False
            if error is None:
                task.status, task.result = "completed", dict(result or {})
            else:
                task.status, task.error = "failed", dict(error)
                task.status_message = str(error.get("message"))
            task.updated_at, task.ended = stamp, self._clock()
            waiters, task.waiters = task.waiters, []
            answer, failure = task.outcome()
        self._answer(task, waiters, answer, failure)
        return True

    def get(self, params: Any) -> dict[str, Any]:
        """The answer to `tasks/get`: the task. `Refusal` -32602 for an unknown id."""
        with self._lock:
            self._purge()
            return self._find(params).wire()

    def result(self, params: Any, reply: Reply, *, owed: Callable[[], bool] = _always) -> None:
        """Answer `tasks/result` through `reply`: at once for an ended task
        (its result, tagged with the task, or the error it failed with),
        else when it ends. An unknown id is answered with -32602. `owed()`
        says whether the request is still owed an answer: a waiter the
        server withdrew or that timed out no longer counts toward
        `MAX_WAITERS` (it is dropped before any is refused)."""
        try:
            for attempt in (1, 2):
                with self._lock:
                    self._purge()
                    task = self._find(params)
                    if task.status != "working":
                        answer, failure = task.outcome()
                        break
                    if len(task.waiters) < MAX_WAITERS:
                        task.waiters.append((reply, owed))
                        return
                    if attempt == 2:
                        raise Refusal(codes.INTERNAL_ERROR,
                                      f"too many tasks/result requests ({MAX_WAITERS}) wait for this task")
                    waiting = list(task.waiters)
                # Asked outside the lock (it takes the engine's); then the
                # stale ones go, and the request is tried once more.
                stale = [waiter for waiter in waiting if not waiter[1]()]
                with self._lock:
                    task.waiters = [waiter for waiter in task.waiters if waiter not in stale]
        except Refusal as refusal:
            reply(error=refusal.error())
            return
        self._answer(task, [(reply, owed)], answer, failure)

    def _answer(self, task: _Task, waiters: list[tuple[Reply, Callable[[], bool]]],
                answer: dict[str, Any] | None, failure: Mapping[str, Any] | None) -> None:
        """(Without the lock.) Answer `waiters`; the task's outcome was
        fetched once one of the answers went out."""
        sent = False
        for reply, _ in waiters:
            sent = reply(answer, failure) is not False or sent
        if sent and not task.fetched:
            with self._lock:
                task.fetched = True

    def list(self, params: Any) -> dict[str, Any]:
        """The answer to `tasks/list`: every task kept, oldest first, in one
        page (there are never more than `max_tasks`), so any cursor is unknown."""
        if isinstance(params, Mapping) and params.get("cursor") is not None:
            raise Refusal(codes.INVALID_PARAMS, "Invalid params: unknown cursor (every task is on the first page)")
        with self._lock:
            self._purge()
            return {"tasks": [task.wire() for task in self._tasks.values()]}

    def cancel(self, params: Any) -> dict[str, Any]:
        """The answer to `tasks/cancel`: a working task is `cancelled` (its
        handler runs on, but its outcome will be dropped) and its waiting
        `tasks/result` requests are answered with an error; -32602 for an
        ended task or an unknown id."""
        stamp = _stamp()
        with self._lock:
            self._purge()
            task = self._find(params)
            if task.status in TERMINAL:
                raise Refusal(codes.INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{task.status}'")
            task.status, task.status_message = "cancelled", "cancelled by the server"
            task.updated_at, task.ended = stamp, self._clock()
            waiters, task.waiters = task.waiters, []
            answered = task.wire()
        self._answer(task, waiters, None, _CANCELLED)
        return answered

    # -- under the lock ---------------------------------------------------------------------------

    def _find(self, params: Any) -> _Task:
        task_id = params.get("taskId") if isinstance(params, Mapping) else None
        if not isinstance(task_id, str):
            raise Refusal(codes.INVALID_PARAMS, "Invalid params: taskId (a string) is required")
        task = self._tasks.get(task_id)
        if task is None:
            raise Refusal(codes.INVALID_PARAMS, "Failed to retrieve task: Task not found")
        return task

    def _purge(self) -> None:
        """Forget the ended tasks past their ttl and `END_GRACE` after they ended."""
        now = self._clock()
        expired = [task_id for task_id, task in self._tasks.items()
                   if task.status in TERMINAL and (now - task.created) * 1000 >= task.ttl_ms
                   and now - task.ended >= END_GRACE]
        for task_id in expired:
            del self._tasks[task_id]

    def _evict(self) -> bool:
        """Make room: forget the oldest ended task, one whose result was
        fetched first. False when every task is still running."""
        ended = [task for task in self._tasks.values() if task.status in TERMINAL]
        if not ended:
            return False
        victim = next((task for task in ended if task.fetched), ended[0])
        del self._tasks[victim.task_id]
        return True
