"""GA-Adaptive's transfer warm start: the sources' best configurations are measured first."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.sampling import GAAdaptiveSampler
from mlkaps_gpu.space import Parameter, Space


def _space() -> Space:
    return Space(
        [Parameter("gpu", "categorical", values=("A", "B", "C"))],
        [Parameter("block", "int", values=(1, 2, 4, 8, 16, 32)), Parameter("unroll", "bool")],
        ["block * (1 + unroll) <= 32"],
    )


def _sources() -> pd.DataFrame:
    """Measurements on A and B: block 8 without unroll is best on both, then block 16."""
    rows = []
    for gpu, scale in (("A", 1.0), ("B", 3.0)):
        for block in (1, 2, 4, 8, 16, 32):
            for unroll in (False, True):
                if block * (1 + unroll) > 32:
                    continue
                time = scale * (1.0 + abs(np.log2(block) - 3.0) + 2.0 * unroll)
                rows.append({"gpu": gpu, "block": block, "unroll": unroll, "time": time})
    return pd.DataFrame(rows)


def test_ranking_orders_by_mean_log_ratio_to_each_source_best() -> None:
    sampler = GAAdaptiveSampler(
        _space().with_fixed_inputs({"gpu": "C"}), budget=10, extra_training=_sources()
    )
    ranking = sampler.warm_ranking()
    assert ranking[["block", "unroll"]].iloc[0].tolist() == [8, False]
    assert ranking["score"].iloc[0] == pytest.approx(0.0)
    assert ranking["score"].is_monotonic_increasing
    # the same configuration scores the same whatever the sources' absolute speed
    assert set(ranking[["block", "unroll"]].iloc[1:3].apply(tuple, axis=1)) == {
        (4, False),
        (16, False),
    }


def test_warm_start_measures_the_sources_best_on_the_new_gpu_first() -> None:
    space = _space().with_fixed_inputs({"gpu": "C"})
    sampler = GAAdaptiveSampler(
        space, budget=10, seed=3, extra_training=_sources(), warm_start=0.3, bootstrap=0.0
    )
    first = sampler.ask(5)
    assert list(first["gpu"]) == ["C"] * 5
    # 3 warm rows (0.3 x 10): the three best-ranked source configurations, in order
    warm = first.iloc[:3][["block", "unroll"]].apply(tuple, axis=1).tolist()
    assert warm[0] == (8, False) and set(warm[1:]) == {(4, False), (16, False)}
    assert space.is_valid(first).all()
    assert len(set(space.key(first))) == 5
    sampler.tell(first, pd.DataFrame({"time": np.ones(5), "status": ["ok"] * 5}))
    assert sampler.describe()["warm_start"] == 0.3


def test_no_sources_no_warm_start() -> None:
    sampler = GAAdaptiveSampler(_space(), budget=10)
    assert sampler.warm_start == 0.0
    with pytest.raises(ValueError, match="warm_start"):
        GAAdaptiveSampler(_space(), budget=10, extra_training=_sources(), warm_start=1.5)
