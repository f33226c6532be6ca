"""GA-Adaptive fits, beside the shared ensemble, a model of each exploitation point's own rows
once the point has ``own_rows`` of them; its predicted optimum is a second nominee (see
``test_exploit.py`` for how the nominees are picked)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlkaps_gpu.sampling import ExploitSettings, GAAdaptiveSampler
from mlkaps_gpu.space import Parameter, Space


def space() -> Space:
    return Space(
        [Parameter("gpu", "categorical", values=("a", "b", "c"))],
        [Parameter("tile", "int", values=tuple(range(1, 33)))],
    )


def measure(rows: pd.DataFrame) -> pd.DataFrame:
    """Each GPU's best tile elsewhere (a: 4, b: 16, c: 28)."""
    best = rows["gpu"].map({"a": 4, "b": 16, "c": 28}).to_numpy()
    time = 1.0 + 0.05 * np.abs(rows["tile"].to_numpy() - best)
    return pd.DataFrame({"time": time, "status": "ok"})


def told(sampler: GAAdaptiveSampler, per_gpu: dict[str, int]) -> None:
    for gpu, count in per_gpu.items():
        rows = pd.DataFrame({"gpu": [gpu] * count, "tile": np.arange(1, count + 1) * 2})
        sampler.tell(rows, measure(rows))


def own_models(sampler: GAAdaptiveSampler, points: pd.DataFrame) -> dict:
    measured = sampler._measured()
    features = sampler.feature_space.features(measured)
    return sampler._own_models(measured, features, points, log_target=True)


def test_points_with_enough_rows_of_their_own_get_a_model_of_them() -> None:
    sampler = GAAdaptiveSampler(space(), seed=0, budget=100)
    told(sampler, {"a": 12, "b": 7, "c": 8})
    own = own_models(sampler, sampler.points)
    assert set(own) == {("a",), ("c",)}  # b has 7 rows, under own_rows = 8
    tiles = pd.DataFrame({"gpu": ["c"] * 32, "tile": np.arange(1, 33)})
    predicted = own[("c",)].predict(sampler.feature_space.features(tiles))
    # learnt from c's rows alone (tiles 2 - 16): the larger the tile, the faster
    assert predicted[15] < predicted[1]
    off = GAAdaptiveSampler(space(), seed=0, budget=100, exploit=ExploitSettings(own_rows=0))
    told(off, {"a": 12, "b": 7, "c": 8})
    assert own_models(off, off.points) == {}


def test_a_campaign_of_one_input_point_fits_no_second_model() -> None:
    sampler = GAAdaptiveSampler(space(), seed=0, budget=100)
    told(sampler, {"a": 12})
    assert own_models(sampler, pd.DataFrame({"gpu": ["a"]})) == {}


def test_a_grid_over_a_continuous_input_fits_no_model_per_point() -> None:
    continuous = Space(
        [Parameter("n", "int", low=16, high=4096)],
        [Parameter("tile", "int", values=tuple(range(1, 33)))],
    )
    grid = pd.DataFrame({"n": [16, 256, 4096]})
    sampler = GAAdaptiveSampler(continuous, seed=0, budget=100, points=grid)
    rows = pd.DataFrame({"n": [16] * 10 + [4096] * 10, "tile": list(range(1, 11)) * 2})
    sampler.tell(rows, pd.DataFrame({"time": 1.0 + rows["tile"] / 10.0, "status": "ok"}))
    assert own_models(sampler, grid) == {}
