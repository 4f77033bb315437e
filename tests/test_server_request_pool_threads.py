"""`HandlerPool.close()` joins every worker that may still run, including
one that has already taken itself off the pool's roll of workers (it closes
down, or retires for idleness) but has not ended yet.

Each test holds such a worker between leaving the roll and ending (a
patched `_work` that waits a moment after the real one returns), which is
the window a loaded machine opens by descheduling the thread there."""

import threading

from mcp_sync.server_request_pool import HandlerPool
from tests.helpers import NoThread, wait_until


def _held_after_work(pool: HandlerPool, hold: float) -> list[threading.Thread]:
    """Every worker of `pool` waits up to `hold` seconds after leaving its
    work loop (after it took itself off the roll); returns those that did."""
    work = pool._work
    leaving: list[threading.Thread] = []

    def work_then_linger(me: threading.Thread) -> None:
        try:
            work(me)
        finally:
            leaving.append(me)
            threading.Event().wait(hold)  # widens the window; nothing waits for it to pass

    pool._work = work_then_linger  # type: ignore[method-assign]
    return leaving


def test_a_second_close_joins_a_worker_the_first_close_did_not_wait_for():
    # Connection.close() closes its pools with timeout 0 first and waits for
    # them later: the second close() must join the worker the first woke.
    pool = HandlerPool(max_workers=1, max_pending=4, name="test-pool-close")
    leaving = _held_after_work(pool, 0.5)
    ran = threading.Event()
    assert pool.submit(ran.set)
    assert ran.wait(5)
    pool.close(timeout=0)
    assert wait_until(lambda: bool(leaving))  # off the roll, not ended
    assert pool.close(timeout=5) is True
    assert len(leaving) == 1
    assert not leaving[0].is_alive(), "a worker outlived close()"


def test_close_joins_a_worker_that_retired_for_idleness():
    pool = HandlerPool(max_workers=1, max_pending=4, idle_seconds=0.05, name="test-pool-retire")
    leaving = _held_after_work(pool, 0.5)
    assert pool.submit(lambda: None)
    assert wait_until(lambda: bool(leaving))  # it retired: off the roll, not ended
    assert pool.threads == 0
    assert pool.close(timeout=5) is True
    assert not leaving[0].is_alive(), "a retired worker outlived close()"


def test_the_roll_of_leaving_workers_stays_bounded():
    # Workers that retire and are replaced over and over leave no trail.
    pool = HandlerPool(max_workers=2, max_pending=4, idle_seconds=0.01, name="test-pool-bound")
    for _ in range(30):
        done = threading.Event()
        assert pool.submit(done.set)
        assert done.wait(5)
        assert wait_until(lambda: pool.threads == 0)
        for thread in list(pool._leaving):
            thread.join(5)
    # Each one that left was let go once it had ended: only the last is kept.
    assert len(pool._leaving) == 1
    assert pool.close(timeout=5) is True


def test_a_worker_that_cannot_be_replaced_leaves_nothing_half_made(monkeypatch, caplog):
    # A job that ends its worker (SystemExit) with jobs still queued gets a
    # new worker; when no thread can be had, the pool stays consistent and
    # the next submit's worker takes the queue.
    import mcp_sync.server_request_pool as pool_module

    real_thread = threading.Thread
    pool = HandlerPool(max_workers=1, max_pending=4, name="test-pool-replace")
    gate, ran, ended_by = threading.Event(), [], []
    # The SystemExit ends its thread on purpose: recorded here, not left to
    # surface as an unhandled thread exception.
    monkeypatch.setattr(threading, "excepthook", lambda args: ended_by.append(args.exc_type))

    def end_the_worker() -> None:
        gate.wait(5)
        monkeypatch.setattr(pool_module.threading, "Thread", NoThread)
        raise SystemExit

    assert pool.submit(end_the_worker)
    assert pool.submit(lambda: ran.append("queued"))
    gate.set()
    assert wait_until(lambda: "no thread to replace" in caplog.text)
    assert pool.threads == 0 and wait_until(lambda: ended_by == [SystemExit])
    monkeypatch.setattr(pool_module.threading, "Thread", real_thread)
    assert pool.submit(lambda: ran.append("next"))
    assert wait_until(lambda: ran == ["queued", "next"])
    assert pool.close(timeout=5) is True
