"""The plain call's lane (`mcp_sync.plain_lane`): what it does not finish
itself goes, with its attempt, to the one retry loop; it follows the
connection; a call whose thread holds a slot takes the general path; and
its calls are counted as the general path counts them."""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.options import Reconnect
from mcp_sync.status import Status
from mcp_sync.testing import RpcError, Server
from tests.helpers import Injected, cyclic_garbage, demo_command, interrupt_at_point, wait_until

FAST = Reconnect(initial_delay=0.01, max_delay=0.05)


def lane_server(gate: threading.Event) -> Server:
    server = Server(name="lane")
    server.cancelled_calls = []
    server.holding = threading.Event()

    @server.tool(input_schema={"type": "object"})
    def echo(args, ctx):
        return str(args.get("text", ""))

    @server.tool(input_schema={"type": "object"})
    def refuse(args, ctx):
        raise RpcError(-32001, "refused on purpose")

    @server.tool(input_schema={"type": "object"})
    def stuck(args, ctx):
        if ctx.cancelled.wait(30):  # the client gave up on it and said so
            server.cancelled_calls.append(args)
        gate.wait(30)
        return "late"

    @server.tool(input_schema={"type": "object"})
    def hold(args, ctx):
        server.holding.set()  # its caller is in `wait()` by now
        gate.wait(30)
        return "held"

    @server.tool(input_schema={"type": "object"})
    def ask(args, ctx):
        answer = ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"asked {answer['content']['name']}"

    return server


def recording_attempts(pipeline, monkeypatch):
    """Record what reaches the retry loop: (method, the attempt's outcome or None)."""
    seen = []
    real = pipeline._send_mending

    def recording(call, plan, attempt=None):
        seen.append((call.method, None if attempt is None else attempt.outcome))
        return real(call, plan, attempt)

    monkeypatch.setattr(pipeline, "_send_mending", recording)
    return seen


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_an_answer_the_lane_does_not_finish_goes_to_the_retry_loop_with_its_attempt(protocol, monkeypatch):
    gate = threading.Event()
    with mcp_sync.connect(lane_server(gate), protocol=protocol) as client:
        seen = recording_attempts(client._pipeline, monkeypatch)
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        assert seen == []  # finished on the lane: the retry loop never ran
        with pytest.raises(mcp_sync.ServerError) as plain:
            client.call_tool("refuse", {})
        ((method, outcome),) = seen
        assert method == "tools/call" and outcome["error"]["code"] == -32001
        with pytest.raises(mcp_sync.ServerError) as general:
            client.call_tool("refuse", {}, timeout=30)  # an option: the general path
        assert type(plain.value) is type(general.value) and str(plain.value) == str(general.value)
        assert seen[1] == ("tools/call", None)  # the general path's own attempt


def test_a_write_that_finds_the_pipe_gone_is_mended_by_the_retry_loop_on_a_new_connection(tmp_path, monkeypatch):
    # `hold` makes the server close its stdin: the lane's next write fails
    # with EPIPE before anything of it was sent, so the retry loop, given
    # the lane's attempt, sends it again on a new connection.
    record = tmp_path / "record"
    server = [sys.executable, str(Path(__file__).parent / "servers" / "stops_reading.py"), str(record)]
    # (The server answers nothing but `tools/call`: the reconnect's probe
    # waits out `probe_timeout`, then trusts the pinned version.)
    with mcp_sync.connect(server, protocol="2026-07-28", reconnect=FAST, timeout=10, probe_timeout=0.5) as client:
        pipeline = client._pipeline
        assert client.call_tool("echo", {"text": "one"}).text == "one"
        first = client._conn
        assert pipeline._lane.conn is first
        seen = recording_attempts(pipeline, monkeypatch)
        holding = threading.Thread(target=lambda: pytest.raises(mcp_sync.ConnectionClosed, client.call_tool,
                                                                "hold", {"seconds": 1}, timeout=10))
        holding.start()
        assert wait_until(lambda: record.exists() and "hold ran" in record.read_text(), 10)
        assert client.call_tool("echo", {"text": "two"}).text == "two"
        holding.join(15)
        assert not holding.is_alive()
        lanes = [outcome for _, outcome in seen if outcome is not None]
        assert len(lanes) == 1 and isinstance(lanes[0], mcp_sync.ConnectionClosed)
        assert client._conn is not first
        before = len(seen)
        assert client.call_tool("echo", {"text": "three"}).text == "three"
        assert len(seen) == before  # finished on the lane of the new connection
        assert pipeline._lane.conn is client._conn


