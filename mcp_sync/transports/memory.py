"""The in-process transport: a client and a server object in one process.

The server is any object with `open_session(send) -> session`, where the
session has `receive(message)` and `close()` (`mcp_sync.testing.Server` is
one). Messages cross as JSON text in both directions, so neither side can
mutate the other's dicts and anything that would not survive the wire fails
here too. The server's own threads deliver to the sink.

The server is user code running in the caller's thread, so what it raises
is turned into the errors every transport raises (`McpError`s): a failing
`open_session()` is a `ConnectError` from `start()`, a failing `receive()`
an `InvalidMessage` from `send()`, the server's exception as `__cause__`.
A `TransportError` it raises itself goes on as it is; `KeyboardInterrupt`
and `SystemExit` are never wrapped.

Closing, and its bound: `close()` returns within `close_timeout` seconds
(2 by default; `close_budget` adds a margin) whatever the server does, as
stdio's close ends by terminating, then killing, the process, and HTTP's by
closing its sockets. The session's `close()` cancels the requests in flight
(what a tool sees as `ctx.cancelled`) and then waits for the server's
threads to end, for as long as a tool runs: a tool that never looks at
`ctx.cancelled` would hold up the client's `close()` for ever. So it runs
on a thread of its own ("mcp-inprocess-server-close"), which `close()`
joins until the bound, in slices on the main thread so that Ctrl-C is
raised at once. Past the bound, that thread and the server's threads still
running the tool are left running (daemon threads: they are the server's
code, and in-process nothing can kill them), with a warning naming the
requests the client sent and never saw answered; they end when the tool
returns. No thread of the client's own outlives `close()`. (A tool of the
server that closes a client of the same server is itself one the session
waits for: that close takes the whole bound.)

To name those requests, the transport keeps, under `_count_lock` (taken
for the byte counts already; nothing else is taken under it, and the
server and the sink are never called under it), the requests it sent that
the server has not answered (by id, at most `UNANSWERED_KEPT`) and the
latest `CANCELLED_KEPT` of them the client cancelled (a cancelled request
gets no answer, so they are let go by age, not by answer). Both bounds only
shorten the warning's list: the record never grows with the connection's age.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Hashable, Mapping
from typing import Any, Callable, Protocol

from ..errors import ConnectError, ConnectionClosed, InvalidMessage, TransportError
from ..protocol import jsonrpc
from ..waiting import check_seconds, deadline_in, on_main_thread, remaining, slice_of
from .base import MessageSink, Target, Transport

log = logging.getLogger("mcp_sync.transport.memory")

#: How long `close()` waits, by default, for the server's session to close:
#: a tool that honours cancellation ends well within it.
DEFAULT_CLOSE_TIMEOUT = 2.0

#: How many of the requests the client cancelled (and the server therefore
#: never answers) are remembered, to be named if one of them still runs at
#: close. Older ones are let go: the record must not grow with every
#: timed-out call of a long-lived client.
CANCELLED_KEPT = 64

#: How many requests sent and not answered are remembered: the oldest are
#: let go beyond it (a server of the user's own may leave requests
#: unanswered that the client never cancels).
UNANSWERED_KEPT = 1024

#: How many requests a warning names before it says "and N more".
NAMED_AT_MOST = 5

#: The name of the thread that runs the session's `close()` (see the module
#: docstring): not "mcp-sync-...", since it may outlive the client's
#: `close()`, waiting for the server's own threads.
CLOSER_THREAD_NAME = "mcp-inprocess-server-close"


class ServerSession(Protocol):
    def receive(self, message: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class InProcessServer(Protocol):
    def open_session(self, send: Callable[[dict[str, Any]], None]) -> ServerSession: ...


class MemoryTransport(Transport):
    kind = "memory"
    """Always "memory" (see `Target.kind` and `Transport.kind`)."""

    def __init__(self, server: InProcessServer, close_timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        self._server = server
        self._close_timeout = close_timeout
        self._session: ServerSession | None = None
        self._sink: MessageSink | None = None
        self._lock = threading.Lock()
        # Its own lock: `_lock` is held by start() while the server may
        # already be sending. It also guards `_unanswered` and `_cancelled`.
        self._count_lock = threading.Lock()
        self._closed = False
        #: Requests sent and not answered, by id: their method and tool
        #: name (formatted only for the warning of a close that times out).
        self._unanswered: dict[Hashable, _Label] = {}
        #: Of those, the ones the client cancelled, oldest first, at most
        #: `CANCELLED_KEPT` (moved here from `_unanswered`).
        self._cancelled: dict[Hashable, _Label] = {}

    @property
    def close_budget(self) -> float:  # type: ignore[override]
        """`close()`'s bound: `close_timeout`, and a margin for starting
        and joining the thread that closes the session."""
        return self._close_timeout + 0.5

    def start(self, sink: MessageSink) -> None:
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the in-process connection is closed")
            self._sink = sink
            try:
                self._session = self._server.open_session(self._from_server)
            except ConnectError:
                raise
            except Exception as exc:  # the server's bug: the channel cannot be opened
                raise ConnectError(
                    f"the in-process server {type(self._server).__name__} failed in open_session(): "
                    f"{type(exc).__name__}: {exc} (the server's bug: fix it, see this error's __cause__)") from exc

    def _from_server(self, message: dict[str, Any]) -> None:
        if self._closed or self._sink is None:
            return
        try:
            text = jsonrpc.encode(message)
            copy = json.loads(text)
        except (TypeError, ValueError) as exc:
            self._sink.transport_failed(InvalidMessage(f"the in-process server sent an unencodable message: {exc}"))
            return
        answered = _answered_id(copy)
        with self._count_lock:
            self.bytes_received += len(text)
            if answered is not None:
                self._unanswered.pop(answered, None)
                self._cancelled.pop(answered, None)
        self._sink.deliver(copy)

    def send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        session = self._session
        if self._closed or session is None:
            raise ConnectionClosed("the in-process connection is closed")
        text = jsonrpc.encode(message)
        # Recorded before `receive()`: the answer may be delivered, on a
        # server thread, before `receive()` returns.
        request_id = _request_id(message)
        cancelled = _cancelled_id(message)
        with self._count_lock:
            self.bytes_sent += len(text)
            if request_id is not None:
                self._unanswered[request_id] = _label(message)
                if len(self._unanswered) > UNANSWERED_KEPT:
                    del self._unanswered[next(iter(self._unanswered))]
            if cancelled is not None and cancelled in self._unanswered:
                self._cancelled[cancelled] = self._unanswered.pop(cancelled)
                if len(self._cancelled) > CANCELLED_KEPT:
                    del self._cancelled[next(iter(self._cancelled))]
        try:
            session.receive(json.loads(text))
        except BaseException as exc:
            if request_id is not None:  # not taken: it will not be answered
                with self._count_lock:
                    self._unanswered.pop(request_id, None)
            if isinstance(exc, TransportError) or not isinstance(exc, Exception):
                raise  # a TransportError as it is; KeyboardInterrupt, SystemExit never wrapped
            # One message failed, not the channel: the session stays, as a
            # network server's connection outlives one failed request.
            raise InvalidMessage(
                f"the in-process server {type(self._server).__name__} failed in receive() on "
                f"{_what(message)}: {type(exc).__name__}: {exc} (the server's bug: fix it, see this error's "
                "__cause__; it may have taken effect, and is not sent again)") from exc

    def close(self) -> None:
        """Close the session, waiting `close_timeout` seconds at most for
        it (see the module docstring). Idempotent; a Ctrl-C while it waits
        is raised at once, the session's close going on without it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            session = self._session
        if session is None:
            return
        closer = threading.Thread(target=self._close_session, args=(session,), name=CLOSER_THREAD_NAME, daemon=True)
        try:
            closer.start()
        except RuntimeError:  # no thread to be had (interpreter shutdown): close it on this one
            self._close_session(session)
            return
        end = deadline_in(self._close_timeout)
        main = on_main_thread()
        while closer.is_alive():
            left = remaining(end)
            if left <= 0:
                break
            closer.join(slice_of(left, main=main))
        if closer.is_alive():
            log.warning(
                "the %s did not close within %g s: a tool or handler ignores cancellation and still runs. "
                "Requests it has not answered: %s. Its threads are left running, as daemon threads, until "
                "they return (they run the server's code, which the client cannot end in-process)",
                self.describe(), self._close_timeout, self._unanswered_names())

    def _close_session(self, session: ServerSession) -> None:
        """The session's `close()`; what it raises is the server's bug,
        logged (on the closing thread nobody would see it)."""
        try:
            session.close()
        except Exception:
            log.warning("the %s failed in close() (the server's bug)", self.describe(), exc_info=True)

    def _unanswered_names(self) -> str:
        """The requests the server may still be running, as the warning of
        a close that timed out names them."""
        with self._count_lock:
            named = [_name(*label, request_id) for request_id, label in self._unanswered.items()]
            named += [_name(*label, request_id) + ", cancelled" for request_id, label in self._cancelled.items()]
        if not named:
            return "none the client knows of"
        more = len(named) - NAMED_AT_MOST
        return "; ".join(named[:NAMED_AT_MOST]) + (f"; and {more} more" if more > 0 else "")

    def discard(self) -> None:
        """In a child after `os.fork()`: forget the session without closing
        it (its threads, and the session itself, are the parent's)."""
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._closed = True
        self._session = None
        self._unanswered = {}
        self._cancelled = {}

    def describe(self) -> str:
        return f"in-process server {type(self._server).__name__}"


