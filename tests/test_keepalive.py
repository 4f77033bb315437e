"""Keepalive: probes only an idle connection, declares it dead once after N
consecutive failures, and leaves no thread behind.

Most tests drive a fake clock: the keepalive decides on the clock it was
given, so a test moves time itself and waits (on a condition) until the
keepalive thread has looked at it, instead of sleeping and hoping.
"""

import logging
import os
import threading
import time

import pytest

import mcp_sync
from mcp_sync.keepalive import Keepalive
from tests.helpers import SLACK, reap, wait_until

INTERVAL = 0.05
NAME = "test-keepalive"


class FakeClock:
    """A clock the test moves; counts the keepalive thread's reads of it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.reads = 0
        self.cond = threading.Condition()

    def __call__(self) -> float:
        with self.cond:
            if threading.current_thread().name == NAME:
                self.reads += 1
                self.cond.notify_all()
            return self.now

    def advance(self, seconds: float) -> None:
        with self.cond:
            self.now += seconds

    def wait_reads(self, count: int = 3) -> None:
        """Until the keepalive thread has read the clock `count` more times:
        it has then decided at least once on the current time."""
        with self.cond:
            target = self.reads + count
            assert self.cond.wait_for(lambda: self.reads >= target, 5), "the keepalive thread is stuck"


class Probe:
    """A fake probe: answers from `outcomes` (an exception to raise, or None
    for success; the last outcome repeats), and counts its calls."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes) or [None]
        self.calls = []
        self.cond = threading.Condition()

    def __call__(self, timeout):
        with self.cond:
            index = len(self.calls)
            self.calls.append(timeout)
            self.cond.notify_all()
        outcome = self.outcomes[min(index, len(self.outcomes) - 1)]
        if outcome is not None:
            raise outcome

    @property
    def count(self):
        return len(self.calls)

    def wait_count(self, count, timeout=5.0):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.calls) >= count, timeout), \
                f"{len(self.calls)} probes, expected {count}"


class Dead:
    def __init__(self, action=None):
        self.errors = []
        self.probes_seen = []
        self.event = threading.Event()
        self.action = action

    def __call__(self, error):
        self.errors.append(error)
        self.event.set()
        if self.action:
            self.action(error)


def failure(i=0):
    return mcp_sync.RequestTimeout(f"no answer to probe {i}", method="ping", timeout=INTERVAL)


@pytest.fixture
def make():
    made = []

    def factory(probe, on_dead=None, failures=3, **kwargs):
        keepalive = Keepalive(INTERVAL, failures, probe, on_dead or Dead(), name=NAME, **kwargs)
        made.append(keepalive)
        return keepalive

    yield factory
    for keepalive in made:
        keepalive.close()
        assert not keepalive._thread.is_alive()


# -- when it probes ------------------------------------------------------------------------


def test_it_probes_only_after_a_whole_idle_interval(make):
    clock, probe = FakeClock(), Probe()
    keepalive = make(probe, clock=clock, probe_timeout=0.02)
    clock.wait_reads()
    assert probe.count == 0
    clock.advance(INTERVAL * 0.9)
    clock.wait_reads()
    assert probe.count == 0
    clock.advance(INTERVAL * 0.2)
    probe.wait_count(1)
    clock.wait_reads()
    assert probe.calls == [0.02]  # once per interval, with its own timeout
    assert keepalive.dead is False


def test_no_probe_while_activity_is_touched_continuously(make):
    clock, probe = FakeClock(), Probe()
    keepalive = make(probe, clock=clock)
    for _ in range(12):  # 10.8 intervals of time pass, but never one without activity
        clock.advance(INTERVAL * 0.9)
        keepalive.touch()
        clock.wait_reads(2)
    assert probe.count == 0
    clock.advance(INTERVAL * 1.1)
    probe.wait_count(1)


def test_no_probe_while_a_call_is_in_flight_and_the_interval_restarts_when_it_ends(make):
    clock, probe = FakeClock(), Probe()
    keepalive = make(probe, clock=clock)
    keepalive.busy()
    keepalive.busy()
    clock.advance(INTERVAL * 10)
    clock.wait_reads()
    keepalive.idle()
    assert keepalive.in_flight == 1
    clock.advance(INTERVAL * 10)
    clock.wait_reads()
    assert probe.count == 0  # still one call in flight
    keepalive.idle()
    keepalive.idle()  # one too many: harmless
    assert keepalive.in_flight == 0
    clock.advance(INTERVAL * 0.9)
    clock.wait_reads()
    assert probe.count == 0  # the interval counts from the end of the call
    clock.advance(INTERVAL * 0.2)
    probe.wait_count(1)


