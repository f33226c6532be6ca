"""Statistics of repeated timings: median, IQR, distribution-free CI, adaptive repeats."""

from __future__ import annotations

import itertools
import json
import math
import time

import numpy as np
import pytest
from scipy import stats

from mlkaps_gpu.executors import _timing as timing
from mlkaps_gpu.executors._timing import (
    TimingPolicy,
    collect_times,
    median,
    median_ci,
    median_ci_ranks,
    precise_enough,
    quantile,
    relative_iqr,
    summarize,
    summarize_raw,
)


def test_quantiles_match_numpy() -> None:
    rng = np.random.default_rng(1)
    for n in (1, 2, 5, 10, 101):
        data = rng.lognormal(size=n)
        for q in (0.0, 0.25, 0.5, 0.75, 1.0):
            assert quantile(sorted(data), q) == pytest.approx(np.quantile(data, q))
        assert median(list(data)) == pytest.approx(np.median(data))


def test_relative_iqr() -> None:
    assert relative_iqr([1.0, 1.0, 1.0]) == 0.0
    assert relative_iqr([2.0]) == 0.0
    assert math.isnan(relative_iqr([]))
    data = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert relative_iqr(data) == pytest.approx((4.0 - 2.0) / 3.0)


@pytest.mark.parametrize("n", [6, 9, 20, 50, 200])
def test_median_ci_ranks_are_the_binomial_ones(n: int) -> None:
    j, k, coverage = median_ci_ranks(n, 0.95)
    assert k == n - j + 1
    exact = 1 - 2 * stats.binom.cdf(j - 1, n, 0.5)
    assert coverage == pytest.approx(exact)
    assert coverage >= 0.95
    # one rank narrower would not reach 95 %
    if j + 1 <= n - j:
        assert 1 - 2 * stats.binom.cdf(j, n, 0.5) < 0.95


def test_median_ci_with_too_few_runs_reports_its_coverage() -> None:
    j, k, coverage = median_ci_ranks(5, 0.95)
    assert (j, k) == (1, 5)
    assert coverage == pytest.approx(1 - 2 / 32)
    low, high, cov = median_ci([3.0, 1.0, 2.0])
    assert (low, high) == (1.0, 3.0) and cov == pytest.approx(0.75)
    assert median_ci_ranks(1)[2] == 0.0


def test_median_ci_covers_the_true_median_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    true_median = math.exp(0.0)  # lognormal(0, 0.5)
    hits = 0
    trials = 2000
    for _ in range(trials):
        low, high, coverage = median_ci(list(rng.lognormal(0.0, 0.5, size=25)))
        hits += low <= true_median <= high
    assert coverage >= 0.95
    assert 0.94 <= hits / trials <= 0.995


def test_summary_and_raw_times() -> None:
    times = [1.0, 1.1, 0.9, 1.05, 0.95, 1.2, 0.98]
    summary = summarize(times)
    assert summary.n == 7
    assert summary.median == pytest.approx(np.median(times))
    assert summary.minimum == 0.9 and summary.maximum == 1.2
    assert summary.ci_low <= summary.median <= summary.ci_high
    assert summary.rel_ci_width == pytest.approx((summary.ci_high - summary.ci_low) / 1.0)
    assert "rel_iqr=" in summary.describe()
    assert summarize_raw(json.dumps(times)) == summary
    assert summarize([]).n == 0


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        TimingPolicy(repeats=0)
    with pytest.raises(ValueError):
        TimingPolicy(warmup=-1)
    with pytest.raises(ValueError):
        TimingPolicy(repeats=5, max_repeats=3)
    with pytest.raises(ValueError):
        TimingPolicy(confidence=1.0)
    assert not TimingPolicy().adaptive
    assert TimingPolicy(max_repeats=20).adaptive
    assert TimingPolicy().repeats == 5


class Clock:
    """A fake kernel: returns scripted times and records the calls."""

    def __init__(self, times) -> None:
        self.times = iter(times)
        self.calls: list[tuple[int, bool]] = []

    def __call__(self, index: int, timed: bool) -> float:
        self.calls.append((index, timed))
        return next(self.times)


def test_collect_runs_warmups_untimed_then_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "_last_measured", time.perf_counter())  # a warm process
    clock = Clock([100.0, 100.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    times = collect_times(clock, TimingPolicy(warmup=2, repeats=5))
    assert times == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert clock.calls[:2] == [(0, False), (1, False)]
    assert clock.calls[2:] == [(i, True) for i in range(2, 7)]


class SlowKernel(Clock):
    """A fake kernel whose every run takes ``seconds`` of wall time."""

    def __init__(self, seconds: float) -> None:
        super().__init__(itertools.repeat(1.0))
        self.seconds = seconds

    def __call__(self, index: int, timed: bool) -> float:
        time.sleep(self.seconds)
        return super().__call__(index, timed)


def test_a_cold_process_warms_up_for_wake_s_a_warm_one_for_warmup_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first measurement of a process, and the first after IDLE_S seconds without one,
    warm up until WAKE_S seconds have passed; the next ones right after run ``warmup`` runs;
    ``warmup = 0`` never warms up. The timed runs are ``repeats`` in every case."""
    monkeypatch.setattr(timing, "_last_measured", None)
    monkeypatch.setattr(timing, "WAKE_S", 0.05)
    monkeypatch.setattr(timing, "IDLE_S", 0.5)
    policy = TimingPolicy(warmup=1, repeats=3)
    cold = SlowKernel(0.002)
    assert collect_times(cold, policy) == [1.0] * 3
    warmups = [index for index, timed in cold.calls if not timed]
    assert len(warmups) >= 3  # 50 ms of 2 ms runs (fewer where sleep overshoots)
    assert cold.calls[len(warmups) :] == [(i, True) for i in range(len(warmups), len(cold.calls))]
    warm = SlowKernel(0.002)
    collect_times(warm, policy)
    assert warm.calls == [(0, False), (1, True), (2, True), (3, True)]
    time.sleep(0.6)  # idle longer than IDLE_S: cold again
    again = SlowKernel(0.002)
    collect_times(again, policy)
    assert len(again.calls) >= 6
    time.sleep(0.6)
    never = SlowKernel(0.002)
    collect_times(never, TimingPolicy(warmup=0, repeats=3))
    assert never.calls == [(0, True), (1, True), (2, True)]


def test_adaptive_stops_when_precise() -> None:
    policy = TimingPolicy(warmup=0, repeats=3, max_repeats=100, target_rel_ci=0.05)
    times = collect_times(Clock([1.0] * 1000), policy)
    assert len(times) == 6  # the first n whose interval reaches 95 % coverage
    assert precise_enough(times, policy)


def test_adaptive_goes_on_while_noisy_and_stops_at_max() -> None:
    rng = np.random.default_rng(3)
    noisy = list(rng.lognormal(0.0, 0.3, size=1000))
    # lognormal(0, 0.3): the interval of the median narrows like 1 / sqrt(n)
    policy = TimingPolicy(warmup=0, repeats=5, max_repeats=400, target_rel_ci=0.1)
    times = collect_times(Clock(noisy), policy)
    assert 40 < len(times) < 400
    assert precise_enough(times, policy)
    capped = TimingPolicy(warmup=0, repeats=5, max_repeats=12, target_rel_ci=1e-6)
    assert len(collect_times(Clock(noisy), capped)) == 12
    budget = TimingPolicy(warmup=0, repeats=2, max_repeats=50, target_rel_ci=1e-6, max_total_s=5)
    assert len(collect_times(Clock([1.0] * 100), budget)) == 5
