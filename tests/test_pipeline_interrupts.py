"""A Ctrl-C anywhere on the general path (`Pipeline.send`, the retry loop
`Pipeline._send_mending` and `Connection.send_request`) leaves no call in
the connection's table, and what `stats().cancellations` counts is what
was cancelled: a call the server saw, once. The walk mirrors the plain
lane's (tests/test_plain_lane.py) at every point where CPython 3.11
delivers an asynchronous exception."""

import sys
import threading

import pytest

import mcp_sync
from mcp_sync import connection, pipeline
from mcp_sync.testing import Server
from tests.helpers import Injected, demo_command, interrupt_at_point

#: The frames walked: each point where a function they call starts, or
#: where a C function they call returns.
WALKED = {pipeline.Pipeline.send.__code__, pipeline.Pipeline._send_mending.__code__,
          connection.Connection.send_request.__code__}


def interrupt_on_the_general_path(k: int):
    """A profile function that raises `Injected` at the k-th point of this
    thread where CPython 3.11 delivers an asynchronous exception in the
    walked frames: a function they call starting (`RESUME`), or a C function
    they call returning (`CALL`). (A Python function returning is no such
    point: `RETURN_VALUE` checks nothing.)"""

    def is_point(frame, event, arg):
        if event == "call":
            return frame.f_back is not None and frame.f_back.f_code in WALKED
        return event == "c_return" and frame.f_code in WALKED

    return interrupt_at_point(
        k, is_point,
        lambda frame, event, arg: f"{event} {getattr(arg, '__name__', frame.f_code.co_name)} "
                                  f"in {(frame.f_back if event == 'call' else frame).f_code.co_name}")


def stuck_server(gate: threading.Event) -> Server:
    server = Server(name="stuck")

    @server.tool(input_schema={"type": "object"})
    def echo(args, ctx):
        return str(args.get("text", ""))

    @server.tool(input_schema={"type": "object"})
    def stuck(args, ctx):
        ctx.cancelled.wait(30)
        gate.wait(30)
        return "late"

    return server


def noting_what_goes_out(conn):
    """Record, on `conn`, the ids of the requests written and the ids the
    cancellations queued name (instance attributes over the methods)."""
    written, cancelled = [], []
    transport, threads = conn.transport, conn._threads
    send, exchange, post = transport.send, transport.exchange, threads.post

    def sending(message, headers=None, **keywords):
        send(message, headers, **keywords)  # (what raises here was not written)
        if "id" in message and "method" in message:
            written.append(message["id"])

    def exchanging(message, headers, deadline):
        written.append(message["id"])  # (an exchange cut short may have gone out in part)
        return exchange(message, headers, deadline)

    def posting(message, **keywords):
        if message.get("method") == "notifications/cancelled":
            cancelled.append(message["params"]["requestId"])
        return post(message, **keywords)

    transport.send, transport.exchange, threads.post = sending, exchanging, posting
    return written, cancelled


@pytest.mark.parametrize("transport", ["memory", "stdio"])
@pytest.mark.parametrize("with_progress", [False, True])
def test_an_interrupt_anywhere_on_the_general_path_leaves_no_route_behind(transport, with_progress):
    # An interrupt landing as `wait()` started (before its own `try`) left
    # the call in the table; one landing as `send_request` released its lock
    # left a call registered and never sent (nobody held its `Pending` to
    # abandon it). Each stayed until an answer came (for ever, if none did)
    # and counted as a call waiting meanwhile.
    gate = threading.Event()
    target = stuck_server(gate) if transport == "memory" else demo_command()
    tool, args = ("stuck", {}) if transport == "memory" else ("sleep", {"seconds": 30})
    options = {"timeout": 0.3}
    if with_progress:
        options["progress"] = lambda update: None
    points = []
    with mcp_sync.connect(target, timeout=10) as client:
        try:
            client.call_tool("echo", {"text": "warm"})
            conn = client._supervisor.conn
            written, cancelled = noting_what_goes_out(conn)
            walked = False
            for k in range(300):
                before = client.stats().cancellations
                del written[:], cancelled[:]
                profile, fired = interrupt_on_the_general_path(k)
                sys.setprofile(profile)
                try:
                    client.call_tool(tool, args, **options)
                except (Injected, mcp_sync.RequestTimeout):
                    pass
                finally:
                    sys.setprofile(None)
                assert client._supervisor.conn is conn
                where = f"interrupted at {fired[0]}" if fired else "not interrupted"
                with conn._lock:
                    left = dict(conn._router.calls)
                    conn._router.calls.clear()  # (so the next point starts clean)
                assert not left, f"{where}: calls {sorted(left)} left in the table"
                # Cancelled: only what was written, at most once; and counted as such.
                assert len(set(cancelled)) == len(cancelled) and set(cancelled) <= set(written), \
                    f"{where}: cancelled {cancelled}, written {written}"
                assert client.stats().cancellations - before == len(cancelled), where
                if not fired:
                    walked = True
                    assert cancelled and set(cancelled) == set(written)  # the timeout: the one call, cancelled
                    break  # every point was walked: this call ran to its timeout
                points.extend(fired)
            assert walked, f"more than 300 points: {points[-5:]}"
        finally:
            gate.set()
    assert "call wait in _send_mending" in points  # the walk reached both windows
    assert "c_return __exit__ in send_request" in points
