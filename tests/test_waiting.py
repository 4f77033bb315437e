"""Interruptible waits: sliced on the main thread only, bounded by their
deadline, ended by their event."""

import threading

from mcp_sync.waiting import MAIN_THREAD_SLICE, acquire_until, on_main_thread, slice_of, wait_for_event


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
