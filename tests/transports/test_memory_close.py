"""`close()` of an in-process connection while a tool ignores cancellation.

The in-process server runs tools on its own worker threads, and its session's
`close()` joins them without a bound. A tool that never looks at
`ctx.cancelled` (it loops, or sleeps for a long time) must not hold up the
client: the call ends by its deadline or interrupt, the server is told the
request was cancelled, and `close()` returns within the transport's bound,
with every thread of the client ended and a warning naming the tool. The
tool's thread is the server's, and is left running (in-process it cannot be
killed); each test releases it at the end, so nothing outlives the test.

Each `close()` here runs on a thread of its own, joined with a generous
timeout, so that a `close()` that hangs fails the test instead of hanging it.
"""

from __future__ import annotations

import _thread
import logging
import threading
import time
from typing import Any

import pytest

import mcp_sync
from mcp_sync.testing import Server
from mcp_sync.transports.memory import Memory, MemoryTransport
from tests.helpers import interrupt_inside, wait_until

#: How long a test waits for a `close()` that should take a few seconds at
#: most before it calls it hung (a hung one is released after it).
GENEROUS = 15.0
#: The longest `connect(server).close()` may take: the in-process
#: transport's default bound (2 s), the engine's flushes (2 x 0.5 s) and a
#: margin for a slow machine. Before the fix it waited as long as the tool ran.
CLOSE_BOUND = 5.0


class Stuck:
    """An in-process server (a `Server` with a tool `stuck` that never looks
    at `ctx.cancelled` and runs until `release` is set) that records every
    message the client sends it."""

    def __init__(self, polite: bool = False) -> None:
        self.server = Server(name="stuck-server")
        self.started = threading.Event()
        self.release = threading.Event()
        self.contexts: list[Any] = []
        self.received: list[dict[str, Any]] = []
        self.sessions: list[Any] = []
        self.tool_threads: list[threading.Thread] = []

        @self.server.tool(name="stuck")
        def stuck(args: dict[str, Any], ctx: Any) -> str:
            self.contexts.append(ctx)
            self.tool_threads.append(threading.current_thread())
            self.started.set()
            if polite:  # a well-behaved tool: it stops once cancelled
                ctx.cancelled.wait(GENEROUS * 4)
                return "stopped"
            self.release.wait(GENEROUS * 4)  # never looks at ctx.cancelled
            return "released"

        @self.server.tool(name="echo")
        def echo(args: dict[str, Any], ctx: Any) -> str:
            return str(args.get("text", ""))

    def open_session(self, send: Any) -> Any:
        session = self.server.open_session(send)
        self.sessions.append(session)
        outer = self

        class Recording:
            def receive(self, message: dict[str, Any]) -> None:
                outer.received.append(message)
                session.receive(message)

            def close(self) -> None:
                session.close()

        return Recording()

    def cancelled_ids(self) -> list[Any]:
        return [m["params"]["requestId"] for m in self.received
                if m.get("method") == "notifications/cancelled"]

    def call_id(self, tool: str) -> Any:
        return next(m["id"] for m in self.received
                    if m.get("method") == "tools/call" and m["params"]["name"] == tool)

    def end(self) -> None:
        """Let the stuck tool return, and wait until the server's threads are gone."""
        self.release.set()
        assert wait_until(lambda: not any(t.is_alive() for t in self.tool_threads), GENEROUS)
        assert wait_until(lambda: not any(_server_threads()), GENEROUS), _server_threads()


#: The threads alive when the test began (another test's may still be ending).
_before: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def _threads_before() -> None:
    _before.clear()
    _before.update(threading.enumerate())


def _client_threads() -> list[threading.Thread]:
    """The client's threads this test started and still alive (all named `mcp-sync...`)."""
    return [t for t in threading.enumerate() if t.name.startswith("mcp-sync") and t not in _before]


def _server_threads() -> list[threading.Thread]:
    """The in-process server's threads this test started and still alive,
    and the thread that runs its session's close()."""
    return [t for t in threading.enumerate()
            if t.name.startswith(("mcp-testing", "mcp-inprocess")) and t not in _before]


def call_stuck(client: mcp_sync.Client) -> threading.Thread:
    """Call the stuck tool on a thread of the test, which expects the call
    to end with `ConnectionClosed` (the client closes under it); started."""
    caller = threading.Thread(target=lambda: pytest.raises(mcp_sync.ConnectionClosed, client.call_tool, "stuck", {}),
                              name="test-caller")
    caller.start()
    return caller


