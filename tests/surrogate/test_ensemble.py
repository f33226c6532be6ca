"""Bootstrapped LightGBM ensemble: accurate mean, a spread that grows away from the data,
Poisson bootstrap weights, out-of-bag predictions, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from mlkaps_gpu.surrogate import BootstrapEnsemble, Surrogate, SurrogateSettings


def bowl(features: np.ndarray) -> np.ndarray:
    return np.exp(0.5 * (features[:, 0] - 2.0) ** 2 + 0.3 * features[:, 1])


def uniform(n: int, seed: int, low: float = 0.0, high: float = 4.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=(n, 2))


def test_mean_is_accurate_and_prediction_positive() -> None:
    train, test = uniform(600, 0), uniform(200, 1)
    model = BootstrapEnsemble(members=5, seed=0).fit(train, bowl(train))
    assert isinstance(model, Surrogate)
    prediction = model.predict(test)
    assert (prediction > 0).all()
    relative = np.abs(prediction - bowl(test)) / bowl(test)
    assert np.median(relative) < 0.05


def test_members_disagree_more_where_data_are_sparse() -> None:
    # 400 rows on x0 < 2, 12 rows on 2 <= x0 < 4, a function that keeps changing with x0
    rng = np.random.default_rng(3)
    dense = np.column_stack([rng.uniform(0, 2, 400), rng.uniform(0, 4, 400)])
    sparse = np.column_stack([rng.uniform(2, 4, 12), rng.uniform(0, 4, 12)])
    train = np.vstack([dense, sparse])
    target = np.exp(np.sin(3 * train[:, 0]) + 0.2 * train[:, 1])
    model = BootstrapEnsemble(members=8, seed=1).fit(train, target)
    members = model.predict_members(train)
    assert members.shape == (8, 412)
    assert not np.allclose(members[0], members[1])  # each member its own weighting
    probe_dense = np.column_stack([rng.uniform(0, 2, 300), rng.uniform(0, 4, 300)])
    probe_sparse = np.column_stack([rng.uniform(2, 4, 300), rng.uniform(0, 4, 300)])
    _, sd_dense = model.predict_log(probe_dense)
    _, sd_sparse = model.predict_log(probe_sparse)
    assert np.mean(sd_sparse) > 1.5 * np.mean(sd_dense)


def test_bootstrap_weights_are_poisson_and_out_of_bag_covers_rows() -> None:
    train = uniform(500, 4)
    model = BootstrapEnsemble(members=6, seed=2).fit(train, bowl(train))
    weights = model.weights_
    assert weights.shape == (6, 500)
    assert np.all(weights == np.round(weights))
    assert 0.25 < np.mean(weights == 0) < 0.5  # P(Poisson(1) = 0) = 0.37
    oob = model.out_of_bag(train)
    covered = np.isfinite(oob)
    assert covered.mean() > 0.9
    assert (
        np.median(np.abs(np.exp(oob[covered]) - bowl(train)[covered]) / bowl(train)[covered]) < 0.1
    )


def test_same_seed_same_models_and_other_seed_other_models() -> None:
    train, test = uniform(300, 5), uniform(50, 6)
    first = BootstrapEnsemble(seed=7).fit(train, bowl(train)).predict_members(test)
    second = BootstrapEnsemble(seed=7).fit(train, bowl(train)).predict_members(test)
    other = BootstrapEnsemble(seed=8).fit(train, bowl(train)).predict_members(test)
    assert np.array_equal(first, second)
    assert not np.array_equal(first, other)


def test_log_target_refuses_non_positive_and_linear_target_accepts_it() -> None:
    train = uniform(100, 9)
    target = train[:, 0] - 2.0
    with pytest.raises(ValueError, match="positive"):
        BootstrapEnsemble(log_target=True).fit(train, target)
    model = BootstrapEnsemble(log_target=False).fit(train, target)
    mean, sd = model.predict_log(train)
    assert np.allclose(model.predict(train), mean)
    assert sd.shape == mean.shape


def test_needs_two_members() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        BootstrapEnsemble(members=1)


@pytest.mark.parametrize("engine", ["lightgbm", "compiled"])
def test_center_members_give_the_estimate_and_bootstrap_members_the_spread(engine: str) -> None:
    train, test = uniform(300, 4), uniform(1500, 5)  # 1,500 rows: the compiled engine's size
    target = bowl(train)
    plain = BootstrapEnsemble(members=4, seed=2, engine=engine).fit(train, target)
    centred = BootstrapEnsemble(members=4, seed=2, center=3, engine=engine).fit(train, target)
    assert len(centred.center_boosters_) == 3 and not plain.center_boosters_
    mean, sd = centred.predict_log(test)
    plain_mean, plain_sd = plain.predict_log(test)
    # the same bootstrap members, so the same spread; the estimate is the centre's mean
    np.testing.assert_allclose(sd, plain_sd)
    centre = np.mean([b.predict(test) for b in centred.center_boosters_], axis=0)
    np.testing.assert_allclose(mean, centre, rtol=1e-9, atol=1e-9)
    assert not np.allclose(mean, plain_mean)
    np.testing.assert_allclose(centred.predict(test), np.exp(centre), rtol=1e-9)
    # each centre member learns from every row, with its own per-tree row subsample
    assert not np.allclose(
        centred.center_boosters_[0].predict(test), centred.center_boosters_[1].predict(test)
    )
    error = np.abs(np.exp(mean) - bowl(test)) / bowl(test)
    assert np.median(error) < 0.05


def test_threads_predict_the_same_numbers() -> None:
    """Compiled members predicting row chunks on several threads give the same numbers as
    one thread (8,192 rows: four chunks of the engine's smallest)."""
    train, test = uniform(300, 4), uniform(8192, 6)
    one = BootstrapEnsemble(members=3, seed=2, center=2, engine="compiled").fit(train, bowl(train))
    four = BootstrapEnsemble(members=3, seed=2, center=2, engine="compiled", threads=4).fit(
        train, bowl(train)
    )
    np.testing.assert_array_equal(one.predict_members(test), four.predict_members(test))
    np.testing.assert_array_equal(one.predict_log(test)[0], four.predict_log(test)[0])
    with pytest.raises(ValueError, match="threads"):
        BootstrapEnsemble(threads=0)


def test_center_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="center"):
        BootstrapEnsemble(center=-1)


