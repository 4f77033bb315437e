"""The connection supervisor (`mcp_sync.supervisor`) on scripted
connections, with an injected clock for the reconnect policy's states; and
the lifecycle guarantees a client gets from it."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest

import mcp_sync
from mcp_sync.admission import Admission
from mcp_sync.connection import new_id_counter
from mcp_sync.metrics import Metrics
from mcp_sync.status import Status
from mcp_sync.options import Reconnect
from mcp_sync.supervisor import Policy, Supervisor
from mcp_sync.transports.base import Target
from tests.scripted_engine import Script, ScriptedTarget, initialize_era_server, methods, terms


class Hooks:
    def __init__(self) -> None:
        self.connected = 0

    def engine_callbacks(self) -> dict[str, Any]:
        return {}

    def after_connect(self, conn: Any, settled: Any, deadline: Any) -> None:
        self.connected += 1

    def keepalive_probe(self, timeout: float) -> None:
        pass


def by_hand(reconnect: Reconnect | None) -> Reconnect | None:
    """These tests drive reconnecting by hand (`live()`), step by step: no
    reconnect thread may race them. It has tests of its own (test_healing)."""
    return None if reconnect is None else attrs.evolve(reconnect, eager=False)


def supervisor(target: Target, reconnect: Reconnect | None) -> tuple[Supervisor, Hooks]:
    hooks = Hooks()
    policy = Policy(restart=True, reconnect=by_hand(reconnect), keepalive=None, timeout=5.0,
                    probe_timeout=5.0, max_server_requests=4, handler_timeout=None)
    made = Supervisor(target, policy, terms(), hooks, new_id_counter(), Metrics(), Admission(None, None),
                      lambda: None)
    return made, hooks


def test_the_supervisor_publishes_what_was_settled_and_reconnects_in_that_era():
    target = ScriptedTarget(initialize_era_server, key="r")
    sup, hooks = supervisor(target, Reconnect(initial_delay=0.001, max_attempts=3))
    with pytest.raises(mcp_sync.ConnectionClosed, match="not connected"):
        sup.live()
    sup.open()
    first = sup.conn
    assert sup.status.status is Status.READY and hooks.connected == 1
    assert sup.require_settled().session is not None
    first.transport_failed(mcp_sync.ConnectionClosed("the scripted server went away"))
    assert sup.status.status is Status.RECONNECTING  # said at once, not at the next call
    second = sup.live()
    assert second is not first and second.failure is None
    # The era settled before is resumed: a new session, no probe.
    assert methods(target.opened[-1]) == ["initialize", "notifications/initialized"]
    assert sup.status.status is Status.READY and hooks.connected == 2
    assert sup.metrics.snapshot({}).reconnects == 1
    sup.close()
    assert sup.status.status is Status.CLOSED and all(t.closed for t in target.opened)
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-sync-closer")]


def test_without_a_reconnect_policy_a_failed_connection_stays_failed():
    target = ScriptedTarget(initialize_era_server)
    sup, _ = supervisor(target, None)
    sup.open()
    conn = sup.conn
    conn.transport_failed(mcp_sync.ConnectionClosed("gone"))
    assert sup.status.status is Status.FAILED
    assert sup.live() is conn  # handed back: sending on it raises why it ended
    assert len(target.opened) == 1
    sup.close()


def test_a_reconnect_that_keeps_failing_gives_up_after_the_policys_attempts():
    calls = {"n": 0}

    def dies_after_first(message: dict[str, Any]) -> dict[str, Any] | None:
        calls["n"] += 1
        if calls["n"] > 2:  # discover and initialize answered; every reconnect's initialize refused
            return {"error": {"code": -32603, "message": "broken"}}
        return initialize_era_server(message)

    target = ScriptedTarget(dies_after_first)
    sup, _ = supervisor(target, Reconnect(initial_delay=0.001, max_delay=0.001, max_attempts=2))
    sup.open()
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone"))
    with pytest.raises(mcp_sync.ConnectionClosed, match="gave up"):
        for _ in range(5):
            try:
                sup.live()
            except mcp_sync.ServerError:
                continue
    assert sup.status.status is Status.FAILED
    sup.close()


class FakeClock:
    """The supervisor's clock: time moves only when the backoff waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


