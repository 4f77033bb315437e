"""Interruptible waits: sliced on the main thread only, bounded by their
deadline, ended by their event."""

import threading
import time

from mcp_sync.waiting import (
    MAIN_THREAD_SLICE,
    acquire_until,
    deadline_in,
    earliest,
    expired,
    on_main_thread,
    remaining,
    slice_of,
    wait_for_event,
)

# A week either way of the module's import: passed, and not reached, however
# long the suite runs before these tests.
PAST = time.monotonic() - 7 * 86400.0
FUTURE = time.monotonic() + 7 * 86400.0


def on_another_thread(function):
    got = []
    thread = threading.Thread(target=lambda: got.append(function()))
    thread.start()
    thread.join(10)
    return got[0]


def test_the_main_thread_waits_in_slices_and_others_in_one_piece():
    assert on_main_thread()
    assert slice_of(5.0) == MAIN_THREAD_SLICE and slice_of(None) == MAIN_THREAD_SLICE
    assert slice_of(0.01) == 0.01
    assert on_another_thread(lambda: (slice_of(5.0), slice_of(None))) == (5.0, None)


def test_acquire_until_a_deadline_in_the_past_only_tries():
    lock = threading.Lock()
    assert acquire_until(lock, 0.0) is True
    assert acquire_until(lock, 0.0) is False
    lock.release()


def test_wait_for_event_returns_whether_it_was_set():
    event = threading.Event()
    assert wait_for_event(event, 0.01) is False
    event.set()
    assert wait_for_event(event, 10.0) is True


def test_no_deadline_stays_none_and_never_expires():
    assert deadline_in(None) is None
    assert remaining(None) is None and remaining(None, at_least=0.05) is None
    assert expired(None) is False


def test_a_deadline_in_seconds_is_that_far_from_now():
    before = time.monotonic()
    deadline = deadline_in(60.0)
    assert before + 60.0 <= deadline <= time.monotonic() + 60.0
    assert deadline_in(-1.0) < time.monotonic()


def test_remaining_is_the_time_left_until_a_future_deadline():
    before = time.monotonic()
    left = remaining(FUTURE)
    assert FUTURE - time.monotonic() <= left <= FUTURE - before
    assert left > 86400.0
    assert remaining(FUTURE, at_least=0.05) > 86400.0  # the floor only lifts what is below it


def test_remaining_of_a_passed_deadline_is_its_floor():
    assert remaining(PAST) == 0.0
    assert remaining(PAST, at_least=0.05) == 0.05
    assert remaining(PAST, at_least=0.001) == 0.001
    assert remaining(deadline_in(-5.0)) == 0.0


def test_expired_is_whether_the_deadline_passed():
    assert expired(PAST) is True
    assert expired(time.monotonic()) is True  # reached counts as passed
    assert expired(FUTURE) is False
    assert expired(deadline_in(-1.0)) is True and expired(deadline_in(3600.0)) is False


def test_earliest_picks_the_nearest_deadline_ignoring_none():
    assert earliest() is None
    assert earliest(None, None) is None
    assert earliest(FUTURE, None) == FUTURE and earliest(None, FUTURE) == FUTURE
    assert earliest(FUTURE, PAST) == PAST and earliest(PAST, FUTURE) == PAST
    assert earliest(FUTURE, None, PAST, FUTURE + 1) == PAST


def test_a_deadline_kept_on_a_clock_of_its_own_is_read_against_it():
    reads = []

    def clock():
        reads.append(None)
        return 100.0

    assert remaining(130.0, clock=clock) == 30.0 and remaining(90.0, clock=clock) == 0.0
    assert remaining(90.0, at_least=0.5, clock=clock) == 0.5
    assert expired(100.0, clock=clock) and not expired(100.5, clock=clock)
    reads.clear()
    assert remaining(None, clock=clock) is None and expired(None, clock=clock) is False
    assert reads == []  # no deadline: the clock is not read (a stepping clock would move)
