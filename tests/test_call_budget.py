"""How much of the client's own Python one call runs: a budget that cannot drift.

A profiler hook counts the calls of functions in `mcp_sync` (attrs-made
methods of its classes included) on the calling thread and on the
connection's reader thread, for one call at a time. Unlike a timing, the
count is the same on a loaded machine and a quiet one, so it can be
asserted: a change that adds a layer, a lookup per call or a helper on the
hot path fails here, and either pays for itself elsewhere or raises the
budget in the same commit, with the benchmark that justifies it.

Each budget is the count measured when it was set. Third-party code
(`json`, `threading`) is left out of the count: its depth changes with
Python's version, not with ours. The fewest of a few calls is compared:
over HTTP a response sometimes needs a second read (its body came in a
later segment than its head), four calls more; the HTTP budgets are set
at that count, so that a loaded machine on which every response came in
two reads still passes.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import wait_until

#: (transport, what) -> {thread: most calls of mcp_sync functions}.
#: `list` is one `list_tools()` page of the demo server (16 tools).
BUDGETS: dict[tuple[str, str], dict[str, int]] = {
    ("stdio", "call"): {"caller": 20, "reader": 3},
    ("stdio", "list"): {"caller": 43, "reader": 3},
    ("http", "call"): {"caller": 82, "reader": 0},
    ("http", "list"): {"caller": 101, "reader": 0},
}
CALLS = 20

#: kind -> {thread: most calls of mcp_sync functions per event} while a
#: server floods one call with `EVENTS` notifications (benchmarks/server.py's
#: `flood`, the benchmark's server): progress to a `progress=` callback on
#: the caller, resource updates to a `listen()` stream read on the caller.
EVENT_BUDGETS: dict[str, dict[str, int]] = {
    "progress": {"caller": 3, "reader": 4},
    "updates": {"caller": 1, "reader": 10},
    # A log message for no call goes from the reader to the client's log
    # thread, which hands it to `logging` (not counted: not ours); the
    # reader hands a read's log messages on together (`LogQueue.put_all`).
    "log": {"caller": 0, "reader": 2, "log": 2},
}
#: Fewer than half of what a call's inbox holds for progress (256): past
#: half, each event also wakes the caller at once (`inbox.CROWDED`), two
#: calls more on the reader for every event the profiled caller has not yet
#: taken, so the count would depend on the caller's pace, not the work per
#: event. (Past the bound, events are dropped: a slowed caller loses some.)
EVENTS = 120
#: The call itself, the stream's own work and the wake-ups of each read, spread over the events.
SLACK = 120
FLOOD_SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "benchmarks" / "server.py"), "stdio"]


class ListHandler(logging.Handler):
    """Keeps what is logged (the server's log messages, on the log thread)."""

    def __init__(self, records: list[object]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class CallCounter:
    """Counts calls of the package's functions per thread while `on`."""

    def __init__(self) -> None:
        self.on = False
        self.counts: Counter[str] = Counter()
        self.caller = threading.get_ident()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        filename = frame.f_code.co_filename
        if "mcp_sync" not in filename or "/mcp_sync/testing/" in filename:
            return  # not ours, or the test server's (in this process over HTTP)
        name = threading.current_thread().name
        if threading.get_ident() == self.caller:
            self.counts["caller"] += 1
        elif name.startswith("mcp-sync-reader"):
            self.counts["reader"] += 1
        elif name.startswith("mcp-sync-log"):
            self.counts["log"] += 1
        elif not name.startswith("mcp-testing"):
            self.counts[name] += 1

    def per_call(self, fn: Callable[[], object]) -> dict[str, int]:
        """The fewest calls on each thread over `CALLS` calls of `fn`, after two to warm up."""
        fn()
        fn()
        samples: list[Counter[str]] = []
        for _ in range(CALLS):
            self.counts = Counter()
            self.on = True
            fn()
            self.on = False
            samples.append(self.counts)
        threads = set().union(*samples)
        return {thread: min(sample[thread] for sample in samples) for thread in threads}


@pytest.fixture
def counter() -> Iterator[CallCounter]:
    """A counter installed on this thread and on every thread started from now on."""
    counting = CallCounter()
    before = sys.getprofile()
    threading.setprofile(counting)
    sys.setprofile(counting)
    try:
        yield counting
    finally:
        sys.setprofile(before)
        threading.setprofile(None)  # type: ignore[arg-type]


def check(counter: CallCounter, transport: str, what: str, client: mcp_sync.Client) -> None:
    fn = {"call": lambda: client.call_tool("echo", {"text": "x"}), "list": client.list_tools}[what]
    counts = counter.per_call(fn)
    budget = BUDGETS[transport, what]
    print(f"  {transport} {what}: {counts} (budget {budget})")
    assert set(counts) <= {"caller", "reader"}, f"a call ran the package's code on another thread: {counts}"
    over = {thread: (counts.get(thread, 0), most) for thread, most in budget.items()
            if counts.get(thread, 0) > most}
    assert not over, (f"{transport} {what}: more calls of mcp_sync functions than the budget "
                      f"(thread: (counted, budget)): {over}")
    assert counts.get("caller", 0) > 0  # the hook saw the call at all


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_stdio_call_stays_within_its_budget(counter: CallCounter, protocol: str) -> None:
    with mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"], protocol=protocol) as client:
        check(counter, "stdio", "call", client)
        check(counter, "stdio", "list", client)


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_an_http_call_stays_within_its_budget(counter: CallCounter, protocol: str) -> None:
    with HTTPServer(demo_server()) as server, mcp_sync.connect(server.url, protocol=protocol) as client:
        check(counter, "http", "call", client)
        check(counter, "http", "list", client)


@pytest.mark.parametrize("kind", sorted(EVENT_BUDGETS))
def test_a_notification_stays_within_its_budget(counter: CallCounter, kind: str,
                                               request: pytest.FixtureRequest) -> None:
    seen: list[object] = []
    with mcp_sync.connect(FLOOD_SERVER, timeout=60) as client:
        if kind == "progress":
            def flood() -> None:
                client.call_tool("flood", {"n": EVENTS, "kind": "progress"}, progress=seen.append)
        elif kind == "log":
            logs = logging.getLogger("mcp_sync.server")
            handler, level, propagate = ListHandler(seen), logs.level, logs.propagate
            logs.addHandler(handler)
            logs.setLevel(logging.INFO)
            logs.propagate = False
            request.addfinalizer(lambda: (logs.removeHandler(handler), logs.setLevel(level),
                                          setattr(logs, "propagate", propagate)))

            def flood() -> None:
                client.call_tool("flood", {"n": EVENTS, "kind": "log"})
                # Logged on the client's log thread, maybe after the answer.
                assert wait_until(lambda: len(seen) >= EVENTS, timeout=30)
        else:
            subscription = client.listen(resource_subscriptions=["bench://1"], max_buffer=EVENTS + 10)

            def flood() -> None:
                client.call_tool("flood", {"n": EVENTS, "kind": "updates"})
                seen.extend(subscription.next(timeout=30) for _ in range(EVENTS))

        # The fewest of three floods: how many reads the events came in (each
        # read wakes the caller once) depends on timing; the per-event work does not.
        samples = []
        for _ in range(3):
            seen.clear()
            counter.counts = Counter()
            counter.on = True
            flood()
            counter.on = False
            assert len(seen) == EVENTS
            samples.append(counter.counts)
    counts = {thread: min(sample[thread] for sample in samples) for thread in set().union(*samples)}
    budget = EVENT_BUDGETS[kind]
    print(f"  {kind}: {counts} for {EVENTS} events (budget per event {budget}, {SLACK} more in all)")
    assert set(counts) <= set(budget), f"an event ran the package's code on another thread: {counts}"
    over = {thread: (counts.get(thread, 0), most * EVENTS + SLACK) for thread, most in budget.items()
            if counts.get(thread, 0) > most * EVENTS + SLACK}
    assert not over, f"{kind}: more calls of mcp_sync functions than the budget (counted, budget): {over}"