def test_a_plain_call_from_a_handler_whose_call_holds_the_only_slot_does_not_wait_for_one():
    # An input handler runs on the calling thread while its call holds an
    # admission slot; a call it makes must not wait for a second slot (with
    # max_in_flight=1, its own), as `send()` never does.
    gate = threading.Event()
    clients = []

    def name(params):
        return {"action": "accept", "content": {"name": clients[0].call_tool("echo", {"text": "Ada"}).text}}

    with mcp_sync.connect(lane_server(gate), protocol="2025-11-25", max_in_flight=1, max_queued=0, timeout=10,
                          input_handlers={"form": name}) as client:
        clients.append(client)
        assert client.call_tool("ask", {}).text == "asked Ada"
        assert client.stats().requests["tools/call"].outcomes["ok"] == 2


@pytest.mark.parametrize("plain", [True, False])
def test_the_lane_counts_and_cancels_its_calls_as_the_general_path_does(plain):
    gate = threading.Event()
    options = {} if plain else {"timeout": 0.3}
    server = lane_server(gate)
    with mcp_sync.connect(server, timeout=0.3) as client:
        for _ in range(3):
            client.call_tool("echo", {"text": "x"}, **options)
        with pytest.raises(mcp_sync.ServerError):
            client.call_tool("refuse", {}, **options)
        try:
            with pytest.raises(mcp_sync.RequestTimeout):
                client.call_tool("stuck", {}, **options)
            assert wait_until(lambda: server.cancelled_calls, 10), "the server was not told the call was cancelled"
        finally:
            gate.set()  # the tool ends, and with it the server's thread
        stats = client.stats()
    calls = stats.requests["tools/call"]
    assert calls.count == 5
    assert {k: v for k, v in calls.outcomes.items() if v} == {"ok": 3, "error": 1, "timeout": 1}
    assert stats.timeouts == 1 and stats.cancellations == 1


BROKEN = r'''
import json, sys
ANSWERS = {
    "both": {"result": {"content": []}, "error": {"code": -32001, "message": "an error with a result"}},
    "number": {"result": 5},
    "unknown": {"result": {"resultType": "unheard-of", "content": []}},
}
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "tools/call":
        answer = ANSWERS[message["params"]["name"]]
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], **answer}), flush=True)
'''


@pytest.mark.parametrize("tool, error, words", [
    ("both", mcp_sync.ServerError, "an error with a result"),
    ("number", mcp_sync.InvalidResult, "not an object"),
    ("unknown", mcp_sync.InvalidResult, "unheard-of"),
])
def test_a_broken_answer_is_refused_on_the_lane_as_on_the_general_path(tool, error, words):
    # The lane finishes only an answer without an error whose result is an
    # object of resultType "complete"; the retry loop refuses the others.
    with mcp_sync.connect([sys.executable, "-c", BROKEN], protocol="2026-07-28", timeout=10,
                          probe_timeout=0.5) as client:
        raised = []
        for options in ({}, {"timeout": 10}):
            with pytest.raises(error, match=words) as info:
                client.call_tool(tool, {}, **options)
            raised.append((type(info.value), str(info.value)))
        assert raised[0] == raised[1]


def test_the_lane_marks_the_keepalive_as_the_general_path_does(monkeypatch):
    # A call in flight holds off the probe (`busy`/`idle`), and one that got
    # its answer says the connection works (`touch`): in the same order on
    # both paths, for an answer and for an error.
    gate = threading.Event()
    with mcp_sync.connect(lane_server(gate), keepalive=30) as client:
        keepalive = client._supervisor.keepalive
        marks = []
        for name in ("busy", "touch", "idle"):
            monkeypatch.setattr(keepalive, name, lambda name=name: marks.append(name))
        by_path = {}
        for path, options in (("plain", {}), ("general", {"timeout": 30})):
            marks.clear()
            client.call_tool("echo", {"text": "x"}, **options)
            with pytest.raises(mcp_sync.ServerError):
                client.call_tool("refuse", {}, **options)
            by_path[path] = list(marks)
    assert by_path["plain"] == by_path["general"] == ["busy", "touch", "idle", "busy", "idle"]


