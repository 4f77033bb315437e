"""The metrics recorder from many threads: every sample counted exactly
once, snapshots consistent while threads record, and the intake queue
bounded whatever the scheduling (see mcp_sync/metrics.py)."""

import threading

import pytest

from mcp_sync import metrics as metrics_module
from mcp_sync.metrics import OTHER, OUTCOMES, Metrics


def _hammer(recorder, threads, per_thread, methods, *, start=None):
    """`threads` threads, each recording `per_thread` samples spread over
    `methods` and every outcome; returns what each method should count."""
    barrier = threading.Barrier(threads)

    def work(n):
        barrier.wait()
        for i in range(per_thread):
            recorder.record(methods[(n + i) % len(methods)], OUTCOMES[i % len(OUTCOMES)], (n * per_thread + i) * 1e-6)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    if start is not None:
        start()
    for worker in workers:
        worker.join()
    expected = {method: 0 for method in methods}
    for n in range(threads):
        for i in range(per_thread):
            expected[methods[(n + i) % len(methods)]] += 1
    return expected


def test_every_sample_is_counted_once_from_32_threads():
    recorder = Metrics()
    expected = _hammer(recorder, 32, 2000, ["tools/call", "tools/list", "ping"])
    stats = recorder.snapshot()
    assert {name: s.count for name, s in stats.requests.items()} == expected
    assert stats.requests_total == 32 * 2000
    for s in stats.requests.values():
        assert sum(s.outcomes.values()) == s.count
    # The longest sample is exact.
    assert max(s.max for s in stats.requests.values()) == pytest.approx((32 * 2000 - 1) * 1e-6)
    assert stats.timeouts == sum(1 for n in range(32) for i in range(2000) if OUTCOMES[i % 5] == "timeout")


def test_snapshots_taken_while_threads_record_are_consistent():
    recorder = Metrics()
    seen = []
    done = threading.Event()
    failures = []

    def watch():
        last = 0
        while not done.is_set():
            try:
                stats = recorder.snapshot()
            except Exception as exc:  # noqa: BLE001 - any error is the failure
                failures.append(exc)
                return
            for s in stats.requests.values():
                # The percentiles come from the same copied counts as `count`.
                assert s.count > 0 and s.p50 is not None and s.p50 <= s.p99 <= s.max * 1.0000001
                assert sum(s.outcomes.values()) == s.count  # a snapshot folds whole records
            assert stats.requests_total >= last  # counts never go back
            last = stats.requests_total
            seen.append(last)

    watcher = threading.Thread(target=watch)
    expected = _hammer(recorder, 16, 3000, ["a", "b"], start=watcher.start)
    done.set()
    watcher.join()
    assert not failures
    assert len(seen) > 1
    assert {name: s.count for name, s in recorder.snapshot().requests.items()} == expected


def test_the_intake_stays_bounded_while_32_threads_record():
    recorder = Metrics()
    sizes = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            sizes.append(len(recorder._intake))

    watcher = threading.Thread(target=watch)
    expected = _hammer(recorder, 32, 3000, ["tools/call"], start=watcher.start)
    done.set()
    watcher.join()
    assert max(sizes) <= 4 * metrics_module._FOLD_AT + 32
    assert recorder.snapshot().requests["tools/call"].count == expected["tools/call"] == 32 * 3000
    assert len(recorder._intake) == 0  # the snapshot folded it


def test_a_fold_in_progress_elsewhere_lets_callers_carry_on_up_to_the_bound():
    recorder = Metrics()
    recorder._lock.acquire()  # as a thread folding (or snapshotting) would hold it
    try:
        for i in range(4 * metrics_module._FOLD_AT - 1):
            recorder.finished("a", "ok", 0.001)  # never waits below the bound
        assert len(recorder._intake) == 4 * metrics_module._FOLD_AT - 1
        blocked = threading.Thread(target=recorder.finished, args=("a", "ok", 0.001))
        blocked.start()
        blocked.join(0.2)
        assert blocked.is_alive()  # at the bound it waits for the fold
    finally:
        recorder._lock.release()
    blocked.join(5)
    assert not blocked.is_alive()
    assert recorder.snapshot().requests["a"].count == 4 * metrics_module._FOLD_AT


