"""Connection status, its callbacks on the dispatcher thread, the reconnect
policy, and `Dispatcher.call_soon` that runs the callbacks."""

import itertools
import logging
import os
import random
import threading
import time

import attrs
import pytest

import mcp_sync
from mcp_sync.notifications import Dispatcher
from mcp_sync.protocol.methods import SAFE_TO_RETRY
from mcp_sync.options import Reconnect
from mcp_sync.status import MAX_PENDING_CHANGES, Status, StatusMonitor
from tests.helpers import SLACK, reap

C, R, RC, X, F = Status.CONNECTING, Status.READY, Status.RECONNECTING, Status.CLOSED, Status.FAILED

# The state machine, written out independently of the module's table.
ALLOWED = {
    (C, R), (C, F), (C, X),
    (R, RC), (R, F), (R, X),
    (RC, R), (RC, F), (RC, X),
    (F, RC), (F, X),
}


def sync_run(fn):
    fn()


def monitor_at(status: Status) -> StatusMonitor:
    """A monitor brought to `status` through allowed transitions."""
    monitor = StatusMonitor(sync_run)
    path = {C: [], R: [R], RC: [R, RC], F: [F], X: [X]}[status]
    for step in path:
        assert monitor.set(step)
    assert monitor.status is status
    return monitor


# -- Status and the state machine --------------------------------------------------------


def test_status_is_a_string_with_the_documented_values():
    assert [s.value for s in Status] == ["connecting", "ready", "reconnecting", "closed", "failed"]
    assert Status.READY == "ready" and str(Status.READY) == "ready" and f"{Status.FAILED}" == "failed"
    assert Status("reconnecting") is Status.RECONNECTING


@pytest.mark.parametrize("old,new", list(itertools.product(Status, Status)))
def test_set_accepts_exactly_the_drawn_transitions(old, new):
    monitor = monitor_at(old)
    before = monitor.last_change
    moved = monitor.set(new)
    assert moved is ((old, new) in ALLOWED)
    assert monitor.status is (new if moved else old)
    if not moved:  # a refused or no-op transition leaves no trace
        assert monitor.last_change is before


def test_closed_is_final_and_a_late_ready_loses_the_race():
    monitor = monitor_at(RC)
    assert monitor.set(X)
    assert not monitor.set(R)  # a reconnect finishing after close() learns it here
    assert monitor.status is X


def test_set_checks_its_arguments():
    monitor = StatusMonitor(sync_run)
    with pytest.raises(ValueError):
        monitor.set("sleeping")
    with pytest.raises(TypeError):
        monitor.set(R, cause=RuntimeError("not an McpError"))
    assert monitor.status is C
    with pytest.raises(TypeError):
        StatusMonitor("not callable")
    with pytest.raises(TypeError):
        monitor.on_status(42)


def test_a_change_carries_old_new_cause_and_wall_clock_time():
    monitor = monitor_at(R)
    cause = mcp_sync.ServerExited("server exited", returncode=1, stderr_tail=[])
    before = time.time()
    assert monitor.set("reconnecting", cause=cause)
    change = monitor.last_change
    assert (change.old, change.new, change.cause) == (R, RC, cause)
    assert before <= change.at <= time.time()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        change.new = X


# -- callbacks -----------------------------------------------------------------------------


def test_callbacks_run_on_the_dispatcher_thread_in_transition_order():
    dispatcher = Dispatcher()
    monitor = StatusMonitor(dispatcher.call_soon)
    seen, threads = [], set()
    done = threading.Event()

    def callback(change):
        seen.append((change.old, change.new))
        threads.add(threading.current_thread().name)
        if change.new is X:
            done.set()

    monitor.on_status(callback)
    for new in (R, RC, R, RC, F, RC, R, X):
        assert monitor.set(new)
    assert done.wait(5)
    dispatcher.close()
    assert seen == [(C, R), (R, RC), (RC, R), (R, RC), (RC, F), (F, RC), (RC, R), (R, X)]
    assert threads == {"mcp-sync-notifications"}


