"""Admission control (`mcp_sync.admission`): the bound on calls in flight,
the bound on calls waiting, strict FIFO hand-over, deadlines, `close()`,
`pause()`/`resume()`, and the promise that an interrupt landing anywhere in
`acquire()` never leaks a slot or a place in the queue.

Threads are coordinated by the admission's own counters (`queued`,
`in_flight`) and by events, never by sleeping and hoping.
"""

from __future__ import annotations

import _thread
import doctest
import inspect
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import mcp_sync
from mcp_sync import admission as admission_module
from mcp_sync import waiting as waiting_module
from mcp_sync.admission import Admission
from mcp_sync.errors import ConnectionClosed, McpError, Overloaded, RequestTimeout
from mcp_sync.waiting import MAIN_THREAD_SLICE
from tests.helpers import SLACK, Injected, interrupt_at_point, wait_until


def run_in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Start `target` on a daemon thread; the dict gets its "result" or "error"."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = target()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            out["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def join_all(threads: list[threading.Thread], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
        assert not thread.is_alive(), "a thread is still stuck in the admission"


def queue_waiter(admission: Admission, deadline: float | None, then: Callable[[], Any] | None = None
                 ) -> tuple[threading.Thread, dict[str, Any]]:
    """A thread that waits in `acquire()`; returns once it is counted as queued."""
    before = admission.queued

    def body() -> str:
        admission.acquire(deadline)
        try:
            if then is not None:
                then()
        finally:
            admission.release()
        return "ran"

    thread, out = run_in_thread(body)
    assert wait_until(lambda: admission.queued == before + 1 or not thread.is_alive(), 5)
    assert admission.queued == before + 1, out
    return thread, out


# -- the documented example ------------------------------------------------------------


def test_the_docstring_example_runs_as_written():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(Admission, "Admission", globs={"Admission": Admission,
                                                                         "Overloaded": Overloaded}):
        runner.run(test)
    assert runner.tries >= 6 and runner.failures == 0


# -- 64 threads against max_in_flight=8, max_queued=16 ------------------------------------


def test_sixty_four_threads_eight_run_sixteen_wait_forty_are_shed_exactly():
    admission = Admission(max_in_flight=8, max_queued=16)
    guard = threading.Lock()
    inside = [0, 0]  # now, most ever (updated under `guard` inside the critical section)
    go = threading.Event()
    outcome: dict[int, str] = {}

    def call(i: int) -> None:
        try:
            with admission.slot(time.monotonic() + 10):
                with guard:
                    inside[0] += 1
                    inside[1] = max(inside[1], inside[0])
                go.wait(10)
                with guard:
                    inside[0] -= 1
            outcome[i] = "ran"
        except Overloaded:
            outcome[i] = "shed"
        except RequestTimeout:
            outcome[i] = "timeout"

    threads = []
    for i in range(64):
        # One at a time, so that the order of arrival is known.
        threads.append(threading.Thread(target=call, args=(i,), daemon=True))
        threads[-1].start()
        assert wait_until(lambda: admission.in_flight + admission.queued + admission.shed == i + 1, 5), i
    assert (admission.in_flight, admission.queued, admission.shed) == (8, 16, 40)
    join_all(threads[24:])
    assert wait_until(lambda: inside[0] == 8, 5)
    assert all(outcome[i] == "shed" for i in range(24, 64))
    assert not any(i in outcome for i in range(24))  # the first 24 are inside or waiting

    go.set()
    join_all(threads)
    assert [outcome[i] for i in range(64)] == ["ran"] * 24 + ["shed"] * 40
    assert inside == [0, 8]
    assert (admission.in_flight, admission.queued, admission.shed, admission.peak_in_flight) == (0, 0, 40, 8)


def test_sixty_four_threads_churning_never_put_more_than_eight_inside():
    admission = Admission(max_in_flight=8, max_queued=16)
    guard = threading.Lock()
    inside = [0, 0]
    counts = {"ran": 0, "shed": 0, "timeout": 0}
    start = threading.Barrier(64)
    rounds = 15

    def call(i: int) -> None:
        start.wait(10)
        for n in range(rounds):
            # Every fourth thread is in a hurry, so that some calls time out.
            patience = 0.002 if i % 4 == 0 else 5.0
            try:
                with admission.slot(time.monotonic() + patience):
                    with guard:
                        inside[0] += 1
                        inside[1] = max(inside[1], inside[0])
                    time.sleep(0.0005 * (n % 3))  # some work, to keep the slots busy
                    with guard:
                        inside[0] -= 1
                outcome = "ran"
            except Overloaded:
                outcome = "shed"
            except RequestTimeout:
                outcome = "timeout"
            with guard:
                counts[outcome] += 1

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(64)]
    for thread in threads:
        thread.start()
    join_all(threads, 30)
    assert sum(counts.values()) == 64 * rounds
    assert counts["ran"] > 0
    assert inside[0] == 0 and 1 <= inside[1] <= 8
    assert admission.shed == counts["shed"]
    assert (admission.in_flight, admission.queued) == (0, 0)
    assert inside[1] <= admission.peak_in_flight <= 8


