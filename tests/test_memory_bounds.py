"""Memory is bounded whatever the server sends (issue 13): notifications
nobody listens to are not kept, the dispatcher queue and every call's inbox
have a bound, and what is dropped beyond it is counted and logged once per
burst. The response and the server's requests are never dropped.

The flood test runs a real client in a subprocess against a stdio server
that floods during a call, and reads the client's own peak RSS. Its size is
`MCP_SYNC_FLOOD_COUNT` messages per call (200 000 by default; the issue's
1 000 000 is `MCP_SYNC_FLOOD_COUNT=1000000`).
"""

import json
import logging
import os
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mcp_sync.connection import (
    INBOX_MAX_LOGS,
    INBOX_MAX_PROGRESS,
    LOG,
    PROGRESS,
    RESPONSE,
    SERVER_REQUEST,
    Connection,
    Drops,
    Inbox,
    new_id_counter,
)
from mcp_sync.engine_threads import MAX_QUEUED_LOGS
from mcp_sync.notifications import MAX_QUEUED_NOTIFICATIONS, Dispatcher
from tests.helpers import wait_until
from tests.scripted_engine import PlayedTransport, respond

HERE = Path(__file__).parent
FLOOD = str(HERE / "servers" / "flood.py")
FLOOD_COUNT = int(os.environ.get("MCP_SYNC_FLOOD_COUNT", "200000"))
RSS_LIMIT_MB = 100


def note(method, **params):
    return {"jsonrpc": "2.0", "method": method, "params": params}


def progress(token, value):
    return note("notifications/progress", progressToken=token, progress=value)


# -- the dispatcher: notifications that belong to no call --------------------------------


def test_nothing_is_queued_for_a_notification_nobody_listens_to():
    dispatcher = Dispatcher()
    for i in range(1000):
        dispatcher.put(note("notifications/resources/updated", uri=f"u{i}"))
    assert dispatcher.queued == 0
    assert dispatcher.unlistened == 1000 and dispatcher.drops.notifications == 0
    assert not any(t.name == "mcp-sync-notifications" for t in threading.enumerate())
    dispatcher.close()


def test_only_the_kinds_a_filtered_callback_listens_to_are_queued():
    dispatcher = Dispatcher()
    seen = []
    got = threading.Event()
    dispatcher.add_callback(lambda n: (seen.append(n.method), got.set()),
                            methods={"notifications/tools/list_changed"})
    for i in range(100):
        dispatcher.put(note("notifications/resources/updated", uri=f"u{i}"))
    dispatcher.put(note("notifications/tools/list_changed"))
    assert got.wait(5)
    dispatcher.close()
    assert seen == ["notifications/tools/list_changed"]
    assert dispatcher.unlistened == 100


def test_a_stream_listens_to_every_kind():
    dispatcher = Dispatcher()
    stream = dispatcher.open_stream()
    dispatcher.put(note("notifications/resources/updated", uri="x"))
    assert stream.next(timeout=5).params == {"uri": "x"}
    stream.close()
    dispatcher.put(note("notifications/resources/updated", uri="y"))
    assert dispatcher.unlistened == 1
    dispatcher.close()


