"""The metrics recorder behind `client.stats()` (issue 14, "Metrics out of
the box"): the fixed-memory histogram's percentiles stay within their
documented error bound against an exact computation, the recorder counts
exactly under many threads, its memory is bounded whatever method names it
is given, and its snapshots are frozen and JSON-ready. And what a client
counts: a cancellation only where one was made, and a call the caller's
own callback or handler ended as "interrupted".
"""

from __future__ import annotations

import json
import math
import random
import sys
import threading
import time
import tracemalloc

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import mcp_sync
from mcp_sync.metrics import COUNTERS, OTHER, OUTCOMES, Histogram, Metrics, MethodStats, Stats
from mcp_sync.testing import HTTPServer, Server, demo_server
from tests.helpers import wait_until

LOW = 10e-6  # the histogram's smallest bucket bound, as documented
RATIO = 1.2  # the documented worst relative overestimate (1 + 20 %)
HIGH = Histogram.BOUNDS[-2]  # the top of the range where that bound holds
QS = (0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 100)


def exact_percentile(samples: list[float], q: float) -> float:
    """The nearest-rank percentile: the smallest sample with at least q % of
    the samples at or below it (no histogram, no numpy)."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q * len(ordered) / 100))
    return ordered[rank - 1]


def check_bound(samples: list[float], q: float, got: float | None) -> None:
    exact = exact_percentile(samples, q)
    assert got is not None
    assert exact <= got <= max(samples), (q, exact, got)
    if LOW <= exact <= HIGH:
        assert got <= exact * RATIO * (1 + 1e-12), (q, exact, got)
    elif exact < LOW:
        assert got <= LOW, (q, exact, got)
    # The defining property, independent of how the rank is computed: at
    # least q % of the samples lie at or below the answer.
    assert sum(1 for s in samples if s <= got) >= q * len(samples) / 100 * (1 - 1e-12)


def histogram_of(samples: list[float]) -> Histogram:
    h = Histogram()
    for s in samples:
        h.add(s)
    return h


# -- Histogram ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_percentiles_within_the_documented_bound_on_random_samples(seed: int) -> None:
    rng = random.Random(seed)
    shapes = [
        lambda: rng.lognormvariate(math.log(0.005), 1.5),  # typical latencies, 10 µs .. seconds
        lambda: rng.uniform(0, 2.0),
        lambda: rng.choice([3e-6, 0.001, 0.001, 0.25, 2000.0]),  # ties, below and above the range
        lambda: 10 ** rng.uniform(-7, 3.5),  # log-uniform over every bucket and both ends
    ]
    samples = [shapes[seed % len(shapes)]() for _ in range(rng.choice([1, 7, 100, 5000]))]
    h = histogram_of(samples)
    assert h.count == len(samples)
    assert h.max == max(samples) and h.min == min(samples)
    for q in QS:
        check_bound(samples, q, h.percentile(q))
    assert h.percentile(100) == max(samples)
    assert h.percentile(0) == min(samples)


@settings(max_examples=200, deadline=None)
@given(
    samples=st.lists(st.floats(min_value=0, max_value=5000, allow_nan=False), min_size=1, max_size=60),
    q=st.floats(min_value=0, max_value=100),
)
def test_percentile_bound_holds_for_any_samples(samples: list[float], q: float) -> None:
    check_bound(samples, q, histogram_of(samples).percentile(q))


def test_a_sample_on_a_bucket_bound_is_never_underestimated() -> None:
    # Where the logarithm is an ulp off, a value exactly on a bound (or just
    # above it) could land one bucket low and be reported below itself.
    for bound in Histogram.BOUNDS[1:-1]:
        for value in (bound, math.nextafter(bound, math.inf), math.nextafter(bound, 0)):
            samples = [0.0, value, 5000.0]  # the median is `value`
            check_bound(samples, 50, histogram_of(samples).percentile(50))


def test_histogram_rejects_impossible_durations_and_answers_none_when_empty() -> None:
    h = Histogram()
    assert h.count == 0 and h.percentile(50) is None and h.max is None and h.min is None
    for bad in (-0.001, math.nan, math.inf):
        with pytest.raises(ValueError):
            h.add(bad)
    assert h.count == 0
    for bad_q in (-1, 100.5, math.nan):
        with pytest.raises(ValueError):
            h.percentile(bad_q)


def test_histogram_memory_does_not_grow_with_samples() -> None:
    rng = random.Random(1)
    h = Histogram()
    for _ in range(1000):
        h.add(rng.uniform(0, 10))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            h.add(rng.uniform(0, 10))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 100 000 kept floats would be >= 800 KB; a fixed list of counts grows
    # only by the int objects of its (at most 104) counts.
    assert grown < 8 * 1024, grown
    assert h.count == 101_000


# -- Metrics --------------------------------------------------------------------------------


def test_counts_are_exact_under_16_threads() -> None:
    metrics = Metrics()
    threads_n, per_thread = 16, 5000
    # Many names, each first met by all threads at once: creating a method's
    # entry is where a missing lock loses counts even under the GIL.
    methods = [f"tools/{n}" for n in range(250)]
    start = threading.Barrier(threads_n)

    def work(worker: int) -> None:
        start.wait(timeout=10)
        for i in range(per_thread):
            metrics.record(methods[i % 250], OUTCOMES[(i + worker) % 5], 0.001 * (i % 7))
            if i % 10 == 0:
                metrics.add_bytes(sent=3, received=5)
            if i % 100 == 0:
                metrics.count("shed")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so that a missing lock shows
    try:
        threads = [threading.Thread(target=work, args=(w,)) for w in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in threads)

    stats = metrics.snapshot()
    total = threads_n * per_thread
    assert stats.requests_total == total, f"{total - stats.requests_total} records lost"
    assert set(stats.requests) == set(methods)
    for name in methods:
        m = stats.requests[name]
        assert m.count == total // 250
        assert sum(m.outcomes.values()) == m.count
    assert sum(stats.requests[name].outcomes["timeout"] for name in methods) == total // 5
    assert stats.timeouts == total // 5
    assert stats.bytes_sent == 3 * total // 10 and stats.bytes_received == 5 * total // 10
    assert stats.shed == total // 100


def test_distinct_methods_are_bounded_and_the_rest_counted_as_other() -> None:
    metrics = Metrics(max_methods=8)
    for i in range(1000):
        metrics.record(f"custom/{i}", "ok", 0.002)
    stats = metrics.snapshot()
    assert len(stats.requests) == 9
    assert stats.requests[OTHER].count == 992
    assert stats.requests_total == 1000
    # A tracked method keeps its own entry after the bound is reached.
    metrics.record("custom/0", "error", 0.5)
    assert metrics.snapshot().requests["custom/0"].outcomes["error"] == 1


def _counted_one_at_a_time(samples, max_methods):
    """What `Metrics` should count: each sample `finished()` took, in
    order, by the rules `record()` states (an unknown outcome or a duration
    outside [0, inf) is left out; a method past `max_methods` names counts
    as OTHER), one at a time: method -> (outcomes, histogram)."""
    names: list[str] = []
    counted: dict[str, tuple[dict[str, int], Histogram]] = {}
    for method, outcome, seconds in samples:
        if outcome not in OUTCOMES or not 0.0 <= seconds < math.inf:
            continue
        if method not in names and len(names) < max_methods:
            names.append(method)
        name = method if method in names else OTHER
        outcomes, histogram = counted.setdefault(name, (dict.fromkeys(OUTCOMES, 0), Histogram()))
        outcomes[outcome] += 1
        histogram.add(seconds)
    return counted


_SECONDS = st.one_of(st.floats(min_value=0.0, max_value=2000.0), st.sampled_from([0.0, 10e-6, -1.0, math.inf,
                                                                                   -math.inf, math.nan, 1e308]))


@settings(max_examples=300, deadline=None)
@given(samples=st.lists(st.tuples(st.sampled_from(["tools/call", "a", "b", "c", "d"]),
                                  st.sampled_from([*OUTCOMES, "bogus"]), _SECONDS), max_size=300),
       cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=4), max_methods=st.integers(1, 4))
# A NaN between valid samples, a NaN first, and an infinity that must not
# give its method a record before another's.
@example(samples=[("a", "ok", 1.0), ("a", "ok", math.nan), ("a", "ok", 2.0)], cuts=[], max_methods=4)
@example(samples=[("a", "ok", math.nan), ("a", "ok", 0.5)], cuts=[], max_methods=4)
@example(samples=[("a", "ok", math.inf), ("b", "ok", 1.0), ("a", "ok", 1.0)], cuts=[], max_methods=1)
@example(samples=[("a", "ok", -1.0), ("a", "ok", 3.0), ("b", "error", 2.0)], cuts=[], max_methods=1)
# Past the fold mark: folds made by `finished()` itself.
@example(samples=[("a" if i % 3 else "b", OUTCOMES[i % 5], i * 1e-4) for i in range(300)], cuts=[], max_methods=1)
def test_a_fold_counts_what_one_sample_at_a_time_counts(samples, cuts, max_methods) -> None:
    """`finished()` trusts its caller and counts in folds (every 256
    samples, and in snapshots taken anywhere in between: `cuts`): the
    counts, the percentiles and which methods have names of their own are
    those of counting each sample as it came, by `record()`'s rules."""
    metrics = Metrics(max_methods=max_methods)
    for index, (method, outcome, seconds) in enumerate(samples):
        if index in cuts:
            metrics.snapshot()
        metrics.finished(method, outcome, seconds)
    stats = metrics.snapshot()
    expected = _counted_one_at_a_time(samples, max_methods)
    assert set(stats.requests) == set(expected)
    for name, (outcomes, histogram) in expected.items():
        got = stats.requests[name]
        assert dict(got.outcomes) == outcomes and got.count == histogram.count
        assert (got.p50, got.p90, got.p99, got.max) == (histogram.percentile(50), histogram.percentile(90),
                                                         histogram.percentile(99), histogram.max)


