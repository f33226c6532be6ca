"""Where inputs take many values, GA-Adaptive's exploitation goes to the points, of ``focus``
times as many drawn at random, where the ensemble's choice is least certain (decision 0046):
the expected regret of the members' mean choice among the incumbents."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.sampling import ExploitSettings, GAAdaptiveSampler
from mlkaps_gpu.sampling._exploit import Exploiter
from mlkaps_gpu.space import Parameter, Space


class Members:
    """Three members over features (n, tile). Below n = 100 they agree: tile 4 costs 0, tile
    16 costs 1. From n = 100 they disagree: member 0 prices tile 4 at 1 and tile 16 at 0,
    members 1 and 2 tile 4 at 0 and tile 16 at 0.6. The mean chooses tile 4 (1/3 < 0.4), which
    member 0 finds 1 worse than its best: an expected regret of 1/3."""

    def predict_members(self, features: np.ndarray) -> np.ndarray:
        n, tile = features[:, 0], features[:, 1]
        agreed = np.where(tile == 4, 0.0, 1.0)
        first = np.where(n < 100, agreed, np.where(tile == 4, 1.0, 0.0))
        others = np.where(n < 100, agreed, np.where(tile == 4, 0.0, 0.6))
        return np.vstack([first, others, others])


def small_space() -> Space:
    return Space(
        [Parameter("n", "int", low=4, high=4096)],
        [Parameter("tile", "int", values=(4, 16))],
        constraints=["tile <= n"],
    )


def measured_rows() -> pd.DataFrame:
    """Tile 4 best measured at n = 50, tile 16 at n = 500: both are incumbents."""
    return pd.DataFrame(
        {"n": [50, 50, 500, 500], "tile": [4, 16, 16, 4], "time": [1.0, 2.0, 1.0, 2.0]}
    )


def test_choice_regret_is_the_members_expected_loss_of_the_mean_choice() -> None:
    exploiter = Exploiter(small_space())
    points = pd.DataFrame({"n": [8, 50, 500, 1000]})
    regret = exploiter.choice_regret(Members(), measured_rows(), points)  # type: ignore[arg-type]
    # n = 8: only tile 4 is valid (tile <= n), nothing to choose; n = 50: the members agree
    assert regret[:2] == pytest.approx([0.0, 0.0])
    assert regret[2:] == pytest.approx([1 / 3, 1 / 3])


def test_choice_regret_is_zero_before_two_incumbents_exist() -> None:
    exploiter = Exploiter(small_space())
    points = pd.DataFrame({"n": [50, 500]})
    one = measured_rows().iloc[:2]  # tile 4, best at n = 50, is the only incumbent
    assert (exploiter.choice_regret(Members(), one, points) == 0).all()  # type: ignore[arg-type]
    empty = measured_rows().iloc[:0]
    assert (exploiter.choice_regret(Members(), empty, points) == 0).all()  # type: ignore[arg-type]


def measure(rows: pd.DataFrame) -> pd.DataFrame:
    """Tile 4 is best below n = 256, tile 16 above."""
    best = np.where(rows["n"].to_numpy() < 256, 4, 16)
    time = rows["n"].to_numpy() * (1.0 + 0.05 * np.abs(rows["tile"].to_numpy() - best))
    return pd.DataFrame({"time": time, "status": "ok"})


def exploited(focus: int, regret=None) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    space = Space(
        [Parameter("n", "int", low=16, high=4096)],
        [Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32))],
    )
    grid = pd.DataFrame({"n": np.geomspace(16, 4096, 64).round()})
    sampler = GAAdaptiveSampler(
        space, seed=0, budget=200, points=grid, exploit=ExploitSettings(focus=focus)
    )
    if regret is not None:
        sampler.exploiter.choice_regret = regret  # type: ignore[method-assign]
    rows = sampler.ask(40)  # the bootstrap (LHS)
    sampler.tell(rows, measure(rows))
    return sampler.ask(10)  # exploitation: 2 rows at each of 5 points


def test_the_batch_goes_to_the_points_of_largest_regret_two_rows_each() -> None:
    grid = np.geomspace(16, 4096, 64).round()

    def largest_n(model, measured, points):  # type: ignore[no-untyped-def]
        return points["n"].to_numpy(dtype=float)

    # a pool of 64 x 100 points is the whole grid: the five largest n, two rows at each
    rows = exploited(100, largest_n)
    per_point = rows.groupby("n")["tile"].nunique()
    assert sorted(per_point.index) == sorted(grid[-5:]) and (per_point == 2).all()
    # a pool of four times the points: the five of largest regret among 20 drawn at random
    rows = exploited(4, largest_n)
    assert rows["n"].nunique() == 5 and len(rows) == 10


def test_focus_one_keeps_the_random_points() -> None:
    def never(model, measured, points):  # type: ignore[no-untyped-def]
        raise AssertionError("focus = 1 scores no pool")

    rows = exploited(1, never)
    assert rows["n"].nunique() == 5 and len(rows) == 10


def test_inputs_of_a_few_values_are_not_focused() -> None:
    """Five GPUs are each revisited batch after batch: no pool is drawn or scored."""
    space = Space(
        [Parameter("gpu", "categorical", values=("a", "b", "c", "d", "e"))],
        [Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32))],
    )
    sampler = GAAdaptiveSampler(space, seed=0, budget=100)

    def never(model, measured, points):  # type: ignore[no-untyped-def]
        raise AssertionError("a categorical input is not focused")

    sampler.exploiter.choice_regret = never  # type: ignore[method-assign]
    rows = sampler.ask(20)
    sampler.tell(rows, pd.DataFrame({"time": np.arange(1.0, 21.0), "status": "ok"}))
    assert len(sampler.ask(4)) == 4


def test_focus_must_be_positive() -> None:
    with pytest.raises(ValueError, match="focus"):
        ExploitSettings(focus=0)