def test_idle_probes_on_the_real_clock_are_spaced_by_the_interval(make):
    probe = Probe()
    started = time.monotonic()
    make(probe)
    probe.wait_count(3)
    elapsed = time.monotonic() - started
    # Spaced by the interval, not by a coarser tick (a 1 s poll would take
    # 3 s): two SLACKs cover three waits each woken late, and stay below that.
    assert 3 * INTERVAL <= elapsed < 3 * INTERVAL + 2 * SLACK
    assert probe.calls[0] == INTERVAL  # default probe timeout: the interval (at most 10 s)


# -- failures ------------------------------------------------------------------------------


def test_on_dead_is_called_exactly_once_after_n_consecutive_failures(make):
    errors = [failure(i) for i in range(3)]
    probe, dead = Probe(*errors), Dead()
    keepalive = make(probe, dead, failures=3)
    assert dead.event.wait(5)
    assert dead.errors == [errors[2]]  # the last error, once
    assert probe.count == 3 and keepalive.dead
    time.sleep(INTERVAL * 6)  # a dead keepalive stays quiet (a wrong one would probe here)
    assert probe.count == 3 and len(dead.errors) == 1


def test_reset_resumes_probing_and_counts_failures_afresh(make):
    probe, dead = Probe(failure()), Dead()
    keepalive = make(probe, dead, failures=2)
    assert dead.event.wait(5)
    assert probe.count == 2
    dead.event.clear()
    keepalive.reset()
    assert not keepalive.dead
    assert dead.event.wait(5)
    assert probe.count == 4 and len(dead.errors) == 2


def test_a_successful_probe_breaks_the_run_of_failures(make):
    probe, dead = Probe(failure(0), None, failure(2), failure(3)), Dead()
    make(probe, dead, failures=2)
    assert dead.event.wait(5)
    assert probe.count == 4
    assert dead.errors[0].args == ("no answer to probe 3",)


def test_activity_after_a_failure_breaks_the_run_of_failures(make):
    clock, probe, dead = FakeClock(), Probe(failure()), Dead()
    keepalive = make(probe, dead, failures=2, clock=clock)
    clock.advance(INTERVAL * 1.1)
    probe.wait_count(1)
    clock.wait_reads()
    clock.advance(INTERVAL * 0.1)
    keepalive.touch()  # something arrived: the connection works after all
    clock.advance(INTERVAL * 1.1)
    probe.wait_count(2)
    clock.wait_reads()  # on_dead would have run by now
    assert dead.errors == []
    clock.advance(INTERVAL * 1.1)
    probe.wait_count(3)
    assert dead.event.wait(5)  # two in a row now
    assert probe.count == 3


def test_an_unexpected_probe_error_is_logged_and_counts_as_a_failure(make, caplog):
    bug = RuntimeError("bug in the probe")
    dead = Dead()
    with caplog.at_level(logging.ERROR, logger="mcp_sync.keepalive"):
        make(Probe(bug), dead, failures=1)
        assert dead.event.wait(5)
    assert isinstance(dead.errors[0], mcp_sync.McpError)
    assert dead.errors[0].__cause__ is bug
    assert "unexpected error" in caplog.text and "bug in the probe" in caplog.text


def test_a_raising_on_dead_is_logged_and_the_thread_survives(make, caplog):
    probe = Probe(failure())
    calls = []
    first, again = threading.Event(), threading.Event()

    def on_dead(error):
        calls.append(error)
        (first if len(calls) == 1 else again).set()
        raise ValueError("the owner's bug")

    with caplog.at_level(logging.ERROR, logger="mcp_sync.keepalive"):
        keepalive = make(probe, on_dead, failures=1)
        assert first.wait(5)
        keepalive.reset()
        assert again.wait(5)
    assert keepalive._thread.is_alive()
    assert "on_dead callback raised" in caplog.text


# -- closing -------------------------------------------------------------------------------


def _keepalive_threads():
    return [t for t in threading.enumerate() if t.name == NAME and t.is_alive()]


def test_close_leaves_no_thread_and_is_idempotent():
    assert _keepalive_threads() == []
    keepalive = Keepalive(INTERVAL, 3, Probe(), Dead(), name=NAME)
    assert len(_keepalive_threads()) == 1
    started = time.monotonic()
    keepalive.close()
    assert time.monotonic() - started < SLACK  # idle: no probe to wait for
    assert _keepalive_threads() == []
    keepalive.close()
    keepalive.touch(), keepalive.busy(), keepalive.idle(), keepalive.reset()  # harmless after close


def test_many_keepalives_opened_and_closed_leave_no_thread():
    before = threading.active_count()
    for _ in range(50):
        Keepalive(INTERVAL, 3, Probe(), Dead(), name=NAME).close()
    assert threading.active_count() == before


