"""Counters and latency histograms of one client, and their snapshots.

What it owns: `Metrics`, the recorder a client keeps from `connect()` on
(requests by method and outcome, latency per method, reconnects, shed
calls, cancel notifications, bytes on the wire), and `Stats`, the frozen
snapshot `client.stats()` hands out. It does no IO and starts no thread.

Cost is what decides the shape: a finished request is one `finished()`
(`record()` without its checks), which appends `(method, outcome,
seconds)` to an intake queue and returns; now and then one caller folds
the queue into the counts, all at once. Measured in calls, where
everything the recorder touches is cold, the cost of a record is the
number of objects and lines of bytecode it touches, not the work: counting
each call in place (a binary search for its bucket, dictionary lookups,
increments) cost twice as much as an append does plus its share of a fold,
in which everything stays hot. The benchmark suite's `stats_cost` case
measures what the recorder adds to a call.

Lock discipline: `_lock` guards the counts (the records, the event
counters, the byte counts) and the folding of the intake. The intake is a
`collections.deque`, whose `append` and `popleft` are atomic, so callers
append without the lock. A caller that finds `_FOLD_AT` items waiting
folds them under the lock, unless another thread is folding already (then
it carries on, and the folder takes its item too); past four times that,
it waits for the lock and folds, which bounds the queue whatever the
scheduling. `snapshot()` folds everything first, so it counts every request
finished before it. `reset()` and `after_fork()` replace the whole state
under the lock; a record racing them lands in the old state and is
forgotten with it. A KeyboardInterrupt landing in a fold can leave the one
sample being folded half counted (in its outcome but not its latency).

Memory is bounded whatever the caller does: the intake holds at most
`4 * _FOLD_AT` items plus one per thread appending, a histogram is a fixed
list of counts (no samples are kept), and at most `max_methods` distinct
method names are tracked; the rest are counted together under `"other"`.

Which number has which source, so that nothing is counted twice:

- a request's outcome (and so the timeout total) comes only from
  `record()`: `Stats.timeouts` is the number of calls recorded with the
  outcome `"timeout"`;
- `count("cancellations")` counts the requests the client cancelled on
  the server, told by the engine where each cancellation is made
  (`Connection._cancel`): a `notifications/cancelled` queued, or, over
  2026-07-28 Streamable HTTP, the request's own stream closed (that era's
  cancellation). After a timeout, an interrupt, a callback that raised or
  a subscription closed alike; never for a call that ended before it was
  sent (a timeout waiting for an admission slot), for `initialize` (which
  may not be cancelled) nor for a call answered already. Not the same as
  calls that ended `"cancelled"`;
- `count("shed")` counts calls refused with `Overloaded` before anything
  was sent; such a call is not also `record()`-ed;
- `count("reconnects")` counts connections re-established after a failure.
"""

from __future__ import annotations

import bisect
import collections
import math
import threading
import time
import types
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Histogram", "Metrics", "MethodStats", "Stats", "OUTCOMES", "COUNTERS", "OTHER"]

#: Records that wait in the intake before a caller folds them into the counts.
_FOLD_AT = 256

#: The outcomes a finished request is recorded with: "ok" (a result),
#: "error" (any other `McpError`: the server's error, a failed transport, a
#: protocol violation, an input handler's answer refused as invalid),
#: "timeout" (`RequestTimeout`), "cancelled" (the caller cancelled it),
#: "interrupted" (KeyboardInterrupt, or an exception raised by the caller's
#: own callback or input handler, as it is or as the `InputHandlerError`
#: whose cause it is).
OUTCOMES = ("ok", "error", "timeout", "cancelled", "interrupted")
#: The event counters `Metrics.count` accepts.
COUNTERS = ("reconnects", "shed", "cancellations")
#: Where requests to methods beyond `Metrics.max_methods` are counted.
OTHER = "other"

_OUTCOME_INDEX = {name: index for index, name in enumerate(OUTCOMES)}