# -- fairness ---------------------------------------------------------------------------------


def test_waiters_get_the_slot_in_arrival_order_and_a_newcomer_never_overtakes():
    admission = Admission(max_in_flight=1, max_queued=None)
    order: list[int] = []
    go = threading.Event()
    admission.acquire(None)
    waiters = []
    for i in range(10):
        def then(i: int = i) -> None:
            order.append(i)
            go.wait(10)
        waiters.append(queue_waiter(admission, time.monotonic() + 10, then))

    admission.release()
    # The slot went straight to the oldest waiter, even before its thread woke:
    assert (admission.in_flight, admission.queued) == (1, 9)
    t0 = time.monotonic()
    with pytest.raises(RequestTimeout):
        admission.acquire(t0)  # a newcomer with a free slot in sight would barge in; it queues
    assert admission.queued == 9
    go.set()
    join_all([thread for thread, _ in waiters])
    assert order == list(range(10))
    assert (admission.in_flight, admission.queued, admission.peak_in_flight) == (0, 0, 1)


# -- deadlines ----------------------------------------------------------------------------------


class SteppingClock:
    """A clock that moves `step` seconds each time it is read: time passes
    only through the code under test, so a deadline's test needs no bound on
    the wall clock. Thread-safe (a lock around the step)."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            self.now += self.step
            return self.now


@pytest.mark.parametrize("where", ["main thread", "worker thread"])
def test_the_deadline_is_honoured_and_nothing_is_left_behind(where):
    clock = SteppingClock(0.05)
    admission = Admission(max_in_flight=1, max_queued=4, clock=clock)
    admission.acquire(None)

    def attempt() -> tuple[float, BaseException | None]:
        started = clock()
        try:
            admission.acquire(started + 0.3)
        except RequestTimeout as exc:
            return clock() - started, exc
        return clock() - started, None

    if where == "main thread":
        waited, error = attempt()
    else:
        thread, out = run_in_thread(attempt)
        join_all([thread])
        waited, error = out["result"]
    assert isinstance(error, RequestTimeout) and isinstance(error, TimeoutError)
    assert waited >= 0.3  # never before the deadline, by the admission's clock
    assert "free slot" in str(error) and "max_in_flight=1" in str(error) and "nothing was sent" in str(error)
    assert (admission.in_flight, admission.queued, admission.shed) == (1, 0, 0)
    admission.release()
    admission.acquire(time.monotonic())  # a free slot needs no time, even past the deadline
    admission.release()


def test_overloaded_names_the_limits_and_is_raised_at_once():
    admission = Admission(max_in_flight=2, max_queued=0)
    admission.acquire(None)
    admission.acquire(None)
    started = time.monotonic()
    with pytest.raises(Overloaded) as caught:
        admission.acquire(None)  # no deadline, yet no waiting: max_queued=0
    assert time.monotonic() - started < SLACK  # without a deadline, any wait would be for ever
    assert isinstance(caught.value, McpError)
    assert (caught.value.max_in_flight, caught.value.max_queued) == (2, 0)
    assert "max_in_flight=2" in str(caught.value) and "max_queued=0" in str(caught.value)
    assert (admission.in_flight, admission.queued, admission.shed) == (2, 0, 1)


# -- close() -----------------------------------------------------------------------------------


def test_close_wakes_every_waiter_with_its_own_copy_of_the_error(monkeypatch):
    # A waiter close() failed to wake would look again only after the
    # safety slice: a long one, so that a bound with SLACK tells them apart.
    monkeypatch.setattr(admission_module, "_SAFETY_SLICE", 60.0)
    admission = Admission(max_in_flight=1, max_queued=None)
    admission.acquire(None)
    waiters = [queue_waiter(admission, None) for _ in range(5)]  # no deadline: only close() ends them
    closed = ConnectionClosed("the client was closed")
    started = time.monotonic()
    admission.close(closed)
    assert admission.queued == 0
    join_all([thread for thread, _ in waiters], 5)
    # Far under the 60 s a worker thread now sleeps between looks: close() woke them.
    assert time.monotonic() - started < SLACK
    errors = [out["error"] for _, out in waiters]
    assert all(type(e) is ConnectionClosed and str(e) == "the client was closed" for e in errors)
    assert len({id(e) for e in errors} | {id(closed)}) == 6
    with pytest.raises(ConnectionClosed):
        admission.acquire(None)
    assert admission.in_flight == 1
    admission.release()  # a call in flight at close() still gives its slot back
    assert (admission.in_flight, admission.queued) == (0, 0)
    admission.close(ConnectionClosed("again"))  # only the first close counts
    with pytest.raises(ConnectionClosed, match="the client was closed"):
        admission.acquire(None)


def test_close_stops_the_unbounded_fast_path_too():
    admission = Admission()
    with admission.slot(None):
        admission.close(ConnectionClosed("closed"))
        with pytest.raises(ConnectionClosed):
            admission.acquire(None)
    assert admission.in_flight == 0


# -- pause() / resume(): waiting for a reconnect -----------------------------------------------


def test_paused_calls_wait_bounded_by_max_queued_and_resume_in_order():
    admission = Admission(max_in_flight=None, max_queued=2)
    admission.pause()
    order: list[int] = []
    waiters = [queue_waiter(admission, time.monotonic() + 10, lambda i=i: order.append(i)) for i in range(2)]
    with pytest.raises(Overloaded, match="waiting for the connection to come back"):
        admission.acquire(None)
    assert admission.shed == 1
    admission.resume()
    join_all([thread for thread, _ in waiters])
    assert sorted(order) == [0, 1] and all(out["result"] == "ran" for _, out in waiters)
    assert (admission.in_flight, admission.queued, admission.peak_in_flight) == (0, 0, 2)
    # Resumed: the lock-free path again, and the slots taken while paused were given back.
    admission.acquire(None)
    admission.release()
    assert admission.in_flight == 0


def test_a_paused_call_times_out_saying_what_it_waited_for():
    clock = SteppingClock(0.05)
    admission = Admission(max_in_flight=4, max_queued=None, clock=clock)
    admission.pause()
    started = clock()
    with pytest.raises(RequestTimeout, match="for the connection to come back") as caught:
        admission.acquire(started + 0.2)
    assert clock() - started >= 0.2  # not before the deadline
    assert "nothing was sent" in str(caught.value)
    assert (admission.in_flight, admission.queued) == (0, 0)


# -- the messages say what to do next -----------------------------------------------------------


def test_refusals_say_what_to_do_next_naming_connects_options():
    """Each refusal names the `connect()` option that would have let the
    call through, and a retry (nothing was sent, so it is safe)."""
    busy = Admission(max_in_flight=1, max_queued=0, clock=SteppingClock(0.05))
    busy.acquire(None)
    with pytest.raises(Overloaded) as shed:
        busy.acquire(None)
    assert str(shed.value).endswith(
        "nothing was sent: retry later, or pass a larger max_in_flight= or max_queued= to connect()")

    queued = Admission(max_in_flight=1, max_queued=None, clock=SteppingClock(0.05))
    queued.acquire(None)
    with pytest.raises(RequestTimeout) as waited:
        queued.acquire(0.0)  # the stepping clock is past it at the first look
    assert str(waited.value).endswith(
        "nothing was sent: retry later, pass a larger timeout=, or a larger max_in_flight= to connect()")

    paused = Admission(max_in_flight=None, max_queued=0, clock=SteppingClock(0.05))
    paused.pause()
    with pytest.raises(Overloaded) as shed_paused:
        paused.acquire(None)
    assert str(shed_paused.value).endswith(
        "nothing was sent: retry once client.status is ready, or pass a larger max_queued= to connect()")

    reconnecting = Admission(max_in_flight=None, max_queued=None, clock=SteppingClock(0.05))
    reconnecting.pause()
    with pytest.raises(RequestTimeout) as waited_paused:
        reconnecting.acquire(0.0)
    assert str(waited_paused.value).endswith("nothing was sent: see client.status, or pass a larger timeout=")
    # And every option named is one connect() takes.
    parameters = inspect.signature(mcp_sync.connect).parameters
    assert {"max_in_flight", "max_queued", "timeout"} <= set(parameters)


# -- the unbounded fast path ----------------------------------------------------------------


class NoLocking:
    """Stands in for the admission's lock: any use fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the lock-free path used the lock ({name})")