def test_on_dead_may_close_the_keepalive_from_its_own_thread():
    closed = threading.Event()
    holder = {}

    def on_dead(error):
        holder["keepalive"].close()  # must not try to join itself
        closed.set()

    holder["keepalive"] = Keepalive(INTERVAL, 1, Probe(failure()), on_dead, name=NAME)
    assert closed.wait(5)
    holder["keepalive"]._thread.join(5)
    assert _keepalive_threads() == []


def test_close_during_a_probe_never_reports_the_connection_dead():
    entered, release = threading.Event(), threading.Event()
    dead = Dead()

    def probe(timeout):
        entered.set()
        release.wait(10)
        raise failure()

    keepalive = Keepalive(INTERVAL, 1, probe, dead, name=NAME)
    assert entered.wait(5)
    keepalive.close(timeout=0)  # closed while the probe runs
    release.set()
    keepalive.close()
    assert _keepalive_threads() == []
    assert dead.errors == []


def test_close_waits_for_a_stuck_probe_only_within_its_bound():
    entered, release = threading.Event(), threading.Event()

    def probe(timeout):
        entered.set()
        release.wait(10)

    keepalive = Keepalive(INTERVAL, 1, probe, Dead(), name=NAME, probe_timeout=0.1)
    assert entered.wait(5)
    started = time.monotonic()
    keepalive.close()
    assert time.monotonic() - started < 0.1 + 1.0 + SLACK
    release.set()
    keepalive._thread.join(5)
    assert _keepalive_threads() == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
def test_after_fork_the_child_gets_its_own_thread():
    probe = Probe()
    now = [1000.0]  # no lock: the parent's thread may hold one at the fork
    keepalive = Keepalive(INTERVAL, 3, probe, Dead(), name=NAME, clock=lambda: now[0])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read)
            keepalive.after_fork()
            now[0] += INTERVAL * 2
            probe.wait_count(1)
            os.write(write, b"probed")
            keepalive.close()
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        assert reap([pid], 10) == [0], "the child failed or hung"
        assert os.read(read, 100) == b"probed"
    finally:
        os.close(read)
        keepalive.close()
    assert probe.count == 0  # the parent's clock never moved


# -- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("interval,failures,error", [
    (0, 3, ValueError), (-1, 3, ValueError), (float("nan"), 3, ValueError), (float("inf"), 3, ValueError),
    (True, 3, TypeError), ("5", 3, TypeError),
    (1, 0, ValueError), (1, 1.5, ValueError), (1, True, ValueError),
])
def test_bad_settings_are_refused_before_any_thread_starts(interval, failures, error):
    before = threading.active_count()
    with pytest.raises(error):
        Keepalive(interval, failures, Probe(), Dead(), name=NAME)
    with pytest.raises(ValueError):
        Keepalive(1, 3, Probe(), Dead(), probe_timeout=0, name=NAME)
    with pytest.raises(TypeError):
        Keepalive(1, 3, "probe", Dead(), name=NAME)
    assert threading.active_count() == before


def test_default_probe_timeout_is_the_interval_at_most_ten_seconds():
    short = Keepalive(2, 3, Probe(), Dead(), name=NAME)
    long = Keepalive(60, 3, Probe(), Dead(), name=NAME)
    try:
        assert short.probe_timeout == 2.0 and long.probe_timeout == 10.0
    finally:
        short.close()
        long.close()


def test_a_probe_reaches_the_server_though_results_are_cached():
    # The 2026-07-28 probe is a server/discover, which the result cache
    # answered for its ttlMs: no probe reached the server, and a dead one
    # was never noticed (status stayed "ready").
    from mcp_sync.testing import HTTPServer, demo_server

    with HTTPServer(demo_server()) as httpd:
        def discovers() -> int:
            return len([r for r in httpd.requests if r.json and r.json.get("method") == "server/discover"])

        with mcp_sync.connect(httpd.url, protocol="2026-07-28", cache=True, keepalive=0.2, timeout=10) as client:
            client.discover()
            client.discover()  # (from the cache: the results are cacheable)
            before = discovers()
            assert wait_until(lambda: discovers() >= before + 2, timeout=10), "no probe reached the server"


def test_the_probe_alone_is_marked_as_holding_no_admission_slot(make):
    """The probe runs with `calling.held` (the pipeline then sends it
    without an admission slot: user calls holding every slot must not fail
    a liveness check); `on_dead`, which may reconnect, runs without it."""
    from mcp_sync.plain_lane import calling

    held_in_probe, held_in_on_dead = [], []

    def probe(timeout):
        held_in_probe.append(getattr(calling, "held", False))
        raise failure()

    dead = Dead(lambda error: held_in_on_dead.append(getattr(calling, "held", False)))
    make(probe, dead, failures=1)
    assert wait_until(lambda: held_in_on_dead, 5)  # (`Dead` sets its event before its action)
    assert held_in_probe == [True] and held_in_on_dead == [False]