def test_the_dispatcher_queue_is_bounded_and_drops_oldest_first(caplog):
    dispatcher = Dispatcher()
    entered, release = threading.Event(), threading.Event()
    seen = []

    def slow(n):
        if n.params["uri"] == "first":
            entered.set()
            release.wait(10)
        seen.append(n.params["uri"])

    dispatcher.add_callback(slow)
    dispatcher.put(note("notifications/resources/updated", uri="first"))
    assert entered.wait(5)  # the dispatcher thread is busy from now on
    flood = 10 * MAX_QUEUED_NOTIFICATIONS
    with caplog.at_level(logging.WARNING, logger="mcp_sync"):
        for i in range(flood):
            dispatcher.put(note("notifications/resources/updated", uri=str(i)))
        assert dispatcher.queued == MAX_QUEUED_NOTIFICATIONS
        assert dispatcher.drops.notifications == flood - MAX_QUEUED_NOTIFICATIONS
        release.set()
        assert wait_until(lambda: len(seen) == MAX_QUEUED_NOTIFICATIONS + 1)
        assert wait_until(lambda: "were dropped" in caplog.text)
    dispatcher.close()
    # The newest survive, in order; the oldest were dropped.
    assert seen == ["first"] + [str(i) for i in range(flood - MAX_QUEUED_NOTIFICATIONS, flood)]
    # One warning when the dropping started and one summary when it ended, not one per message.
    records = [r for r in caplog.records if r.name.startswith("mcp_sync")]
    assert len(records) == 2, [r.getMessage() for r in records]
    assert str(flood - MAX_QUEUED_NOTIFICATIONS) in records[1].getMessage()


def test_a_list_change_is_never_lost_to_the_bound():
    dispatcher = Dispatcher(max_queued=10)
    entered, release = threading.Event(), threading.Event()
    seen = []

    def slow(n):
        if n.params.get("uri") == "first":
            entered.set()
            release.wait(10)
        seen.append(n.method)

    dispatcher.add_callback(slow)
    dispatcher.put(note("notifications/resources/updated", uri="first"))
    assert entered.wait(5)
    dispatcher.put(note("notifications/tools/list_changed"))
    for i in range(100):
        dispatcher.put(note("notifications/resources/updated", uri=str(i)))
    assert dispatcher.queued == 11  # the bound, and the change set aside
    release.set()
    assert wait_until(lambda: len(seen) == 12)
    dispatcher.close()
    # It goes out first, as it came first; only updates were dropped.
    assert seen[:2] == ["notifications/resources/updated", "notifications/tools/list_changed"]
    assert dispatcher.drops.notifications == 90


# -- a call's inbox ----------------------------------------------------------------------


def test_a_slow_progress_callback_keeps_the_inbox_bounded_and_gets_the_latest(engine, caplog):
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    flood = 20 * INBOX_MAX_PROGRESS
    with caplog.at_level(logging.WARNING, logger="mcp_sync"):
        # The caller is not reading yet: as slow as a caller can be.
        for value in range(1, flood + 1):
            transport.sink.deliver(progress(pending.id, value))
        respond(transport, pending.id, {"done": True})
        assert pending.inbox.qsize() <= INBOX_MAX_PROGRESS + 1
        seen = []
        response = conn.wait(pending, timeout=5, on_progress=lambda p: seen.append(p["progress"]))
    assert response["result"] == {"done": True}
    assert seen == list(range(flood - INBOX_MAX_PROGRESS + 1, flood + 1))  # the latest, in order
    assert conn.drops.progress == flood - INBOX_MAX_PROGRESS
    records = [r for r in caplog.records if r.name.startswith("mcp_sync")]
    assert len(records) == 2, [r.getMessage() for r in records]  # started dropping; how many