def test_the_unbounded_path_is_correct_and_takes_no_lock():
    admission = Admission()
    for _ in range(3):
        admission.acquire(None)
    assert (admission.in_flight, admission.peak_in_flight) == (3, 3)
    for _ in range(3):
        admission.release()
    real_lock = admission._lock
    admission._lock = NoLocking()  # type: ignore[assignment]
    try:
        for _ in range(1000):  # below the peak, so not even the peak needs the lock
            admission.acquire(None)
            with admission.slot(None):
                assert admission.in_flight == 2
            admission.release()
    finally:
        admission._lock = real_lock
    assert (admission.in_flight, admission.queued, admission.shed, admission.peak_in_flight) == (0, 0, 0, 3)

    def churn() -> None:
        for _ in range(5000):
            with admission.slot(None):
                pass

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    join_all(threads)
    assert admission.in_flight == 0
    assert 3 <= admission.peak_in_flight <= 8


@pytest.mark.parametrize("limit", [None, 2])
def test_release_without_a_slot_is_a_programming_error(limit):
    admission = Admission(limit, None)
    with pytest.raises(RuntimeError, match="more often than acquire"):
        admission.release()
    assert admission.in_flight == 0


@pytest.mark.parametrize("kwargs,error", [
    ({"max_in_flight": 0}, ValueError), ({"max_in_flight": -1}, ValueError),
    ({"max_queued": -1}, ValueError), ({"max_in_flight": 1.5}, TypeError),
    ({"max_in_flight": True}, TypeError), ({"max_queued": "3"}, TypeError),
])
def test_limits_are_checked(kwargs, error):
    with pytest.raises(error):
        Admission(**kwargs)


