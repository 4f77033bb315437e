"""The negotiation step and the supervisor on scripted connections: a real
engine (`Connection`) over a transport whose server is a function of the
request, so each era outcome and each state change is decided by the script
alone, with no process, socket or timing in the way."""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

import mcp_sync
from mcp_sync import negotiation
from mcp_sync.connection import Connection, new_id_counter
from mcp_sync.errors import HTTPStatusError
from mcp_sync.metrics import Metrics
from mcp_sync.negotiation import Identity, Terms
from mcp_sync.admission import Admission
from mcp_sync.status import Reconnect, Status
from mcp_sync.supervisor import Policy, Supervisor
from mcp_sync.transports.base import Target, Transport

Script = Callable[[dict[str, Any]], "dict[str, Any] | None"]

INITIALIZED = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "scripted", "version": "1"}}
DISCOVERED = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
              "serverInfo": {"name": "scripted", "version": "1"}, "resultType": "complete"}


class ScriptedTransport(Transport):
    """Answers each request with `script(message)`: a result dict, an
    `{"error": ...}` dict, or None (silence); raises what the script raises."""

    restarts_server = False

    def __init__(self, script: Script, kind: str = "custom") -> None:
        self.script = script
        self.kind = kind
        self.sent: list[dict[str, Any]] = []
        self.closed = False
        self.sink: Any = None

    def start(self, sink: Any) -> None:
        self.sink = sink

    def send(self, message: Any, headers: Any = None) -> None:
        self.sent.append(dict(message))
        if "id" not in message or "method" not in message:
            return
        answer = self.script(dict(message))
        if answer is None:
            return
        if "error" in answer:
            self.sink.deliver({"jsonrpc": "2.0", "id": message["id"], "error": answer["error"]})
        else:
            self.sink.deliver({"jsonrpc": "2.0", "id": message["id"], "result": answer})

    def close(self) -> None:
        self.closed = True


class ScriptedTarget(Target):
    def __init__(self, script: Script, kind: str = "custom", key: Any = None,
                 fallback_to: Target | None = None) -> None:
        self.script, self.kind, self.key, self.fallback_to = script, kind, key, fallback_to
        self.opened: list[ScriptedTransport] = []

    def open(self) -> Transport:
        transport = ScriptedTransport(self.script, self.kind)
        self.opened.append(transport)
        return transport

    def server_key(self) -> Any:
        return self.key

    def fallback(self, refusal: Any = None) -> Target | None:
        return self.fallback_to


class Starter:
    """The negotiation's `Starter`, counting what it starts and abandons."""

    def __init__(self) -> None:
        self.started: list[Connection] = []
        self.abandoned: list[Connection] = []

    def start(self, target: Any) -> Connection:
        conn = Connection(target.open(), new_id_counter())
        conn.start()
        self.started.append(conn)
        return conn

    def abandon(self, conn: Connection, reason: str) -> None:
        self.abandoned.append(conn)
        conn.close(reason)


def terms(allowed: tuple[str, ...] = mcp_sync.SUPPORTED_VERSIONS, probe_timeout: float = 5.0) -> Terms:
    import contextlib

    return Terms(allowed=allowed, probe_timeout=probe_timeout, timeout=5.0,
                 identity=lambda: Identity({}, {"name": "t", "version": "1"}, None),
                 on_log=lambda params: None, answerer=lambda conn: (lambda message: None),
                 traced=lambda method, version: contextlib.nullcontext())


def stateless_server(message: dict[str, Any]) -> dict[str, Any] | None:
    return DISCOVERED if message["method"] == "server/discover" else {}


def initialize_era_server(message: dict[str, Any]) -> dict[str, Any] | None:
    if message["method"] == "server/discover":
        return {"error": {"code": -32601, "message": "Method not found"}}
    if message["method"] == "initialize":
        return INITIALIZED
    return {}


@pytest.fixture(autouse=True)
def clean_memory():
    negotiation.forget()
    yield
    negotiation.forget()


def methods(transport: ScriptedTransport) -> list[str]:
    return [m["method"] for m in transport.sent if "method" in m]


