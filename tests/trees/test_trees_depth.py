"""Depth sweep, depth choice, fit_selector, and the regret oracle."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.trees import (
    JointSelector,
    PerParameterSelector,
    RegretOracle,
    fit_selector,
    relative_regret,
    sweep_depths,
)


def test_relative_regret() -> None:
    np.testing.assert_allclose(
        relative_regret(np.array([2.0, 1.0, -90.0, 0.5]), np.array([1.0, 1.0, -100.0, 0.0])),
        [1.0, 0.0, 0.1, 0.5],
    )


def test_oracle_caches_columns(constrained: SimpleNamespace) -> None:
    oracle = RegretOracle(constrained.optima, constrained.space, constrained.score)
    codes = oracle.codes[:3]
    first = oracle.columns(codes)
    scored = oracle.n_scored
    np.testing.assert_array_equal(oracle.columns(codes), first)
    np.testing.assert_array_equal(oracle.matrix(np.arange(5), codes), first[:5])
    assert oracle.n_scored == scored
    # each point's own optimum has zero regret
    own = oracle.regret(np.arange(oracle.n_points), oracle.codes)
    np.testing.assert_allclose(own, 0.0, atol=1e-12)


def test_oracle_scores_each_pair_once(constrained: SimpleNamespace) -> None:
    rows: list[int] = []

    def counting(table: pd.DataFrame) -> np.ndarray:
        rows.append(len(table))
        return np.asarray(constrained.score(table))

    oracle = RegretOracle(constrained.optima, constrained.space, counting)
    fresh = RegretOracle(constrained.optima, constrained.space, constrained.score)
    codes = np.unique(oracle.codes, axis=0)[:4]
    leaf = np.arange(0, oracle.n_points, 2)
    first = oracle.matrix(leaf, codes)
    rows.clear()
    # a smaller leaf inside the first one, and pairs already known, score nothing
    np.testing.assert_array_equal(oracle.matrix(leaf[::3], codes), first[::3])
    again = oracle.regret(leaf[:5], np.repeat(codes[:1], 5, axis=0))
    np.testing.assert_array_equal(again, first[:5, 0])
    assert rows == []
    # a request with known and unknown pairs scores the unknown ones only, in one batch
    whole = oracle.columns(codes)
    outside = np.setdiff1d(np.arange(oracle.n_points), leaf)
    own = (oracle.codes[outside][:, None, :] == codes[None, :, :]).all(axis=2)
    assert rows == [int((~own).sum())]  # a point's own optimum was known from the start
    np.testing.assert_allclose(whole, fresh.columns(codes))
    rows.clear()
    own_regret = oracle.regret(np.arange(oracle.n_points), oracle.codes)
    np.testing.assert_allclose(own_regret, 0.0, atol=1e-12)
    assert rows == []


@pytest.fixture(scope="module")
def sweep(constrained: SimpleNamespace):
    return sweep_depths(
        constrained.optima,
        constrained.space,
        constrained.score,
        depths=range(1, 9),
        tolerance=0.02,
    )


def test_sweep_reports_regret_and_size(sweep) -> None:
    table = sweep.table
    assert list(table.columns) == [
        "depth",
        "mean_regret",
        "p90_regret",
        "max_regret",
        "leaves",
        "nodes",
        "actual_depth",
        "tree_invalid",
    ]
    assert table["depth"].tolist() == list(range(1, len(table) + 1))
    assert table["leaves"].is_monotonic_increasing
    assert (table["tree_invalid"] == 0).all()  # joint trees are valid at the points
    assert "<- chosen" in str(sweep)


def test_sweep_chooses_the_smallest_depth_within_tolerance(sweep) -> None:
    table = sweep.table
    best = table["mean_regret"].min()
    within = table[table["mean_regret"] <= best + 0.02]["depth"]
    assert sweep.chosen == within.min()
    assert sweep.chosen < table["depth"].max()
    assert isinstance(sweep.selector, JointSelector)
    assert sweep.selector.max_depth == sweep.chosen


def test_the_sweep_ranks_only_the_depth_it_chooses(sweep, constrained: SimpleNamespace) -> None:
    ranked = {d: s.model_.ranking is not None for d, s in sweep.selectors.items()}
    assert ranked == {d: d == sweep.chosen for d in sweep.selectors}
    # the same ranking as a selector fitted at that depth alone
    space = constrained.space
    alone = JointSelector(max_depth=sweep.chosen).fit(
        constrained.optima, space.inputs, space.design, space=space, score=constrained.score
    )
    assert np.array_equal(alone.model_.ranking.order, sweep.selector.model_.ranking.order)
    assert np.array_equal(alone.model_.ranking.portfolio, sweep.selector.model_.ranking.portfolio)


def test_zero_tolerance_picks_a_best_depth(constrained: SimpleNamespace) -> None:
    sweep = sweep_depths(
        constrained.optima, constrained.space, constrained.score, depths=[2, 4], tolerance=0.0
    )
    table = sweep.table.set_index("depth")
    assert table.loc[sweep.chosen, "mean_regret"] == table["mean_regret"].min()


def test_sweep_stops_when_the_trees_stop_growing(constrained: SimpleNamespace) -> None:
    sweep = sweep_depths(
        constrained.optima,
        constrained.space,
        constrained.score,
        mode="per_parameter",
        depths=range(1, 30),
    )
    table = sweep.table
    assert len(table) < 29
    assert table["actual_depth"].iloc[-1] < table["depth"].iloc[-1]


def test_fit_selector_fixed_depth_and_modes(constrained: SimpleNamespace) -> None:
    args = (constrained.optima, constrained.space, constrained.score)
    fitted = fit_selector(*args, mode="per_parameter", max_depth=3)
    assert isinstance(fitted.selector, PerParameterSelector)
    assert fitted.sweep.table["depth"].tolist() == [3] and fitted.sweep.chosen == 3
    assert fitted.selector.model_.validity is not None
    with pytest.raises(ValueError, match="mode"):
        fit_selector(*args, mode="oblique")
    with pytest.raises(ValueError, match="max_depth"):
        fit_selector(*args, max_depth=0)
    with pytest.raises(ValueError, match="max_depth"):
        fit_selector(*args, max_depth="deep")
    with pytest.raises(ValueError, match="tolerance"):
        sweep_depths(*args, tolerance=-1.0)


def test_sweep_records_are_json_ready(sweep) -> None:
    import json

    records = sweep.records()
    assert json.loads(json.dumps(records)) == records
    assert isinstance(records[0]["leaves"], int)
    frame = pd.DataFrame(records)
    assert frame["depth"].tolist() == sweep.table["depth"].tolist()


def test_sweep_goes_on_past_trees_that_collapse_to_one_leaf() -> None:
    """One input value out of sixteen has its own optimum. Greedy splits that cannot lower the
    regret yet peel one value at a time; until they reach it every leaf takes the common
    configuration and the merged tree is one leaf at depth 1 and 2 alike. The sweep must not
    take that for a tree that stopped growing (the regret partition's greedy splits)."""
    space = Space(
        [Parameter("x", "int", low=0, high=15)],
        [Parameter("variant", "categorical", values=("common", "special"))],
    )

    def cost(table: pd.DataFrame) -> np.ndarray:
        special = (table["variant"] == "special").to_numpy()
        at_five = (table["x"] == 5).to_numpy()
        return np.where(at_five, np.where(special, 1.0, 1.2), np.where(special, 2.0, 1.0))

    optima = pd.DataFrame(
        {"x": np.arange(16), "variant": np.where(np.arange(16) == 5, "special", "common")}
    ).astype({"variant": object})
    sweep = sweep_depths(optima, space, cost, tolerance=0.0, partition="regret")
    table = sweep.table.set_index("depth")
    assert table.loc[1, "leaves"] == table.loc[2, "leaves"] == 1  # the collapse
    assert len(table) > 2
    assert table.loc[sweep.chosen, "mean_regret"] == 0.0
    chosen = sweep.selector.select(pd.DataFrame({"x": np.arange(16)}))["variant"]
    assert chosen.tolist() == optima["variant"].tolist()


@pytest.mark.parametrize("partition", ["codes", "regret"])
def test_sweep_passes_the_partition_to_every_joint_tree(
    constrained: SimpleNamespace, partition: str
) -> None:
    for fit in (sweep_depths, lambda *a, **k: fit_selector(*a, **k).sweep):
        swept = fit(
            constrained.optima,
            constrained.space,
            constrained.score,
            depths=range(1, 4),
            partition=partition,
        )
        assert {s.partition for s in swept.selectors.values()} == {partition}
    with pytest.raises(ValueError, match="partition"):
        sweep_depths(
            constrained.optima, constrained.space, constrained.score, depths=[2], partition="x"
        )