# -- interrupts ---------------------------------------------------------------------------------


def test_interrupt_main_ends_a_wait_on_the_main_thread_without_a_leak(monkeypatch):
    """`_thread.interrupt_main()` only sets a flag: the wait must wake to see it."""
    # A wait not sliced for the main thread would see the flag only at the
    # safety slice: a long one, so that a bound with SLACK tells them apart.
    monkeypatch.setattr(admission_module, "_SAFETY_SLICE", 60.0)
    admission = Admission(max_in_flight=1, max_queued=None)
    admission.acquire(None)
    sent = []

    def interrupt_when_queued() -> None:
        assert wait_until(lambda: admission.queued == 1, 5)
        sent.append(time.monotonic())
        _thread.interrupt_main()

    helper = threading.Thread(target=interrupt_when_queued, daemon=True)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        admission.acquire(None)  # nobody will release: only the interrupt ends this
    landed = time.monotonic()
    helper.join(5)
    assert sent and landed - sent[0] < MAIN_THREAD_SLICE + SLACK  # a slice, not the 60 s one
    assert (admission.in_flight, admission.queued) == (1, 0)
    admission.release()
    admission.acquire(time.monotonic() + 1)  # the one slot is free again
    admission.release()


ADMISSION_FILE = admission_module.__file__
CALLEES = {ADMISSION_FILE, threading.__file__, waiting_module.__file__}


def interrupt_at(k: int) -> tuple[Callable[..., Any], list[str]]:
    """A profile function that raises `Injected` at the k-th point of this
    thread where CPython can deliver an asynchronous exception inside
    admission.py: a function starting, or a call (C or Python) returning to
    admission code. (Not before a call: nothing is checked there.) Once
    `acquire()` has returned, the slot is the caller's business."""
    def is_point(frame: Any, event: str, arg: Any) -> bool:
        if event == "c_call":
            return False
        if event == "return":
            # A call from admission code returning. (Garbage collection may
            # run a weakref callback anywhere; an exception there is ignored,
            # so those returns are no place to test.)
            if frame.f_code.co_filename not in CALLEES:
                return False
            caller = frame.f_back  # (so not `acquire()` returning to its caller)
            return caller is not None and caller.f_code.co_filename == ADMISSION_FILE
        return frame.f_code.co_filename == ADMISSION_FILE

    return interrupt_at_point(k, is_point,
                              lambda frame, event, arg: f"{event} {getattr(arg, '__name__', '')} in {frame.f_code.co_name}")


