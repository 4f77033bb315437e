"""`HandlerPool.flush()`: what close() waits for before it drops the queue
(the log messages a server sent just before the end)."""

import threading
import time

from mcp_sync.server_request_pool import HandlerPool
from tests.helpers import SLACK


def test_flush_waits_for_queued_and_running_jobs():
    pool = HandlerPool(max_workers=1, max_pending=8, name="test-flush")
    release, done = threading.Event(), []
    pool.submit(lambda: (release.wait(5), done.append(0)))
    for n in range(1, 4):
        pool.submit(lambda n=n: done.append(n))
    threading.Timer(0.05, release.set).start()
    assert pool.flush(5) is True
    assert done == [0, 1, 2, 3] and pool.active == 0
    pool.close(timeout=1)


def test_flush_gives_up_at_its_timeout():
    pool = HandlerPool(max_workers=1, max_pending=8, name="test-flush")
    release = threading.Event()
    pool.submit(lambda: release.wait(5))
    started = time.monotonic()
    assert pool.flush(0.1) is False
    assert 0.1 <= time.monotonic() - started < 0.1 + SLACK  # not the job's 5 s
    release.set()
    assert pool.close(timeout=5)


def test_flush_from_a_job_of_the_pool_does_not_wait_for_itself():
    pool = HandlerPool(max_workers=1, max_pending=8, name="test-flush")
    answers = []
    finished = threading.Event()

    def job():
        started = time.monotonic()
        answers.append((pool.flush(5), time.monotonic() - started))
        finished.set()

    pool.submit(job)
    assert finished.wait(5)
    flushed, took = answers[0]
    assert flushed is False and took < SLACK  # at once, not at the flush's 5 s
    pool.close(timeout=5)
