"""Repeat timing: warm-up runs, repeats, the median as objective, and how much it can be trusted.

A measurement runs the kernel ``warmup`` times untimed, then ``repeats`` times timed; the
objective is the **median** of the timed runs (robust to the odd slow run caused by the rest of
the machine) and every timed run is kept (``raw_times``). The spread is summarised by the
relative inter-quartile range, ``(q3 - q1) / median``, and by a distribution-free confidence
interval of the median built from order statistics (the binomial argument: the number of runs
below the true median is Binomial(n, 1/2), so ``[x_(j), x_(n-j+1)]`` covers it with probability
``1 - 2 P(B <= j - 1)``; no assumption about the shape of the time distribution).

**Adaptive repeats** (``TimingPolicy(max_repeats=...)`` larger than ``repeats``): after the first
``repeats`` timed runs, keep running until the confidence interval of the median, relative to the
median, is at most ``target_rel_ci`` wide (and reaches the asked ``confidence``, which needs at
least 6 runs for 95 %), or ``max_repeats`` runs or ``max_total_s`` seconds of timed work are
reached.

The module only needs the standard library and works on plain lists of seconds, so the worker
processes (CPU and GPU) and the analysis code share it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Timed runs per measurement unless a policy says otherwise (CPU kernels).
DEFAULT_REPEATS = 5
#: Untimed warm-up runs before the timed ones (CPU kernels).
DEFAULT_WARMUP = 1
#: Seconds without a measurement after which a process is cold (:func:`collect_times`).
IDLE_S = 0.1
#: Seconds the warm-up of a cold process lasts at least (:func:`collect_times`).
WAKE_S = 0.02

#: When this process's last measurement ended (``time.perf_counter``; None: none yet).
_last_measured: float | None = None


@dataclass(frozen=True)
class TimingPolicy:
    """How one configuration is timed.

    Args:
        warmup: untimed runs first (page faults, caches, OpenMP thread start, GPU clocks).
        repeats: timed runs (the minimum when adaptive).
        max_repeats: enables adaptive repeats when larger than ``repeats``: the most timed runs.
        target_rel_ci: adaptive stop rule: width of the confidence interval of the median
            divided by the median (0.02 = the interval spans 2 % of the median).
        confidence: confidence level of that interval.
        max_total_s: adaptive stop rule: stop adding runs once the timed runs add up to this.
    """

    warmup: int = DEFAULT_WARMUP
    repeats: int = DEFAULT_REPEATS
    max_repeats: int | None = None
    target_rel_ci: float = 0.02
    confidence: float = 0.95
    max_total_s: float | None = None

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError("warmup must be >= 0")
        if self.repeats < 1:
            raise ValueError("repeats must be >= 1")
        if self.max_repeats is not None and self.max_repeats < self.repeats:
            raise ValueError("max_repeats must be >= repeats")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError("confidence must lie in (0, 1)")
        if self.target_rel_ci <= 0.0:
            raise ValueError("target_rel_ci must be > 0")

    @property
    def adaptive(self) -> bool:
        """Whether runs are added past ``repeats`` (up to ``max_repeats``) until the stop
        rules hold."""
        return self.max_repeats is not None and self.max_repeats > self.repeats


@dataclass(frozen=True)
class TimingSummary:
    """Statistics of the timed runs of one measurement (seconds)."""

    n: int
    median: float
    q1: float
    q3: float
    minimum: float
    maximum: float
    mean: float
    rel_iqr: float
    ci_low: float
    ci_high: float
    ci_coverage: float

    @property
    def rel_ci_width(self) -> float:
        """Width of the confidence interval of the median, relative to the median."""
        if self.median <= 0 or not math.isfinite(self.median):
            return math.inf
        return (self.ci_high - self.ci_low) / self.median

    def describe(self) -> str:
        """A short text for the ``message`` column of a successful measurement."""
        text = f"n={self.n} rel_iqr={self.rel_iqr:.4f}"
        if self.n >= 2:
            text += f" ci{round(self.ci_coverage * 100)}={self.rel_ci_width:.4f}"
        return text


def quantile(sorted_times: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) of already sorted values."""
    n = len(sorted_times)
    if n == 0:
        return math.nan
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * frac)


def median(times: Sequence[float]) -> float:
    return quantile(sorted(times), 0.5)