def timed_close(client: mcp_sync.Client) -> float:
    """Run `client.close()` on a thread of its own; the seconds it took.
    Fails (instead of hanging) when it has not returned after `GENEROUS` s."""
    took: list[float] = []

    def run() -> None:
        started = time.monotonic()
        client.close()
        took.append(time.monotonic() - started)

    closer = threading.Thread(target=run, name="test-closer", daemon=True)
    closer.start()
    closer.join(GENEROUS)
    assert not closer.is_alive(), f"close() still running after {GENEROUS} s: it waits for the tool"
    return took[0]


def _warnings_naming(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name.startswith("mcp_sync") and name in r.getMessage()]


def test_close_returns_within_its_bound_while_a_tool_ignores_cancellation(caplog, no_leaks):
    caplog.set_level(logging.WARNING)
    stuck = Stuck()
    client = mcp_sync.connect(stuck, timeout=10)
    failures: list[BaseException] = []

    def call() -> None:
        try:
            client.call_tool("stuck", {})
        except BaseException as exc:
            failures.append(exc)

    caller = threading.Thread(target=call, name="test-caller")
    caller.start()
    try:
        assert stuck.started.wait(GENEROUS)
        took = timed_close(client)
        assert took < CLOSE_BOUND, f"close() took {took:.1f} s"
        caller.join(GENEROUS)
        assert not caller.is_alive()
        assert len(failures) == 1 and isinstance(failures[0], mcp_sync.ConnectionClosed)
        # The server side learnt that the request is cancelled (in-process,
        # the session's close cancels it: what a well-behaved tool looks at).
        assert stuck.contexts[0].cancelled.is_set()
        assert _client_threads() == []  # the client's threads all ended within close()
        assert any(t.is_alive() for t in stuck.tool_threads)  # the tool's thread is the server's, left running
        assert _warnings_naming(caplog, "'stuck'"), [r.getMessage() for r in caplog.records]
    finally:
        stuck.end()
        caller.join(GENEROUS)
    # Released, the tool's answer goes nowhere: the session is closed.
    assert stuck.sessions[0].closed


def test_a_call_with_a_timeout_ends_by_its_deadline_and_the_server_is_told(caplog, no_leaks):
    caplog.set_level(logging.WARNING)
    stuck = Stuck()
    client = mcp_sync.connect(stuck, timeout=10)
    try:
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("stuck", {}, timeout=0.5)
        took = time.monotonic() - started
        assert took < 0.5 + 1.0, f"the call took {took:.1f} s with timeout=0.5"
        assert stuck.started.is_set()
        # notifications/cancelled reached the server for that request, and the tool's context shows it.
        assert wait_until(lambda: stuck.call_id("stuck") in stuck.cancelled_ids())
        assert stuck.contexts[0].cancelled.is_set()
        assert client.call_tool("echo", {"text": "still usable"}).text == "still usable"
        took = timed_close(client)
        assert took < CLOSE_BOUND, f"close() took {took:.1f} s"
        assert _client_threads() == []
        # The cancelled tool, still running at close, is named too.
        assert _warnings_naming(caplog, "'stuck'"), [r.getMessage() for r in caplog.records]
    finally:
        stuck.end()


def test_ctrl_c_during_a_call_ends_it_and_cancels_the_request_then_close_is_bounded(no_leaks):
    stuck = Stuck()
    client = mcp_sync.connect(stuck, timeout=10)
    at: list[float] = []

    def interrupter() -> None:
        if stuck.started.wait(GENEROUS):
            at.append(time.monotonic())
            _thread.interrupt_main()

    helper = threading.Thread(target=interrupter, name="test-interrupter")
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("stuck", {})
        assert time.monotonic() - at[0] < 1.0
        assert wait_until(lambda: stuck.call_id("stuck") in stuck.cancelled_ids())
        assert stuck.contexts[0].cancelled.is_set()
        took = timed_close(client)
        assert took < CLOSE_BOUND, f"close() took {took:.1f} s"
        assert _client_threads() == []
    finally:
        helper.join(GENEROUS)
        stuck.end()


def test_ctrl_c_during_close_is_raised_at_once_and_leaves_no_client_thread(no_leaks):
    stuck = Stuck()
    client = mcp_sync.connect(stuck, timeout=10)
    caller = call_stuck(client)
    # Whatever close() does, the stuck tool is released after a while, so
    # a close() that waits for it cannot hang this test.
    watchdog = threading.Timer(GENEROUS, stuck.release.set)
    watchdog.start()
    try:
        assert stuck.started.wait(GENEROUS)
        # Ctrl-C (as a notebook's Interrupt sends it) once close() is
        # closing the in-process transport, where it waits for the session.
        at = interrupt_inside(MemoryTransport.close.__code__)
        with pytest.raises(KeyboardInterrupt):
            client.close()
            time.sleep(GENEROUS)  # close() returned before the interrupt: it is raised here
        assert time.monotonic() - at[0] < 1.0, "the interrupt waited for the tool"
        assert not stuck.release.is_set()  # the tool still runs: close() did not wait for it
        assert wait_until(lambda: _client_threads() == [], 5.0), _client_threads()
        client.close()  # again: returns, safe after an interrupted close
    finally:
        watchdog.cancel()
        caller.join(GENEROUS)
        stuck.end()