def test_a_stateless_server_settles_on_the_probe_with_what_it_discovered():
    starter, target = Starter(), ScriptedTarget(stateless_server, key="s")
    conn = starter.start(target)
    kept, settled = negotiation.settle(conn, target, terms(), starter)
    assert kept is conn and starter.abandoned == []
    assert settled.dialect.version == "2026-07-28" and settled.dialect.era == "stateless"
    assert settled.discovered is not None
    assert settled.session is None and settled.capabilities == {"tools": {}}
    assert negotiation.recall("s") is None  # a server that answered the probe is not recorded
    kept.close()


def test_an_initialize_era_server_is_initialized_on_the_same_connection_and_remembered():
    starter, target = Starter(), ScriptedTarget(initialize_era_server, key="i")
    conn = starter.start(target)
    kept, settled = negotiation.settle(conn, target, terms(), starter)
    assert kept is conn and len(starter.started) == 1
    assert methods(target.opened[0]) == ["server/discover", "initialize", "notifications/initialized"]
    assert settled.dialect.version == "2025-11-25" and settled.dialect.era == "initialize"
    assert settled.session is not None and settled.declared["extensions"] == {negotiation.SKILLS_EXTENSION: {}}
    assert negotiation.recall("i") == "initialize"
    kept.close()
    # Remembered: the next negotiation sends no probe.
    again = starter.start(target)
    kept, settled = negotiation.settle(again, target, terms(), starter)
    assert methods(target.opened[1]) == ["initialize", "notifications/initialized"]
    kept.close()


def test_a_silent_probe_costs_probe_timeout_once_then_the_era_is_remembered():
    def silent_on_probe(message: dict[str, Any]) -> dict[str, Any] | None:
        return None if message["method"] == "server/discover" else initialize_era_server(message)

    starter, target = Starter(), ScriptedTarget(silent_on_probe, key="quiet")
    kept, settled = negotiation.settle(starter.start(target), target, terms(probe_timeout=0.2), starter)
    assert settled.dialect.era == "initialize" and negotiation.recall("quiet") == "initialize"
    kept.close()


def test_a_refused_post_falls_back_to_the_targets_fallback():
    fallback = ScriptedTarget(initialize_era_server, kind="sse")

    def refusing(message: dict[str, Any]) -> dict[str, Any] | None:
        raise HTTPStatusError("405 Method Not Allowed", status=405, body=b"", headers={})

    starter, target = Starter(), ScriptedTarget(refusing, key="u", fallback_to=fallback)
    conn = starter.start(target)
    kept, settled = negotiation.settle(conn, target, terms(allowed=("2025-11-25",)), starter)
    assert kept is not conn and conn in starter.abandoned
    assert settled.target is fallback and settled.dialect.version == "2025-11-25"
    kept.close()


def test_a_pinned_stateless_version_sends_nothing_to_settle():
    starter, target = Starter(), ScriptedTarget(stateless_server)
    kept, settled = negotiation.settle(starter.start(target), target, terms(allowed=("2026-07-28",)), starter)
    assert methods(target.opened[0]) == [] and settled.dialect.version == "2026-07-28"
    kept.close()


# -- the supervisor -------------------------------------------------------------------------


class Hooks:
    def __init__(self) -> None:
        self.connected = 0

    def engine_callbacks(self) -> dict[str, Any]:
        return {}

    def after_connect(self, settled: Any, deadline: Any) -> None:
        self.connected += 1

    def keepalive_probe(self, timeout: float) -> None:
        pass


def supervisor(target: Target, reconnect: Reconnect | None) -> tuple[Supervisor, Hooks]:
    hooks = Hooks()
    policy = Policy(restart=True, reconnect=reconnect, keepalive=None, timeout=5.0,
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
    policy = Policy(restart=True, reconnect=reconnect, keepalive=None, timeout=5.0,
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
    sup.live()  # attempt 3 after 2 s: the handshake answered, so the run is over
    assert clock.waits == [1.0, 2.0] and sup.attempts == 0 and sup.status.status is Status.READY
    sup.conn.transport_failed(mcp_sync.ConnectionClosed("gone again"))
    sup.live()  # a fresh run: the first attempt goes at once
    assert clock.waits == [1.0, 2.0] and sup.status.status is Status.READY
    sup.close()