def test_many_methods_from_one_thread_are_each_counted():
    recorder = Metrics()
    methods = [f"m{i}" for i in range(40)]
    for method in methods:
        recorder.record(method, "ok", 0.001)
        recorder.record(method, "error", 0.002)
    stats = recorder.snapshot()
    assert {name: s.count for name, s in stats.requests.items()} == {method: 2 for method in methods}
    assert all(s.outcomes["ok"] == 1 and s.outcomes["error"] == 1 for s in stats.requests.values())


def test_max_methods_holds_with_many_threads():
    recorder = Metrics(max_methods=10)
    methods = [f"m{i}" for i in range(40)]
    expected = _hammer(recorder, 8, 400, methods)
    stats = recorder.snapshot()
    own = [name for name in stats.requests if name != OTHER]
    assert len(own) == 10
    assert stats.requests_total == sum(expected.values()) == 8 * 400
    assert stats.requests[OTHER].count == sum(expected[name] for name in methods if name not in own)


def test_reset_while_threads_record_loses_nothing_recorded_after_it():
    recorder = Metrics()
    _hammer(recorder, 8, 2000, ["a"], start=recorder.reset)
    assert recorder.snapshot().requests_total <= 8 * 2000
    recorder.reset()
    assert recorder.snapshot().requests == {}
    expected = _hammer(recorder, 8, 500, ["a", "b"])
    assert {name: s.count for name, s in recorder.snapshot().requests.items()} == expected


def test_a_bad_sample_counts_nothing():
    recorder = Metrics()
    with pytest.raises(ValueError):
        recorder.record("a", "no such outcome", 0.1)
    with pytest.raises(ValueError):
        recorder.record("a", "ok", -1.0)
    assert recorder.snapshot().requests == {} and len(recorder._intake) == 0


def test_after_fork_starts_with_an_empty_intake_and_no_counts():
    recorder = Metrics()
    recorder.record("a", "ok", 0.1)
    assert len(recorder._intake) == 1
    recorder.after_fork()
    assert len(recorder._intake) == 0 and recorder.snapshot().requests == {}


def test_a_snapshot_counts_every_request_finished_before_it():
    recorder = Metrics()
    for i in range(10):  # fewer than a fold's worth: all still in the intake
        recorder.finished("a", "ok", 0.004)
    stats = recorder.snapshot().requests["a"]
    assert stats.count == 10 and stats.outcomes["ok"] == 10 and stats.max == 0.004
    assert 0.004 <= stats.p50 <= 0.004 * 1.2


def test_finished_counts_what_record_counts_for_the_engines_arguments():
    checked, unchecked = Metrics(), Metrics()
    samples = [("tools/call", outcome, seconds) for outcome in OUTCOMES
               for seconds in (0.0, 5e-6, 1e-5, 0.0123, 3.0, 1e6)]
    for method, outcome, seconds in samples:
        checked.record(method, outcome, seconds)
        unchecked.finished(method, outcome, seconds)
    assert checked.snapshot().requests == unchecked.snapshot().requests
    assert unchecked.snapshot().requests["tools/call"].count == len(samples)


def test_record_still_refuses_what_finished_trusts():
    recorder = Metrics()
    for outcome, seconds in (("bogus", 0.1), ("ok", -0.1), ("ok", float("nan")), ("ok", float("inf"))):
        with pytest.raises(ValueError):
            recorder.record("a", outcome, seconds)
    assert recorder.snapshot().requests == {}


def test_a_bad_sample_given_to_finished_is_dropped_and_corrupts_nothing():
    recorder = Metrics()
    recorder.finished("a", "bogus", 0.1)
    recorder.finished("a", "ok", -1.0)
    recorder.finished("a", "ok", float("nan"))
    recorder.finished("a", "ok", 0.25)
    stats = recorder.snapshot().requests["a"]
    assert stats.count == 1 and sum(stats.outcomes.values()) == 1
    assert stats.max == 0.25 and stats.p50 == 0.25
