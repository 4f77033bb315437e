"""A paired estimate of a small cost per call: arm A against arm B.

Used by the cost cases (`stats_cost`, `tracing_off_cost`), whose effects are
about 1 % of a call's CPU. Batches of thousands of calls measured seconds
apart move by several percent on a shared two-core machine (clock
frequency, the server process and the other core's load, cache state), so
comparing two medians of such batches cannot resolve 2 %. Instead:

- many short blocks of calls, in ABBA order (A B B A): a drift that is
  linear over the few milliseconds of one quad falls equally on both arms;
- one ratio A / B per quad, and the median over hundreds of quads: robust to
  the odd block that a preemption or a GC pass lands in; and the ratio of
  the totals, which counts a cost paid once in many calls (which the
  median leaves out) and is what the targets read;
- a distribution-free 95 % confidence interval of that median (order
  statistics), so that a reader sees what the figure can resolve.

Blocks of 10 calls resolve best on a loaded machine (an interval about
half as wide as blocks of 50 for the same number of calls; on a quiet one
they are alike). The process's CPU clock is the one to read: the CPU
clocks of the caller and of the client's reader thread, read one by one,
gave the same ratios to within 0.1 %, at more cost per block.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any


def _median_interval(values: list[float]) -> tuple[float, float, float]:
    """The median and a distribution-free 95 % interval for it: the order
    statistics n/2 -+ 1.96 sqrt(n)/2 (the binomial's normal approximation)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low = max(int(math.floor(n / 2 - half)), 0)
    high = min(int(math.ceil(n / 2 + half)), n - 1)
    return statistics.median(ordered), ordered[low], ordered[high]


def paired(use_a: Callable[[], None], use_b: Callable[[], None], call: Callable[[int], Any], *,
           quads: int, block: int, warmup: int = 1000) -> dict[str, float]:
    """Run `quads` quads of four blocks of `block` calls, A B B A, `use_a()`
    or `use_b()` switching the arm before each block (the caller restores
    what it wants afterwards); `call(i)` makes one call.

    Returns, for the process's CPU time ("cpu") and for wall time ("wall"):
    the median per call of each arm (`cpu_a_us`, `cpu_b_us`, ...) and the
    median of the quads' ratios A / B with its 95 % interval (`cpu_ratio`,
    `cpu_ratio_lo`, `cpu_ratio_hi`, ...)."""
    # Warm-up: caches, the interpreter's specialised instructions, and both
    # arms once, so that neither pays a first switch inside the measurement.
    for use in (use_a, use_b):
        use()
        for i in range(warmup // 2):
            call(i)
    cpu_clock, wall_clock = time.process_time, time.perf_counter
    cpu: dict[bool, list[float]] = {True: [], False: []}
    wall: dict[bool, list[float]] = {True: [], False: []}
    cpu_ratios: list[float] = []
    wall_ratios: list[float] = []
    for _ in range(quads):
        cpu_sum = {True: 0.0, False: 0.0}
        wall_sum = {True: 0.0, False: 0.0}
        for arm in (True, False, False, True):
            (use_a if arm else use_b)()
            cpu_start, wall_start = cpu_clock(), wall_clock()
            for i in range(block):
                call(i)
            cpu_sum[arm] += cpu_clock() - cpu_start
            wall_sum[arm] += wall_clock() - wall_start
        for sums, per_call, ratios in ((cpu_sum, cpu, cpu_ratios), (wall_sum, wall, wall_ratios)):
            per_call[True].append(sums[True] / (2 * block) * 1e6)
            per_call[False].append(sums[False] / (2 * block) * 1e6)
            if sums[False] > 0:
                ratios.append(sums[True] / sums[False])
    result: dict[str, float] = {"quads": quads, "block": block}
    for name, per_call, ratios in (("cpu", cpu, cpu_ratios), ("wall", wall, wall_ratios)):
        result[f"{name}_a_us"] = statistics.median(per_call[True])
        result[f"{name}_b_us"] = statistics.median(per_call[False])
        # The ratio of the totals: a cost paid now and then (a recorder that
        # folds its intake every few hundred calls) lands in few quads, and
        # the median of the quads' ratios would leave it out; the totals
        # count it, at the price of the odd preempted block, which falls on
        # either arm alike.
        if sum(per_call[False]):
            result[f"{name}_total_ratio"] = sum(per_call[True]) / sum(per_call[False])
        if ratios:
            middle, low, high = _median_interval(ratios)
            result.update({f"{name}_ratio": middle, f"{name}_ratio_lo": low, f"{name}_ratio_hi": high})
    return result