def test_what_record_accepts_never_stops_the_recorder() -> None:
    """An int too large for a float and Decimals among floats are valid
    durations: a fold counts them, and goes on counting."""
    from decimal import Decimal

    metrics = Metrics()
    metrics.record("big", "ok", 10**400)
    metrics.record("big", "ok", 10**308)
    metrics.record("mixed", "ok", Decimal("0.5"))
    metrics.record("mixed", "ok", 0.25)
    stats = metrics.snapshot().requests
    assert stats["big"].count == 2 and stats["big"].max == 10**400
    assert stats["mixed"].count == 2 and stats["mixed"].max == Decimal("0.5")
    metrics.record("big", "ok", 1.0)
    assert metrics.snapshot().requests["big"].count == 3


def test_a_method_that_is_not_a_string_is_refused() -> None:
    metrics = Metrics()
    with pytest.raises(TypeError):
        metrics.record(["tools/call"], "ok", 0.1)  # type: ignore[arg-type]
    metrics.record("ping", "ok", 0.1)
    assert set(metrics.snapshot().requests) == {"ping"}


def test_default_bound_keeps_memory_flat_for_arbitrary_method_names() -> None:
    metrics = Metrics()
    for i in range(300):
        metrics.record(f"warmup/{i}", "ok", 0.001)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20_000):
            metrics.record(f"flood/{i}", "ok", 0.001)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(metrics.snapshot().requests) == 257
    assert grown < 16 * 1024, grown  # 20 000 entries would be megabytes


