"""The waits of subscriptions, notification streams and tasks end when
they should: an interrupt on the main thread lands within a slice, a
`listen()` interrupted before its acknowledgement leaves no stream open,
and a task's waiter wakes when the client closes rather than after the
server's poll interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import mcp_sync
from mcp_sync.subscriptions import Subscription
from mcp_sync.notifications import NotificationStream
from mcp_sync.tasks import MAX_POLL_INTERVAL, Task
from mcp_sync.testing import Server, close_tasks, demo_server, task_tool
from mcp_sync.waiting import MAIN_THREAD_SLICE, wait_for_event
from tests.helpers import SLACK, interrupt_inside, runs, wait_until

main_only = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                               reason="needs the main thread")


def forever_server(poll_interval_ms: int) -> Server:
    """A server with one task tool that runs until cancelled, and asks to
    be polled every `poll_interval_ms`."""
    from mcp_sync.testing._tasks import store_of

    server = Server(name="forever")
    task_tool(server, "forever", lambda args, ctx: ctx.cancelled.wait(60) and "stopped")
    store_of(server).poll_interval_ms = poll_interval_ms
    return server


@main_only
@pytest.mark.parametrize("what", ["subscription", "notifications"])
def test_an_interrupt_ends_an_event_wait_on_the_main_thread_at_once(what):
    with mcp_sync.connect(demo_server()) as client:
        waiting: Callable[..., Any]
        if what == "subscription":
            stream: Any = client.listen(tools_list_changed=True)
            waiting = Subscription.next
        else:
            stream = client.notifications()
            waiting = NotificationStream.next
        with stream:
            at = interrupt_inside(waiting.__code__)
            with pytest.raises(KeyboardInterrupt):
                stream.next(timeout=60)
            assert time.monotonic() - at[0] < MAIN_THREAD_SLICE + SLACK  # not at the 60 s timeout


@main_only
@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_an_interrupt_ends_a_tasks_wait_on_the_main_thread_at_once(protocol):
    server = forever_server(poll_interval_ms=60_000)
    try:
        with mcp_sync.connect(server, protocol=protocol, tasks=True) as client:
            task = client.call_tool("forever", {}, task=True)
            at = interrupt_inside(Task._poll.__code__)
            with pytest.raises(KeyboardInterrupt):
                task.wait(timeout=60)
            assert time.monotonic() - at[0] < MAIN_THREAD_SLICE + SLACK
            task.cancel()
    finally:
        close_tasks(server)


@main_only
def test_a_listen_interrupted_before_its_acknowledgement_leaves_no_stream_open(monkeypatch):
    import mcp_sync.testing._subscriptions as served

    acknowledging = threading.Event()
    release = threading.Event()
    send_on = served._send_on

    def slow(session: Any, call: Any, message: dict[str, Any]) -> Any:
        if message.get("method") == "notifications/subscriptions/acknowledged":
            acknowledging.set()
            release.wait(10)  # a server slow to acknowledge
        return send_on(session, call, message)

    monkeypatch.setattr(served, "_send_on", slow)
    server = demo_server()
    with mcp_sync.connect(server) as client:
        at = interrupt_inside(wait_for_event.__code__)
        try:
            with pytest.raises(KeyboardInterrupt):
                client.listen(tools_list_changed=True, timeout=60)
        finally:
            release.set()
        assert time.monotonic() - at[0] < MAIN_THREAD_SLICE + SLACK
        assert acknowledging.is_set()
        wait_until(lambda: server.listening() == 0)  # it stayed open until close() before
        assert not client._pipeline.supervisor.open_subscriptions()


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_closing_the_client_wakes_a_task_waiter_between_polls(protocol):
    # The server asks to be polled every hour: the waiter slept until then.
    server = forever_server(poll_interval_ms=3_600_000)
    try:
        client = mcp_sync.connect(server, protocol=protocol, tasks=True)
        task = client.call_tool("forever", {}, task=True)
        raised: list[BaseException] = []

        def waiter() -> None:
            try:
                task.wait(timeout=3_600)
            except BaseException as exc:  # noqa: BLE001 - what it raised is the test
                raised.append(exc)

        thread = threading.Thread(target=waiter)
        thread.start()
        wait_until(lambda: runs(thread, Task._poll.__code__))
        client.close()
        thread.join(MAX_POLL_INTERVAL / 2)  # (it slept MAX_POLL_INTERVAL, the longest sleep, before)
        assert not thread.is_alive()
        assert [type(exc) for exc in raised] == [mcp_sync.ConnectionClosed]
    finally:
        close_tasks(server)




@pytest.mark.parametrize("waiting", [3, 0], ids=["events waiting", "none waiting"])
def test_an_interrupt_wherever_it_lands_in_next_leaves_the_stream_unlocked(waiting):
    # A Ctrl-C is raised where the interpreter checks for one: after a call
    # returns, and at a loop's jump back. Wherever that is in `next()`, the
    # stream's lock is not left held (the reader thread that queues the
    # next events would block on it for good). A first version of the fast
    # path took the lock without blocking, then entered its `try`: an
    # interrupt after the `acquire` call left it held. Raised here at each
    # such point in turn by a trace function, until `next()` gets through.
    import dis
    import sys

    def probe() -> None:
        pass

    opcodes: list[str] = []

    def probing(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "opcode":
            opcodes.append(event)
        return probing

    sys.settrace(probing)
    probe()
    sys.settrace(None)
    if not opcodes:  # 3.12.0 and 3.12.1: a frame's f_trace_opcodes set by its trace function is ignored
        pytest.skip("this interpreter gives a trace function no opcode events")
    code = Subscription.next.__code__
    checked_after = {"CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "CALL_METHOD",
                     "JUMP_BACKWARD", "JUMP_ABSOLUTE", "RESUME"}  # (3.10 to 3.13)
    sub = Subscription(lambda s: None, max_buffer=100)
    for stop_at in range(1, 10_000):
        sub._events.clear()
        sub._events.extend(range(waiting))
        seen, previous = [0], [None]

        def tracer(frame, event, arg):
            if frame.f_code is code:
                frame.f_trace_opcodes = True
                if event == "opcode":
                    after = previous[0]
                    previous[0] = dis.opname[code.co_code[frame.f_lasti]]
                    if after in checked_after:
                        seen[0] += 1
                        if seen[0] == stop_at:
                            raise KeyboardInterrupt
            return tracer

        sys.settrace(tracer)
        try:
            sub.next(timeout=0.001)
            got_through = True
        except KeyboardInterrupt:
            got_through = False
        except mcp_sync.RequestTimeout:  # none waiting: the end of the path
            got_through = True
        finally:
            sys.settrace(None)
        assert not sub._lock._is_owned(), f"the lock was left held by an interrupt at check {stop_at}"
        if got_through:
            break
    assert stop_at > 1  # it went through the checks of the path
