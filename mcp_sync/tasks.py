"""Tasks: long-running tool calls as handles (the `io.modelcontextprotocol/tasks` extension).

A server that has negotiated the extension may answer a `tools/call` with a
`CreateTaskResult` (`resultType: "task"`) instead of the tool's result. This
module owns what the client does with one:

* declaring the extension: per request in `_meta`'s client capabilities
  (2026-07-28), or at `initialize` (`connect(..., tasks=True)`) in the
  initialize era, whose capabilities cannot change later;
* `Task`, the blocking handle: `refresh()` (`tasks/get`), `wait()` (follows
  `notifications/tasks` on a `subscriptions/listen` stream when the server
  acknowledges the task id there (2026-07-28), else polls at the server's
  `pollIntervalMs`; answers `input_required` rounds with the input handlers
  on the waiting thread through `tasks/update`), `cancel()` (`tasks/cancel`);
* `call_tool()` and `get_task()`, which `Client.call_tool(..., task=True)`
  and `Client.get_task()` delegate to.

It must not know how requests are sent or retried: it goes through the
request pipeline's `Requester` interface, declaring the extension with
`extensions=`, so the one retry loop (`tasks/*` are safe to repeat),
tracing, metrics and the `Mcp-Method`/`Mcp-Name` headers work as for any
request.

2025-11-25 has tasks in its core protocol instead, with other shapes, and
a `Task` speaks whichever the connection has (`flavour()`): the request
carries `params.task` (no extension is declared); the answer is
`{"task": {...}}`; `tasks/get` answers the task's state alone, and the
outcome of a finished task comes from `tasks/result`, which also blocks
while the task is `input_required`, the server's requests (its elicitation,
say) arriving meanwhile and answered by the input handlers like any server
request; `notifications/tasks/status` carries changes, which wake a waiting
poller. A tool whose `execution.taskSupport` is `required` is run as a
task by `call_tool()` even without `task=True`.

Field names are those of the extension (`ttlMs`, `pollIntervalMs`); the
older `ttl` and `pollInterval` (also milliseconds, 2025-11-25's names) are
read when the new ones are missing.

Threading: a `Task` may be shared. Its state is guarded by a condition;
one waiting thread at a time polls (the "poller"), the others wait on the
condition for its outcome, so every waiter sees the same result or error.
When the poller gives up (its own timeout), another waiter takes over.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, cast

from . import multiround
from .errors import (
    ConnectionClosed,
    ExtensionNotDeclared,
    InputRoundsExceeded,
    InvalidParams,
    InvalidResult,
    McpError,
    MissingClientCapability,
    RequestTimeout,
    ServerError,
    copy_error,
    server_error_from_wire,
)
from .errors import TaskCancelled as TaskCancelled
from .negotiation import TASKS_EXTENSION, offers_core_tasks
from .notifications import Notification
from .options import RequestOptions, check_input_handlers, check_options, check_timeout, check_tool_arguments
from .protocol import codes, pagination
from .protocol.headers import encode_header_value
from .types import CallToolResult, Tool
from .waiting import deadline_in, remaining, slice_of, wait_for_event

if TYPE_CHECKING:
    from .pipeline import Requester
    from .subscriptions import Subscription

log = logging.getLogger("mcp_sync.client")

__all__ = ["EXTENSION", "Task", "TaskCancelled"]

#: The extension's identifier, as declared in capabilities.
EXTENSION = TASKS_EXTENSION
TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATUSES = TERMINAL | {"working", "input_required"}
#: Seconds between polls when the server suggests no interval.
DEFAULT_POLL_INTERVAL = 1.0
# Bounds on a server's suggestion: a zero interval would spin, a huge one
# would make a finished task look hung. The spec sets none (clients SHOULD
# respect `pollIntervalMs`; servers MAY rate-limit faster polling), so a
# suggestion of 0 polls at the floor: at most 100 polls a second per waiter.
MIN_POLL_INTERVAL = 0.01
MAX_POLL_INTERVAL = 30.0
#: Seconds a `subscriptions/listen` for a task's notifications may take to be acknowledged.
LISTEN_ACK_TIMEOUT = 5.0

Finish = Callable[[Mapping[str, Any]], CallToolResult]




def _names_tasks(capabilities: Any) -> bool:
    return (isinstance(capabilities, Mapping) and isinstance(capabilities.get("extensions"), Mapping)
            and EXTENSION in capabilities["extensions"])


#: What a request that may create or touch a task declares (`extensions=`).
_DECLARE: Mapping[str, Any] = {EXTENSION: {}}


def explained(exc: MissingClientCapability) -> MissingClientCapability:
    """-32021 naming the tasks extension, with a message that says what to do."""
    if not _names_tasks(exc.required_capabilities):
        return exc
    return MissingClientCapability(
        exc.code, f"{exc.message} (this tool only runs as a task: pass task=True to call_tool(), "
                  "or tasks=True to connect())", exc.data, method=exc.method)


CORE, EXTENSION_FLAVOUR = "core", "extension"


def flavour(client: Requester) -> str | None:
    """How the connection runs tasks: `CORE` (2025-11-25, the server's
    capabilities list `tasks.requests.tools.call`), `EXTENSION_FLAVOUR`
    (2026-07-28, declared per request; or an initialize-era server that
    declares the extension), or None: an initialize-era server that offers
    neither."""
    settled = client.settled
    if settled is None or settled.dialect.stateless:
        return EXTENSION_FLAVOUR  # not connected yet (the request will say so), or per request
    capabilities = client.server_capabilities or {}
    if offers_core_tasks(settled.dialect, capabilities):
        return CORE
    return EXTENSION_FLAVOUR if _names_tasks(capabilities) else None


def runs_only_as_task(client: Requester, tool: Any) -> bool:
    """Whether `tool` (a name, a `Tool` or a definition mapping) declares
    `execution.taskSupport: "required"`, as far as the client knows."""
    if isinstance(tool, str):
        return tool in client.calls.catalog.task_required
    if isinstance(tool, Tool):
        return tool.task_support == "required"
    if isinstance(tool, Mapping):
        execution = tool.get("execution")
        return isinstance(execution, Mapping) and execution.get("taskSupport") == "required"
    return False


def learn_before_calling(client: Requester, arguments: Any, options: RequestOptions) -> RequestOptions:
    """List the tools once before calling one not seen listed, on a
    server whose tools may run only as tasks (2025-11-25 with tasks):
    after the call's own checks, within its timeout (what is left of it
    goes to the call), and at most once per connection: a failed listing
    is logged and the call goes ahead plainly."""
    check_options(options)
    check_tool_arguments(arguments)
    timeout = options.get("timeout", client.options.timeouts.request)
    check_timeout("timeout", timeout)
    deadline = deadline_in(timeout)
    client.calls.catalog.list_before_calling = False
    try:
        client.calls.list_all("tools", {"timeout": timeout}, client.options.limits.max_pages)
    except McpError as exc:
        log.info("could not list the tools to learn which run only as tasks (%s); calling plainly", exc)
    left = remaining(deadline, at_least=1e-9)
    return options if left is None else cast(RequestOptions, {**options, "timeout": left})


def _parse_time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def _millis(state: Mapping[str, Any], new: str, old: str) -> float | None:
    """A duration field in seconds, from its new name or else its old one."""
    value = state.get(new, state.get(old))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return value / 1000.0


class Task:
    """A tool call running on the server as a task. Thread-safe.

    Get one from `client.call_tool(..., task=True)` or
    `client.get_task(task_id)`. When the server answered at once instead of
    creating a task, the handle is already `completed` and its `id` is None.

    Example::

        task = client.call_tool("slow_compute", {"seconds": 0.2}, task=True)
        print(task.id, task.status)        # working
        result = task.wait(timeout=10)     # the CallToolResult
        print(result.text)

    Attributes:
        id (str | None): The task id (None when no task was created).
        status (str): ``"working"``, ``"input_required"``, ``"completed"``,
            ``"failed"`` or ``"cancelled"``, as last seen.
        status_message (str | None): The server's `statusMessage`, or None.
        created_at (datetime.datetime | None): When the task was created, as a
            `datetime` (None when the server sent none or an unreadable one).
        last_updated_at (datetime.datetime | None): When the task last changed, read
            the same way.
        ttl (float | None): Seconds the server keeps the task from its
            creation (None: unlimited or not said).
        poll_interval (float | None): Seconds between polls the server asks
            for (None: not said; `wait()` then polls every second). `wait()`
            keeps it within 0.01 and 30 s: 0 (poll again at once) polls
            every 0.01 s.
        raw (dict[str, Any]): The last task object received, as received.
    """

    def __init__(self, requester: Requester | None, state: Mapping[str, Any], finish: Finish,
                 options: Mapping[str, Any] | None = None, *, core: bool = False) -> None:
        self._requester = requester
        self._finish = finish
        self._core = core  # 2025-11-25's core tasks, else the extension
        self._options: dict[str, Any] = dict(options or {})
        self._cond = threading.Condition()
        self._polling = False
        self._nudge = threading.Event()
        self._answered: set[str] = set()
        self._outcome: CallToolResult | None = None
        self._error: McpError | None = None
        self._no_listen = False  # the server offers no notifications/tasks stream
        self.id: str | None = None
        self._apply(state)

    @classmethod
    def _settled(cls, result: CallToolResult) -> Task:
        """A handle for a call the server answered at once."""
        task = cls(None, {"status": "completed"}, lambda wire: result)
        task._outcome = result
        return task

    # -- state ------------------------------------------------------------------

    def _apply(self, state: Mapping[str, Any]) -> None:
        task_id = state.get("taskId", self.id)
        status = state.get("status")
        if self._requester is not None and (not isinstance(task_id, str) or not task_id):
            raise InvalidResult("the task has no string taskId")
        if status not in STATUSES:
            raise InvalidResult(f"task {task_id}: unknown status {status!r}")
        if self.id is not None and task_id != self.id:
            raise InvalidResult(f"asked for task {self.id}, the server answered for {task_id}")
        if status not in TERMINAL and getattr(self, "status", None) in TERMINAL:
            return  # an answer sent before the task ended, arriving after: a task never leaves a terminal status
        self.id = task_id
        self.status: str = status
        message = state.get("statusMessage")
        self.status_message: str | None = message if isinstance(message, str) else None
        self.created_at = _parse_time(state.get("createdAt"))
        self.last_updated_at = _parse_time(state.get("lastUpdatedAt"))
        self.ttl = _millis(state, "ttlMs", "ttl")
        self.poll_interval = _millis(state, "pollIntervalMs", "pollInterval")
        self.raw: dict[str, Any] = dict(state)

    @property
    def done(self) -> bool:
        """Whether the task reached a terminal status (as last seen)."""
        return self.status in TERMINAL

    def __repr__(self) -> str:
        return f"<Task {self.id} {self.status}>"

    # -- requests ----------------------------------------------------------------

    def _client(self) -> Requester:
        if self._requester is None:
            raise ConnectionClosed("this task handle has no client: the server answered at once")
        return self._requester

    def _request(self, method: str, params: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        client = self._client()
        # The call's input handlers come along: the capabilities they imply
        # are declared on the task's requests as on the call.
        options: dict[str, Any] = {k: v for k, v in self._options.items()
                                   if k in ("meta", "trace_context", "input_handlers")}
        if timeout is not None or "timeout" in self._options:
            options["timeout"] = timeout if timeout is not None else self._options["timeout"]
        # Mcp-Name lets a load balancer route the task's requests to the
        # instance that holds it; the 2026-07-28 transport adds both headers
        # itself, the initialize era's HTTP needs them passed.
        headers = {"Mcp-Method": method, "Mcp-Name": encode_header_value(params["taskId"])}
        # tasks/get is a pure read, tasks/cancel and tasks/update are
        # idempotent (answered keys are ignored): the one retry loop sends
        # them once more when a poll, coming at the server's interval, finds
        # the pooled connection just reset.
        return client.request(method, params, cast(RequestOptions, options), headers=lambda: headers,
                              extensions=None if self._core else _DECLARE)

    def refresh(self, *, timeout: float | None = None) -> Task:
        """Fetch the task's state (`tasks/get`) and return the handle.

        Example::

            task.refresh()
            print(task.status, task.status_message)

        Args:
            timeout: Seconds to wait for the answer; None: the call's
                timeout (the client's default unless the call set one).

        Returns:
            This handle, updated (unchanged when no task was created).

        Raises:
            RequestTimeout: No answer within `timeout`.
            McpError: What the request raises, such as the server's
                `ServerError` for a task it no longer knows.
        """
        check_timeout("timeout", timeout)
        if self.id is None:
            return self
        state = self._request("tasks/get", {"taskId": self.id}, timeout)
        with self._cond:
            self._apply(state)
        return self

    def cancel(self, *, timeout: float | None = None) -> None:
        """Ask the server to cancel the task (`tasks/cancel`). Idempotent:
        cancelling a finished or already cancelled task is not an error.
        Cancelling is cooperative: the task may still complete.

        Example::

            task.cancel()

        Args:
            timeout: Seconds to wait for the answer; None: the call's
                timeout (the client's default unless the call set one).

        Raises:
            RequestTimeout: No answer within `timeout`.
            McpError: What the request raises, such as the server's
                `ServerError` for a task it does not know.
        """
        check_timeout("timeout", timeout)
        if self.id is None:
            return
        if not self._core:
            self._request("tasks/cancel", {"taskId": self.id}, timeout)
        else:
            # 2025-11-25 answers the task's state, and -32602 for a task
            # already finished: not an error here, once its state says so.
            deadline = deadline_in(timeout)
            try:
                state = self._request("tasks/cancel", {"taskId": self.id}, timeout)
            except InvalidParams:
                left = remaining(deadline)
                if (left is not None and left <= 0) or not self.refresh(timeout=left).done:
                    raise
            else:
                with self._cond:
                    self._apply(state)
        self._nudge.set()  # a waiting poller looks again now rather than after its interval

    def wait(self, timeout: float | None = None) -> CallToolResult:
        """Block until the task ends and return the tool's `CallToolResult`
        (`is_error` set when the tool reported failure).

        A `failed` task raises the server's error (a `ServerError`), a
        `cancelled` one `TaskCancelled`; `RequestTimeout` after `timeout`
        seconds (None: no limit), the task still running. While the task is
        `input_required`, its requests are answered with the input
        handlers, on this thread. In 2026-07-28 it follows the server's
        `notifications/tasks` when the server offers them, else it polls.

        Example::

            result = task.wait(timeout=60)

        Args:
            timeout: The most seconds to wait in all; None: no limit.

        Returns:
            The tool's result, with `is_error` set when the tool failed.

        Raises:
            ServerError: The task `failed`: the server's error.
            TaskCancelled: The task was cancelled before its result.
            RequestTimeout: Still running after `timeout` seconds.
            ValueError: `timeout` is not a positive number or None.
        """
        check_timeout("timeout", timeout)
        deadline = deadline_in(timeout)
        with self._cond:
            while True:
                if self._outcome is not None:
                    return self._outcome
                if self._error is not None:
                    # A copy each time: the kept one raised again would
                    # gather every raise's frames in its traceback, and
                    # hand one traceback to every thread that waits.
                    raise copy_error(self._error)
                if not self._polling:
                    self._polling = True
                    break
                left = remaining(deadline)
                if left is not None and left <= 0:
                    raise self._timed_out(timeout)
                self._cond.wait(slice_of(left))  # (an interrupt lands on the main thread)
        try:
            return self._poll(deadline, timeout)
        finally:
            with self._cond:
                self._polling = False
                self._cond.notify_all()

    def _timed_out(self, timeout: float | None) -> RequestTimeout:
        return RequestTimeout(f"task {self.id} still {self.status} after {timeout:g} s", method="tasks/get",
                              timeout=timeout)

    def _poll(self, deadline: float | None, timeout: float | None) -> CallToolResult:
        subscription: Subscription | None = None
        listened = False
        stop_hearing = self._hear_status() if self._core else None
        rounds = 0  # of input answered in this wait
        # A client closed (or given up) meanwhile ends the sleep between
        # polls at once: the next request raises why.
        stop_waking = self._client().on_closed(self._nudge.set)
        try:
            while True:
                with self._cond:
                    status, raw = self.status, self.raw
                if status in TERMINAL:
                    return self._settle(raw, deadline, timeout)
                if status == "input_required":
                    if self._core:
                        # tasks/result brings the server's questions and
                        # blocks until the task ends; when it did not settle
                        # the task, the poll below waits its interval first.
                        outcome = self._fetch_result(deadline, timeout)
                        if outcome is not None:
                            return outcome
                    else:
                        spent = self._answer(raw, deadline, timeout, rounds)
                        if spent is not None:
                            rounds += 1
                            deadline = None if deadline is None else deadline + spent
                if not listened:  # only for a task that is still running
                    subscription, listened = self._listen(deadline), True
                # `pollIntervalMs: 0` is a suggestion like any other (poll
                # again at once), not "unset": it meets the floor, as 1 ms
                # would; only a missing one means the default.
                suggested = self.poll_interval
                interval = min(max(DEFAULT_POLL_INTERVAL if suggested is None else suggested, MIN_POLL_INTERVAL),
                               MAX_POLL_INTERVAL)
                if subscription is not None:
                    # Notifications carry every change: a poll is only the
                    # safety net for one lost on the way.
                    interval = MAX_POLL_INTERVAL
                if deadline is not None:
                    before = remaining(deadline)
                    if before <= 0:
                        raise self._timed_out(timeout)
                    interval = min(interval, before)
                if subscription is not None:
                    if self._heard(subscription, interval):
                        continue
                    if subscription.ended:
                        subscription = None  # the stream is gone: back to polling
                elif wait_for_event(self._nudge, interval):
                    self._nudge.clear()
                left = remaining(deadline)
                if left is not None and left <= 0:
                    raise self._timed_out(timeout)
                self.refresh(timeout=self._request_timeout(left))
        finally:
            stop_waking()
            if subscription is not None:
                subscription.close()
            if stop_hearing is not None:
                stop_hearing()

    def _hear_status(self) -> Callable[[], None]:
        """Apply this task's `notifications/tasks/status` (2025-11-25) and
        wake the poller; the callback runs on the notification thread and
        touches only the state under the condition. Returns the stop."""

        def heard(notification: Notification) -> None:
            if notification.params.get("taskId") != self.id:
                return
            try:
                with self._cond:
                    if self.status not in TERMINAL:
                        self._apply(notification.params)
            except InvalidResult as exc:  # a malformed one: the next poll will tell
                log.debug("task %s: ignoring a malformed status notification: %s", self.id, exc)
                return
            self._nudge.set()

        return self._client().on_notification(heard, ("notifications/tasks/status",))

    def _fetch_result(self, deadline: float | None, timeout: float | None) -> CallToolResult | None:
        """The outcome from `tasks/result` (2025-11-25), kept for every
        waiter: the tool's result, or the error the task ended with. None
        when the request's own timeout passed before the task ended (the
        caller polls again); `RequestTimeout` when the wait's did."""
        left = remaining(deadline)
        if left is not None and left <= 0:
            raise self._timed_out(timeout)
        assert self.id is not None
        with self._cond:
            ended_before = self.status in TERMINAL
        try:
            raw = self._request("tasks/result", {"taskId": self.id}, self._request_timeout(left))
        except RequestTimeout:
            left = remaining(deadline)
            if left is not None and left <= 0:
                raise self._timed_out(timeout) from None
            self.refresh(timeout=self._request_timeout(left))
            return None
        except ServerError as exc:
            # The error the task ended with, only when it had ended before
            # the request was sent: an error for a task still running then
            # (a server that does not hold tasks/result open, a proxy's
            # error) says nothing of its outcome, even when the task ended
            # since, so the caller polls again and a terminal status
            # fetches the outcome afresh; a cancelled one says so.
            if not ended_before:
                left = remaining(deadline)
                if left is None or left > 0:
                    self.refresh(timeout=self._request_timeout(left))
                return None
            error: McpError = exc if self.status != "cancelled" else self._cancelled()
            with self._cond:
                self._error = copy_error(error)  # kept without this raise's traceback (see `wait()`)
            try:
                raise error from None
            finally:
                del error  # the traceback holds this frame: no reference cycle through it
        outcome = self._finish(raw)
        with self._cond:
            self._outcome = outcome
            if self.status not in TERMINAL:
                self.status = "completed"
        return outcome

    def _listen(self, deadline: float | None) -> Subscription | None:
        """A `subscriptions/listen` stream of this task's `notifications/tasks`
        (2026-07-28), or None when the server does not offer one: polling."""
        client = self._client()
        settled = client.settled
        if self._no_listen or settled is None or not settled.dialect.stateless or self.id is None:
            return None
        # A server that does not acknowledge at once is not waited for long.
        wait = LISTEN_ACK_TIMEOUT if deadline is None else min(LISTEN_ACK_TIMEOUT, remaining(deadline))
        if wait <= 0:
            return None
        try:
            subscription = client.listen(extra={"taskIds": [self.id]}, timeout=wait)
        except McpError as exc:
            log.debug("task %s: no notifications (%s); polling", self.id, exc)
            self._no_listen = True
            return None
        accepted = subscription.accepted or {}
        if self.id not in (accepted.get("taskIds") or []):
            subscription.close()
            self._no_listen = True
            return None
        return subscription

    def _heard(self, subscription: Subscription, interval: float) -> bool:
        """Whether a `notifications/tasks` for this task arrived within
        `interval` seconds (the state is then applied); False on silence,
        or when the stream ended."""
        deadline = time.monotonic() + interval
        while True:
            left = remaining(deadline)
            if left <= 0:
                return False
            try:
                event = subscription.next(timeout=left)
            except (RequestTimeout, StopIteration):
                return False
            if isinstance(event, Notification):
                if event.method == "notifications/tasks" and event.params.get("taskId") == self.id:
                    try:
                        with self._cond:
                            self._apply(event.params)
                    except InvalidResult as exc:  # a malformed one: the next poll will tell
                        log.debug("task %s: ignoring a malformed notification: %s", self.id, exc)
                        return False
                    return True
            elif subscription.ended:
                return False

    def _request_timeout(self, left: float | None) -> float | None:
        client = self._client()
        own = self._options.get("timeout", client.options.timeouts.request)
        if left is None:
            return own
        return left if own is None else min(own, left)

    def _settle(self, raw: Mapping[str, Any], deadline: float | None = None,
                timeout: float | None = None) -> CallToolResult:
        """The outcome of a terminal state, kept for every waiter."""
        task_id = self.id or ""
        if self._core and raw.get("status") in ("completed", "failed"):
            while True:  # the outcome is tasks/result's: a result, or the error the task failed with
                outcome = self._fetch_result(deadline, timeout)
                if outcome is not None:
                    return outcome
        try:
            if raw.get("status") == "completed":
                result = raw.get("result")
                if not isinstance(result, Mapping):
                    raise InvalidResult(f"task {task_id} completed without a result object")
                outcome = self._finish(result)
                with self._cond:
                    self._outcome = outcome
                return outcome
            if raw.get("status") == "failed":
                error = raw.get("error")
                if error is None:
                    message = self.status_message or "the task failed and the server gave no error"
                    error = {"code": codes.INTERNAL_ERROR, "message": message}
                raise server_error_from_wire(error, method="tools/call")
            raise self._cancelled()
        except McpError as exc:
            with self._cond:
                self._error = copy_error(exc)  # kept without this raise's traceback (see `wait()`)
            raise

    def _cancelled(self) -> TaskCancelled:
        task_id = self.id or ""
        return TaskCancelled(f"task {task_id} was cancelled" + (f": {self.status_message}"
                                                              if self.status_message else ""),
                             task_id=task_id, status_message=self.status_message)

    def _answer(self, raw: Mapping[str, Any], deadline: float | None, timeout: float | None,
                rounds: int) -> float | None:
        """Answer the task's new input requests (`tasks/update`), on this
        thread, with the same checks and handler rules as a multi-round
        call; `rounds` were answered before in this wait, and a round past
        `max_input_rounds` raises `InputRoundsExceeded`. Returns the seconds
        the handlers took (None: nothing new to answer): as for a call, the wait's timeout pauses while a
        person answers, so the answers are sent, not dropped at a deadline
        that passed meanwhile."""
        requests = raw.get("inputRequests")
        if not isinstance(requests, Mapping):
            raise InvalidResult(f"task {self.id} is input_required without an inputRequests object")
        # Keys are unique over the task's life: one already answered may
        # still show until the server has taken the answer in.
        fresh = {key: value for key, value in requests.items() if key not in self._answered}
        if not fresh:
            return None
        client = self._client()
        limit = self._options.get("max_input_rounds", client.options.limits.max_input_rounds)
        if rounds >= limit:
            raise InputRoundsExceeded(f"tasks/get: task {self.id} still asks for input after {rounds} rounds "
                                      "(max_input_rounds)", result=dict(raw), rounds=rounds)
        handlers = {**client.input_handlers, **check_input_handlers(self._options.get("input_handlers"))}
        started = time.monotonic()
        answers = multiround.answer_requests("tasks/get", raw, fresh, handlers, client.schemas)
        spent = time.monotonic() - started
        left = remaining(None if deadline is None else deadline + spent)
        assert self.id is not None
        self._request("tasks/update", {"taskId": self.id, "inputResponses": answers},
                      self._request_timeout(left))
        self._answered.update(answers)
        return spent


def call_tool(client: Requester, tool: Any, arguments: Mapping[str, Any] | None, options: Mapping[str, Any], *,
              task: bool, wait: bool) -> CallToolResult | Task:
    """`Client.call_tool()`: see there."""
    if not isinstance(task, bool) or not isinstance(wait, bool):
        raise TypeError("task and wait must be booleans")
    # A tool that runs only as a task is run as one, and waited for, as
    # `wait=True` would: the caller asked for its result.
    # Without tasks on offer the spec forbids task augmentation whatever
    # the tool says: it is then called plainly.
    how = flavour(client)
    asked = task or wait or (how is not None and runs_only_as_task(client, tool))
    opts: dict[str, Any] = dict(options)
    timeout = opts.get("timeout", client.options.timeouts.request)
    check_timeout("timeout", timeout)
    deadline = deadline_in(timeout)
    if asked and how is None:
        settled = client.settled
        version = settled.dialect.version if settled is not None else "?"
        raise ExtensionNotDeclared(EXTENSION, None, (
            f"the server offers no tasks: on protocol {version} it declares neither the capability "
            "tasks.requests.tools.call (2025-11-25) nor the io.modelcontextprotocol/tasks extension; "
            "call the tool without task=True"))
    core = asked and how == CORE
    raw, finish = client.calls.call_tool_raw(tool, arguments, cast(RequestOptions, opts),
                                             max_pages=client.options.limits.max_pages, timeout=client.options.timeouts.request,
                                             extensions=_DECLARE if asked and not core else None,
                                             task={} if core else None)
    created = raw.get("task") if core else None
    if core and isinstance(created, Mapping):
        handle = Task(client, created, finish, opts, core=True)
    elif raw.get("resultType") != "task":
        result = finish(raw)
        return Task._settled(result) if task and not wait else result
    else:
        # Not asked for here means declared for every call (`connect(tasks=True)`).
        handle = Task(client, raw, finish, opts)
    if task and not wait:
        return handle
    # wait=True, or a client that declared tasks for every call but wants
    # plain results: the call's timeout bounds the whole wait.
    return handle.wait(remaining(deadline, at_least=1e-9))


def get_task(client: Requester, task_id: str, options: Mapping[str, Any]) -> Task:
    """`Client.get_task()`: see there."""
    if not isinstance(task_id, str) or not task_id:
        raise TypeError("task_id must be a non-empty string")
    check_timeout("timeout", options.get("timeout"))
    # The tool's definition is not known here: the result is typed, not validated.
    handle = Task(client, {"taskId": task_id, "status": "working"}, CallToolResult.from_wire, options,
                  core=flavour(client) == CORE)
    handle.refresh()
    return handle


def list_tasks(client: Requester, options: Mapping[str, Any]) -> list[Task]:
    """`Client.list_tasks()`: see there."""
    check_timeout("timeout", options.get("timeout"))
    if flavour(client) != CORE:
        raise ExtensionNotDeclared(EXTENSION, "list", "the server offers no tasks/list: only a 2025-11-25 "
                                   "server that declares the capability tasks.list lists its tasks")
    capabilities = client.server_capabilities or {}
    if not isinstance(capabilities.get("tasks"), Mapping) or not isinstance(capabilities["tasks"].get("list"), Mapping):
        raise ExtensionNotDeclared(EXTENSION, "list", "the server does not declare the capability tasks.list")

    def fetch(cursor: str | None) -> tuple[list[Task], str | None]:
        raw = client.request("tasks/list", {} if cursor is None else {"cursor": cursor},
                             cast(RequestOptions, dict(options)))
        items = raw.get("tasks")
        if not isinstance(items, list):
            raise InvalidResult("tasks/list: the result has no tasks list")
        following = raw.get("nextCursor")
        return ([Task(client, item, CallToolResult.from_wire, options, core=True) for item in items],
                following if isinstance(following, str) else None)

    found: list[Task] = []
    for page in pagination.pages("tasks/list", fetch, client.options.limits.max_pages):
        found.extend(page)
    return found