def test_an_answer_on_the_lane_starts_a_fresh_run_of_the_reconnect_policy():
    # The server died and the healer connected again (one attempt of the
    # policy): the first answer, here on the new connection's lane, says
    # the connection works, so the next failure starts from the first delay.
    with mcp_sync.connect(demo_command(), reconnect=FAST) as client:
        old = client._conn
        os.kill(old.transport.pid, signal.SIGKILL)
        assert wait_until(lambda: client._conn not in (old, None) and client.status is Status.READY, 10)
        assert client._supervisor.attempts == 1
        assert client.call_tool("echo", {"text": "x"}).text == "x"
        assert client._pipeline._lane.conn is client._conn  # the lane took it
        assert client._supervisor.attempts == 0


def test_a_plain_call_that_waited_for_its_slot_keeps_its_own_deadline(monkeypatch):
    # With max_in_flight=1 the call waits for the slot another call holds;
    # its wait for the answer then ends by its own deadline (`until`), not
    # a whole timeout after the slot, and names its own timeout.
    gate = threading.Event()
    server = lane_server(gate)
    with mcp_sync.connect(server, max_in_flight=1, timeout=20) as client:
        holder = threading.Thread(target=client.call_tool, args=("hold", {}), kwargs={"timeout": 30})
        holder.start()
        assert server.holding.wait(10)  # the holder has its slot and waits in `conn.wait`
        conn, waits = client._conn, []
        real_wait = conn.wait

        def wait(pending, **options):
            waits.append((options["timeout"], options.get("until")))
            return real_wait(pending, **options)

        monkeypatch.setattr(conn, "wait", wait)
        released = []

        def release():
            time.sleep(0.5)  # how long the call waits for the slot: measured, not assumed
            released.append(time.monotonic())
            gate.set()

        releaser = threading.Thread(target=release)
        releaser.start()
        started = time.monotonic()
        assert client.call_tool("echo", {"text": "x"}).text == "x"
        releaser.join(10)
        holder.join(10)
    [(timeout, until)] = waits
    # The deadline was taken when the call began, before the slot came free
    # (released, 0.5 s later); one taken after it would be past released + 20.
    assert timeout == 20 and until is not None and started + 20 <= until < released[0] + 20


@pytest.mark.parametrize("plain", [True, False])
def test_a_call_queued_for_its_slot_when_the_server_dies_is_sent_on_the_new_connection(plain):
    # The lane is looked at before the call waits for its slot: once it holds
    # it, a lane whose connection failed meanwhile hands the call, whole, to
    # the retry loop, which sends it on the new connection (as it does for
    # the general path), instead of on the dead one.
    options = {} if plain else {"timeout": 10}
    with mcp_sync.connect(demo_command(), reconnect=FAST, max_in_flight=1, timeout=10) as client:
        assert client.call_tool("echo", {"text": "warm"}).text == "warm"  # the lane is made
        admission = client._supervisor.admission
        received = threading.Event()  # its first progress: the server has the holder's request
        holding = threading.Thread(target=lambda: pytest.raises(
            mcp_sync.ConnectionClosed, client.call_tool, "countdown", {"steps": 300, "delay": 0.1}, timeout=20,
            progress=lambda p: received.set()))
        holding.start()
        assert received.wait(10) and admission.in_flight == 1
        outcome = {}

        def queued():
            try:
                outcome["text"] = client.call_tool("echo", {"text": "queued"}, **options).text
            except mcp_sync.McpError as exc:
                outcome["error"] = exc

        waiting = threading.Thread(target=queued)
        waiting.start()
        assert wait_until(lambda: admission.queued == 1, 10)
        old = client._conn
        os.kill(old.transport.pid, signal.SIGKILL)
        waiting.join(15)
        holding.join(15)
        assert outcome == {"text": "queued"}
        assert client._conn is not old


@pytest.mark.parametrize("plain", [True, False])
def test_an_interrupt_once_the_answer_is_in_leaves_the_keepalive_idle_and_is_counted(plain):
    gate = threading.Event()
    with mcp_sync.connect(lane_server(gate), keepalive=30) as client:
        keepalive = client._supervisor.keepalive
        real = keepalive.touch

        def touch():  # the first thing after the answer, on both paths
            keepalive.touch = real
            raise KeyboardInterrupt

        keepalive.touch = touch
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("echo", {"text": "x"}, **({} if plain else {"timeout": 30}))
        assert keepalive.in_flight == 0  # else no probe would ever run again
        outcomes = client.stats().requests["tools/call"].outcomes
        assert {k: v for k, v in outcomes.items() if v} == {"interrupted": 1}


