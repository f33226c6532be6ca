"""LightGBM surrogate: accuracy on known functions, options, persistence, determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.surrogate import DEFAULT_PARAMS, LightGBMSurrogate, Surrogate, accuracy


def smooth(features: np.ndarray) -> np.ndarray:
    return 3.0 * features[:, 0] + features[:, 1] ** 2


def uniform(n: int, seed: int, dimensions: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.0, 4.0, size=(n, dimensions))


def test_fits_a_known_function() -> None:
    train, test = uniform(800, 0), uniform(300, 1)
    model = LightGBMSurrogate(n_estimators=300).fit(train, smooth(train))
    assert isinstance(model, Surrogate)
    prediction = model.predict(test)
    assert prediction.shape == (300,) and prediction.dtype == np.float64
    truth = smooth(test)
    assert np.abs(prediction - truth).mean() < 0.03 * (truth.max() - truth.min())


def test_log_target_learns_relative_structure() -> None:
    train, test = uniform(800, 2), uniform(300, 3)
    target = np.exp(2.0 * train[:, 0]) * (1.0 + train[:, 1])  # ~1 to ~15000

    def relative_error(model: LightGBMSurrogate) -> float:
        truth = np.exp(2.0 * test[:, 0]) * (1.0 + test[:, 1])
        return float(np.median(np.abs(model.predict(test) - truth) / truth))

    logged = LightGBMSurrogate(log_target=True).fit(train, target)
    assert (logged.predict(test) > 0).all()
    assert relative_error(logged) < 0.1
    # the booster itself learnt log(y); predict maps it back
    raw = logged.booster_.predict(test)
    truth = np.exp(2.0 * test[:, 0]) * (1.0 + test[:, 1])
    assert np.abs(raw - np.log(truth)).mean() < 0.1
    np.testing.assert_allclose(logged.predict(test), np.exp(raw))


def test_log_target_refuses_non_positive_objectives() -> None:
    features = uniform(20, 4)
    with pytest.raises(ValueError, match="positive"):
        LightGBMSurrogate(log_target=True).fit(features, features[:, 0] - 1.0)


CATEGORY_VALUES = np.array([5.0, -3.0, 10.0, 0.0, 7.0])


def categorical_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Column 0 is a category index whose effect is not monotonic in the index."""
    rng = np.random.default_rng(seed)
    category = rng.integers(len(CATEGORY_VALUES), size=n)
    x = rng.uniform(0.0, 1.0, size=n)
    features = np.column_stack([category.astype(float), x])
    return features, CATEGORY_VALUES[category] + x


def test_categorical_features() -> None:
    features, target = categorical_data(600, 5)
    model = LightGBMSurrogate(categorical_features=[0]).fit(features, target)
    dumped = model.booster_.dump_model()
    categorical_splits = [
        node
        for tree in dumped["tree_info"]
        for node in _nodes(tree["tree_structure"])
        if node.get("decision_type") == "=="
    ]
    assert categorical_splits  # the index is split as a category, not as a number
    test, truth = categorical_data(300, 6)
    assert accuracy(model.predict(test), truth)["mae"] < 0.1


def _nodes(node: dict) -> list[dict]:
    stack, out = [node], []
    while stack:
        current = stack.pop()
        out.append(current)
        stack += [current[k] for k in ("left_child", "right_child") if k in current]
    return out


@pytest.mark.parametrize("log_target", [False, True])
def test_save_load_round_trip_gives_identical_predictions(tmp_path: Path, log_target: bool) -> None:
    features, target = categorical_data(300, 7)
    target = target + 4.0  # positive for log_target
    model = LightGBMSurrogate(categorical_features=[0], log_target=log_target, seed=3)
    model.fit(features, target)
    path = tmp_path / "time.txt"
    model.save(str(path))
    loaded = LightGBMSurrogate.load(str(path), log_target=log_target)
    test, _ = categorical_data(500, 8)
    assert np.array_equal(loaded.predict(test), model.predict(test))
    assert path.read_text(encoding="utf-8").startswith("tree")


def test_non_finite_targets_are_dropped() -> None:
    features = uniform(300, 9)
    target = smooth(features)
    spoiled = target.copy()
    spoiled[::7] = np.nan
    spoiled[3::11] = np.inf
    keep = np.isfinite(spoiled)
    with_gaps = LightGBMSurrogate(seed=1).fit(features, spoiled)
    clean = LightGBMSurrogate(seed=1).fit(features[keep], target[keep])
    test = uniform(100, 10)
    assert np.isfinite(with_gaps.predict(test)).all()
    assert np.array_equal(with_gaps.predict(test), clean.predict(test))


def test_fewer_than_two_finite_targets_is_an_error() -> None:
    features = uniform(5, 11)
    with pytest.raises(ValueError, match="fewer than two"):
        LightGBMSurrogate().fit(features, np.array([1.0, np.nan, np.nan, np.inf, np.nan]))


@pytest.mark.parametrize(
    ("features", "target"),
    [(np.zeros(5), np.zeros(5)), (np.zeros((5, 2)), np.zeros(4))],
    ids=["one-dimensional", "length-mismatch"],
)
def test_fit_checks_shapes(features: np.ndarray, target: np.ndarray) -> None:
    with pytest.raises(ValueError, match="2-D"):
        LightGBMSurrogate().fit(features, target)


def test_same_seed_same_model() -> None:
    features = uniform(400, 12, dimensions=4)
    target = smooth(features) + features[:, 2] * features[:, 3]
    random_params = {"bagging_fraction": 0.5, "bagging_freq": 1, "feature_fraction": 0.5}
    test = uniform(200, 13, dimensions=4)

    def predictions(seed: int) -> np.ndarray:
        model = LightGBMSurrogate(seed=seed, params=random_params, n_estimators=60)
        return model.fit(features, target).predict(test)

    assert np.array_equal(predictions(4), predictions(4))
    assert not np.array_equal(predictions(4), predictions(5))  # the seed is used


def test_explicit_params_override_defaults() -> None:
    model = LightGBMSurrogate(params={"num_leaves": 3}, n_estimators=5, num_threads=1)
    features = uniform(200, 14)
    model.fit(features, smooth(features))
    trees = model.booster_.dump_model()["tree_info"]
    assert len(trees) == 5
    assert all(tree["num_leaves"] <= 3 for tree in trees)
    assert DEFAULT_PARAMS["num_leaves"] == 31  # the defaults themselves are untouched


def test_accuracy_on_a_hand_example() -> None:
    result = accuracy(np.array([1.0, 3.0, 5.0, 9.0]), np.array([2.0, 3.0, np.nan, 10.0]))
    assert result["n"] == 3
    assert result["mae"] == pytest.approx(2.0 / 3.0)
    assert result["mape"] == pytest.approx(100 * (0.5 + 0.0 + 0.1) / 3)