#: A request as the warning of a close that timed out names it: its
#: method, and the tool's name for a tools/call.
_Label = tuple[str, "str | None"]


def _label(message: Mapping[str, Any]) -> _Label:
    """What a request is (`message` has a string method), cheaply: it is
    taken for every request, and formatted only for a warning."""
    params = message.get("params")
    name = params.get("name") if isinstance(params, Mapping) else None
    return message["method"], name if isinstance(name, str) else None


def _name(method: str, tool: str | None, request_id: Hashable) -> str:
    """A request as a warning names it: "tools/call 'stuck' (request 3)"."""
    what = f"{method} {tool!r}" if method == "tools/call" and tool is not None else repr(method)
    return f"{what} (request {request_id!r})"


def _request_id(message: Mapping[str, Any]) -> Hashable | None:
    """The id of a request (a message with a method and an id), else None."""
    if not isinstance(message, Mapping) or not isinstance(message.get("method"), str):
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, (str, int)) else None


def _cancelled_id(message: Mapping[str, Any]) -> Hashable | None:
    """The request a `notifications/cancelled` cancels, else None."""
    if not isinstance(message, Mapping) or message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    request_id = params.get("requestId") if isinstance(params, Mapping) else None
    return request_id if isinstance(request_id, (str, int)) else None