@pytest.mark.parametrize("plain", [True, False])
def test_a_mended_calls_error_does_not_carry_the_mended_failure(plain):
    # The first sending fails before anything was written and is mended (sent
    # again on a new connection); the error answer to the second is raised
    # as it is, not "during the handling" of the first failure.
    options = {} if plain else {"timeout": 10}
    with mcp_sync.connect(demo_command(), reconnect=FAST, timeout=10) as client:
        client.call_tool("echo", {"text": "warm"})
        conn = client._conn
        real = conn.send_request

        def send_request(*args, **kwargs):
            conn.send_request = real
            failure = mcp_sync.ConnectionClosed("the pipe is gone (a test)")
            failure.may_have_executed = False
            raise failure

        conn.send_request = send_request
        with pytest.raises(mcp_sync.ServerError) as info:
            client.call_tool("no-such-tool", {}, **options)
        assert client._conn is not conn
        assert info.value.__context__ is None and info.value.__cause__ is None


@pytest.mark.parametrize("how", ["dead server, plain", "dead server, general", "refused send, plain",
                                 "refused send, general", "error answer, plain", "error answer, general"])
def test_a_failed_call_leaves_no_reference_cycle(how, monkeypatch):
    # A failure the retry loop kept as a value and raised again must not hold
    # the frames that hold it: each failed call would leave a cycle for the
    # garbage collector (a count, not a timing). A dead server fails the
    # call in the retry loop; a refused send fails the lane's own attempt;
    # an error answer is raised by the retry loop.
    options = {} if how.endswith("plain") else {"timeout": 10}
    erring = how.startswith("error")
    tool, expected = ("no-such-tool", mcp_sync.ServerError) if erring else ("echo", mcp_sync.ConnectionClosed)
    with mcp_sync.connect(demo_command(), reconnect=False, restart=False, timeout=10) as client:
        client.call_tool("echo", {"text": "warm"})
        conn = client._conn
        if how.startswith("dead"):
            os.kill(conn.transport.pid, signal.SIGKILL)
            assert wait_until(lambda: conn.failure is not None, 10)
        elif how.startswith("refused"):
            def refuse(*args, **kwargs):
                raise mcp_sync.ConnectionClosed("refused (a test)")

            monkeypatch.setattr(conn, "send_request", refuse)
        call = lambda: client.call_tool(tool, {"text": "x"}, **options)  # noqa: E731
        assert cyclic_garbage(call, expected, times=50) == 0


def test_a_queued_plain_call_keeps_its_deadline_while_it_waits_for_a_slot():
    gate = threading.Event()
    server = lane_server(gate)
    with mcp_sync.connect(server, max_in_flight=1, timeout=0.3) as client:
        holder = threading.Thread(target=client.call_tool, args=("hold", {}), kwargs={"timeout": 30})
        holder.start()
        try:
            assert server.holding.wait(10)
            with pytest.raises(mcp_sync.RequestTimeout, match="free slot") as info:
                client.call_tool("echo", {"text": "x"})
            assert "nothing was sent" in str(info.value)
        finally:
            gate.set()
            holder.join(10)


def test_the_servers_log_messages_during_a_plain_call_go_to_its_logger(caplog):
    server = Server(name="logs")

    @server.tool(input_schema={"type": "object"})
    def talk(args, ctx):
        ctx.log("warning", "said during the call")
        return "done"

    with caplog.at_level("DEBUG"), mcp_sync.connect(server, log_level="debug") as client:
        for options in ({}, {"timeout": 10}):
            caplog.clear()
            assert client.call_tool("talk", {}, **options).text == "done"
            assert wait_until(lambda: any("said during the call" in r.getMessage() for r in caplog.records), 10)
            names = {r.name for r in caplog.records if "said during the call" in r.getMessage()}
            assert names == {"mcp_sync.server.logs"}, names


@pytest.mark.parametrize("plain", [True, False])
def test_a_call_waiting_for_its_slot_when_close_begins_is_not_sent(plain):
    # close() marks the client closed, then closes admission, then the
    # connection. A call that passed `send()`'s look at `closed` and then got
    # its slot must not be sent in between: the lane looks again.
    ran = []
    server = Server(name="closing")

    @server.tool(input_schema={"type": "object"})
    def work(args, ctx):
        ran.append(args)
        return "done"

    with mcp_sync.connect(server, keepalive=30, timeout=30) as client:
        assert client.call_tool("work", {}).text == "done"  # the lane is made
        ran.clear()
        supervisor = client._supervisor
        keepalive, admission = supervisor.keepalive, supervisor.admission
        at_busy, may_go = threading.Event(), threading.Event()
        real_busy, real_close = keepalive.busy, admission.close

        def busy():  # after `send()` looked at `closed`, before its slot
            real_busy()
            at_busy.set()
            assert may_go.wait(10)

        def close_admission(error):  # `closed` is set by now: let the call take its slot
            may_go.set()
            caller.join(10)
            real_close(error)

        keepalive.busy, admission.close = busy, close_admission
        outcome = {}

        def call():
            try:
                outcome["text"] = client.call_tool("work", {}, **({} if plain else {"timeout": 30})).text
            except mcp_sync.McpError as exc:
                outcome["error"] = exc

        caller = threading.Thread(target=call)
        caller.start()
        assert at_busy.wait(10)
        client.close()
    caller.join(10)
    assert ran == [] and isinstance(outcome.get("error"), mcp_sync.ConnectionClosed), outcome