def test_a_tool_that_stops_when_cancelled_is_waited_for_and_nothing_is_left(caplog, no_leaks):
    caplog.set_level(logging.WARNING)
    stuck = Stuck(polite=True)
    client = mcp_sync.connect(stuck, timeout=10)
    caller = call_stuck(client)
    try:
        assert stuck.started.wait(GENEROUS)
        took = timed_close(client)
        assert took < CLOSE_BOUND
        # The session's own close() finished inside ours: its threads are joined, none abandoned.
        assert stuck.sessions[0].closed
        assert not any(t.is_alive() for t in stuck.tool_threads)
        assert _server_threads() == []
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("mcp_sync")]
    finally:
        caller.join(GENEROUS)
        stuck.end()


# -- the transport's own bound ------------------------------------------------------------------


def test_memory_close_timeout_bounds_close_and_the_close_budget():
    assert Memory(Server()).close_timeout == 2.0
    stuck = Stuck()
    target = Memory(stuck, close_timeout=0.2)
    transport = target.open()
    assert transport.close_budget >= 0.2 and transport.close_budget <= 0.2 + 1.0
    client = mcp_sync.connect(target, timeout=10)
    caller = call_stuck(client)
    try:
        assert stuck.started.wait(GENEROUS)
        took = timed_close(client)
        # Its flushes (2 x 0.5 s at most, none needed here) and 0.2 s for the session.
        assert took < 0.2 + 1.0 + 0.5, f"close() took {took:.1f} s"
        assert _client_threads() == []
    finally:
        caller.join(GENEROUS)
        stuck.end()


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                        ("2", TypeError), (True, TypeError), (None, TypeError)])
def test_memory_close_timeout_must_be_a_finite_number(bad, error):
    with pytest.raises(error, match="close_timeout"):
        Memory(Server(), close_timeout=bad)
    assert Memory(Server(), close_timeout=0).close_timeout == 0.0


class Hung:
    """A hand-made in-process server that answers nothing and whose
    session's close() waits for `release` (or raises `on_close`)."""

    def __init__(self, on_close: BaseException | None = None) -> None:
        self.release = threading.Event()
        self.on_close = on_close

    def open_session(self, send: Any) -> Any:
        server = self

        class Session:
            def receive(self, message: dict[str, Any]) -> None:
                pass

            def close(self) -> None:
                if server.on_close is not None:
                    raise server.on_close
                server.release.wait(GENEROUS)

        return Session()


class Sink:
    def deliver(self, message: Any, related_to: Any = None) -> None:
        pass

    def transport_failed(self, error: Any) -> None:
        pass


def test_the_warning_names_what_was_never_answered_and_the_record_stays_bounded(caplog):
    from mcp_sync.transports import memory

    caplog.set_level(logging.WARNING)
    hung = Hung()
    transport = Memory(hung, close_timeout=0.1).open()
    transport.start(Sink())
    meta = {"arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                       "io.modelcontextprotocol/clientCapabilities": {}}}
    sent = 3 * (memory.UNANSWERED_KEPT + memory.CANCELLED_KEPT)
    for n in range(sent):
        transport.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": f"t{n}", **meta}})
    for n in range(sent - 2 * memory.CANCELLED_KEPT, sent):  # the newest cancelled, the rest left waiting
        transport.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": n}})
    started = time.monotonic()
    try:
        transport.close()
        assert time.monotonic() - started < 0.1 + 0.5
        [warning] = _warnings_naming(caplog, "did not close within 0.1 s")
        # The oldest not cancelled are named first; beyond the bounds, the oldest were let go.
        assert "tools/call 't" in warning and "(request " in warning
        # Left waiting: the newest UNANSWERED_KEPT less those cancelled; cancelled: the newest CANCELLED_KEPT.
        kept = memory.UNANSWERED_KEPT - 2 * memory.CANCELLED_KEPT + memory.CANCELLED_KEPT
        assert f"; and {kept - memory.NAMED_AT_MOST} more" in warning, warning
    finally:
        hung.release.set()
        assert wait_until(lambda: not _server_threads())


def test_a_session_close_that_raises_is_logged_and_close_returns(caplog):
    caplog.set_level(logging.WARNING)
    bug = RuntimeError("close bug")
    transport = Memory(Hung(on_close=bug)).open()
    transport.start(Sink())
    transport.close()
    [record] = [r for r in caplog.records if "failed in close()" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[1] is bug
    transport.close()  # idempotent
    assert not _server_threads()
