"""The engine's own threads, and the work the engine hands them.

What it owns: the *sender* (`sender.Sender`), which writes everything that
is not a caller's own request (answers, refusals, cancellations); the
*handler pool* (`server_request_pool.HandlerPool`), where the client's
`on_server_request` answers the server requests no caller takes, each
answered with an error once `handler_timeout` has passed since its
arrival; the *log thread*, where the client's `on_log` gets the log
messages that came for no call (the oldest waiting one makes room when it
is behind); the rule that a server request is answered once (`respond()`);
answers given later (`Later`: a handler that answers at once and goes on
in the background, or answers when something else ends); and how all
three end: `flush()`, `stop()`, `join()`, or `discard()` after a fork.
What it must not know: the pending table or its lock (it asks the engine
through `settle` and `owes`, which take that lock themselves), the
transport (it writes through the `write` it is given), or what a method
means.

Lock discipline: no lock of its own; the sender, the pools and the log
burst have theirs and are only ever taken for a moment. Any thread may call
it (the reader, a caller, a handler, the sender), but never with the
engine's lock held, since `settle` and `owes` take that lock. Only
`flush()` and `join()` wait, and only within the timeout they are given.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from .server_request_pool import HandlerPool, Job
from .sender import DEFAULT_MAX_QUEUED, Sender
from .waiting import remaining
from .errors import McpError
from .protocol import codes, jsonrpc

if TYPE_CHECKING:
    from .connection import Drops

log = logging.getLogger("mcp_sync.connection")

#: The most threads answering server requests that belong to no call.
MAX_HANDLER_THREADS = 4
#: The most log messages (for no call) waiting for the log handler; beyond,
#: the oldest waiting one is dropped.
MAX_QUEUED_LOGS = 256
#: The refusal of a server request the client has no room for.
BUSY = {"code": codes.INTERNAL_ERROR, "message": "too many server requests in progress"}


#: The most threads running client-task handlers (see `Answer.background`):
#: their own, so tasks that wait for a person never take the threads the
#: other server requests are answered on.
MAX_TASK_THREADS = 4


class Answer:
    """The later answer to one server request (see `Later`), from any
    thread: `answer(result=...)` or `answer(error=...)` answers it once and
    says whether it settled (False: cancelled, timed out or answered
    already, so nothing was sent); never blocks (the sender writes it).

    Also what answering later needs: `owed()` (is the request still owed an
    answer?), `background(job)` (run `job` on a task thread: False at once
    when they are all taken or the connection closed; a job still queued at
    close() never runs), and `expire(key, action)` (`action(limit)` on the
    sender's thread `handler_timeout` seconds from now, unless
    `cancel_expiry(key)` came first; nothing when there is no
    `handler_timeout`). `action` must not block.
    """

    __slots__ = ("_threads", "request_id")

    def __init__(self, threads: EngineThreads, request_id: Any) -> None:
        self._threads = threads
        self.request_id = request_id

    def __call__(self, result: Mapping[str, Any] | None = None, error: Mapping[str, Any] | None = None) -> bool:
        return self._threads.respond(self.request_id, result, error)

    def owed(self) -> bool:
        return self._threads.owes(self.request_id)

    def background(self, job: Job) -> bool:
        return self._threads.submit(job)

    def expire(self, key: Any, action: Callable[[float], None]) -> None:
        self._threads.expire(key, action)

    def cancel_expiry(self, key: Any) -> None:
        self._threads.cancel_expiry(key)


class Later:
    """What a server-request handler returns to answer later rather than
    with its return value: the engine calls `start(answer)` at once, on the
    same thread, with the request's `Answer`. The handler timeout armed at
    the request's arrival still applies (an answer after it is not sent).

    Example::

        def answer(message):
            def start(answer):
                if not answer.background(lambda: work_then(answer)):
                    answer(error={"code": -32603, "message": "too busy"})
            return Later(start)
    """

    __slots__ = ("start",)

    def __init__(self, start: Callable[[Answer], None]) -> None:
        self.start = start


class EngineThreads:
    """The sender, the handler pool and the log thread of one connection.

    `write` is the sender's one way out; `settle(request_id)` says (once,
    under the engine's lock) whether a server request is still owed the
    answer about to go out, and `owes(request_id)` whether it is owed one
    at all. The other arguments are `Connection`'s own.

    Example::

        threads = EngineThreads(transport.send, settle=settle, owes=owes, on_server_request=None,
                                on_log=None, max_server_requests=16, handler_timeout=None, drops=Drops())
        threads.respond("s1", result={})   # queued for the sender
        threads.stop(); threads.join(2.0)
    """

    def __init__(
        self,
        write: Callable[[Mapping[str, Any]], None],
        *,
        settle: Callable[[Any], bool],
        owes: Callable[[Any], bool],
        on_server_request: Callable[[dict[str, Any]], Any] | None,
        on_log: Callable[[dict[str, Any]], None] | None,
        max_server_requests: int,
        handler_timeout: float | None,
        drops: Drops,
        at_once: Callable[[dict[str, Any]], bool] | None = None,
        writers: int = 1,
    ) -> None:
        self._write = write
        self._writers = writers
        self._settle = settle
        self._owes = owes
        self._on_server_request = on_server_request
        self._at_once = at_once
        self._handler_timeout = handler_timeout
        self._drops = drops
        self._log_burst = Burst()
        # Answers the handler pool may still add (capped: a pool larger than
        # half the sender's bound would otherwise have every request refused).
        self._answer_reserve = min(max_server_requests, DEFAULT_MAX_QUEUED // 2)
        self._sender = Sender(write, writers=writers)  # (the transport's `parallel_writes`)
        self._handlers = HandlerPool(max_workers=MAX_HANDLER_THREADS, max_pending=max_server_requests,
                                     name="mcp-sync-handler")
        # Client-task handlers (a person answering a task-augmented
        # elicitation) get threads of their own: a pool of 4 waiting for
        # people would otherwise leave none for ping or roots/list.
        self._tasks = HandlerPool(max_workers=MAX_TASK_THREADS, max_pending=max_server_requests,
                                  name="mcp-sync-handler-task")
        # The log thread runs one job at a time, `LogQueue`'s drain: room
        # for two, the one ending and the next (see `LogQueue.put_all`).
        self._logs = HandlerPool(max_workers=1, max_pending=2, name="mcp-sync-log")
        self._log_queue = LogQueue(self._logs, on_log or log_message, MAX_QUEUED_LOGS)

    # -- what the engine hands on ------------------------------------------------------

    def post(self, message: Mapping[str, Any], *, spare: bool = False) -> bool:
        """Queue `message` for the sender (a cancellation); never blocks.
        False when it was dropped (`spare`: when the queue is half full)."""
        return self._sender.put(message, spare=spare)

    def respond(self, request_id: Any, result: Mapping[str, Any] | None = None,
                error: Mapping[str, Any] | None = None, *, small: bool = False) -> bool:
        """Answer a server request (with `result`, or with `error` {code,
        message, data}) once: a request the server cancelled, or one already
        answered (a handler that timed out), gets nothing more (False). Never
        blocks: the answer goes out through the sender."""
        if not self._settle(request_id):
            log.debug("not answering server request %r: cancelled or answered already", request_id)
            return False
        self._sender.cancel(("handler timeout", request_id))
        if error is None:
            # An answer that cannot be written would never reach the server,
            # which would wait for it: it gets an error instead.
            problem = jsonrpc.unencodable(result or {})
            if problem is not None:
                log.warning("the answer to server request %r cannot be sent as JSON (%s): answering with an error",
                            request_id, problem)
                error = {"code": codes.INTERNAL_ERROR, "message": f"the client's answer cannot be sent as JSON: "
                                                                  f"{problem}"}
        if error is not None:
            message = jsonrpc.error_response(request_id, error["code"], error["message"], error.get("data"))
        else:
            message = jsonrpc.result_response(request_id, result or {})
        # A `small` answer (a refusal, a ping's `{}`) waits in a lane of
        # its own, so a flood's refusals never crowd out the answers of real
        # handlers, and each still reaches a server that reads (it waits for
        # every one of them).
        self._sender.put(message, small=small)
        return True

    def owes(self, request_id: Any) -> bool:
        """Is server request `request_id` still owed an answer?"""
        return self._owes(request_id)

    def later(self, request_id: Any) -> Answer:
        """The `Answer` of server request `request_id`, for a `Later`."""
        return Answer(self, request_id)

    def take(self, message: dict[str, Any]) -> None:
        """A server request no caller takes: to the handler pool, with its
        `handler_timeout` counted from now; refused at once when the pool is
        full (through the sender: this may be the reader's thread)."""
        request_id = message["id"]
        self.arm_handler_timeout(request_id)
        if self._at_once is not None and self._at_once(message):
            # Invariant: what `at_once` picks never blocks and runs no user
            # code (the answers about the client's own tasks, ping, creating
            # a client task): answered here, on whatever thread this is (the
            # reader's too), without a pool slot, so a pool full of handlers
            # waiting for a person never delays them. The answer itself goes
            # out through the sender, never written on this thread.
            self._answer(message, small=message["method"] == "ping")
            return
        # Room for the answers of every request the pool may hold, or the
        # request is refused: the server reads our answers slower than it
        # asks, and an answer queued now could overflow the sender and be
        # lost (a refusal has its own lane). What `at_once` answered above
        # is as small as a refusal and is never refused for this.
        if (self._sender.room_for_answers <= self._answer_reserve
                or not self._handlers.submit(lambda: self._answer(message))):
            self.respond(request_id, error=BUSY, small=True)

    def answer_here(self, message: dict[str, Any]) -> None:
        """`take()`, on the calling thread: the same handler and answer, for
        a request adopted by the one call waiting (see `router.ADOPTED`),
        whose handler timeout was armed as it arrived
        (`arm_handler_timeout`). An interrupt propagates (the caller answers)."""
        self._answer(message)

    def submit(self, job: Job) -> bool:
        """Run `job` on a client-task thread (at most `max_server_requests`
        queued or running); False at once when they are full or closed."""
        return self._tasks.submit(job)

    def expire(self, key: Any, action: Callable[[float], None]) -> None:
        """`action(handler_timeout)` on the sender's thread `handler_timeout`
        seconds from now (nothing without one), unless `cancel_expiry(key)`."""
        if self._handler_timeout is not None:
            limit = self._handler_timeout

            def due() -> None:
                try:
                    action(limit)
                except Exception:  # the sender must survive it
                    log.exception("a handler-timeout action failed")

            self._sender.at(time.monotonic() + limit, key, due)

    def cancel_expiry(self, key: Any) -> None:
        self._sender.cancel(key)

    @property
    def handler_timeout(self) -> float | None:
        """Seconds a server request's handler may take from its arrival (None: no limit)."""
        return self._handler_timeout

    def arm_handler_timeout(self, request_id: Any) -> None:
        """Answer server request `request_id` with an error if its handler
        has not answered `handler_timeout` seconds from now (no IO here: the
        sender does it; may be called on the reader's thread)."""
        if self._handler_timeout is not None:
            limit = self._handler_timeout
            self._sender.at(time.monotonic() + limit, ("handler timeout", request_id),
                            lambda: self._settled_error(
                                request_id, f"the client's handler did not answer within {limit:g} s"))

    def withdrawn(self, request_id: Any) -> None:
        """The server cancelled its request `request_id`: its handler
        timeout is moot."""
        self._sender.cancel(("handler timeout", request_id))

    def log(self, params: dict[str, Any]) -> None:
        """A log message for no call, to the log handler's queue; when the
        handler is behind, the oldest waiting message makes room."""
        self.log_all((params,))

    def log_all(self, messages: Sequence[dict[str, Any]]) -> bool:
        """Log messages for no call, in order, to the log handler's queue
        in one go (the ones of one read: one wake-up of the log thread, not
        one per message); when the handler is behind, the oldest waiting
        messages make room. True when half the queue's bound or more waits
        (the reader then hands on one message at a time, see
        `Delivery.deliver_all`)."""
        dropped, waiting = self._log_queue.put_all(messages)
        crowded = 2 * waiting >= MAX_QUEUED_LOGS
        if dropped:
            self._drops.add("logs", dropped)
            if self._log_burst.drop(dropped):
                log.warning("the server's log messages come faster than the log handler takes them; the oldest "
                            "are dropped beyond %d until it catches up", MAX_QUEUED_LOGS)
            return crowded
        if crowded:
            # Half full: the reader (who calls this) lets go of the GIL so
            # that a handler that keeps up on average takes its messages
            # before the bound drops any (as for a call's progress, see
            # `inbox.CROWDED`); it never waits for the handler.
            time.sleep(0)
        # The burst ends when the handler has caught up (nothing else
        # waits), not at the first message that finds room: that would
        # warn again and again while the handler keeps up only just.
        if self._log_burst.dropping and waiting <= len(messages):
            ended = self._log_burst.end()
            if ended:
                log.warning("%d server log messages were dropped while the log handler was behind", ended)
        return crowded

    # -- on the pool and the sender ------------------------------------------------------

    def _settled_error(self, request_id: Any, text: str) -> dict[str, Any] | None:
        if not self._settle(request_id):
            return None
        return jsonrpc.error_response(request_id, codes.INTERNAL_ERROR, text)

    def _answer(self, message: dict[str, Any], small: bool = False) -> None:
        """Run the handler and answer; `small`: the answer is as small as a
        refusal (a ping's), so it takes the refusals' lane."""
        request_id = message["id"]
        if not self._owes(request_id):
            self._sender.cancel(("handler timeout", request_id))
            return  # withdrawn, or timed out in the queue: nobody wants the answer
        handler = self._on_server_request
        try:
            if handler is None:
                raise jsonrpc.Refusal(codes.METHOD_NOT_FOUND, f"Method not found: {message['method']}")
            result = handler(message)
            if isinstance(result, Later):
                result.start(self.later(request_id))
        except jsonrpc.Refusal as refusal:
            self.respond(request_id, error=refusal.error())
        except McpError as exc:
            # An outcome the client expects (a handler's answer refused by
            # the request's schema, say): one line; the traceback at DEBUG.
            log.warning("the answer to the server's %s was not sent: %s", message.get("method"), exc)
            log.debug("details", exc_info=True)
            self.respond(request_id, error={"code": codes.INTERNAL_ERROR, "message": f"client handler failed: {exc}"})
        except Exception as exc:  # a handler bug must not kill the worker
            log.exception("handler for server request %s failed", message.get("method"))
            self.respond(request_id, error={"code": codes.INTERNAL_ERROR, "message": f"client handler failed: {exc}"})
        else:
            if not isinstance(result, Later):
                self.respond(request_id, result=result, small=small)

    # -- the end ---------------------------------------------------------------------------

    def flush(self, timeout: float) -> None:
        """Let the sender write what is queued (cancellations, answers), for
        at most `timeout`; then the log thread hand on what the server said
        before the end, for as long again: a log message received just
        before close() was dropped with the queue, so a program's last
        server warnings went missing."""
        self._sender.flush(timeout)
        self._logs.flush(timeout)

    def stop(self) -> None:
        """Tell every thread to stop, waiting for none."""
        self._sender.close(timeout=0)
        self._handlers.close(timeout=0)
        self._tasks.close(timeout=0)
        self._log_queue.stop()
        self._logs.close(timeout=0)

    def join(self, timeout: float) -> None:
        """Wait at most `timeout` in all for the threads to end. A handler
        still running then is left to finish on its own; its answer is not
        sent."""
        deadline = time.monotonic() + timeout
        for part in (self._sender, self._handlers, self._tasks, self._logs):
            if not part.close(timeout=remaining(deadline)):
                log.warning("a handler was still running %g s after close(); it is left to "
                            "finish on its own and its answer will not be sent", timeout)

    def discard(self) -> None:
        """In a child after `os.fork()`: the parent's threads were not
        copied, and their locks may have been held at the fork. Fresh parts,
        closed at once, take their place: nothing runs or waits any more."""
        self._sender = Sender(self._write, writers=self._writers)
        self._sender.close(timeout=0)
        self._handlers = HandlerPool(max_workers=1, max_pending=1)
        self._handlers.close(timeout=0)
        self._logs = self._tasks = self._handlers
        self._log_queue = LogQueue(self._logs, log_message, MAX_QUEUED_LOGS)
        self._log_queue.stop()


class Burst:
    """One source's drops, so that it logs once per burst and not once per
    message: `drop()` is True for the first drop of a burst; `end()`, called
    when the source has room again, ends the burst once no drop came for
    `quiet` seconds and says how many it dropped (0: the burst goes on, or
    there was none). The quiet time keeps a consumer that catches up only
    now and then (a thread that gets the GIL in turns) to one burst."""

    __slots__ = ("_lock", "_count", "_last", "quiet")

    def __init__(self, quiet: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._last = 0.0
        self.quiet = quiet

    def drop(self, count: int = 1) -> bool:
        """Count `count` drops; True when they begin a burst."""
        with self._lock:
            begins = not self._count
            self._count += count
            self._last = time.monotonic()
            return begins

    @property
    def dropping(self) -> bool:
        """A burst is on (read without the lock: a hint)."""
        return self._count > 0

    def end(self) -> int:
        if not self._count:  # the usual case, without the lock
            return 0
        with self._lock:
            if not self._count or time.monotonic() - self._last < self.quiet:
                return 0
            count, self._count = self._count, 0
            return count


class LogQueue:
    """The log messages that came for no call, on their way to the log
    handler, which runs on the log thread (a job of `pool`, a pool of one
    worker): at most `limit` wait; beyond, the oldest waiting make room.

    Producers (the stdio reader, an HTTP exchange thread) put the messages
    of one read together (`put_all`): one lock pass, and the log thread is
    woken only when it is not already draining the queue, so a flood costs
    a wake-up per read at most, not one per message. The drain takes them
    one at a time, so at most `limit` wait while one is in the handler.
    `stop()` (at close, or in a fork child) drops what waits and ends the
    drain after the message in hand.

    Lock discipline: `_lock` guards `_waiting`, `_draining` and `_stopped`,
    only for a moment; the handler is never called under it, and nothing
    here waits.
    """

    __slots__ = ("_pool", "_handler", "_limit", "_lock", "_waiting", "_draining", "_stopped")

    def __init__(self, pool: HandlerPool, handler: Callable[[dict[str, Any]], None], limit: int) -> None:
        self._pool = pool
        self._handler = handler
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: collections.deque[dict[str, Any]] = collections.deque()
        self._draining = False  # a drain job is queued or running, and will see what is put
        self._stopped = False

    def put_all(self, messages: Sequence[dict[str, Any]]) -> tuple[int, int]:
        """Queue `messages` in order: (how many were dropped: the oldest,
        to make room, or every one waiting when no thread can be had to
        hand them on; how many wait now)."""
        with self._lock:
            if self._stopped:
                return 0, 0
            waiting = self._waiting
            waiting.extend(messages)
            dropped = len(waiting) - self._limit
            for _ in range(dropped):
                waiting.popleft()
            start = not self._draining
            self._draining = True
            size = len(waiting)
        # The pool holds two jobs: a drain that has just said it is done
        # (it is still running) and this new one, which runs after it.
        if start and not self._pool.submit(self._drain):
            # No thread to be had (a stopped queue returned above): what
            # waits cannot be handed on, and is counted as dropped.
            with self._lock:
                self._draining = False
                lost = len(self._waiting)
                self._waiting.clear()
            return max(dropped, 0) + lost, 0
        return max(dropped, 0), size

    def stop(self) -> None:
        """Drop what waits; the drain ends after the message in hand."""
        with self._lock:
            self._stopped = True
            self._waiting.clear()

    def _drain(self) -> None:
        """The log thread's job: hand each waiting message to the handler,
        oldest first, until none waits."""
        handler, lock, waiting = self._handler, self._lock, self._waiting
        while True:
            with lock:
                if not waiting or self._stopped:
                    self._draining = False
                    return
                params = waiting.popleft()
            try:
                handler(params)
            except Exception:  # a handler bug must not end the drain, or lose the rest
                log.exception("the log handler raised")
            except BaseException:
                # (SystemExit, say) the thread ends: what waits gets a drain
                # of its own (the pool gives the queued job a new worker).
                with lock:
                    again = bool(waiting) and not self._stopped
                    if not again:
                        self._draining = False
                if again and not self._pool.submit(self._drain):
                    with lock:
                        self._draining = False
                raise


def log_message(params: dict[str, Any]) -> None:
    """The log handler when nobody gave one: the `mcp_sync.connection` logger."""
    log.info("server log: %s", params)


#: The name of every thread the client starts begins so.
ENGINE_THREAD_PREFIX = "mcp-sync-"


def is_engine_thread() -> bool:
    """Is this one of the engine's threads (sender, handler, log)? They must
    never wait for a close that waits for them."""
    return threading.current_thread().name.startswith(("mcp-sync-sender", "mcp-sync-handler", "mcp-sync-log"))