class Scenario:
    """One way `acquire()` can go, with the help of another thread.

    `setup` builds the admission (the test thread may take slots there);
    `helper` (on its own thread) acts once the attempt waits in the queue,
    or as soon as it is over; `expect` is the outcome without interrupt;
    `cleanup` gives back what `setup` and `helper` took."""

    def __init__(self, name: str, make: Callable[[], Admission], *, held_before: int = 0,
                 helper: Callable[[Admission], None] | None = None, patience: float = 5.0,
                 expect: type[BaseException] | None = None) -> None:
        self.name = name
        self.make = make
        self.held_before = held_before
        self.helper = helper
        self.patience = patience
        self.expect = expect


def paused(limit: int | None) -> Admission:
    admission = Admission(limit, 4)
    admission.pause()
    return admission


SCENARIOS = [
    Scenario("lock-free path", lambda: Admission()),
    Scenario("a free slot", lambda: Admission(2, 2)),
    Scenario("waits, then handed a slot", lambda: Admission(1, 4), held_before=1,
             helper=lambda a: a.release()),
    Scenario("waits, then the deadline passes", lambda: Admission(1, 4), held_before=1, patience=0.02,
             expect=RequestTimeout),
    Scenario("shed at once", lambda: Admission(1, 0), held_before=1, expect=Overloaded),
    Scenario("waits, then closed", lambda: Admission(1, 4), held_before=1,
             helper=lambda a: a.close(ConnectionClosed("closed")), expect=ConnectionClosed),
    Scenario("paused, then resumed (unbounded)", lambda: paused(None), helper=lambda a: a.resume()),
    Scenario("paused, then resumed (bounded)", lambda: paused(1), helper=lambda a: a.resume()),
]


def run_once(scenario: Scenario, use_slot: bool, k: int | None) -> tuple[bool, list[str], BaseException | None]:
    """One attempt, interrupted at point `k` (None: not at all); checks that
    afterwards exactly the attempt's own slot (if it got one) is taken."""
    admission = scenario.make()
    for _ in range(scenario.held_before):
        admission.acquire(None)
    attempt_over = threading.Event()

    def help_() -> None:
        wait_until(lambda: admission.queued == 1 or attempt_over.is_set(), 5, 0.0005)
        assert scenario.helper is not None
        scenario.helper(admission)

    helper = threading.Thread(target=help_, daemon=True) if scenario.helper else None
    if helper:
        helper.start()
    profile, fired = interrupt_at(k) if k is not None else (None, [])
    deadline = time.monotonic() + scenario.patience
    got_slot, error = False, None
    sys.setprofile(profile)
    try:
        if use_slot:
            admission.slot(deadline).__enter__()
        else:
            admission.acquire(deadline)
        got_slot = True
    except (Injected, McpError) as exc:
        error = exc
    finally:
        sys.setprofile(None)
        attempt_over.set()
    if helper:
        helper.join(10)
        assert not helper.is_alive()
    if scenario.helper is not None and scenario.held_before:
        held_by_others = 0 if scenario.expect is not ConnectionClosed else scenario.held_before
    else:
        held_by_others = scenario.held_before
    where = f"{scenario.name}, interrupted at {fired}"
    assert admission.queued == 0, where
    assert admission.in_flight == held_by_others + int(got_slot), where
    if got_slot:
        admission.release()
    for _ in range(held_by_others):
        admission.release()
    assert admission.in_flight == 0, where
    if admission._closed is None:
        # Every slot is really free again: the whole capacity can be taken.
        capacity = admission.max_in_flight or 3
        for _ in range(capacity):
            admission.acquire(time.monotonic() + 1)
        for _ in range(capacity):
            admission.release()
    return got_slot, fired, error


@pytest.mark.parametrize("use_slot", [False, True], ids=["acquire", "slot"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_an_interrupt_anywhere_in_acquire_leaks_nothing(scenario, use_slot):
    got_slot, fired, error = run_once(scenario, use_slot, None)
    assert not fired
    if scenario.expect is None:
        assert got_slot and error is None
    else:
        assert type(error) is scenario.expect

    points = []
    for k in range(500):
        got_slot, fired, error = run_once(scenario, use_slot, k)
        if not fired:
            break  # past the last point: the attempt ran undisturbed
        points.append(fired[0])
        assert isinstance(error, Injected) or type(error) is scenario.expect, (fired, error)
        assert not (got_slot and isinstance(error, Injected))
    else:
        pytest.fail("the walk did not end")
    # The walk really went through the code (a profile that cannot raise would stop at once).
    assert len(points) >= (4 if scenario.name == "lock-free path" else 8), points