def test_a_call_waiting_for_its_slot_while_the_version_is_settled_again_takes_the_retry_loop(monkeypatch):
    # A lane belongs to one settled version: when the version was settled
    # again while its call waited for a slot, the retry loop sends the call,
    # with the new version's `_meta`.
    gate = threading.Event()
    server = lane_server(gate)
    with mcp_sync.connect(server, max_in_flight=1, timeout=20) as client:
        pipeline, supervisor = client._pipeline, client._supervisor
        assert client.call_tool("echo", {"text": "warm"}).text == "warm"  # the lane is made
        holder = threading.Thread(target=client.call_tool, args=("hold", {}), kwargs={"timeout": 30})
        holder.start()
        assert server.holding.wait(10)
        seen = recording_attempts(pipeline, monkeypatch)
        outcome = {}
        waiting = threading.Thread(target=lambda: outcome.update(text=client.call_tool("echo", {"text": "x"}).text))
        waiting.start()
        assert wait_until(lambda: supervisor.admission.queued == 1, 10)
        supervisor.settled = supervisor.settled._replace()  # settled again: equal terms, another value
        gate.set()
        waiting.join(10)
        holder.join(10)
        assert outcome == {"text": "x"}
        assert seen == [("tools/call", None)]  # the retry loop, from scratch
        assert client.call_tool("echo", {"text": "y"}).text == "y"
        assert pipeline._lane.settled is supervisor.settled and len(seen) == 1  # a new lane for the new terms


def interrupt_in_lane(k: int):
    """A profile function that raises `Injected` at the k-th point of this
    thread where CPython 3.11 delivers an asynchronous exception (Ctrl-C)
    in `PlainLane.send()`: a function it calls starting (`RESUME`), or a C
    function it calls returning (`CALL`). A Python function returning to it
    is no such point (`RETURN_VALUE` checks nothing)."""
    from mcp_sync import plain_lane

    send = plain_lane.PlainLane.send.__code__

    def is_point(frame, event, arg):
        if event == "call":
            return frame.f_back is not None and frame.f_back.f_code is send
        return event == "c_return" and frame.f_code is send

    return interrupt_at_point(
        k, is_point, lambda frame, event, arg: f"{event} {getattr(arg, '__name__', frame.f_code.co_name)}")


@pytest.mark.parametrize("transport", ["memory", "stdio"])
def test_an_interrupt_anywhere_in_the_lane_leaves_no_route_behind(transport):
    # An interrupt landing as `wait()` started (before its own `try`, which
    # abandons the call) left the call in the connection's table and its
    # inbox with it: no cancellation reached the server, the route stayed
    # until an answer came (for ever, if none did), and while it stayed it
    # counted as a call waiting (a server request that names no call was no
    # longer given to the one real caller).
    gate = threading.Event()
    target = lane_server(gate) if transport == "memory" else demo_command()
    tool, args = ("stuck", {}) if transport == "memory" else ("sleep", {"seconds": 30})
    points = []
    with mcp_sync.connect(target, timeout=0.5) as client:
        try:
            client.call_tool("echo", {"text": "warm"})
            for k in range(100):
                profile, fired = interrupt_in_lane(k)
                sys.setprofile(profile)
                try:
                    client.call_tool(tool, args)
                except (Injected, mcp_sync.RequestTimeout):
                    pass
                finally:
                    sys.setprofile(None)
                if not fired:
                    break  # every point was walked: this call ran to its timeout
                points.extend(fired)
                conn = client._supervisor.conn
                with conn._lock:
                    left = dict(conn._router.calls)
                    conn._router.calls.clear()  # (so the next point starts clean)
                assert not left, f"interrupted at {fired[0]}: calls {sorted(left)} left in the table"
        finally:
            gate.set()
    assert "call wait" in points  # the walk reached the window
