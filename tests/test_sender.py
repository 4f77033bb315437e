"""`Sender`: the writer of what no caller waits on."""

from __future__ import annotations

import threading
import time

import pytest

from mcp_sync.sender import SMALL_COST, Sender
from tests.helpers import wait_until


def _blocking_writer(block: str):
    """A write that hangs on a message whose method is `block` (until
    `release`), and records the others."""
    written: list[str] = []
    release, hung = threading.Event(), threading.Event()

    def write(message):
        if message["method"] == block:
            hung.set()
            release.wait(30)
        written.append(message["method"])

    return write, written, release, hung


def test_a_message_left_unanswered_holds_up_no_other_with_parallel_writers():
    # Over HTTP each message is a POST of its own: one the server left
    # unanswered held the only writer, and the answers queued behind it
    # waited up to 30 s (their callers' calls timed out).
    write, written, release, hung = _blocking_writer("stuck")
    sender = Sender(write, writers=3)
    try:
        sender.put({"method": "stuck"})
        assert hung.wait(10)
        for i in range(5):
            sender.put({"method": f"answer-{i}"})
        assert wait_until(lambda: len(written) == 5, timeout=10), written
        assert sender.flush(0.01) is False  # the stuck one is still being written
    finally:
        release.set()
        assert sender.flush(10)
        assert sender.close(timeout=10)
    assert written[-1] == "stuck"


def test_no_more_threads_than_writers_and_none_while_one_waits():
    write, written, release, hung = _blocking_writer("stuck")
    before = set(threading.enumerate())
    sender = Sender(write, writers=2, name="test-sender")
    try:
        for _ in range(4):
            sender.put({"method": "stuck"})
        assert wait_until(lambda: len([t for t in set(threading.enumerate()) - before
                                       if t.name.startswith("test-sender")]) == 2, timeout=10)
        assert not written
    finally:
        release.set()
        assert sender.flush(10) and written == ["stuck"] * 4
        assert sender.close(timeout=10)
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]
    # One message at a time: one thread is enough.
    sender = Sender(lambda message: None, writers=4, name="test-sender")
    for _ in range(20):
        sender.put({"method": "x"})
        assert sender.flush(10)
    assert len([t for t in threading.enumerate() if t.name.startswith("test-sender")]) == 1
    assert sender.close(timeout=10)


def test_one_writer_keeps_the_order_and_waits_behind_a_stuck_message():
    write, written, release, hung = _blocking_writer("stuck")
    sender = Sender(write)
    try:
        sender.put({"method": "first"})
        sender.put({"method": "stuck"})
        sender.put({"method": "last"})
        assert hung.wait(10)
        assert written == ["first"]  # a stream's messages go in order: "last" waits
    finally:
        release.set()
        assert sender.flush(10)
        assert sender.close(timeout=10)
    assert written == ["first", "stuck", "last"]


@pytest.mark.parametrize("writers", [0, -1, 1.5, True, "2"])
def test_writers_must_be_a_positive_integer(writers):
    with pytest.raises(ValueError, match="writers"):
        Sender(lambda message: None, writers=writers)


def test_the_http_transport_writes_in_parallel_and_stdio_in_order():
    import sys

    import mcp_sync
    from mcp_sync.testing import HTTPServer, demo_server

    with HTTPServer(demo_server()) as httpd, mcp_sync.connect(httpd.url) as client:
        assert client._conn._threads._sender._writers == 4
    with mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing"]) as client:
        assert client._conn._threads._sender._writers == 1