def test_the_reader_lets_the_caller_run_once_a_lane_is_half_full(engine, monkeypatch):
    # Within one turn of the GIL the reader can route more events than a
    # lane holds, although the caller takes them faster on average: from
    # half the bound on, it lets go of the GIL after each event (a
    # `time.sleep(0)`), never waiting for the caller, never dropping.
    import mcp_sync.delivery as connection

    yields = []
    monkeypatch.setattr(connection.time, "sleep", lambda seconds: yields.append(seconds))
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    for value in range(1, INBOX_MAX_PROGRESS // 2):
        transport.sink.deliver(progress(pending.id, value))
    assert yields == []  # below half: the reader carries on
    for value in range(INBOX_MAX_PROGRESS // 2, INBOX_MAX_PROGRESS + 1):
        transport.sink.deliver(progress(pending.id, value))
    assert yields == [0] * (INBOX_MAX_PROGRESS // 2 + 1)
    monkeypatch.undo()
    respond(transport, pending.id, {"done": True})
    seen = []
    conn.wait(pending, timeout=5, on_progress=lambda p: seen.append(p["progress"]))
    assert seen == list(range(1, INBOX_MAX_PROGRESS + 1)) and conn.drops.progress == 0


def test_log_messages_of_a_call_are_bounded_oldest_first(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    flood = 10 * INBOX_MAX_LOGS
    for i in range(flood):
        transport.sink.deliver(note("notifications/message", level="info", data=i), related_to=pending.id)
    respond(transport, pending.id)
    assert pending.inbox.qsize() <= INBOX_MAX_LOGS + 1
    seen = []
    conn.wait(pending, timeout=5, on_log=lambda p: seen.append(p["data"]))
    assert seen == list(range(flood - INBOX_MAX_LOGS, flood))
    assert conn.drops.logs == flood - INBOX_MAX_LOGS


def test_the_inbox_keeps_arrival_order_across_kinds(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {}, progress=True)
    events = []
    transport.sink.deliver(note("notifications/message", level="info", data="a"), related_to=pending.id)
    transport.sink.deliver(progress(pending.id, 1))
    transport.sink.deliver({"jsonrpc": "2.0", "id": "q", "method": "elicitation/create", "params": {}},
                           related_to=pending.id)
    transport.sink.deliver(note("notifications/message", level="info", data="b"), related_to=pending.id)
    transport.sink.deliver(progress(pending.id, 2))
    respond(transport, pending.id, {"done": True})

    def on_request(message):
        events.append(("request", message["id"]))
        conn.respond(message["id"], result={"action": "decline"})

    response = conn.wait(pending, timeout=5, on_progress=lambda p: events.append(("progress", p["progress"])),
                         on_log=lambda p: events.append(("log", p["data"])), on_server_request=on_request)
    assert response["result"] == {"done": True}
    assert events == [("log", "a"), ("progress", 1), ("request", "q"), ("log", "b"), ("progress", 2)]


@pytest.mark.parametrize("mix", [(PROGRESS, PROGRESS, LOG, SERVER_REQUEST), (PROGRESS, PROGRESS, PROGRESS, SERVER_REQUEST)],
                         ids=["with-logs", "progress-and-requests"])
@pytest.mark.parametrize("seed", range(20))
def test_the_inbox_keeps_order_and_every_response_while_a_producer_races_the_caller(seed, mix):
    """A producer thread puts a random mix while the caller takes: what the
    caller gets is in arrival order, only progress and logs are ever
    missing, and the latest progress and the response always arrive.
    (Without logs, the caller takes the progress lane whole when nothing
    is held before it.)"""
    rng = random.Random(seed)
    bound = rng.choice([2, 8, 10**6])
    inbox = Inbox(1, "m", max_requests=10**6, max_progress=bound, max_logs=bound)
    kinds = [rng.choice(mix) for _ in range(3000)] + [RESPONSE]
    sent = list(enumerate(kinds))

    def produce():
        for number, kind in sent:
            inbox.put(kind, number)
            if number % rng.choice([7, 50, 500]) == 0:
                time.sleep(0.0005)  # let the caller catch up now and then: tokens go stale

    producer = threading.Thread(target=produce)
    producer.start()
    got = []
    while not got or got[-1][0] is not RESPONSE:
        got.append(inbox.get(timeout=10))
    producer.join()
    numbers = [number for _, number in got]
    assert numbers == sorted(numbers)
    assert all(kinds[number] is kind for kind, number in got)
    firm = [number for number, kind in sent if kind in (SERVER_REQUEST, RESPONSE)]
    assert [number for kind, number in got if kind in (SERVER_REQUEST, RESPONSE)] == firm
    assert max(n for k, n in got if k is PROGRESS) == max(n for n, k in sent if k is PROGRESS)
    if inbox.max_progress == 10**6:
        assert numbers == list(range(len(sent)))  # nothing dropped when nothing overflows
    with pytest.raises(queue.Empty):
        inbox.get_nowait()


@pytest.mark.parametrize("kind", [PROGRESS, LOG])
def test_a_request_queued_while_the_caller_takes_the_lanes_keeps_its_place(kind):
    """The reader queues a server request, then a progress or log event, in
    the moment between the caller's last look at the queue and its pass
    over the lanes: the caller still gets the request before that event
    (the lanes are taken only up to the sequence number seen before the
    look). Made deterministic by putting both from inside that moment."""
    inbox = Inbox(1, "m", max_requests=10)
    inbox.put(kind, "first")
    lanes = inbox._lanes
    real = lanes.lock
    armed = [True]

    class LockWithAMoment:
        def __enter__(self):
            frame = sys._getframe(1)
            if armed[0] and frame.f_code.co_name == "_next_in_order" and "ready" in frame.f_locals:
                armed[0] = False  # the pass over the lanes, once
                inbox.put(SERVER_REQUEST, "request")
                inbox.put(kind, "after the request")
            return real.__enter__()

        def __exit__(self, *exc):
            return real.__exit__(*exc)

    lanes.lock = LockWithAMoment()
    got = [inbox.get(timeout=5)[1] for _ in range(3)]
    assert not armed[0]  # the moment came
    assert got == ["first", "request", "after the request"]


def test_a_waiting_caller_is_woken_by_progress_alone():
    """No response comes: each progress event must still wake the caller at
    once, also after tokens went stale (events taken before their token)."""
    inbox = Inbox(1, "m")

    def produce(first, count, pause):
        time.sleep(pause)  # mostly after the caller blocked (the test holds either way)
        for k in range(count):
            inbox.put(PROGRESS if k % 2 else LOG, first + k)

    for i in range(300):
        burst = 1 + i % 3
        producer = threading.Thread(target=produce, args=(10 * i, burst, 0.001 * (i % 2)))
        producer.start()
        for k in range(burst):
            assert inbox.get(timeout=2)[1] == 10 * i + k
        producer.join()
    assert inbox.qsize() == 0


def test_server_requests_beyond_the_bound_are_refused_never_dropped_silently(engine):
    conn, transport = engine
    limit = 3
    conn2 = Connection(transport, new_id_counter(), max_server_requests=limit)
    conn.close()  # the fixture's engine; this one has a small bound
    conn2.start()
    pending = conn2.send_request("tools/call", {})
    transport.next_sent()
    for i in range(limit + 5):
        transport.sink.deliver({"jsonrpc": "2.0", "id": f"r{i}", "method": "elicitation/create", "params": {}},
                               related_to=pending.id)
    refusals = [transport.next_sent() for _ in range(5)]
    assert sorted(r["id"] for r in refusals) == [f"r{i}" for i in range(limit, limit + 5)]
    assert all(r["error"]["code"] == -32603 for r in refusals)
    respond(transport, pending.id, {"done": True})
    handled = []

    def on_request(message):
        handled.append(message["id"])
        conn2.respond(message["id"], result={"action": "decline"})

    assert conn2.wait(pending, timeout=5, on_server_request=on_request)["result"] == {"done": True}
    assert handled == [f"r{i}" for i in range(limit)]
    assert conn2.drops.refused_requests == 5
    conn2.close()


def test_a_plain_response_costs_one_queue_item(engine):
    conn, transport = engine
    pending = conn.send_request("tools/call", {})
    respond(transport, pending.id, {"x": 1})
    assert pending.inbox.qsize() == 1
    assert conn.wait(pending, timeout=5)["result"] == {"x": 1}
    assert conn.drops.total == 0


def test_log_messages_for_no_call_are_bounded_and_counted():
    transport = PlayedTransport()
    release = threading.Event()
    conn = Connection(transport, new_id_counter(), on_log=lambda params: release.wait(10))
    conn.start()
    try:
        for i in range(5000):
            transport.sink.deliver(note("notifications/message", level="info", data=i))
        assert conn.drops.logs >= 5000 - 257  # at most the bound waits, one runs
    finally:
        release.set()
        conn.close()


def test_the_reader_lets_the_log_handler_run_once_its_queue_is_half_full(monkeypatch):
    # As for a call's progress: from half the bound on, the reader lets go
    # of the GIL after each message, never waiting for the handler.
    import mcp_sync.engine_threads as engine_threads

    yields = []
    transport = PlayedTransport()
    release = threading.Event()
    conn = Connection(transport, new_id_counter(), on_log=lambda params: release.wait(10))
    conn.start()
    try:
        monkeypatch.setattr(engine_threads.time, "sleep", lambda seconds: yields.append(seconds))
        half = MAX_QUEUED_LOGS // 2
        for i in range(half - 1):  # one runs (held), the rest wait: below half
            transport.sink.deliver(note("notifications/message", level="info", data=i))
        assert yields == []
        for i in range(10):
            transport.sink.deliver(note("notifications/message", level="info", data=i))
        assert yields == [0] * 10
        monkeypatch.undo()
    finally:
        release.set()
        conn.close()
    assert conn.drops.logs == 0


def test_the_drop_counter_is_shared_across_connections():
    drops = Drops()
    for _ in range(2):
        transport = PlayedTransport()
        conn = Connection(transport, new_id_counter(), drops=drops)
        conn.start()
        pending = conn.send_request("tools/call", {}, progress=True)
        for value in range(INBOX_MAX_PROGRESS + 10):
            transport.sink.deliver(progress(pending.id, value))
        conn.close()
    assert drops.progress == 20 and drops.total == 20


# -- the whole client under a flood, in a process of its own ------------------------------

CLIENT = r"""
import json, logging, os, resource, sys, time
import mcp_sync

flood, count, mode, limit_mb = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])

class Count(logging.Handler):
    warnings = []
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            Count.warnings.append(record.getMessage()[:100])

logging.getLogger("mcp_sync").addHandler(Count())

def peak_mb():
    # VmHWM is this process image's own high-water mark: ru_maxrss keeps the
    # forking parent's across exec on Linux (a big test runner would count).
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

class TooBig(Exception):
    pass

last = {"progress": None, "calls": 0}

def on_progress(p):
    # A slow caller: a millisecond per progress, while the reader reads on.
    last["progress"] = p.progress
    last["calls"] += 1
    if last["calls"] % 200 == 0 and peak_mb() > limit_mb:
        raise TooBig(peak_mb())
    time.sleep(0.001)

def on_note(n):
    time.sleep(0.001)  # a slow listener

out = {"mode": mode}
client = mcp_sync.connect([sys.executable, flood], timeout=120)
started = time.monotonic()
if mode == "slow_listener":
    client.on_notification(on_note)
try:
    result = client.call_tool("flood", {"count": count, "pad": 500}, progress=on_progress)
    out["text"] = result.text
except TooBig as exc:
    out["too_big"] = exc.args[0]
out["seconds"] = round(time.monotonic() - started, 2)
out["last_progress"] = last["progress"]
out["progress_calls"] = last["calls"]
out["peak_mb"] = round(peak_mb(), 1)
out["warnings"] = len(Count.warnings)
out["first_warnings"] = Count.warnings[:20]
out["drops"] = client.dropped.as_dict()
out["unlistened"] = getattr(client._supervisor.dispatcher, "unlistened", None)
if "text" in out:
    out["after"] = client.call_tool("flood", {"count": 3}).text  # still usable
print(json.dumps(out, default=str), flush=True)
os._exit(0)  # the test is about memory; an unbounded queue would take long to close
"""


def last_progress_value(count, kinds=("progress", "notify", "log")):
    """What the flood server's last progress notification says."""
    return max(i for i in range(1, count + 1) if kinds[i % len(kinds)] == "progress")


@pytest.mark.parametrize("mode", ["unlistened", "slow_listener"])
def test_peak_memory_stays_bounded_while_a_server_floods_during_a_call(mode):
    proc = subprocess.run([sys.executable, "-c", CLIENT, FLOOD, str(FLOOD_COUNT), mode, str(RSS_LIMIT_MB)],
                          capture_output=True, text=True, timeout=120 + FLOOD_COUNT / 5000)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "too_big" not in out, out
    assert out["peak_mb"] < RSS_LIMIT_MB, out
    assert out["text"] == str(FLOOD_COUNT) and out["after"] == "3", out
    assert out["last_progress"] == last_progress_value(FLOOD_COUNT), out
    if mode == "unlistened" and out["unlistened"] is not None:
        assert out["unlistened"] == (FLOOD_COUNT + 2) // 3, out  # every update counted, none queued
    # What the slow caller and listener could not take is counted on the client.
    assert out["drops"]["progress"] > 0, out
    if mode == "slow_listener":
        assert out["drops"]["notifications"] > 0, out
    # Once per burst, not once per message: each source warns when a burst
    # starts and when it ends, and a burst lasts at least a second.
    assert out["warnings"] <= 6 + 2 * out["seconds"], out


def test_an_unexpected_failure_on_one_notification_does_not_end_the_dispatcher(monkeypatch):
    from mcp_sync import notifications

    real = notifications.Notification.from_wire.__func__

    def from_wire(cls, message):
        if message.get("params", {}).get("poison"):
            raise RecursionError("a failure nobody foresaw")
        return real(cls, message)

    monkeypatch.setattr(notifications.Notification, "from_wire", classmethod(from_wire))
    dispatcher = notifications.Dispatcher()
    seen: list[str] = []
    got = threading.Event()

    def on_note(note):
        seen.append(note.params.get("level"))
        got.set()

    dispatcher.add_callback(on_note)
    try:
        dispatcher.put({"jsonrpc": "2.0", "method": "notifications/message", "params": {"poison": True}})
        dispatcher.put({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
        assert got.wait(5), "the dispatcher thread stopped"
        assert seen == ["info"]
    finally:
        dispatcher.close()


class _StalledServer(PlayedTransport):
    """A server that floods and reads none of the client's answers until
    `reading` is set: every write of an answer blocks until then."""

    def __init__(self):
        super().__init__()
        self.reading = threading.Event()

    def send(self, message, headers=None):
        if "method" not in message:  # an answer (the client's own requests still go)
            self.reading.wait(30)
        super().send(message, headers)


def test_a_flood_from_a_server_that_does_not_read_is_answered_once_each_within_the_bounds():
    # 5,000 roots/list while the server reads nothing: the reader never
    # waits (it delivers them all), the answers queued leave room for
    # those of the handlers still running (then requests are refused: a
    # refusal has a lane of its own), and once the server reads, each
    # request has exactly one answer. (Before: the refusals beyond half the queue were dropped, and
    # the server would wait for them for ever.)
    count = 5000
    transport = _StalledServer()
    conn = Connection(transport, new_id_counter(), max_server_requests=4)
    conn.start()
    try:
        for i in range(count):
            transport.sink.deliver({"jsonrpc": "2.0", "id": f"r{i}", "method": "roots/list"})
        transport.reading.set()
        answers = [transport.next_sent() for _ in range(count)]
        assert sorted(a["id"] for a in answers) == sorted(f"r{i}" for i in range(count))  # each once
        assert transport.sent.empty()
        # (No handler here: those the pool takes are -32601, the rest refused for load.)
        assert {a["error"]["message"] for a in answers} == {"too many server requests in progress",
                                                            "Method not found: roots/list"}
        assert sum(a["error"]["message"] != "too many server requests in progress" for a in answers) <= 1024
    finally:
        transport.reading.set()
        conn.close()
