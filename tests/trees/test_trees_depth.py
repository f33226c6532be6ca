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


def test_an_oracle_view_is_its_parent_on_some_points(constrained: SimpleNamespace) -> None:
    oracle = RegretOracle(constrained.optima, constrained.space, constrained.score, clip=True)
    points = np.arange(oracle.n_points)[::-3]
    view = oracle.view(points)
    assert view.n_points == len(points)
    pd.testing.assert_frame_equal(view.inputs, oracle.inputs.iloc[points].reset_index(drop=True))
    np.testing.assert_array_equal(view.codes, oracle.codes[points])
    np.testing.assert_array_equal(view.reference, oracle.reference[points])
    codes = np.unique(oracle.codes, axis=0)[:3]
    np.testing.assert_array_equal(view.columns(codes), oracle.matrix(points, codes))
    scored = oracle.n_scored
    # what the view asks is what the parent knows: nothing is scored again
    np.testing.assert_array_equal(
        view.matrix(np.arange(4), codes), oracle.matrix(points[:4], codes)
    )
    at = np.arange(len(points))
    own = view.regret(at, view.codes)
    np.testing.assert_allclose(own, 0.0, atol=1e-12)
    tiled = np.repeat(codes[:1], len(points), axis=0)
    np.testing.assert_array_equal(view.valid(at, tiled), oracle.valid(points, tiled))
    assert oracle.n_scored == view.n_scored == scored


def _noisy_halves(noise: float) -> tuple[Space, pd.DataFrame, object]:
    """x in 0..79: variant ``a`` is 1.5x slower on the upper half, ``b`` on the lower half,
    and ``c`` / ``d`` are as fast as the better one everywhere; each (x, variant) time carries
    a fixed pseudo-random error of up to ``noise`` (relative). The optima are the argmin of the
    noisy times: within each half they change from one x to the next by the noise alone."""
    space = Space(
        [Parameter("x", "int", low=0, high=79)],
        [Parameter("variant", "categorical", values=("a", "b", "c", "d"))],
    )
    error = np.random.default_rng(7).uniform(-noise, noise, size=(80, 4))
    index = {"a": 0, "b": 1, "c": 2, "d": 3}

    def cost(table: pd.DataFrame) -> np.ndarray:
        x = table["x"].to_numpy(dtype=np.int64)
        v = table["variant"].map(index).to_numpy(dtype=np.int64)
        upper = x >= 40
        slow = np.where(v == 0, upper, np.where(v == 1, ~upper, False))
        return np.where(slow, 1.5, 1.0) * (1.0 + error[x, v])

    x = np.arange(80)
    table = pd.DataFrame({"x": np.repeat(x, 4), "variant": np.tile(list("abcd"), 80)})
    best = cost(table).reshape(80, 4).argmin(axis=1)
    optima = pd.DataFrame({"x": x, "variant": np.array(list("abcd"))[best]}).astype(
        {"variant": object}
    )
    return space, optima, cost


def test_cross_validated_depth_does_not_split_on_noise() -> None:
    """Decisions that differ from one point to the next by the noise alone, every cell measured
    (a table replay of one noisy pass): judged where they were fitted, the trees follow them
    (depth 11 of 12: each split lowers the regret and the measured violations); judged at
    held-out points, splits stop where they no longer help there (``c`` and ``d`` are the best
    everywhere but for the noise)."""
    space, optima, cost = _noisy_halves(0.05)
    assert optima["variant"].nunique() >= 3
    decisions = optima.reset_index(drop=True)

    def measured_regret(table: pd.DataFrame) -> np.ndarray:
        best = cost(decisions.assign(x=table["x"].to_numpy()))
        return np.maximum(relative_regret(cost(table), best), 0.0)

    judges = {"tolerance": 0.01, "measured_regret": measured_regret}
    in_sample = sweep_depths(optima, space, cost, **judges)
    held_out = sweep_depths(optima, space, cost, folds=5, **judges)
    assert "cv_regret" not in in_sample.table
    assert in_sample.chosen >= 10
    assert held_out.chosen <= 2
    table = held_out.table.set_index("depth")
    assert table.loc[held_out.chosen, "leaves"] <= 4
    # deeper trees are no better where they were not fitted
    assert table["cv_regret"].min() > table.loc[table.index.max(), "mean_regret"] + 0.01
    assert table.loc[held_out.chosen, "cv_measured_over"] == table["cv_measured_over"].min()
    chosen = held_out.selector.select(pd.DataFrame({"x": np.arange(80)}))["variant"]
    assert not (chosen[:40] == "b").any() and not (chosen[40:] == "a").any()
    assert chosen.nunique() <= 3


def test_cross_validated_depth_follows_real_structure() -> None:
    """Without noise, four regions of twenty points each with its own best variant: held-out
    points are predicted by their neighbours, and the trees keep every region."""
    space = Space(
        [Parameter("x", "int", low=0, high=79)],
        [Parameter("variant", "categorical", values=("a", "b", "c", "d"))],
    )

    def cost(table: pd.DataFrame) -> np.ndarray:
        region = table["x"].to_numpy(dtype=np.int64) // 20
        own = table["variant"].map({"a": 0, "b": 1, "c": 2, "d": 3}).to_numpy(dtype=np.int64)
        return np.where(own == region, 1.0, 1.3)

    optima = pd.DataFrame({"x": np.arange(80), "variant": np.repeat(list("abcd"), 20)}).astype(
        {"variant": object}
    )
    sweep = sweep_depths(optima, space, cost, tolerance=0.01, folds=5)
    # a held-out point next to a boundary can fall on the wrong side of it: a few points
    assert sweep.table.set_index("depth").loc[sweep.chosen, "cv_regret"] <= 0.3 * 6 / 80
    chosen = sweep.selector.select(optima[["x"]])["variant"]
    assert chosen.tolist() == optima["variant"].tolist()
    # too few points to hold any out: the sweep of the trees fitted on every point
    few = sweep_depths(optima.iloc[::9], space, cost, tolerance=0.01, folds=5)
    assert "cv_regret" not in few.table