@pytest.mark.parametrize("stuck_by", ["a message", "an earlier deadline's answer"])
def test_an_answer_due_at_a_deadline_is_not_held_up_by_a_stuck_write(stuck_by):
    # A handler that overran its `handler_timeout` is answered with an error
    # by a factory the sender runs at that deadline. With parallel writers
    # (HTTP), no thread was free to run it while every one was writing: the
    # answer waited for the stuck POST to end (up to the request timeout),
    # though `writers` allowed another thread.
    write, written, release, hung = _blocking_writer("stuck")
    late = threading.Event()

    def recording(message):
        write(message)
        if message["method"] == "late":
            late.set()

    sender = Sender(recording, writers=3)
    try:
        if stuck_by == "a message":
            sender.put({"method": "stuck"})
        else:
            sender.at(time.monotonic(), "first", lambda: {"method": "stuck"})
        assert hung.wait(10)
        sender.at(time.monotonic() + 0.05, "second", lambda: {"method": "late"})
        assert late.wait(10), "the due answer waited behind the stuck write"
        assert "stuck" not in written  # (still being written)
    finally:
        release.set()
        assert sender.flush(10)
        assert sender.close(timeout=10)
    assert written == ["late", "stuck"]


def test_one_writer_sends_a_due_answer_in_order_behind_what_it_writes():
    # A stream (stdio) has one writer: its messages go in order, so a due
    # answer waits behind a stuck write there, and no second thread starts.
    write, written, release, hung = _blocking_writer("stuck")
    before = set(threading.enumerate())
    sender = Sender(write, name="test-sender-one")
    try:
        sender.put({"method": "stuck"})
        assert hung.wait(10)
        sender.at(time.monotonic(), "due", lambda: {"method": "late"})
        assert len([t for t in set(threading.enumerate()) - before if t.name.startswith("test-sender-one")]) == 1
    finally:
        release.set()
        assert wait_until(lambda: written == ["stuck", "late"], timeout=10), written
        assert sender.close(timeout=10)


# -- the lanes: owed answers and refusals are bounded apart from spare messages -----------


def _gated_writer():
    """A write that blocks until `gate` is set (a peer not reading)."""
    gate, written = threading.Event(), []

    def write(message):
        gate.wait(10)
        written.append(message["id"])

    return gate, written, write


def test_each_lane_has_its_own_bound_and_spare_messages_never_take_an_answers_room():
    gate, written, write = _gated_writer()
    # Room for 20 refusals with ids of 4 characters, or 2 with ids of 20,000.
    sender = Sender(write, max_queued=8, max_small_bytes=20 * (SMALL_COST + 4))
    try:
        spare = [sender.put({"id": f"c{i}"}, spare=True) for i in range(7)]
        # At most 4 wait (half of 8), one more once the blocked write took the first.
        assert spare[:4] == [True] * 4 and spare[-1] is False
        answers = [sender.put({"id": f"a{i}"}) for i in range(9)]
        assert answers == [True] * 8 + [False]  # the spare ones took none of the 8
        assert sender.room_for_answers == 0
        refusals = [sender.put({"id": f"r{i:03}"}, small=True) for i in range(21)]
        assert refusals == [True] * 20 + [False]
        assert sender.dropped == spare.count(False) + 2
        gate.set()
        assert sender.flush(5) and sender.room_for_answers == 8
        assert [i for i in written if i[0] == "a"] == [f"a{i}" for i in range(8)]
        assert [i for i in written if i[0] == "r"] == [f"r{i:03}" for i in range(20)]
        assert written.index("a0") < written.index("r000")  # one queue: the order they came in
    finally:
        gate.set()
        sender.close(timeout=5)


def test_refusals_are_bounded_by_their_bytes_so_a_server_with_long_ids_cannot_fill_memory():
    gate, written, write = _gated_writer()
    sender = Sender(write, max_queued=8, max_small_bytes=20 * (SMALL_COST + 4))
    try:
        sender.put({"id": "a0"})
        assert wait_until(lambda: sender.room_for_answers == 8)  # the writer holds it, blocked
        # By count, 20 would fit; by bytes, two refusals with ids of 4,000 characters do.
        long_id = "x" * 4000
        assert [sender.put({"id": long_id + str(i)}, small=True) for i in range(3)] == [True, True, False]
        assert sender.put({"id": "r1"}, small=True)  # a short one still fits
    finally:
        gate.set()
        sender.close(timeout=5)