# -- the histogram's buckets ------------------------------------------------------------------
#
# Bucket 0 holds [0, 10 µs]; bucket i (1 <= i <= _TOP) holds (B[i-1], B[i]] with
# B[i] = 10 µs * 1.2**i, so that the last finite bound is just above 1000 s;
# bucket _TOP + 1 holds everything larger. 104 counts in all.
_LOW = 10e-6
_RATIO = 1.2
_LOG_RATIO = math.log(_RATIO)
_TOP = math.ceil(math.log(1000.0 / _LOW) / _LOG_RATIO)
_BOUNDS: tuple[float, ...] = tuple(_LOW * _RATIO ** i for i in range(_TOP + 1)) + (math.inf,)
_INF = math.inf
# The bucket of `seconds` is the first bound at or above it: bucket i holds
# (B[i-1], B[i]]. A binary search of the table (seven comparisons, in C)
# rather than a logarithm: cheaper, and exact at every bound by
# construction, which the documented error bound relies on.
_bisect_left = bisect.bisect_left


def _bucket(seconds: float) -> int:
    """The index of the bucket that holds `seconds` (checked: 0 <= seconds < inf)."""
    return _bisect_left(_BOUNDS, seconds)


def _check_duration(seconds: float) -> None:
    if not 0.0 <= seconds < _INF:
        raise ValueError(f"a duration must be finite and >= 0, not {seconds!r}")