def _answered_id(message: Any) -> Hashable | None:
    """The id a response answers (a message with an id and no method), else None."""
    if not isinstance(message, dict) or "method" in message:
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, (str, int)) else None


def _what(message: Mapping[str, Any]) -> str:
    """A message as an error names it: its method, else the id it answers."""
    if not isinstance(message, Mapping):
        return "a batch"  # (typed a Mapping; a list must not break the error)
    method = message.get("method")
    return repr(method) if isinstance(method, str) else f"the answer to {message.get('id')!r}"


class Memory(Target):
    """Target an in-process server: `connect(Memory(server))` or just `connect(server)`.

    The server is any object with `open_session(send)` (see the module
    docstring); `mcp_sync.testing` makes them. Messages cross as JSON text,
    so what would not survive the wire fails here too.

    Args:
        server: An object with `open_session(send)`, such as
            `mcp_sync.testing.demo_server()`.
        close_timeout: The longest, in seconds, the client's `close()`
            waits for the server's session to close. The session cancels
            its requests in flight and waits for its tools; a tool that
            ignores `ctx.cancelled` is left running on the server's
            (daemon) thread past this, with a warning naming it.

    Attributes:
        server (InProcessServer): The in-process server each `open()` opens
            a session on.
        close_timeout (float): As given.

    Raises:
        TypeError: `server` has no `open_session()`.
        TypeError: `close_timeout` is not a number.
        ValueError: `close_timeout` is negative, NaN or infinite.

    Example::

        client = mcp_sync.connect(Memory(mcp_sync.testing.demo_server()))
        assert client.transport_kind == "memory"
    """

    kind = "memory"
    """Always "memory" (see `Target.kind` and `Transport.kind`)."""

    def __init__(self, server: InProcessServer, *, close_timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        if not callable(getattr(server, "open_session", None)):
            raise TypeError(f"{type(server).__name__} is not an in-process MCP server (no open_session())")
        # Finite, never None: `close()` promises to return within it.
        check_seconds("close_timeout", close_timeout, allow_none=False, allow_zero=True)
        self.server = server
        self.close_timeout = float(close_timeout)

    def open(self) -> Transport:
        """A new transport; its `start()` opens a session on `server`."""
        return MemoryTransport(self.server, self.close_timeout)