def relative_iqr(times: Sequence[float]) -> float:
    """(q3 - q1) / median; 0 for a single run, nan for none."""
    data = sorted(times)
    if not data:
        return math.nan
    mid = quantile(data, 0.5)
    if mid == 0:
        return math.inf if data[-1] != data[0] else 0.0
    return (quantile(data, 0.75) - quantile(data, 0.25)) / mid


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """Ranks (1-based) ``(j, n - j + 1)`` of the narrowest symmetric order-statistic interval
    whose coverage of the median is at least ``confidence``, and that coverage: the binomial
    interval of the median (the count of runs below it is Binomial(n, 1/2), ``scipy.stats.binom``).

    When no interval reaches ``confidence`` (too few runs: fewer than 6 for 95 %), the widest
    one, ``(1, n)``, is returned with the coverage it does have.
    """
    from scipy.stats import binom

    if n < 1:
        raise ValueError("need at least one run")
    # coverage of (j, n - j + 1) is 1 - 2 P(B <= j - 1); the largest j that keeps it
    lower_tails = binom.cdf(np.arange(0, (n + 1) // 2), n, 0.5)
    admissible = np.flatnonzero(2.0 * lower_tails <= 1.0 - confidence)
    best = int(admissible[-1]) + 1 if admissible.size else 1
    coverage = 1.0 - 2.0 * float(binom.cdf(best - 1, n, 0.5)) if n > 1 else 0.0
    return best, n - best + 1, max(coverage, 0.0)


def median_ci(times: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval of the median: ``(low, high, coverage)``."""
    data = sorted(times)
    if not data:
        return math.nan, math.nan, 0.0
    j, k, coverage = median_ci_ranks(len(data), confidence)
    return float(data[j - 1]), float(data[k - 1]), coverage


def summarize(times: Sequence[float], confidence: float = 0.95) -> TimingSummary:
    """All statistics of a list of run times."""
    data = sorted(float(t) for t in times)
    if not data:
        nan = math.nan
        return TimingSummary(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0.0)
    low, high, coverage = median_ci(data, confidence)
    return TimingSummary(
        n=len(data),
        median=quantile(data, 0.5),
        q1=quantile(data, 0.25),
        q3=quantile(data, 0.75),
        minimum=data[0],
        maximum=data[-1],
        mean=math.fsum(data) / len(data),
        rel_iqr=relative_iqr(data),
        ci_low=low,
        ci_high=high,
        ci_coverage=coverage,
    )


def summarize_raw(raw_times: str, confidence: float = 0.95) -> TimingSummary:
    """Statistics of a ``raw_times`` cell (the JSON list an executor stores)."""
    return summarize([float(t) for t in json.loads(raw_times)], confidence)


def precise_enough(times: Sequence[float], policy: TimingPolicy) -> bool:
    """The adaptive stop rule: the interval reaches ``confidence`` and is narrow enough."""
    if len(times) < 2:
        return False
    summary = summarize(times, policy.confidence)
    return summary.ci_coverage >= policy.confidence and summary.rel_ci_width <= policy.target_rel_ci


def collect_times(run_once: Callable[[int, bool], float], policy: TimingPolicy) -> list[float]:
    """Drive one measurement: ``run_once(index, timed)`` runs the kernel once and returns the
    seconds of the kernel alone (the caller excludes set-up such as re-initialising buffers).

    ``index`` counts all runs from 0 (warm-ups first); ``timed`` is False for warm-ups. Returns
    the timed runs in order.

    A process that ran no measurement for :data:`IDLE_S` seconds (the first one of a worker,
    or the first of a batch while the campaign fitted its models) has gone cold: its caches
    hold someone else's data and its core may have slowed down. With ``warmup`` of 1 or more,
    its warm-up then goes on until it has lasted :data:`WAKE_S` seconds (one run at least per
    ``warmup``): a cell under 0.2 ms measured first in a batch after one warm-up run took 25 %
    more than its truth's median, the later cells of the batch 3 % at most (decision 0050).
    """
    global _last_measured
    started = time.perf_counter()
    cold = _last_measured is None or started - _last_measured > IDLE_S
    index = 0
    while index < policy.warmup or (
        cold and policy.warmup > 0 and time.perf_counter() - started < WAKE_S
    ):
        run_once(index, False)
        index += 1
    times: list[float] = []
    for _ in range(policy.repeats):
        times.append(float(run_once(index, True)))
        index += 1
    if policy.adaptive:
        assert policy.max_repeats is not None
        while len(times) < policy.max_repeats and not precise_enough(times, policy):
            if policy.max_total_s is not None and math.fsum(times) >= policy.max_total_s:
                break
            times.append(float(run_once(index, True)))
            index += 1
    _last_measured = time.perf_counter()
    return times