class Histogram:
    """A fixed-memory latency histogram: log-spaced buckets, no samples kept.

    Buckets grow by a factor of 1.2 from 10 µs to about 1190 s (104 counts,
    whatever the number of samples); the exact smallest and largest sample
    are kept too. Not thread-safe on its own (`Metrics` guards it).

    Error bound of `percentile(q)`: let v be the exact nearest-rank
    percentile of the samples added (the smallest sample with at least q %
    of the samples at or below it). The answer r never underestimates and
    never exceeds the largest sample: v <= r <= max. Moreover r <= 1.2 * v
    (at most 20 % high) when 10 µs <= v <= `BOUNDS[-2]` (about 1190 s),
    r <= 10 µs when v < 10 µs, and above the range only r <= max holds.
    r = v exactly when v is the smallest or the largest sample (q = 0,
    q = 100).

    Example::

        h = Histogram()
        for ms in (1, 2, 3, 4, 100):
            h.add(ms / 1000)
        assert h.count == 5 and h.percentile(100) == 0.1
        assert 0.003 <= h.percentile(50) <= 0.003 * 1.2
    """

    __slots__ = ("_counts", "_n", "_min", "_max")

    #: The upper bound of each bucket, in seconds (the last one is infinite).
    BOUNDS = _BOUNDS

    def __init__(self) -> None:
        self._counts = [0] * len(_BOUNDS)
        self._n = 0
        self._min = math.inf
        self._max = 0.0

    def add(self, seconds: float) -> None:
        """Count one sample; ValueError for a negative, NaN or infinite one."""
        _check_duration(seconds)
        self._add_at(_bucket(seconds), seconds)

    def _add_at(self, bucket: int, seconds: float) -> None:
        """`add` with the check made and the bucket found by the caller."""
        self._counts[bucket] += 1
        self._n += 1
        if seconds > self._max:
            self._max = seconds
        if seconds < self._min:
            self._min = seconds

    @property
    def count(self) -> int:
        """The number of samples added."""
        return self._n

    @property
    def max(self) -> float | None:
        """The largest sample, exactly; None when there is none."""
        return self._max if self._n else None

    @property
    def min(self) -> float | None:
        """The smallest sample, exactly; None when there is none."""
        return self._min if self._n else None

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0 <= q <= 100) in seconds, within the bound
        stated on the class; None when no sample was added."""
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"a percentile is between 0 and 100, not {q!r}")
        n = self._n
        if n == 0:
            return None
        rank = max(1, math.ceil(q * n / 100.0))
        if rank == 1:
            return self._min
        if rank >= n:
            return self._max
        seen = 0
        for index, count in enumerate(self._counts):
            seen += count
            if seen >= rank:
                return min(_BOUNDS[index], self._max)
        raise AssertionError("the counts add up to fewer than count")  # pragma: no cover

    def copy(self) -> Histogram:
        """An independent copy (for a snapshot taken under a lock)."""
        new = Histogram.__new__(Histogram)
        new._counts = self._counts.copy()
        new._n, new._min, new._max = self._n, self._min, self._max
        return new


# -- the snapshot types ---------------------------------------------------------------------


def _frozen_map(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class MethodStats:
    """The requests of one method since the client connected.

    `count` is every finished call; `outcomes` splits it by outcome (every
    name in `OUTCOMES` is present, zeros included). The latencies (seconds)
    cover all outcomes: a timed-out call counts with the time it waited, so
    a p99 near the timeout means calls are hitting it. They come from a
    `Histogram` (at most 20 % high, never low; `max` is exact) and are None
    when `count` is 0.

    Example::

        m = client.stats().requests["tools/call"]
        print(m.count, m.outcomes["timeout"], m.p99)

    Attributes:
        count (int): Calls of this method that finished, whatever the outcome.
        outcomes (Mapping[str, int]): `count` split by outcome: a number for
            every name in `OUTCOMES` (``"ok"``, ``"error"``, ``"timeout"``,
            ``"cancelled"``, ``"interrupted"``), zeros included. Read-only.
        p50 (float | None): The median latency, in seconds; None when `count`
            is 0.
        p90 (float | None): The 90th percentile latency, in seconds; None
            when `count` is 0.
        p99 (float | None): The 99th percentile latency, in seconds; None
            when `count` is 0.
        max (float | None): The longest latency, in seconds (exact); None
            when `count` is 0.
    """

    count: int
    outcomes: Mapping[str, int] = attrs.field(converter=_frozen_map)
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {"count": self.count, "outcomes": dict(self.outcomes),
                "p50": self.p50, "p90": self.p90, "p99": self.p99, "max": self.max}


@attrs.frozen(kw_only=True)
class Stats:
    """A snapshot of a client's counters since it connected (or since
    `Metrics.reset()`); later activity does not change it.

    Example (a health endpoint)::

        stats = client.stats()
        if stats.timeouts > 10 or stats.reconnects > 3:
            log.warning("MCP server unhealthy: %s", stats.as_dict())
        body = json.dumps(stats.as_dict())

    Attributes:
        since (float): When counting began, wall-clock seconds since the
            epoch (as `time.time()`).
        uptime (float): Seconds from `since` to the snapshot.
        requests (Mapping[str, MethodStats]): A `MethodStats` per method, at
            most `max_methods` of them plus ``"other"`` for the rest.
            Read-only.
        requests_total (int): The calls of `requests` added up.
        timeouts (int): Calls that ended with `RequestTimeout` (their
            outcome ``"timeout"``).
        cancellations (int): Requests cancelled on the server: a
            `notifications/cancelled` queued, or (2026-07-28 Streamable
            HTTP) the request's stream closed; after a timeout, an
            interrupt, a callback that raised or a subscription closed
            alike. A call that ended before it was sent counts none.
        reconnects (int): Connections re-established after a failure.
        shed (int): Calls refused with `Overloaded` before anything was sent
            (not counted in `requests`).
        notifications_dropped (int): Everything the client dropped to stay
            within its memory bounds (the total of `client.dropped`).
        bytes_sent (int): Bytes written to the wire, as the transports count
            them.
        bytes_received (int): Bytes read from the wire, as the transports
            count them.
        in_flight (int): Calls sent and waiting for their answer, at the
            snapshot.
        queued (int): Calls waiting for a slot (`max_in_flight`) or for the
            connection to come back, at the snapshot.
    """

    since: float
    uptime: float
    requests: Mapping[str, MethodStats] = attrs.field(converter=_frozen_map)
    requests_total: int
    timeouts: int
    cancellations: int
    reconnects: int
    shed: int
    notifications_dropped: int
    bytes_sent: int
    bytes_received: int
    in_flight: int = 0
    queued: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data that `json.dumps` accepts (numbers, strings, None)."""
        data = {field.name: getattr(self, field.name) for field in attrs.fields(Stats)}
        data["requests"] = {name: stats.as_dict() for name, stats in self.requests.items()}
        return data


