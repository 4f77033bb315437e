"""The keepalive probe and admission (`max_in_flight`): a connection busy
with calls is not idle, and its liveness check must not be refused, or
queued, for want of a slot the user's calls hold.

The race: the keepalive thread finds no call in flight and decides to
probe; before its `ping` takes a slot, user calls take every slot. The
tests drive that window exactly: the keepalive's clock is stepped (no
sleeping for an interval), and its probe starts a blocking tool call and
waits until that call holds the only slot before the real probe runs.
"""

import threading
import time

import pytest

import mcp_sync
from mcp_sync.testing import Server
from tests.helpers import GENEROUS, wait_until


class SteppedClock:
    """A clock the test moves, starting where `time.monotonic()` is."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


def blocking_server(entered: threading.Event, release: threading.Event) -> Server:
    server = Server()

    @server.tool(description="blocks until the test releases it")
    def slow(args, ctx):
        entered.set()
        assert release.wait(GENEROUS * 4), "the test never released the tool"
        return "done"

    return server


@pytest.mark.parametrize("max_queued", [0, None], ids=["shed", "queued"])
def test_a_probe_racing_calls_that_fill_max_in_flight_is_not_a_failed_check(max_queued):
    entered, release = threading.Event(), threading.Event()
    server = blocking_server(entered, release)
    # One failure would declare the connection dead; an hour's interval so
    # the keepalive thread probes only when the test steps its clock.
    with mcp_sync.connect(server, max_in_flight=1, max_queued=max_queued, timeout=GENEROUS * 4,
                          keepalive=mcp_sync.Keepalive(3600, failures=1)) as client:
        keepalive = client._supervisor.keepalive
        admission = client._supervisor.admission
        assert keepalive is not None
        keepalive.probe_timeout = GENEROUS  # a queued probe fails after this, not after 10 s
        results, outcomes, deaths = [], [], []
        real_probe, real_on_dead = keepalive._probe, keepalive._on_dead

        def call():
            results.append(client.call_tool("slow", {}))

        def probe(timeout):
            # The thread has just found no call in flight. Now a user call
            # takes the only slot, before the ping asks for one.
            threading.Thread(target=call, daemon=True).start()
            assert entered.wait(GENEROUS) and admission.in_flight == 1
            try:
                real_probe(timeout)
            except BaseException as exc:
                outcomes.append(exc)
                raise
            outcomes.append(None)

        keepalive._probe = probe
        keepalive._on_dead = lambda error: (deaths.append(error), real_on_dead(error))
        clock = SteppedClock()
        keepalive._clock = clock
        clock.now += 7200  # a whole interval (twice) without traffic: a probe is due
        with keepalive._cond:
            keepalive._cond.notify_all()
        assert wait_until(lambda: outcomes, GENEROUS * 2), "the keepalive never probed"
        try:
            # The server answered the ping while the tool call held the slot.
            assert outcomes == [None], f"the probe failed: {outcomes[0]!r}"
            assert deaths == [] and not keepalive.dead
            assert admission.shed == 0, "the probe was shed as a user call would be"
        finally:
            release.set()
        assert wait_until(lambda: results, GENEROUS), "the user's call never returned"
        assert results[0].text == "done"  # its connection was not torn down under it
        assert client.status == "ready"