def ridges(features: np.ndarray) -> np.ndarray:
    """A surface with much fine structure: boosting keeps learning it past 150 rounds."""
    x, y = features[:, 0], features[:, 1]
    return np.exp(np.sin(3.0 * x) * np.cos(2.0 * y) + 0.5 * np.sin(7.0 * x * y) + 0.2 * x)


def test_max_rounds_keeps_learning_where_the_out_of_bag_error_keeps_falling() -> None:
    train, test = uniform(3000, 6), uniform(2000, 7)
    fixed = BootstrapEnsemble(members=4, seed=0, center=2).fit(train, ridges(train))
    grown = BootstrapEnsemble(members=4, seed=0, center=2, max_rounds=800)
    grown.fit(train, ridges(train))
    assert fixed.rounds_ == 150
    assert 150 < grown.rounds_ <= 800
    curve = grown.oob_curve_
    assert curve["rounds"].iloc[0] == 150 and curve["rounds"].iloc[-1] == 800
    assert curve["oob_mse"].iloc[-1] < curve["oob_mse"].iloc[0]
    # every member keeps the chosen rounds, the centre ones included
    assert {b.num_trees() for b in grown.boosters_ + grown.center_boosters_} == {grown.rounds_}

    def error(model: BootstrapEnsemble) -> float:
        return float(np.sqrt(np.mean((model.predict_log(test)[0] - np.log(ridges(test))) ** 2)))

    assert error(grown) < 0.97 * error(fixed)


def test_max_rounds_keeps_the_default_on_few_noisy_rows() -> None:
    train = uniform(80, 8)
    noisy = bowl(train) * np.exp(np.random.default_rng(9).normal(0.0, 0.3, len(train)))
    model = BootstrapEnsemble(members=4, seed=0, max_rounds=600).fit(train, noisy)
    assert model.rounds_ == 150
    with pytest.raises(ValueError, match="max_rounds"):
        BootstrapEnsemble(max_rounds=0)


def test_the_surrogate_sections_params_reach_the_members() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (300, 3))
    y = np.exp(x @ np.array([1.0, -2.0, 0.5]) + 0.05 * rng.normal(size=300))

    def most_leaves(settings: SurrogateSettings) -> int:
        model = BootstrapEnsemble.from_settings(settings, seed=0).fit(x, y)
        dumps = [b.dump_model()["tree_info"] for b in model.boosters_]
        return max(tree["num_leaves"] for trees in dumps for tree in trees)

    assert most_leaves(SurrogateSettings(params={"num_leaves": 4})) <= 4
    assert most_leaves(SurrogateSettings()) > 4