# -- the recorder ---------------------------------------------------------------------------


# A method's record is one flat list, the fewest objects for a fold to
# touch: the counts by outcome, then the counts by latency bucket, then the
# smallest and the largest latency.
_BUCKET0 = len(OUTCOMES)
_MIN = _BUCKET0 + len(_BOUNDS)
_MAX = _MIN + 1


def _new_record() -> list[Any]:
    return [0] * _MIN + [math.inf, 0.0]


class Metrics:
    """The thread-safe recorder a client owns; `snapshot()` gives `Stats`.

    Counting runs from creation (the client's `connect()`) and is not reset
    by a reconnect: `reconnects` counts those. `reset()` starts afresh, for
    a caller that wants figures per interval. Unknown outcomes or counter
    names and negative amounts raise ValueError: they are bugs of the
    caller, and cheap to catch (one dictionary or set lookup).

    Example::

        metrics = Metrics()
        metrics.record("tools/call", "ok", 0.012)
        metrics.count("reconnects")
        metrics.add_bytes(sent=120, received=480)
        stats = metrics.snapshot(dropped={"notifications": 2})
        assert stats.requests["tools/call"].count == 1
        assert stats.reconnects == 1 and stats.notifications_dropped == 2
    """

    __slots__ = ("max_methods", "_lock", "_intake", "_since", "_started", "_names", "_methods", "_counters",
                 "_sent", "_received")

    def __init__(self, max_methods: int = 256) -> None:
        if isinstance(max_methods, bool) or not isinstance(max_methods, int) or max_methods < 1:
            raise ValueError("max_methods must be a positive integer")
        self.max_methods = max_methods
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        """(Re)initialise every count; the caller holds the lock or owns the object."""
        self._since = time.time()
        self._started = time.monotonic()
        #: Finished requests not folded into the counts yet (see the module notes).
        self._intake: collections.deque[tuple[str, str, float]] = collections.deque()
        #: The method names that have records of their own (at most
        #: `max_methods`); any other is counted under OTHER.
        self._names: set[str] = set()
        #: method -> its record (see `_new_record`).
        self._methods: dict[str, list[Any]] = {}
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._sent = 0
        self._received = 0

    def record(self, method: str, outcome: str, seconds: float) -> None:
        """Count one finished request: its method, its outcome (one of
        `OUTCOMES`) and how long it took in seconds. ValueError for an
        unknown outcome or a negative, NaN or infinite duration, TypeError
        for a method that is not a string (nothing is counted then)."""
        if not isinstance(method, str):
            raise TypeError(f"method must be a string, not {type(method).__name__}")
        if outcome not in _OUTCOME_INDEX:
            raise ValueError(f"unknown outcome {outcome!r}; expected one of {OUTCOMES}")
        _check_duration(seconds)
        self.finished(method, outcome, seconds)

    def finished(self, method: str, outcome: str, seconds: float) -> None:
        """`record()` without its checks, for the engine, which calls it once
        per request: its outcome is one of `OUTCOMES` and its duration the
        difference of two `time.monotonic()` readings, by construction. (A
        sample `record()` would refuse is dropped, later, uncounted.)

        Example::

            metrics.finished("tools/call", "ok", time.monotonic() - started)
        """
        intake = self._intake
        intake.append((method, outcome, seconds))
        if len(intake) >= _FOLD_AT:
            # Another thread folding takes this item too; past four times
            # the mark, wait for it, so that the queue stays bounded.
            if len(intake) >= 4 * _FOLD_AT or not self._lock.locked():
                with self._lock:
                    self._fold()

    def _fold(self) -> None:
        """Count what waits in the intake (lock held). A sample that
        `record()` would refuse (`finished()` trusts its caller) is dropped."""
        intake, methods, index, bounds = self._intake, self._methods, _OUTCOME_INDEX, _BOUNDS
        while intake:  # popped under the lock only: what it holds stays there
            method, outcome, seconds = intake.popleft()
            at = index.get(outcome)
            if at is None or not 0.0 <= seconds < _INF:
                continue
            entry = methods.get(method)
            if entry is None:
                entry = self._entry(method)
            # Everything looked up first, then the two counts back to back:
            # a KeyboardInterrupt landing in a fold can leave at most that
            # one sample half counted.
            bucket = _BUCKET0 + _bisect_left(bounds, seconds)
            entry[at] += 1
            entry[bucket] += 1
            if seconds > entry[_MAX]:
                entry[_MAX] = seconds
            if seconds < entry[_MIN]:
                entry[_MIN] = seconds

    def _entry(self, method: str) -> list[Any]:
        """The record `method` is counted in (lock held), made now if need
        be: its own while fewer than `max_methods` names have one, else
        OTHER's, so that arbitrary method names cannot grow memory."""
        if method not in self._names and len(self._names) < self.max_methods:
            self._names.add(method)
        name = method if method in self._names else OTHER
        entry = self._methods.get(name)
        if entry is None:
            entry = self._methods[name] = _new_record()
        return entry

    def count(self, name: str, n: int = 1) -> None:
        """Add `n` to an event counter: "reconnects", "shed" or
        "cancellations" (timeouts come from `record()`'s outcomes only)."""
        if name not in self._counters:
            hint = " (record the call with outcome 'timeout' instead)" if name == "timeouts" else ""
            raise ValueError(f"unknown counter {name!r}; expected one of {COUNTERS}{hint}")
        if n < 0:
            raise ValueError("a counter only grows")
        with self._lock:
            self._counters[name] += n

    def add_bytes(self, sent: int = 0, received: int = 0) -> None:
        """Count bytes written to and read from the wire."""
        if sent < 0 or received < 0:
            raise ValueError("byte counts are >= 0")
        with self._lock:
            self._sent += sent
            self._received += received

    def snapshot(self, dropped: Mapping[str, int] | None = None) -> Stats:
        """A frozen `Stats` of everything counted so far; `dropped` is what
        the client dropped by kind (`client.dropped.as_dict()`), added up
        into `notifications_dropped`."""
        with self._lock:
            # The fold and copies under the lock; percentiles are computed
            # outside it, so that a snapshot holds up no fold for long.
            now = time.monotonic()
            since, started = self._since, self._started
            self._fold()
            methods = [(name, entry.copy()) for name, entry in self._methods.items()]
            counters = dict(self._counters)
            sent, received = self._sent, self._received
        requests = {name: _method_stats(entry) for name, entry in methods}
        return Stats(
            since=since,
            uptime=max(now - started, 0.0),
            requests=requests,
            requests_total=sum(stats.count for stats in requests.values()),
            timeouts=sum(stats.outcomes["timeout"] for stats in requests.values()),
            cancellations=counters["cancellations"],
            reconnects=counters["reconnects"],
            shed=counters["shed"],
            notifications_dropped=sum(dropped.values()) if dropped else 0,
            bytes_sent=sent,
            bytes_received=received,
        )

    def reset(self) -> None:
        """Start counting afresh (`since` becomes now). The client never
        calls it, not even on a reconnect: its counters run since connect."""
        with self._lock:
            self._start()

    def after_fork(self) -> None:
        """In a child after `os.fork()`: a fresh lock (a parent thread may
        have held the old one) and fresh counts (the child's client opens a
        connection of its own; the parent's figures are not its own)."""
        self._lock = threading.Lock()
        self._start()


def _method_stats(entry: list[Any]) -> MethodStats:
    latency = Histogram()
    latency._counts = entry[_BUCKET0:_MIN]
    latency._n = sum(latency._counts)
    latency._min, latency._max = entry[_MIN], entry[_MAX]
    return MethodStats(
        count=latency.count,
        outcomes=dict(zip(OUTCOMES, entry[:_BUCKET0])),
        p50=latency.percentile(50),
        p90=latency.percentile(90),
        p99=latency.percentile(99),
        max=latency.max,
    )
