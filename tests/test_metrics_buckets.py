"""The recorder's bucket search (a binary search of the bounds table, for
cost) finds the same bucket as the logarithm formula it replaced, for every
duration from 0 to the largest float, and `Metrics.record` (which makes the
histogram's increments inline, for cost) counts exactly what
`Histogram.add` counts.
"""

from __future__ import annotations

import math
import random
import sys

import pytest

from mcp_sync.metrics import OUTCOMES, Histogram, Metrics, _bucket

BOUNDS = Histogram.BOUNDS
LOW = BOUNDS[0]
TOP = len(BOUNDS) - 2  # the last finite bound's index
LOG_RATIO = math.log(1.2)


def formula_bucket(seconds: float) -> int:
    """The bucket as the recorder computed it before: a logarithm, then one
    step against the table where the logarithm is an ulp off."""
    if seconds <= LOW:
        return 0
    if seconds > BOUNDS[TOP]:
        return TOP + 1
    index = math.ceil(math.log(seconds / LOW) / LOG_RATIO)
    if seconds > BOUNDS[index]:
        index += 1
    elif seconds <= BOUNDS[index - 1]:
        index -= 1
    return index


def durations() -> list[float]:
    values = [0.0, -0.0, 5e-324, 1e-300, 1e-9, LOW / 2, 1.0, 60.0, 1e6, 1e300, sys.float_info.max]
    for bound in BOUNDS[:-1]:
        values += [bound, math.nextafter(bound, 0.0), math.nextafter(bound, math.inf), bound * (1 + 1e-9)]
    rng = random.Random(14)
    values += [10 ** rng.uniform(-12, 7) for _ in range(20_000)]
    return values


def test_bucket_matches_the_logarithm_formula_everywhere() -> None:
    mismatches = [(s, _bucket(s), formula_bucket(s)) for s in durations() if _bucket(s) != formula_bucket(s)]
    assert mismatches == []


def test_every_bucket_holds_what_its_bounds_say() -> None:
    # Bucket i holds (B[i-1], B[i]]: a bound is in its own bucket, the next
    # float up in the next one; the last bucket holds everything larger.
    for i, bound in enumerate(BOUNDS[:-1]):
        assert _bucket(bound) == i
        assert _bucket(math.nextafter(bound, math.inf)) == i + 1
    assert _bucket(0.0) == 0 and _bucket(sys.float_info.max) == len(BOUNDS) - 1


def test_record_counts_what_histogram_add_counts() -> None:
    rng = random.Random(7)
    samples = [0.0, LOW, BOUNDS[5], math.nextafter(BOUNDS[5], math.inf), 2000.0]
    samples += [10 ** rng.uniform(-7, 3) for _ in range(5000)]
    metrics, histogram = Metrics(), Histogram()
    for seconds in samples:
        metrics.record("tools/call", "ok", seconds)
        histogram.add(seconds)
    got = metrics.snapshot().requests["tools/call"]
    assert got.count == histogram.count == len(samples)
    assert (got.p50, got.p90, got.p99, got.max) == (
        histogram.percentile(50), histogram.percentile(90), histogram.percentile(99), histogram.max)
    assert got.max == max(samples)


@pytest.mark.parametrize("bad", [-1e-9, -0.5, -math.inf, math.inf, math.nan])
def test_record_refuses_a_negative_or_non_finite_duration_and_counts_nothing(bad: float) -> None:
    metrics = Metrics()
    for outcome in OUTCOMES:
        with pytest.raises(ValueError, match="finite and >= 0"):
            metrics.record("tools/call", outcome, bad)
    assert metrics.snapshot().requests == {}