def test_snapshot_is_frozen_and_unaffected_by_later_records() -> None:
    metrics = Metrics()
    metrics.record("tools/call", "ok", 0.010)
    stats = metrics.snapshot()
    metrics.record("tools/call", "timeout", 30.0)
    metrics.record("ping", "ok", 0.001)
    metrics.count("reconnects")

    assert stats.requests_total == 1 and stats.timeouts == 0 and stats.reconnects == 0
    assert set(stats.requests) == {"tools/call"}
    assert stats.requests["tools/call"].max == 0.010
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.reconnects = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        stats.requests["ping"] = stats.requests["tools/call"]  # type: ignore[index]
    with pytest.raises(TypeError):
        stats.requests["tools/call"].outcomes["ok"] = 7  # type: ignore[index]
    assert metrics.snapshot().requests_total == 3


def test_as_dict_is_json_serialisable_and_complete() -> None:
    metrics = Metrics()
    metrics.record("tools/call", "ok", 0.004)
    metrics.record("tools/call", "cancelled", 0.2)
    metrics.count("cancellations", 2)
    metrics.add_bytes(sent=10)
    stats = metrics.snapshot(dropped={"notifications": 2, "progress": 1, "logs": 0, "refused_requests": 4})
    data = json.loads(json.dumps(stats.as_dict(), allow_nan=False))
    assert set(data) == {field.name for field in attrs.fields(Stats)}
    assert data["notifications_dropped"] == 7 and data["cancellations"] == 2 and data["bytes_sent"] == 10
    call = data["requests"]["tools/call"]
    assert set(call) == {field.name for field in attrs.fields(MethodStats)}
    assert call["count"] == 2 and call["outcomes"] == {"ok": 1, "error": 0, "timeout": 0,
                                                        "cancelled": 1, "interrupted": 0}
    assert call["max"] == 0.2 and 0.004 <= call["p50"] <= 0.004 * RATIO
    assert json.loads(json.dumps(Metrics().snapshot().as_dict()))["requests"] == {}