def refused_after(answered: int) -> Script:
    """An initialize-era server whose first `answered` requests are answered
    and every later one refused (a server that keeps failing to come back)."""
    calls = {"n": 0}

    def script(message: dict[str, Any]) -> dict[str, Any] | None:
        calls["n"] += 1
        if calls["n"] > answered:
            return {"error": {"code": -32603, "message": "still starting"}}
        return initialize_era_server(message)

    return script


def clocked(target: Target, reconnect: Reconnect) -> tuple[Supervisor, FakeClock]:
    clock = FakeClock()
    policy = Policy(restart=True, reconnect=by_hand(reconnect), keepalive=None, timeout=5.0,
                    probe_timeout=5.0, max_server_requests=4, handler_timeout=None)
    made = Supervisor(target, policy, terms(), Hooks(), new_id_counter(), Metrics(), Admission(None, None),
                      lambda: None, clock=clock, pause=clock.pause)
    return made, clock


def test_the_backoff_steps_through_the_policys_delays_then_gives_up():
    target = ScriptedTarget(refused_after(2))
    sup, clock = clocked(target, Reconnect(max_attempts=3, initial_delay=1, max_delay=4, jitter=False))
    sup.open()
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone"))
    assert sup.status.status is Status.RECONNECTING
    with pytest.raises(mcp_sync.ConnectionClosed, match="gave up after 4 attempts"):
        sup.live()
    # One attempt at once, then one after each delay of the policy: 1, 2, 4.
    assert clock.waits == [1.0, 2.0, 4.0] and sup.attempts == 4
    assert sup.status.status is Status.FAILED
    with pytest.raises(mcp_sync.ConnectionClosed, match="reconnecting gave up"):
        sup.live()  # it stays failed: no new run of the policy
    assert len(target.opened) == 5
    sup.close()


def test_a_caller_whose_deadline_comes_before_the_next_attempt_is_told_so_at_once():
    target = ScriptedTarget(refused_after(2))
    sup, clock = clocked(target, Reconnect(max_attempts=5, initial_delay=10, max_delay=10, jitter=False))
    sup.open()
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone"))
    with pytest.raises(mcp_sync.RequestTimeout, match="next attempt is in 10.00 s"):
        sup.live(deadline=clock() + 3)
    assert clock.waits == [] and sup.attempts == 1  # the one attempt it had time for
    # A later caller waits out the backoff and tries again, as long as its
    # deadline lets it: here once.
    with pytest.raises(mcp_sync.RequestTimeout, match="next attempt is in 10.00 s"):
        sup.live(deadline=clock() + 15)
    assert clock.waits == [10.0] and sup.attempts == 2
    sup.close()


def test_a_connection_proven_alive_starts_a_fresh_run_of_the_policy():
    answers = {"refuse": False}

    def script(message: dict[str, Any]) -> dict[str, Any] | None:
        if answers["refuse"] and message["method"] == "initialize":
            return {"error": {"code": -32603, "message": "still starting"}}
        return initialize_era_server(message)

    target = ScriptedTarget(script)
    sup, clock = clocked(target, Reconnect(max_attempts=3, initial_delay=1, max_delay=8, jitter=False))
    sup.open()
    answers["refuse"] = True
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone"))
    with pytest.raises(mcp_sync.RequestTimeout):
        sup.live(deadline=clock() + 1.5)  # attempt 1 now, attempt 2 after 1 s, no time for the 2 s wait
    assert clock.waits == [1.0] and sup.attempts == 2
    answers["refuse"] = False
    sup.live()  # attempt 3 after 2 s: connected, but no call was answered yet
    assert clock.waits == [1.0, 2.0] and sup.attempts == 3 and sup.status.status is Status.READY
    sup.alive()  # a call's answer: the run is over
    assert sup.attempts == 0
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone again"))
    sup.live()  # a fresh run: the first attempt goes at once
    assert clock.waits == [1.0, 2.0] and sup.status.status is Status.READY
    sup.close()