def test_racing_setters_deliver_one_unbroken_chain():
    """8 threads flip ready/reconnecting; every change that `set()` reported
    is delivered once, in an order where each starts where the last ended.
    (96 changes at most: under the bound, so none may be dropped.)"""
    dispatcher = Dispatcher()
    monitor = StatusMonitor(dispatcher.call_soon)
    changes = []
    monitor.on_status(changes.append)
    moved = []
    start = threading.Barrier(8)

    def flip(index):
        start.wait()
        count = 0
        for i in range(12):
            if monitor.set(R if (i + index) % 2 else RC):
                count += 1
        moved.append(count)

    threads = [threading.Thread(target=flip, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    last = threading.Event()
    monitor.on_status(lambda change: last.set())
    monitor.set(X)
    assert last.wait(5)
    dispatcher.close()
    assert sum(moved) >= 1
    assert len(changes) == sum(moved) + 1
    for before, after in zip(changes, changes[1:]):
        assert before.new is after.old
    assert changes[0].old is C and changes[-1].new is X


def test_a_raising_callback_is_logged_and_the_others_still_run(caplog):
    dispatcher = Dispatcher()
    monitor = StatusMonitor(dispatcher.call_soon)
    got = []
    done = threading.Event()
    monitor.on_status(lambda change: 1 / 0)
    monitor.on_status(lambda change: (got.append(change.new), change.new is X and done.set()))
    with caplog.at_level(logging.ERROR, logger="mcp_sync.status"):
        monitor.set(R)
        monitor.set(X)
        assert done.wait(5)
    dispatcher.close()
    assert got == [R, X]
    assert sum("a status callback raised" in r.message for r in caplog.records) == 2


def test_a_callback_hears_only_changes_between_adding_and_removing_it():
    monitor = StatusMonitor(sync_run)
    early, late = [], []
    remove_early = monitor.on_status(lambda change: early.append(change.new))
    monitor.set(R)
    monitor.on_status(lambda change: late.append(change.new))
    monitor.set(RC)
    remove_early()
    remove_early()  # harmless twice
    monitor.set(R)
    assert early == [R, RC]
    assert late == [RC, R]


def test_a_callback_removed_by_an_earlier_one_is_not_called():
    monitor = StatusMonitor(sync_run)
    second = []
    remove_second = None

    def first(change):
        remove_second()

    monitor.on_status(first)
    remove_second = monitor.on_status(lambda change: second.append(change))
    monitor.set(R)
    assert second == []


def test_set_never_waits_for_a_slow_callback_and_queues_one_delivery_at_a_time():
    dispatcher = Dispatcher()
    monitor = StatusMonitor(dispatcher.call_soon)
    release, entered = threading.Event(), threading.Event()
    seen = []

    def slow(change):
        entered.set()
        release.wait(10)
        seen.append(change.new)

    monitor.on_status(slow)
    monitor.set(R)
    assert entered.wait(5)
    started = time.monotonic()
    for i in range(50):
        assert monitor.set(RC if i % 2 == 0 else R)
        assert len(dispatcher._queue.calls) <= 1  # one delivery queued, not one per change
    assert time.monotonic() - started < SLACK  # the callback is blocked (for ever); set() is not
    done = threading.Event()
    monitor.on_status(lambda change: done.set())
    monitor.set(X)
    release.set()
    assert done.wait(5)
    dispatcher.close()
    assert seen == [R] + [RC if i % 2 == 0 else R for i in range(50)] + [X]


def test_changes_waiting_for_a_stuck_callback_are_bounded(caplog):
    dispatcher = Dispatcher()
    monitor = StatusMonitor(dispatcher.call_soon)
    release, entered = threading.Event(), threading.Event()
    seen = []
    done = threading.Event()

    def stuck(change):
        entered.set()
        release.wait(10)
        seen.append(change)
        if change.new is X:
            done.set()

    monitor.on_status(stuck)
    monitor.set(R)
    assert entered.wait(5)
    with caplog.at_level(logging.WARNING, logger="mcp_sync.status"):
        for i in range(3 * MAX_PENDING_CHANGES):
            monitor.set(RC if i % 2 == 0 else R)
        monitor.set(X)
        assert len(monitor._pending) == MAX_PENDING_CHANGES
        release.set()
        assert done.wait(5)
        dispatcher.close()
    assert len(seen) == 1 + MAX_PENDING_CHANGES  # the first, then the latest ones
    assert seen[-1].new is X
    messages = [r.getMessage() for r in caplog.records]
    assert any("oldest status changes are dropped" in m for m in messages)
    assert any(f"{2 * MAX_PENDING_CHANGES + 1} status changes were dropped" in m for m in messages)


def test_no_delivery_is_scheduled_when_nobody_listens():
    scheduled = []
    monitor = StatusMonitor(scheduled.append)
    monitor.set(R)
    monitor.set(X)
    assert scheduled == []  # so no dispatcher thread starts for nobody


def test_a_run_that_raises_does_not_break_set_and_the_next_change_delivers(caplog):
    calls = []

    def flaky_run(fn):
        calls.append(fn)
        if len(calls) == 1:
            raise RuntimeError("queue unavailable")
        fn()

    monitor = StatusMonitor(flaky_run)
    seen = []
    monitor.on_status(lambda change: seen.append(change.new))
    with caplog.at_level(logging.ERROR, logger="mcp_sync.status"):
        assert monitor.set(R)
    assert seen == [] and "could not schedule" in caplog.text
    assert monitor.set(RC)
    assert seen == [R, RC]


# -- wait_for ------------------------------------------------------------------------------


def test_wait_for_returns_when_another_thread_reaches_a_wanted_status():
    monitor = StatusMonitor(sync_run)
    waiting = threading.Event()
    result = []

    def waiter():
        waiting.set()
        result.append(monitor.wait_for({R, F}, timeout=10))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(5)
    monitor.set(F)
    thread.join(5)
    assert result == [F]
    assert monitor.wait_for("failed", timeout=0) is F  # already there


def test_wait_for_times_out_with_none_within_bounds():
    monitor = StatusMonitor(sync_run)
    started = time.monotonic()
    assert monitor.wait_for(R, timeout=0.2) is None
    assert 0.2 <= time.monotonic() - started < 0.2 + SLACK
    with pytest.raises(ValueError):
        monitor.wait_for([], timeout=1)
    with pytest.raises(ValueError):
        monitor.wait_for(R, timeout=-1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
def test_after_fork_the_child_is_not_stuck_on_a_lock_held_by_a_vanished_thread():
    monitor = StatusMonitor(sync_run)
    seen = []
    monitor.on_status(lambda change: seen.append(change.new))
    holding, release = threading.Event(), threading.Event()

    def hold():
        with monitor._cond:
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(5)
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            monitor.after_fork()
            ok = monitor.set(R) and monitor.wait_for(R, timeout=1) is R and seen == [R]
            code = 0 if ok else 2
        finally:
            os._exit(code)
    release.set()
    holder.join(5)
    assert reap([pid], 10) == [0], "the child failed or hung on the monitor's lock"
    assert monitor.status is C  # the parent is untouched


# -- Reconnect -----------------------------------------------------------------------------


def test_reconnect_defaults_suit_a_web_process():
    policy = Reconnect()
    assert (policy.max_attempts, policy.initial_delay, policy.max_delay, policy.jitter) == (None, 0.5, 30.0, True)


def test_delays_without_jitter_double_up_to_the_cap_and_stop_after_max_attempts():
    delays = list(Reconnect(max_attempts=9, initial_delay=0.5, max_delay=30, jitter=False).delays())
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert list(Reconnect(max_attempts=1, jitter=False).delays()) == [0.5]


def test_delays_with_jitter_are_full_jitter_under_each_cap_and_repeatable():
    policy = Reconnect(max_attempts=12, initial_delay=0.25, max_delay=4)
    caps = [min(4, 0.25 * 2 ** n) for n in range(12)]
    first = list(policy.delays(random.Random(7)))
    assert first == list(policy.delays(random.Random(7)))
    assert len(first) == 12
    assert all(0 <= d <= cap for d, cap in zip(first, caps))
    expected_rng = random.Random(7)
    assert first == [expected_rng.uniform(0, cap) for cap in caps]
    # Spread, not the cap: over many draws at the cap, the mean is near half of it.
    tail = list(itertools.islice(Reconnect(max_delay=1, initial_delay=1).delays(random.Random(1)), 2000))
    assert 0.4 < sum(tail) / len(tail) < 0.6


def test_unbounded_delays_never_end_and_never_overflow():
    delays = Reconnect(jitter=False).delays()
    assert list(itertools.islice(delays, 5000))[-1] == 30.0
    assert next(delays) == 30.0


@pytest.mark.parametrize("kwargs,error", [
    ({"max_attempts": 0}, ValueError),
    ({"max_attempts": -3}, ValueError),
    ({"max_attempts": True}, TypeError),
    ({"max_attempts": 2.5}, TypeError),
    ({"initial_delay": 0}, ValueError),
    ({"initial_delay": -1}, ValueError),
    ({"initial_delay": float("nan")}, ValueError),
    ({"max_delay": float("inf")}, ValueError),
    ({"initial_delay": "1"}, TypeError),
    ({"initial_delay": 5, "max_delay": 1}, ValueError),
    ({"jitter": 1}, TypeError),
])
def test_reconnect_refuses_bad_settings(kwargs, error):
    with pytest.raises(error):
        Reconnect(**kwargs)


def test_reconnect_accepts_ints_and_is_frozen():
    policy = Reconnect(max_attempts=3, initial_delay=1, max_delay=2)
    assert policy.initial_delay == 1.0 and isinstance(policy.initial_delay, float)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        policy.max_attempts = 4


def test_coerce_turns_the_connect_argument_into_a_policy_or_none():
    custom = Reconnect(max_attempts=2)
    assert Reconnect.coerce(True) == Reconnect()
    assert Reconnect.coerce(False) is None
    assert Reconnect.coerce(None) is None
    assert Reconnect.coerce(custom) is custom
    for bad in (1, 0, "yes", 3.0):
        with pytest.raises(TypeError):
            Reconnect.coerce(bad)


def test_only_read_and_idempotent_methods_are_safe_to_retry():
    assert SAFE_TO_RETRY == {
        "ping", "server/discover", "tools/list", "resources/list", "resources/templates/list",
        "prompts/list", "resources/read", "prompts/get", "completion/complete",
        "tasks/get", "tasks/list", "tasks/result", "tasks/cancel", "tasks/update",
    }
    for method in ("tools/call", "resources/subscribe", "subscriptions/listen", "initialize",
                   "logging/setLevel", "sampling/createMessage"):
        assert method not in SAFE_TO_RETRY


# -- Dispatcher.call_soon ------------------------------------------------------------------


def test_call_soon_runs_on_the_dispatcher_thread_in_order_and_starts_it():
    dispatcher = Dispatcher()  # nobody listens: no thread yet
    assert dispatcher._thread is None
    ran = []
    done = threading.Event()
    for i in range(20):
        dispatcher.call_soon(lambda i=i: ran.append((i, threading.current_thread().name)))
    dispatcher.call_soon(done.set)
    assert done.wait(5)
    dispatcher.close()
    assert [i for i, _ in ran] == list(range(20))
    assert {name for _, name in ran} == {"mcp-sync-notifications"}


def test_call_soon_is_not_held_behind_waiting_notifications():
    dispatcher = Dispatcher()
    release, entered = threading.Event(), threading.Event()
    order = []

    def slow(note):
        entered.set()
        release.wait(10)
        order.append(note.params["i"])

    dispatcher.add_callback(slow)
    for i in range(5):
        dispatcher.put({"jsonrpc": "2.0", "method": "notifications/message", "params": {"i": i}})
    assert entered.wait(5)
    done = threading.Event()
    dispatcher.call_soon(lambda: (order.append("call"), done.set()))
    release.set()
    assert done.wait(5)
    dispatcher.close()
    assert order == [0, "call", 1, 2, 3, 4]  # right after the notification that was running


def test_a_raising_function_is_logged_and_the_thread_goes_on(caplog):
    dispatcher = Dispatcher()
    done = threading.Event()
    with caplog.at_level(logging.ERROR, logger="mcp_sync.notifications"):
        dispatcher.call_soon(lambda: 1 / 0)
        dispatcher.call_soon(done.set)
        assert done.wait(5)
    dispatcher.close()
    assert "a function run on the dispatcher thread raised" in caplog.text
    assert "ZeroDivisionError" in caplog.text


def test_call_soon_from_the_dispatcher_thread_itself_runs_later():
    dispatcher = Dispatcher()
    order = []
    done = threading.Event()

    def outer():
        dispatcher.call_soon(lambda: (order.append("inner"), done.set()))
        order.append("outer")

    dispatcher.call_soon(outer)
    assert done.wait(5)
    dispatcher.close()
    assert order == ["outer", "inner"]


def test_close_runs_what_was_queued_and_later_calls_never_run_on_the_caller():
    dispatcher = Dispatcher()
    release, entered = threading.Event(), threading.Event()
    ran = []
    dispatcher.call_soon(lambda: (entered.set(), release.wait(10)))
    assert entered.wait(5)
    dispatcher.call_soon(lambda: ran.append(threading.current_thread().name))
    closer = threading.Thread(target=dispatcher.close)
    closer.start()
    release.set()
    closer.join(5)
    assert not closer.is_alive()
    assert ran == ["mcp-sync-notifications"]  # queued before close(): still ran
    dispatcher.call_soon(lambda: ran.append("late"))
    assert ran == ["mcp-sync-notifications"]  # after close(): dropped, not run here
    assert not dispatcher._thread.is_alive()


def test_waiting_functions_are_bounded_oldest_dropped(caplog):
    dispatcher = Dispatcher(max_queued=3)
    release, entered = threading.Event(), threading.Event()
    ran = []
    dispatcher.call_soon(lambda: (entered.set(), release.wait(10)))
    assert entered.wait(5)
    with caplog.at_level(logging.WARNING, logger="mcp_sync.notifications"):
        for i in range(5):
            dispatcher.call_soon(lambda i=i: ran.append(i))
        assert len(dispatcher._queue.calls) == 3
        done = threading.Event()
        dispatcher.call_soon(done.set)  # the bound drops the oldest again, not this one
    release.set()
    assert done.wait(5)
    dispatcher.close()
    assert ran == [3, 4]
    assert sum("dropped the oldest" in r.getMessage() for r in caplog.records) == 3
    with pytest.raises(TypeError):
        dispatcher.call_soon("not callable")