def test_timeouts_have_one_source_the_recorded_outcome() -> None:
    metrics = Metrics()
    metrics.record("tools/call", "timeout", 5.0)
    metrics.record("resources/read", "timeout", 5.0)
    assert metrics.snapshot().timeouts == 2
    with pytest.raises(ValueError, match="outcome 'timeout'"):
        metrics.count("timeouts")
    assert set(COUNTERS) == {"reconnects", "shed", "cancellations"}


def test_bad_arguments_raise_value_error_and_count_nothing() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError):
        metrics.record("ping", "okay", 0.1)
    with pytest.raises(ValueError):
        metrics.record("ping", "ok", -1.0)
    with pytest.raises(ValueError):
        metrics.record("ping", "ok", math.nan)
    with pytest.raises(ValueError):
        metrics.count("reconnects", -1)
    with pytest.raises(ValueError):
        metrics.add_bytes(sent=-5)
    with pytest.raises(ValueError):
        Metrics(max_methods=0)
    stats = metrics.snapshot()
    assert stats.requests_total == 0 and stats.reconnects == 0 and stats.bytes_sent == 0
    assert stats.requests == {}  # not even an empty entry for "ping"


def test_since_uptime_and_reset() -> None:
    before = time.time()
    metrics = Metrics()
    metrics.record("ping", "ok", 0.001)
    metrics.count("reconnects")
    first = metrics.snapshot(dropped=None)
    assert before <= first.since <= time.time() and first.uptime >= 0
    assert first.notifications_dropped == 0

    metrics.reset()
    after = metrics.snapshot()
    assert after.since >= first.since
    assert after.requests == {} and after.requests_total == 0 and after.reconnects == 0
    assert metrics.snapshot().uptime >= after.uptime


def test_after_fork_gives_a_fresh_lock_and_fresh_counts() -> None:
    metrics = Metrics()
    metrics.record("ping", "ok", 0.001)
    # A parent thread holding the lock at fork time does not exist in the child.
    assert metrics._lock.acquire(timeout=1)
    metrics.after_fork()
    done = threading.Event()

    def use() -> None:
        metrics.record("ping", "ok", 0.002)
        done.set()

    t = threading.Thread(target=use, daemon=True)
    t.start()
    assert done.wait(timeout=5), "record() blocked on the lock held at fork time"
    t.join(timeout=5)
    assert metrics.snapshot().requests["ping"].count == 1


# -- what a client counts (`client.stats()`) ---------------------------------------------------



def counting_server(gate: threading.Event) -> Server:
    server = Server(name="counting")
    server.holding = threading.Event()
    server.cancelled_calls = []
    server.echoed = []

    @server.tool(input_schema={"type": "object"})
    def echo(args, ctx):
        server.echoed.append(args)
        return str(args.get("text", ""))

    @server.tool(input_schema={"type": "object"})
    def hold(args, ctx):
        server.holding.set()
        gate.wait(30)
        return "held"

    @server.tool(input_schema={"type": "object"})
    def report(args, ctx):
        ctx.progress(1, 2)
        if ctx.cancelled.wait(30):  # the client gave up on it and said so
            server.cancelled_calls.append(args)
        return "reported"

    @server.tool(input_schema={"type": "object"})
    def ask(args, ctx):
        ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        if ctx.cancelled.wait(30):
            server.cancelled_calls.append(args)
        return "asked"

    return server