def test_a_server_that_fails_right_after_its_handshake_meets_the_backoff():
    # A server that answers initialize, then dies (a banner on stdout, say):
    # the handshake is no proof, so its failures walk the policy's delays
    # instead of restarting it in a loop; one that lasted starts a fresh run.
    target = ScriptedTarget(initialize_era_server)
    sup, clock = clocked(target, Reconnect(initial_delay=1, max_delay=4, jitter=False))
    sup.open()
    for _ in range(4):
        sup.conn.transport_failed(mcp_sync.ConnectionClosed("died after its handshake"))
        sup.live()
    assert clock.waits == [1.0, 2.0, 4.0] and sup.attempts == 4
    clock.now += 10.0  # it lasted: the longest wait (4 s), and at least 10 s
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("died much later"))
    sup.live()
    assert clock.waits == [1.0, 2.0, 4.0] and sup.attempts == 1
    sup.close()


def keepalive_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mcp-sync-keepalive" and t.is_alive()]


def test_open_a_second_time_opens_nothing_and_after_close_raises():
    target = ScriptedTarget(initialize_era_server)
    sup, hooks = supervisor(target, Reconnect())
    sup.open()
    sup.open()
    assert len(target.opened) == 1 and hooks.connected == 1
    sup.close()
    with pytest.raises(mcp_sync.ConnectionClosed, match="closed"):
        sup.open()
    assert len(target.opened) == 1


def test_a_close_while_open_starts_the_keepalive_leaves_no_keepalive_thread(monkeypatch):
    from mcp_sync import supervisor as module
    from mcp_sync.options import Keepalive as Checks

    real = module.Keepalive
    target = ScriptedTarget(initialize_era_server)
    policy = Policy(restart=True, reconnect=None, keepalive=Checks(30), timeout=5.0, probe_timeout=5.0,
                    max_server_requests=4, handler_timeout=None)
    sup = Supervisor(target, policy, terms(), Hooks(), new_id_counter(), Metrics(), Admission(None, None),
                     lambda: None)

    def closed_first(*args: Any, **kwargs: Any) -> Any:
        # Another thread's close() lands between publishing the connection
        # and storing the keepalive.
        closer = threading.Thread(target=sup.close)
        closer.start()
        closer.join()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "Keepalive", closed_first)
    before = set(keepalive_threads())
    with pytest.raises(mcp_sync.ConnectionClosed, match="closed while connecting"):
        sup.open()
    assert set(keepalive_threads()) <= before


def test_close_ends_a_subscription_a_reconnect_had_interrupted():
    from mcp_sync.subscriptions import Subscription, SubscriptionBroken

    target = ScriptedTarget(initialize_era_server)
    sup, _ = supervisor(target, Reconnect())
    sup.open()
    subscription = Subscription(lambda sub: None)
    sup.register(subscription)
    subscription.interrupt()  # its stream broke; the reconnect was under way
    sup.close()
    assert subscription.ended
    end = subscription.next(timeout=0)
    assert isinstance(end, SubscriptionBroken) and "closed" in str(end.error)


def test_a_discovery_that_lands_while_reconnecting_is_kept():
    from mcp_sync.types import DiscoverResult

    newer = DiscoverResult.from_wire({"supportedVersions": ["2026-07-28"], "capabilities": {"prompts": {}},
                                      "resultType": "complete"})
    sup_box: list[Supervisor] = []

    class Discovering(ScriptedTarget):
        def open(self) -> Any:
            if self.opened:  # the reconnect: a discover() of another thread lands now
                sup_box[0].update(discovered=newer)
            return super().open()

    def stateless(message: dict[str, Any]) -> dict[str, Any] | None:
        return {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete"}

    target = Discovering(stateless)
    sup, _ = supervisor(target, Reconnect())
    sup_box.append(sup)
    sup.open()
    assert sup.require_settled().capabilities == {"tools": {}}
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone"))
    sup.live()
    assert len(target.opened) == 2
    assert sup.require_settled().capabilities == {"prompts": {}}  # not the record the reconnect started from
    sup.close()