def test_a_call_that_timed_out_waiting_for_its_slot_counts_no_cancellation() -> None:
    # Nothing of it was sent, so nothing was cancelled: it counted one.
    gate = threading.Event()
    server = counting_server(gate)
    with mcp_sync.connect(server, max_in_flight=1, timeout=10) as client:
        holder = threading.Thread(target=client.call_tool, args=("hold", {}), daemon=True)
        holder.start()
        try:
            assert server.holding.wait(10)
            with pytest.raises(mcp_sync.RequestTimeout):
                client.call_tool("echo", {"text": "queued"}, timeout=0.2)
        finally:
            gate.set()
            holder.join(10)
        stats = client.stats()
    assert server.echoed == []  # it never reached the server
    assert stats.timeouts == 1 and stats.cancellations == 0
    assert {k: v for k, v in stats.requests["tools/call"].outcomes.items() if v} == {"ok": 1, "timeout": 1}


def test_a_call_that_timed_out_after_it_was_sent_counts_its_cancellation() -> None:
    gate = threading.Event()
    server = counting_server(gate)
    with mcp_sync.connect(server, timeout=10) as client:
        try:
            with pytest.raises(mcp_sync.RequestTimeout):
                client.call_tool("report", {}, timeout=0.2)
            assert wait_until(lambda: server.cancelled_calls, 10)
        finally:
            gate.set()
        stats = client.stats()
    assert stats.timeouts == 1 and stats.cancellations == 1


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_progress_callback_that_raises_counts_an_interrupted_call_and_its_cancellation(protocol) -> None:
    # The metrics' definition: "interrupted" is a KeyboardInterrupt or an
    # exception raised by the caller's own callback; the call is cancelled
    # on the server, and that counts as a cancellation.
    gate = threading.Event()
    server = counting_server(gate)

    def progress(update):
        raise ValueError("the caller's own callback")

    with mcp_sync.connect(server, protocol=protocol, timeout=10) as client:
        try:
            with pytest.raises(ValueError, match="the caller's own callback"):
                client.call_tool("report", {}, progress=progress)
            assert wait_until(lambda: server.cancelled_calls, 10), "the server was not told the call was cancelled"
        finally:
            gate.set()
        stats = client.stats()
    assert {k: v for k, v in stats.requests["tools/call"].outcomes.items() if v} == {"interrupted": 1}
    assert stats.cancellations == 1 and stats.timeouts == 0


def test_an_input_handler_that_raises_counts_an_interrupted_call_and_its_cancellation() -> None:
    # Initialize-era HTTP: the question comes on the call's own response
    # stream and its handler runs inside the call, on the caller's thread.
    def form(params):
        raise RuntimeError("the caller's own handler")

    with HTTPServer(demo_server()) as httpd, \
            mcp_sync.connect(httpd.url, protocol="2025-11-25", input_handlers={"form": form}, timeout=30) as client:
        with pytest.raises(mcp_sync.InputHandlerError, match="the caller's own handler"):
            client.call_tool("book_table", {"date": "friday"})
        stats = client.stats()
    assert {k: v for k, v in stats.requests["tools/call"].outcomes.items() if v} == {"interrupted": 1}
    assert stats.cancellations == 1  # (initialize-era HTTP: a notifications/cancelled)


def test_an_input_handler_that_answers_something_invalid_is_an_error() -> None:
    # Nothing of the caller's raised: the library refused what it answered.
    def form(params):
        return {"action": "accept", "content": {"name": "Ada", "guests": "many"}}

    with HTTPServer(demo_server()) as httpd, \
            mcp_sync.connect(httpd.url, protocol="2025-11-25", input_handlers={"form": form}, timeout=30) as client:
        with pytest.raises(mcp_sync.InputHandlerError):
            client.call_tool("book_table", {"date": "friday"})
        stats = client.stats()
    assert {k: v for k, v in stats.requests["tools/call"].outcomes.items() if v} == {"error": 1}


def test_an_error_of_the_library_is_still_an_error() -> None:
    # Only the caller's own code makes a call "interrupted": a server's error
    # answer stays "error" and cancels nothing.
    with mcp_sync.connect(counting_server(threading.Event()), timeout=10) as client:
        with pytest.raises(mcp_sync.ServerError):
            client.call_tool("no-such-tool", {}, timeout=10)
        stats = client.stats()
    assert {k: v for k, v in stats.requests["tools/call"].outcomes.items() if v} == {"error": 1}
    assert stats.cancellations == 0


def test_a_subscription_closed_counts_its_cancellation() -> None:
    # Closing it sends notifications/cancelled for its listen request.
    with mcp_sync.connect(demo_server(), timeout=10) as client:
        subscription = client.listen()
        subscription.close()
        assert client.stats().cancellations == 1
